// The client's replica of the monitored tables: rows by UUID, secondary indexes, and change events.
// Rows never change; a change replaces the row object, so listeners can keep and compare old and new. One
// exception to know: a large set value (live-set.ts) taken out of the current row is changed in place by the
// next update, while the row it came from keeps its old value. Keep the row, not the array, across an await.

import {
  type Atom,
  applyDiff,
  decodeValue,
  defaultValue,
  EMPTY_SET,
  setToggles,
  type Value,
  valuesEqual,
} from "./datum.ts";
import { changeableInPlace, pinInPlace, toggleInPlace } from "./live-set.ts";
import type { RowBase, TableMap } from "./model.ts";
import type { ColumnSchema, DatabaseSchema, TableSchema } from "./schema.ts";

export type AnyRow = RowBase & { readonly [column: string]: Value };

export type RowEvent<R = AnyRow> =
  | { readonly kind: "add"; readonly table: string; readonly row: R }
  | { readonly kind: "update"; readonly table: string; readonly old: R; readonly row: R }
  | { readonly kind: "delete"; readonly table: string; readonly old: R };

export type IndexKey = string | number | boolean;
/** Maps a row to the key(s) it is found under; undefined leaves it out of the index. */
export type IndexFn<R> = (row: R) => IndexKey | readonly IndexKey[] | undefined;

const NO_ROWS: readonly never[] = Object.freeze([]);

class Index<R extends RowBase> {
  private readonly entries = new Map<IndexKey, R | Set<R>>();
  constructor(readonly fn: IndexFn<R>) {}

  private keysOf(row: R): readonly IndexKey[] {
    const k = this.fn(row);
    if (k === undefined) return NO_ROWS;
    return Array.isArray(k) ? (k as IndexKey[]) : [k as IndexKey];
  }

  add(row: R): void {
    for (const k of this.keysOf(row)) {
      const cur = this.entries.get(k);
      if (cur === undefined) this.entries.set(k, row);
      else if (cur instanceof Set) cur.add(row);
      else this.entries.set(k, new Set([cur, row]));
    }
  }

  remove(row: R): void {
    for (const k of this.keysOf(row)) {
      const cur = this.entries.get(k);
      if (cur === row) this.entries.delete(k);
      else if (cur instanceof Set) {
        cur.delete(row);
        if (cur.size === 1) this.entries.set(k, cur.values().next().value as R);
      }
    }
  }

  get(k: IndexKey): readonly R[] {
    const cur = this.entries.get(k);
    if (cur === undefined) return NO_ROWS;
    return cur instanceof Set ? [...cur] : [cur];
  }

  clear(): void {
    this.entries.clear();
  }
}

/** A set column that may hold more than one element: its large values are changed in place (live-set.ts). */
function inPlaceColumn(c: ColumnSchema): boolean {
  return c.type.kind === "set" && c.type.max > 1;
}

/** Key for a multi-column schema index: the canonical JSON of the column values. */
function schemaIndexFn(columns: readonly ColumnSchema[]): IndexFn<AnyRow> {
  if (columns.length === 1) {
    const c = columns[0] as ColumnSchema;
    if (c.type.kind === "scalar") return (r) => r[c.name] as IndexKey;
  }
  return (r) => JSON.stringify(columns.map((c) => r[c.name]));
}

export class TableCache<R extends RowBase = AnyRow> {
  private readonly rows = new Map<string, R>();
  private readonly indexes = new Map<string, Index<R>>();
  /** Columns every row carries, in a fixed order so all rows of a table share one hidden class. */
  private columns: readonly ColumnSchema[];
  /** The columns by name, and those whose values may be large sets (changed in place, live-set.ts). */
  private readonly byName: ReadonlyMap<string, ColumnSchema>;
  private readonly setColumns: readonly ColumnSchema[];
  private serverColumns: ReadonlySet<string>;

