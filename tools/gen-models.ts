// Writes the typed OVSDB models in src/ovsdb/models/ from the .ovsschema files of the installed OVN and OVS packages.
// Usage: node --import tsx tools/gen-models.ts [--out-dir DIR]   (make models; make models-check compares)

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  type BaseType,
  type ColumnSchema,
  type DatabaseSchema,
  parseSchema,
  type TableSchema,
} from "../src/ovsdb/schema.ts";

interface Target {
  readonly schemaPath: string;
  /** Lower-case prefix of the exported names and the file: nb -> nb.generated.ts, NbTables, nbModel. */
  readonly prefix: string;
}

const TARGETS: readonly Target[] = [
  { schemaPath: "/usr/share/ovn/ovn-nb.ovsschema", prefix: "nb" },
  { schemaPath: "/usr/share/ovn/ovn-sb.ovsschema", prefix: "sb" },
  { schemaPath: "/usr/share/openvswitch/vswitch.ovsschema", prefix: "vswitch" },
];

const COMMAND = "node --import tsx tools/gen-models.ts";
const IMPORTED_NAMES = new Set(["Uuid", "InsertRow", "defineModel"]);

/** Logical_Switch_Port -> LogicalSwitchPort, NB_Global -> NBGlobal, sFlow -> SFlow. */
function pascalCase(name: string): string {
  return name
    .split("_")
    .filter((p) => p.length > 0)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");
}

function capitalize(s: string): string {
  return s[0]!.toUpperCase() + s.slice(1);
}

function literal(a: string | number | boolean): string {
  return JSON.stringify(a);
}

function atomType(bt: BaseType): string {
  if (bt.enum && bt.enum.length > 0) return bt.enum.map(literal).join(" | ");
  switch (bt.type) {
    case "integer":
    case "real":
      return "number";
    case "boolean":
      return "boolean";
    case "string":
      return "string";
    case "uuid":
      return "Uuid";
  }
}

function elementType(bt: BaseType): string {
  const t = atomType(bt);
  return t.includes(" | ") ? `(${t})` : t;
}

function columnTsType(c: ColumnSchema): string {
  const ct = c.type;
  switch (ct.kind) {
    case "scalar":
      return atomType(ct.key);
    case "optional":
      return `${atomType(ct.key)} | null`;
    case "set":
      return `readonly ${elementType(ct.key)}[]`;
    case "map": {
      const value = atomType(ct.value!);
      // Map keys are always object keys in JavaScript, so enumerated keys become string literals of the atoms.
      if (ct.key.enum && ct.key.enum.length > 0) {
        const keys = ct.key.enum.map((e) => literal(String(e))).join(" | ");
        return `Readonly<Partial<Record<${keys}, ${value}>>>`;
      }
      return `Readonly<Record<string, ${value}>>`;
    }
  }
}

function range(min: number | undefined, max: number | undefined): string | undefined {
  if (min === undefined && max === undefined) return undefined;
  return `${min ?? ""}..${max ?? ""}`;
}

// Constraints the TypeScript type cannot express, so that they show up in editor hovers.
function atomNotes(bt: BaseType, role: string): string[] {
  const notes: string[] = [];
  if (bt.type === "integer" && !bt.enum) {
    const ints = range(bt.minInteger, bt.maxInteger);
    notes.push(`${role}integer${ints ? ` ${ints}` : ""}`);
  }
  const reals = range(bt.minReal, bt.maxReal);
  if (bt.type === "real" && reals) notes.push(`${role}${reals}`);
  const lens = range(bt.minLength, bt.maxLength);
  if (bt.type === "string" && lens) notes.push(`${role}length ${lens}`);
  if (bt.refTable) notes.push(`${role}${bt.refType === "weak" ? "weak" : "strong"} ref to ${bt.refTable}`);
  return notes;
}

function columnNotes(c: ColumnSchema): string[] {
  const ct = c.type;
  const notes: string[] = [];
  if (ct.kind === "map") {
    notes.push(...atomNotes(ct.key, "key "), ...atomNotes(ct.value!, "value "));
  } else {
    notes.push(...atomNotes(ct.key, ""));
  }
  if ((ct.kind === "set" || ct.kind === "map") && (ct.min > 0 || Number.isFinite(ct.max))) {
    notes.push(
      `${ct.min}..${Number.isFinite(ct.max) ? ct.max : ""} ${ct.kind === "map" ? "pairs" : "elements"}`,
    );
  }
  if (!c.mutable) notes.push("immutable");
  if (c.ephemeral) notes.push("ephemeral");
  return notes;
}

