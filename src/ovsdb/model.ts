// Typed database models: row interfaces generated from an .ovsschema (see tools/gen-models.ts), bound to the
// parsed schema at run time, plus the derived types for writing rows.

import type { NamedUuid } from "./datum.ts";
import { type DatabaseSchema, parseSchema } from "./schema.ts";

declare const uuidBrand: unique symbol;

/**
 * A row UUID in its 36-character text form. Any string is assignable to it; the optional phantom member exists only
 * so that InsertRow/UpdateRow can tell uuid columns from plain string columns and let them take a NamedUuid.
 */
export type Uuid = string & { readonly [uuidBrand]?: "uuid" };

/** A uuid column value being written: an existing row's UUID, or a row inserted earlier in the same transaction. */
export type UuidRef = Uuid | NamedUuid;

export interface RowBase {
  readonly _uuid: string;
}

export type TableMap = { [table: string]: RowBase };

export interface DatabaseModel<T extends TableMap> {
  /** The database name, e.g. "OVN_Northbound". */
  readonly name: string;
  /** Parsed from the schema JSON embedded in the generated model. */
  readonly schema: DatabaseSchema;
  readonly tables: readonly (keyof T & string)[];
  /** Never set: carries T so that callers can infer row types from a model value. */
  readonly _rows?: T;
}

export function defineModel<T extends TableMap>(rawSchema: unknown): DatabaseModel<T> {
  const schema = parseSchema(rawSchema);
  return Object.freeze({
    name: schema.name,
    schema,
    tables: Object.freeze([...schema.tables.keys()] as (keyof T & string)[]),
  });
}

export type RowOf<T extends TableMap, K extends keyof T> = T[K];

/** The tables map carried by a model. */
export type TablesOf<M> = M extends DatabaseModel<infer T> ? T : never;

type WritableAtom<A> = A extends string ? (typeof uuidBrand extends keyof A ? A | NamedUuid : A) : A;

// Arrays before objects: sets are arrays, maps are plain objects, and Uuid (a string) matches neither.
type WritableValue<V> = V extends readonly (infer E)[]
  ? readonly WritableAtom<E>[]
  : V extends string | number | boolean | null
    ? WritableAtom<V>
    : { readonly [K in keyof V]: WritableAtom<V[K]> };

/**
 * Columns a caller may give to insert: everything but _uuid, all optional (omitted = the column's default).
 * uuid columns, and sets and map values of uuids, also accept NamedUuid.
 */
export type InsertRow<R> = { [K in Exclude<keyof R, "_uuid">]?: WritableValue<R[K]> };

/** Columns to change in an update; same value types as InsertRow. */
export type UpdateRow<R> = InsertRow<R>;
