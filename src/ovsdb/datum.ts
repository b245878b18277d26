// Values of OVSDB columns: conversion between JavaScript values and the RFC 7047 wire notation,
// validation against a column type, and the update2 "modify" diff semantics.
//
// JavaScript representation, chosen by ColumnType.kind:
//   scalar   -> the atom
//   optional -> the atom or null
//   set      -> an array of atoms
//   map      -> a plain object; keys are the key atoms as strings (integer keys as decimal strings)
// uuid atoms are 36-character strings; a reference to a row inserted in the same transaction is a NamedUuid.

import { ValueError } from "./errors.ts";
import type { BaseType, ColumnType } from "./schema.ts";
import { handOn, INDEXED_MIN, setHas } from "./set-index.ts";

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A reference to a row inserted earlier in the same transaction by its uuid-name. */
export class NamedUuid {
  constructor(readonly name: string) {
    if (!NAME_RE.test(name)) {
      throw new ValueError(`invalid uuid-name "${name}": it must match [A-Za-z_][A-Za-z0-9_]*`);
    }
  }
  toJSON(): ["named-uuid", string] {
    return ["named-uuid", this.name];
  }
}

export type Atom = string | number | boolean | NamedUuid;
export type MapValue = Readonly<Record<string, Atom>>;
export type Value = Atom | null | readonly Atom[] | MapValue;

export const EMPTY_SET: readonly never[] = Object.freeze([]);
export const EMPTY_MAP: Readonly<Record<string, never>> = Object.freeze({});

export function isUuid(s: string): boolean {
  return s.length === 36 && UUID_RE.test(s);
}

export function defaultAtom(bt: BaseType): Atom {
  if (bt.enum && bt.enum.length > 0) {
    const sorted = [...bt.enum].sort(compareAtoms);
    return sorted[0] as Atom;
  }
  switch (bt.type) {
    case "integer":
    case "real":
      return 0;
    case "boolean":
      return false;
    case "string":
      return "";
    case "uuid":
      return "00000000-0000-0000-0000-000000000000";
  }
}

/** The value a column holds when a row is inserted without it (RFC 7047 §5.1). */
export function defaultValue(ct: ColumnType): Value {
  switch (ct.kind) {
    case "scalar":
      return defaultAtom(ct.key);
    case "optional":
      return null;
    case "set":
      return EMPTY_SET;
    case "map":
      return EMPTY_MAP;
  }
}

function where(table: string | undefined, column: string | undefined): string {
  return table ? `${table}.${column}` : (column ?? "value");
}

// Validation runs for every value written, so it allocates nothing unless it fails: no closures, and the
// "Table.column" text is built only for the error.
function invalid(msg: string, table: string | undefined, column: string | undefined): never {
  throw new ValueError(`${where(table, column)}: ${msg}`, table, column);
}

export function validateAtom(a: unknown, bt: BaseType, table?: string, column?: string): Atom {
  switch (bt.type) {
    case "integer":
      if (typeof a !== "number" || !Number.isInteger(a))
        invalid(`expected an integer, got ${JSON.stringify(a)}`, table, column);
      if (bt.minInteger !== undefined && (a as number) < bt.minInteger)
        invalid(`${a} is below the minimum ${bt.minInteger}`, table, column);
      if (bt.maxInteger !== undefined && (a as number) > bt.maxInteger)
        invalid(`${a} is above the maximum ${bt.maxInteger}`, table, column);
      break;
    case "real":
      if (typeof a !== "number" || !Number.isFinite(a))
        invalid(`expected a real number, got ${JSON.stringify(a)}`, table, column);
      // ovsdb-server's JSON parser rejects subnormal numbers as out of range.
      if ((a as number) !== 0 && Math.abs(a as number) < 2.2250738585072014e-308) {
        invalid(
          `${a} is too small for OVSDB (subnormal reals are refused by ovsdb-server); use 0`,
          table,
          column,
        );
      }
      if (bt.minReal !== undefined && (a as number) < bt.minReal)
        invalid(`${a} is below the minimum ${bt.minReal}`, table, column);
      if (bt.maxReal !== undefined && (a as number) > bt.maxReal)
        invalid(`${a} is above the maximum ${bt.maxReal}`, table, column);
      break;
    case "boolean":
      if (typeof a !== "boolean") invalid(`expected a boolean, got ${JSON.stringify(a)}`, table, column);
      break;
    case "string": {
      if (typeof a !== "string") invalid(`expected a string, got ${JSON.stringify(a)}`, table, column);
      if (bt.minLength !== undefined || bt.maxLength !== undefined) {
        // ovsdb-server counts code points, not bytes: "ééé" fits maxLength 3.
        const len = codePoints(a as string);
        if (bt.minLength !== undefined && len < bt.minLength)
          invalid(`"${a}" is shorter than ${bt.minLength} characters`, table, column);
        if (bt.maxLength !== undefined && len > bt.maxLength)
          invalid(`"${a}" is longer than ${bt.maxLength} characters`, table, column);
      }
      break;
    }
    case "uuid":
      if (a instanceof NamedUuid) break;
      if (typeof a !== "string" || !isUuid(a))
        invalid(`expected a UUID or a NamedUuid, got ${JSON.stringify(a)}`, table, column);
      break;
  }
  if (bt.enum && !(a instanceof NamedUuid) && !bt.enum.includes(a as string | number | boolean)) {
    invalid(
      `${JSON.stringify(a)} is not one of ${bt.enum.map((e) => JSON.stringify(e)).join(", ")}`,
      table,
      column,
    );
  }
  return a as Atom;
}