  constructor(
    readonly name: string,
    clientTable: TableSchema,
    serverTable: TableSchema | undefined,
  ) {
    this.columns = [...clientTable.columns.values()];
    this.byName = new Map(this.columns.map((c) => [c.name, c]));
    this.setColumns = this.columns.filter(inPlaceColumn);
    this.serverColumns = new Set(serverTable ? serverTable.columns.keys() : clientTable.columns.keys());
    for (const idx of clientTable.indexes) {
      const cols = idx.map((c) => clientTable.columns.get(c)).filter((c): c is ColumnSchema => !!c);
      if (cols.length === idx.length)
        this.indexes.set(idx.join(","), new Index(schemaIndexFn(cols) as unknown as IndexFn<R>));
    }
  }

  setServerTable(serverTable: TableSchema | undefined): void {
    this.serverColumns = new Set(serverTable ? serverTable.columns.keys() : []);
  }

  get size(): number {
    return this.rows.size;
  }

  get(uuid: string): R | undefined {
    return this.rows.get(uuid);
  }

  values(): IterableIterator<R> {
    return this.rows.values();
  }

  find(pred: (row: R) => boolean): R[] {
    const out: R[] = [];
    for (const r of this.rows.values()) if (pred(r)) out.push(r);
    return out;
  }

  findOne(pred: (row: R) => boolean): R | undefined {
    for (const r of this.rows.values()) if (pred(r)) return r;
    return undefined;
  }

  /**
   * Adds a secondary index. `by` is a column name (a set column indexes each element) or a function;
   * schema indexes are present already, named by their columns joined with ",".
   */
  addIndex(name: string, by: string | IndexFn<R>): void {
    if (this.indexes.has(name)) throw new Error(`${this.name}: index ${name} exists already`);
    let fn: IndexFn<R>;
    if (typeof by === "function") fn = by;
    else {
      const col = this.columns.find((c) => c.name === by);
      if (!col) throw new Error(`${this.name}: no column ${by} to index`);
      if (col.type.kind === "map") throw new Error(`${this.name}.${by}: index a map column with a function`);
      if (col.type.kind === "optional")
        fn = (r) =>
          (r as unknown as AnyRow)[by] === null ? undefined : ((r as unknown as AnyRow)[by] as IndexKey);
      else fn = (r) => (r as unknown as AnyRow)[by] as IndexKey | IndexKey[];
    }
    const idx = new Index<R>(fn);
    for (const r of this.rows.values()) idx.add(r);
    this.indexes.set(name, idx);
  }

  hasIndex(name: string): boolean {
    return this.indexes.has(name);
  }

  lookup(index: string, key: IndexKey): readonly R[] {
    const idx = this.indexes.get(index);
    if (!idx) throw new Error(`${this.name}: no index ${index}`);
    return idx.get(key);
  }

  lookupOne(index: string, key: IndexKey): R | undefined {
    return this.lookup(index, key)[0];
  }

  /** Builds a row from a full wire row; columns the server did not send (defaults, or unknown to it) get their default. */
  decodeRow(uuid: string, wire: Record<string, unknown>, refs?: RefResolver): R {
    const values: unknown[] = new Array(this.columns.length);
    for (let i = 0; i < this.columns.length; i++) {
      const c = this.columns[i] as ColumnSchema;
      const w = this.serverColumns.has(c.name) ? wire[c.name] : undefined;
      let v = w === undefined ? defaultValue(c.type) : decodeValue(w, c.type);
      if (refs && w !== undefined) v = shareRefs(v, c, refs);
      values[i] = v;
    }
    return this.makeRow(uuid, values) as R;
  }

