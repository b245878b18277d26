/** table -> row _uuid -> column -> value exactly as OVSDB puts it on the wire (["uuid",..], ["set",..], ["map",..]). */
export type DatabaseDump = Record<string, Record<string, Record<string, unknown>>>;

interface JsonTable {
  caption: string;
  headings: string[];
  data: unknown[][];
}

const CAPTION_SUFFIX = " table";

/**
 * Parses `ovsdb-client dump -f json`: one JSON object per line and per table,
 * {"caption":"<Table> table","headings":[column...],"data":[[value...]...]}, empty tables included.
 * JSON escapes newlines inside strings, so splitting on lines is safe. Integers beyond 2^53 lose precision.
 */
export function parseJsonDump(text: string): DatabaseDump {
  const dump: DatabaseDump = {};
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const table = asTable(JSON.parse(line));
    const name = table.caption.slice(0, -CAPTION_SUFFIX.length);
    const uuidAt = table.headings.indexOf("_uuid");
    if (uuidAt < 0) throw new Error(`dump of table ${name} has no _uuid column`);
    const rows: Record<string, Record<string, unknown>> = {};
    for (const values of table.data) {
      if (values.length !== table.headings.length) {
        throw new Error(
          `dump of table ${name}: row has ${values.length} values for ${table.headings.length} columns`,
        );
      }
      const row: Record<string, unknown> = {};
      table.headings.forEach((column, i) => {
        // _version changes on every write and says nothing about the content.
        if (column !== "_version") row[column] = values[i];
      });
      rows[uuidString(values[uuidAt], name)] = row;
    }
    dump[name] = rows;
  }
  return dump;
}

function asTable(value: unknown): JsonTable {
  if (typeof value !== "object" || value === null) throw new Error("dump line is not a JSON object");
  const { caption, headings, data } = value as Record<string, unknown>;
  if (typeof caption !== "string" || !caption.endsWith(CAPTION_SUFFIX)) {
    throw new Error(`dump line has an unexpected caption: ${JSON.stringify(caption)}`);
  }
  if (!Array.isArray(headings) || !headings.every((h) => typeof h === "string")) {
    throw new Error(`dump of ${caption} has no headings`);
  }
  if (!Array.isArray(data) || !data.every((row) => Array.isArray(row))) {
    throw new Error(`dump of ${caption} has no data rows`);
  }
  return { caption, headings, data: data as unknown[][] };
}

function uuidString(value: unknown, table: string): string {
  if (Array.isArray(value) && value.length === 2 && value[0] === "uuid" && typeof value[1] === "string") {
    return value[1];
  }
  throw new Error(`dump of table ${table} has a malformed _uuid: ${JSON.stringify(value)}`);
}