/** The number of code points of `s`: its UTF-16 length less one for each surrogate pair. */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

export function encodeAtom(a: Atom, bt: BaseType): unknown {
  if (bt.type === "uuid") return a instanceof NamedUuid ? ["named-uuid", a.name] : ["uuid", a];
  return a;
}

export function decodeAtom(w: unknown, bt: BaseType): Atom {
  if (bt.type === "uuid") {
    if (Array.isArray(w) && (w[0] === "uuid" || w[0] === "named-uuid")) return w[1] as string;
    throw new ValueError(`expected a uuid atom, got ${JSON.stringify(w)}`);
  }
  if (bt.type === "real" || bt.type === "integer") {
    if (typeof w !== "number") throw new ValueError(`expected a number, got ${JSON.stringify(w)}`);
    return w;
  }
  return w as Atom;
}

function keyToAtom(k: string, bt: BaseType): Atom {
  switch (bt.type) {
    case "integer":
    case "real":
      return Number(k);
    case "boolean":
      return k === "true";
    default:
      return k;
  }
}

// Maps are ordinary objects (compact in V8, unlike null-prototype ones); "__proto__" needs defineProperty to stay a key.
function setKey(o: Record<string, Atom>, k: string, v: Atom): void {
  if (k === "__proto__")
    Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  else o[k] = v;
}

// ovsdb-server refuses a set with duplicate elements; a JavaScript array may repeat, a set cannot.
function dedupe(v: readonly unknown[]): readonly unknown[] {
  if (v.length < 2) return v;
  const seen = new Set<unknown>();
  const out: unknown[] = [];
  for (const e of v) {
    const k = e instanceof NamedUuid ? `\0named:${e.name}` : e;
    if (!seen.has(k)) {
      seen.add(k);
      out.push(e);
    }
  }
  return out;
}

function wireSetElements(w: unknown): unknown[] {
  if (Array.isArray(w) && w[0] === "set") return w[1] as unknown[];
  return [w];
}

export interface EncodeOptions {
  /** Check min/max cardinality: true for full values (insert, update, ==), false for partial ones (mutate, includes). */
  cardinality?: boolean;
  table?: string;
  column?: string;
}