  // Rows are built by an object literal listing every column, so V8 gives all rows of a table one compact shape.
  // Adding a dozen properties one by one with computed names would turn each row into a hash-table object
  // several times larger.
  private makeRowFn: ((uuid: string, v: unknown[]) => object) | undefined;
  private makeRow(uuid: string, values: unknown[]): object {
    if (!this.makeRowFn) {
      const body = this.columns.map((c, i) => `${JSON.stringify(c.name)}: v[${i}]`).join(", ");
      this.makeRowFn = new Function("u", "v", `return { _uuid: u${body ? `, ${body}` : ""} };`) as (
        uuid: string,
        v: unknown[],
      ) => object;
    }
    return this.makeRowFn(uuid, values);
  }

  /**
   * Applies an update2 "modify" diff, returning the new row. A large set column is changed in place and `old`
   * gets its former value back lazily (live-set.ts); every other value is copied.
   */
  diffRow(old: R, diff: Record<string, unknown>): R {
    const row: Record<string, unknown> = { ...(old as object) };
    // The columns the diff names (usually one), not every column of the table.
    for (const name in diff) {
      if (!Object.hasOwn(diff, name)) continue;
      const d = diff[name];
      const c = this.byName.get(name);
      if (d === undefined || !c || !this.serverColumns.has(name)) continue;
      const ov = (old as unknown as AnyRow)[name] as Value;
      if (inPlaceColumn(c) && changeableInPlace(ov)) {
        const live = ov;
        if (toggleInPlace(old, name, live, setToggles(d, c.type.key)) && live.length === 0)
          row[name] = EMPTY_SET;
      } else row[name] = applyDiff(ov, d, c.type);
    }
    for (const c of this.setColumns) {
      if (diff[c.name] !== undefined && this.serverColumns.has(c.name)) continue;
      // Unchanged, so `row` shares the array: a later in-place change must not reach `old` through it.
      const ov = (old as unknown as AnyRow)[c.name] as Value;
      if (changeableInPlace(ov)) pinInPlace(old, c.name, ov);
    }
    return row as unknown as R;
  }

  rowsEqual(a: R, b: R): boolean {
    for (const c of this.columns) {
      if (
        !valuesEqual(
          (a as unknown as AnyRow)[c.name] as Value,
          (b as unknown as AnyRow)[c.name] as Value,
          c.type,
        )
      )
        return false;
    }
    return true;
  }

  put(row: R): R | undefined {
    const old = this.rows.get(row._uuid);
    if (old) for (const idx of this.indexes.values()) idx.remove(old);
    this.rows.set(row._uuid, row);
    for (const idx of this.indexes.values()) idx.add(row);
    return old;
  }

  remove(uuid: string): R | undefined {
    const old = this.rows.get(uuid);
    if (!old) return undefined;
    this.rows.delete(uuid);
    for (const idx of this.indexes.values()) idx.remove(old);
    return old;
  }

  clear(): void {
    this.rows.clear();
    for (const idx of this.indexes.values()) idx.clear();
  }
}

/** Finds the canonical UUID string of a row already cached in `table`, so references share one string. */
export type RefResolver = (table: string, uuid: string) => string | undefined;

function shareRefs(v: Value, c: ColumnSchema, refs: RefResolver): Value {
  const kt = c.type.key.refTable;
  const vt = c.type.value?.refTable;
  if (!kt && !vt) return v;
  const one = (t: string | undefined, a: unknown) => (t && typeof a === "string" ? (refs(t, a) ?? a) : a);
  switch (c.type.kind) {
    case "scalar":
    case "optional":
      return v === null ? v : (one(kt, v) as Value);
    case "set":
      return (v as readonly string[]).length === 0
        ? v
        : (v as readonly string[]).map((a) => one(kt, a) as string);
    case "map": {
      if (!vt) return v;
      const m = v as Record<string, unknown>;
      for (const k of Object.keys(m)) m[k] = one(vt, m[k]);
      return v;
    }
  }
}

export type RowListener = (events: readonly RowEvent[]) => void;

/** Wire table-updates of any monitor flavour: 1 = "update" (old/new), 2 = update2/update3. */
export type UpdateFormat = 1 | 2;
type WireRows = Record<string, Record<string, unknown> | null>;
type TableUpdates = Record<string, WireRows>;

