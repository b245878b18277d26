import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  childElements,
  escapeXml,
  parseXml,
  textOf,
  type XmlElement,
  XmlError,
  type XmlNode,
} from "../../tools/conformance/xml.ts";

describe("parseXml", () => {
  it("reads elements, both quote styles, self-closing tags, comments, the declaration and a BOM", () => {
    const root = parseXml(
      "\uFEFF<?xml version='1.0'?>\n<!-- c --><a x=\"1\" y='two'>\n  <b/><c z = \"&lt;&amp;&gt;\">t</c><!-- d --></a>\n",
    );
    assert.equal(root.name, "a");
    assert.deepEqual(
      [...root.attributes],
      [
        ["x", "1"],
        ["y", "two"],
      ],
    );
    const [b, c] = childElements(root);
    assert.equal(b?.name, "b");
    assert.equal(b?.children.length, 0);
    assert.equal(c?.attributes.get("z"), "<&>");
    assert.equal(c && textOf(c), "t");
  });

  it("decodes the five entities and decimal and hex character references in text and attributes", () => {
    const root = parseXml(`<a v="&quot;&apos;&#65;&#x42;&#xA;">&lt;&gt;&amp;&#x1F600;&#233;</a>`);
    assert.equal(root.attributes.get("v"), `"'AB\n`);
    assert.equal(textOf(root), "<>&\u{1F600}é");
  });

  it("keeps CDATA verbatim, entities and markup included, and joins it with the text around it", () => {
    const root = parseXml("<f>a<![CDATA[<b>&amp; ]] > `x`]]>c</f>");
    assert.equal(root.children.length, 1);
    assert.equal(textOf(root), "a<b>&amp; ]] > `x`c");
  });

  it("turns literal tabs and newlines in attribute values into spaces, as XML normalises them", () => {
    assert.equal(parseXml('<a m="x\ny\tz"/>').attributes.get("m"), "x y z");
  });

  const refused: [string, string, RegExp][] = [
    [
      "a DOCTYPE (no entity declaration is ever expanded)",
      '<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>',
      /DOCTYPE/,
    ],
    ["an unknown entity", "<a>&e;</a>", /unknown entity/],
    ["a bare ampersand", "<a>x & y</a>", /without its ';'/],
    ["a reference to a non-XML character", "<a>&#0;</a>", /not an XML character/],
    ["a mismatched end tag", "<a><b></a></b>", /closes <b>/],
    ["an unclosed element", "<a><b></b>", /never closed/],
    ["a second root", "<a/><b/>", /second root/],
    ["text after the root", "<a/>x", /outside the root/],
    ["no root at all", "<!-- only -->", /no root/],
    ["an unterminated comment", "<a><!-- x</a>", /unterminated comment/],
    ["an unquoted attribute", "<a x=1/>", /quoted value/],
    ["a repeated attribute", '<a x="1" x="2"/>', /given twice/],
    ["attributes without a space between them", '<a x="1"y="2"/>', /space before/],
    ["'<' in an attribute value", '<a x="<"/>', /'<' in the value/],
  ];
  for (const [what, doc, message] of refused) {
    it(`refuses ${what} with an XmlError`, () => {
      assert.throws(
        () => parseXml(doc),
        (err: unknown) => err instanceof XmlError && message.test(err.message),
      );
    });
  }
});

// A tree of elements with arbitrary attribute values and text, serialised with escaping (text runs may
// also go out as CDATA), must parse back to itself.
const name = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.-]{0,8}$/);
const xmlText = fc
  .string({ unit: "grapheme", maxLength: 20 })
  .map((s) => s.replace(/[^\t\n\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "").replace(/\r/g, ""));
type Tree = { name: string; attrs: [string, string][]; children: (Tree | string)[] };
const { tree } = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.record({
    name,
    attrs: fc.uniqueArray(fc.tuple(name, xmlText), { maxLength: 3, selector: ([k]) => k }),
    children: fc.array(fc.oneof({ depthSize: "small" }, xmlText, tie("tree")), { maxLength: 4 }),
  }),
}));

function serialise(t: Tree, cdata: boolean): string {
  const attrs = t.attrs
    .map(([k, v]) => ` ${k}="${escapeXml(v).replace(/\t/g, "&#9;").replace(/\n/g, "&#10;")}"`)
    .join("");
  const body = t.children
    .map((c) =>
      typeof c === "string"
        ? cdata && !c.includes("]]>")
          ? `<![CDATA[${c}]]>`
          : escapeXml(c)
        : serialise(c, cdata),
    )
    .join("");
  return body === "" ? `<${t.name}${attrs}/>` : `<${t.name}${attrs}>${body}</${t.name}>`;
}

// The expected parse: adjacent text runs join, empty ones vanish.
function expected(t: Tree): unknown {
  const children: unknown[] = [];
  for (const c of t.children) {
    if (typeof c !== "string") children.push(expected(c));
    else if (c === "") continue;
    else {
      const last = children[children.length - 1] as { kind?: string; text?: string } | undefined;
      if (last?.kind === "text") children[children.length - 1] = { kind: "text", text: last.text + c };
      else children.push({ kind: "text", text: c });
    }
  }
  return { kind: "element", name: t.name, attributes: Object.fromEntries(t.attrs), children };
}

function plain(e: XmlNode): unknown {
  if (e.kind === "text") return e;
  const el = e as XmlElement;
  return {
    kind: "element",
    name: el.name,
    attributes: Object.fromEntries(el.attributes),
    children: el.children.map(plain),
  };
}

describe("parseXml properties", () => {
  it("parses any escaped tree back to the same elements, attributes and text", () => {
    fc.assert(
      fc.property(tree, fc.boolean(), (t, cdata) => {
        assert.deepEqual(plain(parseXml(`<?xml version="1.0"?>\n${serialise(t, cdata)}\n`)), expected(t));
      }),
      { numRuns: 300 },
    );
  });

  it("either parses or throws an XmlError on any input, never another error", () => {
    const noisy = fc.oneof(
      fc.string({ maxLength: 60 }),
      fc
        .array(
          fc.constantFrom(
            "<a",
            "<a>",
            "</a>",
            "<b/>",
            "&amp;",
            "&",
            "<!--",
            "-->",
            "<![CDATA[",
            "]]>",
            '"',
            "x",
            " ",
            "=",
            "<?",
            "?>",
            "&#",
          ),
          {
            maxLength: 20,
          },
        )
        .map((parts) => parts.join("")),
    );
    fc.assert(
      fc.property(noisy, (doc) => {
        try {
          parseXml(doc);
        } catch (err) {
          assert.ok(err instanceof XmlError, `${String(err)} for ${JSON.stringify(doc)}`);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