/** Validates `v` against the column type and encodes it in wire notation. */
export function encodeValue(v: unknown, ct: ColumnType, opts: EncodeOptions = {}): unknown {
  const { table, column } = opts;
  switch (ct.kind) {
    case "scalar":
      if (Array.isArray(v)) invalid("expected a single value, got an array", table, column);
      return encodeAtom(validateAtom(v, ct.key, table, column), ct.key);
    case "optional":
    case "set": {
      let elems: readonly unknown[];
      if (v === null || v === undefined) elems = EMPTY_SET;
      else if (Array.isArray(v)) elems = dedupe(v);
      else elems = [v];
      if (opts.cardinality !== false && (elems.length < ct.min || elems.length > ct.max)) {
        invalid(
          `holds ${ct.min === ct.max ? ct.min : `${ct.min} to ${ct.max}`} elements, got ${elems.length}`,
          table,
          column,
        );
      }
      if (elems.length === 1) return encodeAtom(validateAtom(elems[0], ct.key, table, column), ct.key);
      const out: unknown[] = new Array(elems.length);
      for (let i = 0; i < elems.length; i++)
        out[i] = encodeAtom(validateAtom(elems[i], ct.key, table, column), ct.key);
      return ["set", out];
    }
    case "map": {
      if (v === null || v === undefined) return ["map", []];
      // A set of keys is accepted (partial, for the map "delete" mutator).
      if (Array.isArray(v)) {
        return ["set", v.map((k) => encodeAtom(validateAtom(k, ct.key, table, column), ct.key))];
      }
      if (typeof v !== "object") invalid(`expected a map object, got ${typeof v}`, table, column);
      const valueType = ct.value as BaseType;
      // Every write of external_ids comes here: the pairs are built directly, with no entries array between.
      const o = v as Record<string, unknown>;
      let n = 0;
      if (v instanceof Map) n = v.size;
      else for (const k in o) if (Object.hasOwn(o, k)) n++;
      if (opts.cardinality !== false && (n < ct.min || n > ct.max)) {
        invalid(`holds at most ${ct.max} pairs, got ${n}`, table, column);
      }
      const pairs: unknown[] = [];
      if (v instanceof Map) for (const [k, val] of v) pairs.push(encodePair(k, val, ct.key, valueType, opts));
      else
        for (const k in o) if (Object.hasOwn(o, k)) pairs.push(encodePair(k, o[k], ct.key, valueType, opts));
      return ["map", pairs];
    }
  }
}

// A function of the module, not a closure made per map encoded: every write of external_ids comes here.
function encodePair(
  k: unknown,
  val: unknown,
  key: BaseType,
  value: BaseType,
  opts: EncodeOptions,
): unknown[] {
  const { table, column } = opts;
  return [
    encodeAtom(validateAtom(typeof k === "string" ? keyToAtom(k, key) : k, key, table, column), key),
    encodeAtom(validateAtom(val, value, table, column), value),
  ];
}

/** Decodes a wire value; no validation beyond shape, since it comes from the server. */
export function decodeValue(w: unknown, ct: ColumnType): Value {
  switch (ct.kind) {
    case "scalar":
      return decodeAtom(w, ct.key);
    case "optional": {
      const e = wireSetElements(w);
      return e.length === 0 ? null : decodeAtom(e[0], ct.key);
    }
    case "set": {
      const e = wireSetElements(w);
      if (e.length === 0) return EMPTY_SET;
      return e.map((x) => decodeAtom(x, ct.key));
    }
    case "map": {
      if (!Array.isArray(w) || w[0] !== "map" || !Array.isArray(w[1])) {
        throw new ValueError(`expected a map, got ${JSON.stringify(w)}`);
      }
      const pairs = w[1] as [unknown, unknown][];
      if (pairs.length === 0) return EMPTY_MAP;
      const valueType = ct.value as BaseType;
      const out: Record<string, Atom> = {};
      for (const [k, val] of pairs) setKey(out, String(decodeAtom(k, ct.key)), decodeAtom(val, valueType));
      return out;
    }
  }
}

/**
 * Applies an update2 "modify" diff to an old value: columns with at most one element take the new value;
 * sets toggle each listed element (symmetric difference);
 * maps add a missing key, delete a key whose value matches, and replace a key whose value differs; scalars are replaced.
 */
export function applyDiff(old: Value, diff: unknown, ct: ColumnType): Value {
  // ovsdb-server sends the new value, not a difference, for every column that holds at most one element
  // (scalars, optional atoms and single-pair maps), as its monitor code does for n_max == 1.
  // Scalars and optional atoms always have max 1 (schema.ts), so only sets and maps get here.
  if (ct.max === 1 || ct.kind === "scalar" || ct.kind === "optional") return decodeValue(diff, ct);
  switch (ct.kind) {
    case "set":
      return applySetDiff(old as readonly Atom[], diff, ct.key);
    case "map": {
      const d = decodeValue(diff, ct) as MapValue;
      const out: Record<string, Atom> = {};
      for (const k of Object.keys(old as MapValue)) setKey(out, k, (old as MapValue)[k] as Atom);
      for (const k of Object.keys(d)) {
        const nv = d[k] as Atom;
        if (!Object.hasOwn(out, k)) setKey(out, k, nv);
        else if (out[k] === nv) delete out[k];
        else out[k] = nv;
      }
      return Object.keys(out).length === 0 ? EMPTY_MAP : out;
    }
  }
}