export class Cache<T extends TableMap = TableMap> {
  private readonly tables = new Map<string, TableCache>();
  private readonly listeners = new Set<{ table: string | undefined; fn: RowListener }>();
  /** Listener failures are reported here and never disturb the cache. */
  onListenerError: (e: unknown) => void = () => {};

  private readonly resolveRef: RefResolver = (table, uuid) => this.tables.get(table)?.get(uuid)?._uuid;
  /** Tables in an order where referenced tables come before those referring to them, where the schema allows. */
  private readonly order: string[];
  /** Each table's place in `order`. */
  private readonly rank = new Map<string, number>();

  constructor(clientSchema: DatabaseSchema, serverSchema?: DatabaseSchema) {
    for (const [name, t] of clientSchema.tables) {
      this.tables.set(name, new TableCache(name, t, serverSchema ? serverSchema.tables.get(name) : t));
    }
    this.order = referenceOrder(clientSchema);
    for (const [i, name] of this.order.entries()) this.rank.set(name, i);
  }

  private ordered(updates: TableUpdates): [string, WireRows][] {
    return this.order.filter((t) => updates[t] !== undefined).map((t) => [t, updates[t] as WireRows]);
  }

  setServerSchema(serverSchema: DatabaseSchema): void {
    for (const [name, tc] of this.tables) tc.setServerTable(serverSchema.tables.get(name));
  }

  table<K extends keyof T & string>(name: K): TableCache<T[K]> {
    const t = this.tables.get(name);
    if (!t) throw new Error(`no table ${name} in the cache`);
    return t as unknown as TableCache<T[K]>;
  }

  tableNames(): string[] {
    return [...this.tables.keys()];
  }