function tableComment(t: TableSchema): string {
  const facts = [t.isRoot ? "root table" : "non-root table (rows without a strong reference are deleted)"];
  if (t.indexes.length > 0) facts.push(`indexes: ${t.indexes.map((i) => `(${i.join(", ")})`).join(", ")}`);
  if (t.maxRows !== undefined) facts.push(`at most ${t.maxRows} rows`);
  return `/** ${t.name}: ${facts.join("; ")}. */`;
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function renderModel(schema: DatabaseSchema, target: Target): string {
  const tablesName = `${capitalize(target.prefix)}Tables`;
  const modelName = `${target.prefix}Model`;
  const schemaName = `${target.prefix}SchemaJson`;
  const tables = [...schema.tables.values()].sort((a, b) => byName(a.name, b.name));

  const taken = new Map<string, string>();
  const claim = (id: string, owner: string) => {
    const prev = IMPORTED_NAMES.has(id) ? "an imported name" : taken.get(id);
    if (prev !== undefined)
      throw new Error(`${schema.name}: ${owner} and ${prev} both map to the identifier ${id}`);
    taken.set(id, owner);
  };
  for (const n of [tablesName, modelName, schemaName]) claim(n, n);
  for (const t of tables) {
    claim(pascalCase(t.name), `table ${t.name}`);
    claim(`${pascalCase(t.name)}Insert`, `table ${t.name} (insert type)`);
  }

  const out: string[] = [];
  out.push(
    `// GENERATED FILE, DO NOT EDIT. Regenerate with \`${COMMAND}\` (make models).`,
    `// Source: ${target.schemaPath}, schema ${schema.name} version ${schema.version}` +
      (schema.cksum ? `, cksum ${schema.cksum}.` : "."),
    "//",
    "// One interface per table describes a row as the cache holds it; property names are the column names.",
    "// Column kinds: scalar -> the atom, optional -> atom | null, set -> readonly array, map -> readonly object keyed",
    "// by the key atom as a string. Enumerations are literal unions. uuid columns have type Uuid (a string whose",
    "// phantom brand lets InsertRow/UpdateRow see them), so `XxxInsert` = InsertRow<Xxx> accepts a NamedUuid wherever",
    "// the column, a set element or a map value is a uuid.",
    "",
    'import { type InsertRow, type Uuid, defineModel } from "../model.ts";',
    "",
  );
  for (const t of tables) {
    const name = pascalCase(t.name);
    out.push(tableComment(t), `export interface ${name} {`, "  readonly _uuid: Uuid;");
    for (const c of [...t.columns.values()].sort((a, b) => byName(a.name, b.name))) {
      const notes = columnNotes(c);
      if (notes.length > 0) out.push(`  /** ${notes.join("; ")} */`);
      out.push(`  readonly ${c.name}: ${columnTsType(c)};`);
    }
    out.push("}", `export type ${name}Insert = InsertRow<${name}>;`, "");
  }
  out.push(`export type ${tablesName} = {`);
  for (const t of tables) out.push(`  ${t.name}: ${pascalCase(t.name)};`);
  out.push("};", "");
  out.push(`export const ${schemaName}: unknown = ${JSON.stringify(schema.raw)};`, "");
  out.push(`export const ${modelName} = defineModel<${tablesName}>(${schemaName});`, "");
  return out.join("\n");
}

function renderIndex(targets: readonly Target[]): string {
  const out = [`// GENERATED FILE, DO NOT EDIT. Regenerate with \`${COMMAND}\` (make models).`];
  out.push(
    "// Each database is a namespace because the schemas share table names (SSL, Connection, Meter, ...).",
    "",
  );
  for (const t of targets) {
    out.push(`export * as ${t.prefix} from "./${t.prefix}.generated.ts";`);
    out.push(`export { ${t.prefix}Model } from "./${t.prefix}.generated.ts";`);
  }
  out.push("");
  return out.join("\n");
}

function main(): void {
  const { values } = parseArgs({ options: { "out-dir": { type: "string" } } });
  const outDir = resolve(
    values["out-dir"] ?? join(fileURLToPath(new URL(".", import.meta.url)), "../src/ovsdb/models"),
  );
  mkdirSync(outDir, { recursive: true });
  for (const target of TARGETS) {
    const schema = parseSchema(JSON.parse(readFileSync(target.schemaPath, "utf8")));
    const file = join(outDir, `${target.prefix}.generated.ts`);
    writeFileSync(file, renderModel(schema, target));
    console.log(`${basename(target.schemaPath)} (${schema.name} ${schema.version}) -> ${file}`);
  }
  writeFileSync(join(outDir, "index.ts"), renderIndex(TARGETS));
}

main();
