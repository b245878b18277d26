// A small XML reader for the e2e JUnit files: elements, attributes, text, CDATA, comments and processing
// instructions, with the five predefined entities and character references. No dependency of the project
// reads XML, and a JUnit report needs no more. A DOCTYPE is refused rather than skipped, so no entity
// declaration can ever be expanded; anything malformed throws an XmlError that names the offset.

export interface XmlElement {
  readonly kind: "element";
  readonly name: string;
  readonly attributes: ReadonlyMap<string, string>;
  readonly children: readonly XmlNode[];
}

export interface XmlText {
  readonly kind: "text";
  readonly text: string;
}

export type XmlNode = XmlElement | XmlText;

export class XmlError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`XML at offset ${offset}: ${message}`);
    this.name = "XmlError";
  }
}

// XML 1.0 names, restricted to what JUnit writers use plus any non-ASCII letter.
const NAME = /[A-Za-z_:\u00C0-\uFFFF][-A-Za-z0-9_:.\u00B7\u00C0-\uFFFF]*/y;
const SPACE = /[ \t\r\n]*/y;

const PREDEFINED: Readonly<Record<string, string>> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/** Replaces entity and character references in text or an attribute value; `at` is its offset in the document. */
export function decodeEntities(raw: string, at: number): string {
  if (!raw.includes("&")) return raw;
  let out = "";
  let i = 0;
  while (i < raw.length) {
    const amp = raw.indexOf("&", i);
    if (amp < 0) {
      out += raw.slice(i);
      break;
    }
    out += raw.slice(i, amp);
    const semi = raw.indexOf(";", amp);
    if (semi < 0) throw new XmlError("an '&' without its ';'", at + amp);
    const ref = raw.slice(amp + 1, semi);
    if (ref.startsWith("#")) {
      const hex = ref.startsWith("#x");
      const digits = ref.slice(hex ? 2 : 1);
      if (!(hex ? /^[0-9A-Fa-f]{1,6}$/ : /^[0-9]{1,7}$/).test(digits)) {
        throw new XmlError(`bad character reference '&${ref};'`, at + amp);
      }
      const code = Number.parseInt(digits, hex ? 16 : 10);
      if (!isXmlChar(code))
        throw new XmlError(`character reference '&${ref};' is not an XML character`, at + amp);
      out += String.fromCodePoint(code);
    } else {
      const value = PREDEFINED[ref];
      if (value === undefined) throw new XmlError(`unknown entity '&${ref};'`, at + amp);
      out += value;
    }
    i = semi + 1;
  }
  return out;
}

function isXmlChar(code: number): boolean {
  return (
    code === 0x9 ||
    code === 0xa ||
    code === 0xd ||
    (code >= 0x20 && code <= 0xd7ff) ||
    (code >= 0xe000 && code <= 0xfffd) ||
    (code >= 0x10000 && code <= 0x10ffff)
  );
}

