// Turning a desired set of owned NB rows into the operations that make the database match it, reading the
// current state from the client's cache. Pure with respect to the server: it only adds operations to a
// transaction, so a caller can put one logical change (including IPAM) into one commit. Nothing changes when
// the database already matches, which is what makes a restart with no changes write nothing.

import type { AnyRow, Cache, TableCache } from "../ovsdb/cache.ts";
import { NamedUuid, type Value, valuesEqual } from "../ovsdb/datum.ts";
import type { DatabaseSchema } from "../ovsdb/schema.ts";
import { setHas } from "../ovsdb/set-index.ts";
import { byUuid, type Transaction } from "../ovsdb/transaction.ts";
import { ID_KEY, idOf } from "./ownership.ts";

export interface ParentRef {
  readonly table: string;
  readonly column: string;
  /** The parent is one of our desired rows (by id), or an existing row by UUID (e.g. a ZStack switch). */
  readonly id?: string;
  readonly uuid?: string;
}

export interface DesiredRow {
  readonly table: string;
  /** Stable identity, stored as external_ids["zstack.io/id"]. */
  readonly id: string;
  /** The columns we manage; others are left as they are. external_ids must carry the ownership keys. */
  readonly row: Readonly<Record<string, unknown>>;
  /** The row that must refer to this one (required for rows of non-root tables). */
  readonly parent?: ParentRef;
  /** Further rows that must refer to this one (a load balancer in a second group); added, never removed. */
  readonly alsoParents?: readonly ParentRef[];
  /**
   * The UUID to insert the row with (ownership.ts rowUuid): a second insert of it is refused by the server, which
   * makes a retried insert safe without a guardAbsent. Ignored when the row exists.
   */
  readonly uuid?: string;
  /** References this row must hold in a set column (added by mutation; other members are left alone). */
  readonly links?: readonly { readonly column: string; readonly uuid: string }[];
}

export interface Scope {
  /** Tables whose owned rows are candidates for deletion. */
  readonly tables: readonly string[];
  /** Which owned rows of those tables this plan is responsible for (the others are left alone). */
  readonly owns: (id: string, row: AnyRow) => boolean;
  /**
   * When set, only rows whose id group (see idGroup) is listed are candidates: an index lookup instead of a
   * scan of the table, which matters for Logical_Switch_Port with thousands of pod ports.
   */
  readonly groups?: readonly string[];
}

export interface PlanSummary {
  inserted: string[];
  updated: string[];
  deleted: string[];
  relinked: string[];
  /** True when the transaction got no operation from this plan. */
  readonly empty: boolean;
  /** A desired row's uuid, or its named-uuid when this plan inserts it (for references later in the transaction). */
  refOf(table: string, id: string): string | NamedUuid | undefined;
}

const ID_INDEX = "zstack.io/id";
const GROUP_INDEX = "zstack.io/id-group";

/** An id's first two segments ("subnet/a/rtos" → "subnet/a", "pod/ns/name" → "pod/ns"), or the id itself. */
export function idGroup(id: string): string {
  const first = id.indexOf("/");
  if (first < 0) return id;
  const second = id.indexOf("/", first + 1);
  return second < 0 ? id : id.slice(0, second);
}

/** Adds the index the planner looks rows up by; call once per table after connecting. */
export function ensureIdIndex(cache: Cache, table: string): TableCache {
  const tc = cache.table(table) as unknown as TableCache;
  if (!tc.hasIndex(ID_INDEX)) {
    tc.addIndex(ID_INDEX, (r) => idOf(r as AnyRow & { external_ids: Record<string, string> }));
  }
  return tc;
}

export function findOwned(cache: Cache, table: string, id: string): AnyRow | undefined {
  return ensureIdIndex(cache, table).lookupOne(ID_INDEX, id) as AnyRow | undefined;
}

/** Every row carrying the id: more than one means a write was applied twice and needs repair. */
export function findAllOwned(cache: Cache, table: string, id: string): readonly AnyRow[] {
  return ensureIdIndex(cache, table).lookup(ID_INDEX, id) as readonly AnyRow[];
}

function referencesUuid(v: Value, uuid: string): boolean {
  if (v === uuid) return true;
  if (Array.isArray(v)) return setHas(v, uuid);
  if (v !== null && typeof v === "object" && !(v instanceof NamedUuid))
    return Object.values(v).includes(uuid);
  return false;
}

// A class rather than an object literal with closures: plan() runs once per pod and per reconcile.
class Summary implements PlanSummary {
  readonly inserted: string[] = [];
  readonly updated: string[] = [];
  readonly deleted: string[] = [];
  readonly relinked: string[] = [];
  /** table\0id → uuid or named-uuid. */
  readonly refs = new Map<string, string | NamedUuid>();

  get empty(): boolean {
    return this.inserted.length + this.updated.length + this.deleted.length + this.relinked.length === 0;
  }

  refOf(table: string, id: string): string | NamedUuid | undefined {
    return this.refs.get(`${table}\0${id}`);
  }
}

function resolveParent(
  cache: Cache,
  refs: ReadonlyMap<string, string | NamedUuid>,
  p: ParentRef,
): string | NamedUuid | undefined {
  if (p.uuid) return p.uuid;
  if (p.id) return refs.get(`${p.table}\0${p.id}`) ?? findOwned(cache, p.table, p.id)?._uuid;
  return undefined;
}

/**
 * Adds to `txn` the operations that turn the owned rows in `scope` into exactly `desired`.
 * `desired` must list parents before their children.
 */