/** The elements a set column's update2 diff toggles: each one listed an odd number of times, in order. */
export function setToggles(diff: unknown, key: BaseType): Set<Atom> {
  const toggled = new Set<Atom>();
  for (const e of wireSetElements(diff)) {
    const a = decodeAtom(e, key);
    // An element listed twice toggles twice: no change.
    if (!toggled.delete(a)) toggled.add(a);
  }
  return toggled;
}

/**
 * A set diff toggles each element: present ones leave, absent ones join. One pass over the old value with a
 * Set of the (usually few) toggled elements, so growing a set of n elements by one costs a copy, not n hashes.
 */
function applySetDiff(old: readonly Atom[], wire: unknown, key: BaseType): Value {
  const toggled = setToggles(wire, key);
  if (toggled.size === 0) return old as Value;
  const removed: Atom[] = [];
  let next: Atom[];
  if (old.length >= INDEXED_MIN) {
    for (const a of toggled) if (setHas(old, a)) removed.push(a);
  } else {
    for (const a of old) if (toggled.has(a)) removed.push(a);
  }
  if (removed.length === 0) next = old.concat([...toggled]);
  else {
    for (const r of removed) toggled.delete(r);
    const gone = new Set<Atom>(removed);
    next = old.filter((a) => !gone.has(a));
    for (const a of toggled) next.push(a);
  }
  if (next.length === 0) return EMPTY_SET;
  handOn(old, next, [...toggled], removed);
  return next;
}

export function compareAtoms(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  const sa = String(a);
  const sb = String(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/** A canonical, order-independent form of a decoded value, for comparisons. */
export function canonicalValue(v: Value, ct: ColumnType): unknown {
  switch (ct.kind) {
    case "scalar":
      return v instanceof NamedUuid ? `named:${v.name}` : v;
    case "optional":
      return v === null ? [] : [v];
    case "set":
      return [...(v as Atom[])].sort(compareAtoms);
    case "map": {
      const m = v as MapValue;
      return Object.keys(m)
        .sort((a, b) => compareAtoms(keyToAtom(a, ct.key), keyToAtom(b, ct.key)))
        .map((k) => [k, m[k]]);
    }
  }
}

export function valuesEqual(a: Value, b: Value, ct: ColumnType): boolean {
  if (a === b) return true;
  const quick = quickEqual(a, b, ct);
  if (quick !== undefined) return quick;
  return JSON.stringify(canonicalValue(a, ct)) === JSON.stringify(canonicalValue(b, ct));
}

/**
 * valuesEqual's answer without building canonical forms, for the common values (strings, string-keyed maps of
 * strings, sets of different sizes); undefined where only the canonical comparison can tell. A load balancer's
 * vips map compared per reconcile and per update was serialized whole twice.
 */
function quickEqual(a: Value, b: Value, ct: ColumnType): boolean | undefined {
  switch (ct.kind) {
    case "scalar":
    case "optional":
      if (a === null || b === null) return ct.kind === "optional" ? false : undefined;
      return typeof a === "string" && typeof b === "string" ? false : undefined;
    case "set":
      return (a as readonly Atom[]).length !== (b as readonly Atom[]).length ? false : undefined;
    case "map": {
      // Keys of another type sort as atoms, where two texts may tie ("1", "01"): the canonical order decides.
      const kt = ct.key.type;
      if (kt === "integer" || kt === "real" || kt === "boolean") return undefined;
      const ma = a as MapValue;
      const mb = b as MapValue;
      let size = 0;
      let unsure = false;
      for (const k in ma) {
        if (!Object.hasOwn(ma, k)) continue;
        size++;
        if (!Object.hasOwn(mb, k)) return false;
        const x = ma[k];
        const y = mb[k];
        if (x === y) continue;
        if (typeof x === "string" || typeof y === "string") return false;
        unsure = true;
      }
      let sizeB = 0;
      for (const k in mb) if (Object.hasOwn(mb, k)) sizeB++;
      if (size !== sizeB) return false;
      return unsure ? undefined : true;
    }
  }
}