/** Escapes text so decodeEntities gives it back (used by tests and by nobody else needing XML out). */
export function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&${Object.keys(PREDEFINED).find((k) => PREDEFINED[k] === c)};`);
}

interface Frame {
  name: string;
  attributes: Map<string, string>;
  children: XmlNode[];
  start: number;
}

/** Parses a whole document and returns its root element. */
export function parseXml(doc: string): XmlElement {
  let i = doc.charCodeAt(0) === 0xfeff ? 1 : 0;
  const stack: Frame[] = [];
  let root: XmlElement | undefined;

  const pushText = (text: string) => {
    if (text === "") return;
    const top = stack[stack.length - 1];
    if (!top) {
      if (/^[ \t\r\n]*$/.test(text)) return;
      throw new XmlError("text outside the root element", i);
    }
    const last = top.children[top.children.length - 1];
    if (last?.kind === "text")
      top.children[top.children.length - 1] = { kind: "text", text: last.text + text };
    else top.children.push({ kind: "text", text });
  };

  const readName = (): string => {
    NAME.lastIndex = i;
    const m = NAME.exec(doc);
    if (!m) throw new XmlError("expected a name", i);
    i += m[0].length;
    return m[0];
  };
  const skipSpace = (): number => {
    SPACE.lastIndex = i;
    const n = SPACE.exec(doc)?.[0].length ?? 0;
    i += n;
    return n;
  };
  const expectEnd = (token: string, what: string): number => {
    const end = doc.indexOf(token, i);
    if (end < 0) throw new XmlError(`unterminated ${what}`, i);
    return end;
  };

  while (i < doc.length) {
    const lt = doc.indexOf("<", i);
    if (lt < 0) {
      pushText(decodeEntities(doc.slice(i), i));
      i = doc.length;
      break;
    }
    if (lt > i) {
      const raw = doc.slice(i, lt);
      pushText(decodeEntities(raw, i));
      i = lt;
    }
    if (doc.startsWith("<!--", i)) {
      i += 4;
      const end = expectEnd("-->", "comment");
      i = end + 3;
    } else if (doc.startsWith("<![CDATA[", i)) {
      if (stack.length === 0) throw new XmlError("CDATA outside the root element", i);
      i += 9;
      const end = expectEnd("]]>", "CDATA section");
      pushText(doc.slice(i, end));
      i = end + 3;
    } else if (doc.startsWith("<?", i)) {
      i += 2;
      const end = expectEnd("?>", "processing instruction");
      i = end + 2;
    } else if (doc.startsWith("<!", i)) {
      throw new XmlError("DOCTYPE and other declarations are not accepted", i);
    } else if (doc.startsWith("</", i)) {
      const at = i;
      i += 2;
      const name = readName();
      skipSpace();
      if (doc[i] !== ">") throw new XmlError(`expected '>' to close </${name}`, i);
      i++;
      const top = stack.pop();
      if (!top) throw new XmlError(`</${name}> closes nothing`, at);
      if (top.name !== name) throw new XmlError(`</${name}> closes <${top.name}> opened at ${top.start}`, at);
      const element: XmlElement = {
        kind: "element",
        name: top.name,
        attributes: top.attributes,
        children: top.children,
      };
      const parent = stack[stack.length - 1];
      if (parent) parent.children.push(element);
      else root = element;
    } else {
      const at = i;
      if (root) throw new XmlError("a second root element", at);
      i++;
      const name = readName();
      const attributes = new Map<string, string>();
      for (;;) {
        const spaced = skipSpace();
        if (doc.startsWith("/>", i) || doc[i] === ">") break;
        if (i >= doc.length) throw new XmlError(`unterminated tag <${name}`, at);
        if (spaced === 0) throw new XmlError(`expected a space before an attribute of <${name}>`, i);
        const attr = readName();
        skipSpace();
        if (doc[i] !== "=") throw new XmlError(`expected '=' after attribute ${attr}`, i);
        i++;
        skipSpace();
        const quote = doc[i];
        if (quote !== '"' && quote !== "'")
          throw new XmlError(`expected a quoted value for attribute ${attr}`, i);
        const end = doc.indexOf(quote, i + 1);
        if (end < 0) throw new XmlError(`unterminated value of attribute ${attr}`, i);
        const raw = doc.slice(i + 1, end);
        if (raw.includes("<")) throw new XmlError(`'<' in the value of attribute ${attr}`, i);
        if (attributes.has(attr)) throw new XmlError(`attribute ${attr} given twice`, i);
        // Attribute-value normalisation: literal whitespace characters become spaces.
        attributes.set(attr, decodeEntities(raw.replace(/[\t\r\n]/g, " "), i + 1));
        i = end + 1;
      }
      if (doc.startsWith("/>", i)) {
        i += 2;
        const element: XmlElement = { kind: "element", name, attributes, children: [] };
        const parent = stack[stack.length - 1];
        if (parent) parent.children.push(element);
        else root = element;
      } else {
        i++;
        stack.push({ name, attributes, children: [], start: at });
      }
    }
  }
  const open = stack[stack.length - 1];
  if (open) throw new XmlError(`<${open.name}> is never closed`, open.start);
  if (!root) throw new XmlError("no root element", 0);
  return root;
}

/** The element children of `element` named `name`. */
export function childElements(element: XmlElement, name?: string): XmlElement[] {
  return element.children.filter(
    (c): c is XmlElement => c.kind === "element" && (name === undefined || c.name === name),
  );
}

/** The concatenated text directly inside `element`. */
export function textOf(element: XmlElement): string {
  return element.children.map((c) => (c.kind === "text" ? c.text : "")).join("");
}