export function plan(
  cache: Cache,
  schema: DatabaseSchema,
  txn: Transaction,
  desired: readonly DesiredRow[],
  scope?: Scope,
): PlanSummary {
  const summary = new Summary();
  const refs = summary.refs;
  const wanted = new Set<string>();

  for (const d of desired) {
    wanted.add(`${d.table}\0${d.id}`);
    const tschema = schema.tables.get(d.table);
    if (!tschema) throw new Error(`desired row ${d.id}: table ${d.table} is not in the server's schema`);
    const ids = d.row.external_ids as Record<string, string> | undefined;
    if (ids?.[ID_KEY] !== d.id)
      throw new Error(`desired row ${d.id}: external_ids must carry ${ID_KEY}=${d.id}`);
    const existing = findOwned(cache, d.table, d.id);
    let ref: string | NamedUuid;
    if (!existing) {
      ref = txn.insert(d.table, d.row as never, undefined, d.uuid === undefined ? {} : { uuid: d.uuid });
      summary.inserted.push(`${d.table}/${d.id}`);
    } else {
      ref = existing._uuid;
      const changed = changedColumns(schema, d.table, existing, d.row);
      if (Object.keys(changed).length > 0) {
        txn.update(d.table, byUuid(existing._uuid), changed as never);
        summary.updated.push(`${d.table}/${d.id}:${Object.keys(changed).join(",")}`);
      }
    }
    refs.set(`${d.table}\0${d.id}`, ref);
    for (const link of d.links ?? []) {
      if (existing && referencesUuid(existing[link.column] as Value, link.uuid)) continue;
      txn.mutate(d.table, byUuid(ref), [[link.column, "insert", [link.uuid]]]);
      if (existing) summary.updated.push(`${d.table}/${d.id}:${link.column}`);
    }
    for (const p of [...(d.parent ? [d.parent] : []), ...(d.alsoParents ?? [])]) {
      const parent = resolveParent(cache, refs, p);
      if (parent === undefined) throw new Error(`desired row ${d.id}: parent ${p.table}/${p.id} not found`);
      const parentRow =
        typeof parent === "string" ? (cache.table(p.table).get(parent) as AnyRow | undefined) : undefined;
      const linked =
        typeof ref === "string" &&
        parentRow !== undefined &&
        referencesUuid(parentRow[p.column] as Value, ref);
      if (!linked) {
        txn.mutate(p.table, byUuid(parent), [[p.column, "insert", [ref]]]);
        if (existing) summary.relinked.push(`${d.table}/${d.id}`);
      }
    }
  }

  if (scope) {
    for (const table of scope.tables) {
      const tc = ensureIdIndex(cache, table);
      let candidates: Iterable<AnyRow> = tc.values() as Iterable<AnyRow>;
      if (scope.groups) {
        if (!tc.hasIndex(GROUP_INDEX)) {
          tc.addIndex(GROUP_INDEX, (r) => {
            const id = idOf(r as AnyRow & { external_ids: Record<string, string> });
            return id === undefined ? undefined : idGroup(id);
          });
        }
        candidates = scope.groups.flatMap((g) => tc.lookup(GROUP_INDEX, g) as readonly AnyRow[]);
      }
      for (const row of candidates) {
        const id = idOf(row as AnyRow & { external_ids: Record<string, string> });
        if (id === undefined || wanted.has(`${table}\0${id}`) || !scope.owns(id, row as AnyRow)) continue;
        unlinkAndDelete(cache, schema, txn, table, row._uuid);
        summary.deleted.push(`${table}/${id}`);
      }
    }
  }
  return summary;
}

/**
 * The columns of `desired` whose values `existing` does not hold (as plan() would update them); columns the
 * server's schema lacks are left out. Empty when the row is as desired.
 */
export function changedColumns(
  schema: DatabaseSchema,
  table: string,
  existing: AnyRow,
  desired: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const tschema = schema.tables.get(table);
  if (!tschema) throw new Error(`table ${table} is not in the server's schema`);
  const changed: Record<string, unknown> = {};
  for (const [col, v] of Object.entries(desired)) {
    const c = tschema.columns.get(col);
    if (!c) continue;
    const same = !containsNamed(v) && valuesEqual(existing[col] as Value, normalize(v, c.type.kind), c.type);
    if (!same) changed[col] = v;
  }
  return changed;
}

/** Removes every strong reference to a row and deletes it, in the given transaction. */
export function unlinkAndDelete(
  cache: Cache,
  schema: DatabaseSchema,
  txn: Transaction,
  table: string,
  uuid: string,
): void {
  for (const t of schema.tables.values()) {
    for (const c of t.columns.values()) {
      if (c.type.key.refTable !== table || c.type.key.refType === "weak") continue;
      if (c.type.kind !== "set" && c.type.kind !== "optional") continue;
      for (const r of cache.table(t.name).values()) {
        if (referencesUuid((r as AnyRow)[c.name] as Value, uuid)) {
          txn.mutate(t.name, byUuid(r._uuid), [[c.name, "delete", [uuid]]]);
        }
      }
    }
  }
  // A non-root row would also go with its last reference; the explicit delete says what is meant.
  txn.delete(table, byUuid(uuid));
}

function containsNamed(v: unknown): boolean {
  if (v instanceof NamedUuid) return true;
  if (Array.isArray(v)) return v.some((e) => e instanceof NamedUuid);
  if (v !== null && typeof v === "object") return Object.values(v).some((e) => e instanceof NamedUuid);
  return false;
}

function normalize(v: unknown, kind: string): Value {
  if (kind === "optional") return (v === undefined ? null : Array.isArray(v) ? (v[0] ?? null) : v) as Value;
  if (kind === "set" && !Array.isArray(v))
    return (v === null || v === undefined ? [] : [v]) as unknown as Value;
  return v as Value;
}
