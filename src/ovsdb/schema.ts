// The OVSDB schema language (RFC 7047 §3.2) as plain data, with the derived facts the codec and cache need.

import { SchemaError } from "./errors.ts";

export type AtomicType = "integer" | "real" | "boolean" | "string" | "uuid";

export interface BaseType {
  readonly type: AtomicType;
  readonly enum?: readonly (string | number | boolean)[];
  readonly minInteger?: number;
  readonly maxInteger?: number;
  readonly minReal?: number;
  readonly maxReal?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly refTable?: string;
  readonly refType?: "strong" | "weak";
}

/**
 * How a column is represented in JavaScript:
 * - scalar: exactly one atom (min 1, max 1);
 * - optional: zero or one atom, `null` when empty;
 * - set: an array of atoms;
 * - map: an object keyed by the key atom (integer keys become their decimal string).
 */
export type ColumnKind = "scalar" | "optional" | "set" | "map";

export interface ColumnType {
  readonly key: BaseType;
  readonly value?: BaseType;
  readonly min: number;
  readonly max: number; // Infinity for "unlimited"
  readonly kind: ColumnKind;
}

export interface ColumnSchema {
  readonly name: string;
  readonly type: ColumnType;
  readonly ephemeral: boolean;
  readonly mutable: boolean;
}

export interface TableSchema {
  readonly name: string;
  readonly columns: ReadonlyMap<string, ColumnSchema>;
  readonly isRoot: boolean;
  readonly indexes: readonly (readonly string[])[];
  readonly maxRows?: number;
}

export interface DatabaseSchema {
  readonly name: string;
  readonly version: string;
  readonly cksum?: string;
  readonly tables: ReadonlyMap<string, TableSchema>;
  /** The JSON the schema was parsed from, kept for get_schema comparisons and code generation. */
  readonly raw: unknown;
}

const ATOMIC_TYPES = new Set<string>(["integer", "real", "boolean", "string", "uuid"]);
const ID_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parseBaseType(v: unknown, where: string): BaseType {
  if (typeof v === "string") {
    if (!ATOMIC_TYPES.has(v)) throw new SchemaError(`${where}: unknown atomic type "${v}"`);
    return { type: v as AtomicType };
  }
  if (!isObject(v) || typeof v.type !== "string" || !ATOMIC_TYPES.has(v.type)) {
    throw new SchemaError(`${where}: a base type must be an atomic type name or an object with "type"`);
  }
  const bt: {
    -readonly [K in keyof BaseType]: BaseType[K];
  } = { type: v.type as AtomicType };
  if (v.enum !== undefined) {
    const e = v.enum;
    if (Array.isArray(e) && e[0] === "set" && Array.isArray(e[1])) bt.enum = e[1] as (string | number)[];
    else bt.enum = [e as string | number | boolean];
  }
  for (const k of ["minInteger", "maxInteger", "minReal", "maxReal", "minLength", "maxLength"] as const) {
    if (typeof v[k] === "number") bt[k] = v[k] as number;
  }
  if (typeof v.refTable === "string") {
    bt.refTable = v.refTable;
    bt.refType = v.refType === "weak" ? "weak" : "strong";
  }
  return bt;
}

export function parseColumnType(v: unknown, where: string): ColumnType {
  if (typeof v === "string") {
    return { key: parseBaseType(v, where), min: 1, max: 1, kind: "scalar" };
  }
  if (!isObject(v)) throw new SchemaError(`${where}: a column type must be a string or an object`);
  const key = parseBaseType(v.key, `${where}.key`);
  const value = v.value === undefined ? undefined : parseBaseType(v.value, `${where}.value`);
  const min = v.min === undefined ? 1 : v.min;
  const maxRaw = v.max === undefined ? 1 : v.max;
  if (typeof min !== "number" || (min !== 0 && min !== 1))
    throw new SchemaError(`${where}: min must be 0 or 1`);
  const max = maxRaw === "unlimited" ? Number.POSITIVE_INFINITY : maxRaw;
  if (typeof max !== "number" || max < 1 || max < min) {
    throw new SchemaError(`${where}: max must be a positive integer or "unlimited"`);
  }
  let kind: ColumnKind;
  if (value) kind = "map";
  else if (min === 1 && max === 1) kind = "scalar";
  else if (min === 0 && max === 1) kind = "optional";
  else kind = "set";
  return value ? { key, value, min, max, kind } : { key, min, max, kind };
}