  /** Listens to changes of one table, or all tables when `table` is undefined. Returns the unsubscribe function. */
  subscribe(table: (keyof T & string) | undefined, fn: RowListener): () => void {
    const l = { table, fn };
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** Applies a notification or a monitor reply and emits the resulting events. */
  apply(updates: unknown, format: UpdateFormat): RowEvent[] {
    const events: RowEvent[] = [];
    const all = (updates ?? {}) as TableUpdates;
    // One update per write on the pod path, naming one or two tables: visit those, not every table of the
    // schema, in reference order, without building entry arrays.
    // (Insertion by rank: Array.prototype.sort would allocate a work array per update.)
    const present: TableCache[] = [];
    for (const tname in all) {
      if (!Object.hasOwn(all, tname) || all[tname] === undefined) continue;
      const tc = this.tables.get(tname);
      if (!tc) continue;
      const r = this.rank.get(tname) as number;
      let i = present.length;
      present.push(tc);
      for (; i > 0 && (this.rank.get((present[i - 1] as TableCache).name) as number) > r; i--)
        present[i] = present[i - 1] as TableCache;
      present[i] = tc;
    }
    for (const tc of present) {
      const rows = all[tc.name] as WireRows;
      for (const uuid in rows) {
        if (!Object.hasOwn(rows, uuid)) continue;
        const u = rows[uuid];
        if (u === null || u === undefined) continue;
        if (format === 1) this.applyV1(tc, uuid, u, events);
        else this.applyV2(tc, uuid, u, events);
      }
    }
    this.emit(events);
    return events;
  }

  /** Replaces the whole content with a full snapshot, emitting only the real differences. */
  replace(snapshot: unknown, format: UpdateFormat): RowEvent[] {
    const fresh = new Map<string, Map<string, AnyRow>>();
    const resolve: RefResolver = (table, uuid) => fresh.get(table)?.get(uuid)?._uuid;
    for (const [tname, rows] of this.ordered((snapshot ?? {}) as TableUpdates)) {
      const tc = this.tables.get(tname);
      if (!tc) continue;
      const m = new Map<string, AnyRow>();
      for (const [uuid, u] of Object.entries(rows)) {
        if (u === null) continue;
        const wire = (format === 1 ? u.new : (u.initial ?? u.insert ?? u.modify)) as Record<string, unknown>;
        if (wire) m.set(uuid, tc.decodeRow(uuid, wire, resolve));
      }
      fresh.set(tname, m);
    }
    const events: RowEvent[] = [];
    for (const [tname, tc] of this.tables) {
      const m = fresh.get(tname) ?? new Map<string, AnyRow>();
      for (const old of [...tc.values()]) {
        if (!m.has(old._uuid)) {
          tc.remove(old._uuid);
          events.push({ kind: "delete", table: tname, old });
        }
      }
      for (const row of m.values()) {
        const old = tc.get(row._uuid);
        if (!old) {
          tc.put(row);
          events.push({ kind: "add", table: tname, row });
        } else if (!tc.rowsEqual(old, row)) {
          tc.put(row);
          events.push({ kind: "update", table: tname, old, row });
        }
      }
    }
    this.emit(events);
    return events;
  }

  clear(): void {
    for (const tc of this.tables.values()) tc.clear();
  }

  private applyV1(tc: TableCache, uuid: string, u: Record<string, unknown>, events: RowEvent[]): void {
    const nw = u.new as Record<string, unknown> | undefined;
    if (!nw) {
      const old = tc.remove(uuid);
      if (old) events.push({ kind: "delete", table: tc.name, old });
      return;
    }
    const cur = tc.get(uuid);
    // "new" carries every monitored column; with "old" present only the changed ones are in "old".
    const row = tc.decodeRow(uuid, nw, this.resolveRef);
    tc.put(row);
    events.push(
      cur ? { kind: "update", table: tc.name, old: cur, row } : { kind: "add", table: tc.name, row },
    );
  }

  private applyV2(tc: TableCache, uuid: string, u: Record<string, unknown>, events: RowEvent[]): void {
    if ("delete" in u) {
      const old = tc.remove(uuid);
      if (old) events.push({ kind: "delete", table: tc.name, old });
      return;
    }
    const full = (u.initial ?? u.insert) as Record<string, unknown> | undefined;
    if (full) {
      const cur = tc.get(uuid);
      const row = tc.decodeRow(uuid, full, this.resolveRef);
      tc.put(row);
      events.push(
        cur ? { kind: "update", table: tc.name, old: cur, row } : { kind: "add", table: tc.name, row },
      );
      return;
    }
    const diff = u.modify as Record<string, unknown> | undefined;
    if (!diff) return;
    const cur = tc.get(uuid);
    if (!cur) return; // a modify for a row we never saw: the next full sync repairs it
    const row = tc.diffRow(cur, diff);
    tc.put(row);
    events.push({ kind: "update", table: tc.name, old: cur, row });
  }

  private emit(events: readonly RowEvent[]): void {
    if (events.length === 0 || this.listeners.size === 0) return;
    for (const l of this.listeners) {
      const evs = l.table === undefined ? events : events.filter((e) => e.table === l.table);
      if (evs.length === 0) continue;
      try {
        l.fn(evs);
      } catch (e) {
        this.onListenerError(e);
      }
    }
  }
}

export type { Atom };

/** Orders tables so that a referenced table precedes the tables referring to it (cycles broken arbitrarily). */
function referenceOrder(schema: DatabaseSchema): string[] {
  const out: string[] = [];
  const state = new Map<string, 1 | 2>();
  const visit = (name: string) => {
    if (state.get(name)) return;
    state.set(name, 1);
    const t = schema.tables.get(name);
    for (const c of t?.columns.values() ?? []) {
      for (const bt of [c.type.key, c.type.value])
        if (bt?.refTable && bt.refTable !== name) visit(bt.refTable);
    }
    state.set(name, 2);
    out.push(name);
  };
  for (const name of schema.tables.keys()) visit(name);
  return out;
}