export function parseSchema(json: unknown): DatabaseSchema {
  if (!isObject(json)) throw new SchemaError("schema: not a JSON object");
  const { name, version, cksum, tables } = json;
  if (typeof name !== "string" || !ID_RE.test(name)) throw new SchemaError("schema: missing or invalid name");
  if (!isObject(tables)) throw new SchemaError(`schema ${name}: missing tables`);
  const out = new Map<string, TableSchema>();
  for (const [tname, t] of Object.entries(tables)) {
    if (!isObject(t) || !isObject(t.columns))
      throw new SchemaError(`schema ${name}: table ${tname} has no columns`);
    const columns = new Map<string, ColumnSchema>();
    for (const [cname, c] of Object.entries(t.columns)) {
      if (!isObject(c)) throw new SchemaError(`schema ${name}: ${tname}.${cname} is not an object`);
      columns.set(cname, {
        name: cname,
        type: parseColumnType(c.type, `${tname}.${cname}`),
        ephemeral: c.ephemeral === true,
        mutable: c.mutable !== false,
      });
    }
    const indexes = Array.isArray(t.indexes) ? (t.indexes as string[][]) : [];
    out.set(tname, {
      name: tname,
      columns,
      isRoot: t.isRoot === true,
      indexes,
      ...(typeof t.maxRows === "number" ? { maxRows: t.maxRows } : {}),
    });
  }
  // RFC 7047: a schema where no table is marked isRoot predates the flag, and then every table is a root.
  if (![...out.values()].some((t) => t.isRoot)) {
    for (const [k, t] of out) out.set(k, { ...t, isRoot: true });
  }
  for (const t of out.values()) {
    for (const c of t.columns.values()) {
      for (const bt of [c.type.key, c.type.value]) {
        if (bt?.refTable && !out.has(bt.refTable)) {
          throw new SchemaError(`schema ${name}: ${t.name}.${c.name} refers to unknown table ${bt.refTable}`);
        }
      }
    }
  }
  return {
    name,
    version: typeof version === "string" ? version : "0.0.0",
    ...(typeof cksum === "string" ? { cksum } : {}),
    tables: out,
    raw: json,
  };
}

/** Tables referencing `table` through strong references, as [referringTable, column] pairs. */
export function strongReferrers(schema: DatabaseSchema, table: string): [string, string][] {
  const out: [string, string][] = [];
  for (const t of schema.tables.values()) {
    for (const c of t.columns.values()) {
      for (const bt of [c.type.key, c.type.value]) {
        if (bt?.refTable === table && bt.refType !== "weak") out.push([t.name, c.name]);
      }
    }
  }
  return out;
}

/**
 * The part of a client's schema that a server actually has: tables and columns missing on the server are dropped,
 * and the server's column types win, so the client never sends or monitors something the server does not know.
 */
export function intersectSchema(client: DatabaseSchema, server: DatabaseSchema): DatabaseSchema {
  const tables = new Map<string, TableSchema>();
  for (const [tname, ct] of client.tables) {
    const st = server.tables.get(tname);
    if (!st) continue;
    const columns = new Map<string, ColumnSchema>();
    for (const [cname] of ct.columns) {
      const sc = st.columns.get(cname);
      if (sc) columns.set(cname, sc);
    }
    tables.set(tname, { ...st, columns });
  }
  return { ...server, tables };
}
