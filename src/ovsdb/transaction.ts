// Building one OVSDB transaction: typed operations, named-uuid references between them, guards for optimistic
// concurrency, and checks that catch mistakes before the server silently accepts them.

import { randomUUID } from "node:crypto";
import { encodeValue, isUuid, NamedUuid } from "./datum.ts";
import { type OperationFailure, OrphanRowError, transactionErrorFor, ValueError } from "./errors.ts";
import type { InsertRow, RowBase, TableMap, UpdateRow } from "./model.ts";
import type { ColumnSchema, DatabaseSchema, TableSchema } from "./schema.ts";

export type ConditionFunction = "==" | "!=" | "<" | "<=" | ">" | ">=" | "includes" | "excludes";
export type Condition = readonly [column: string, fn: ConditionFunction, value: unknown];
export type Mutator = "+=" | "-=" | "*=" | "/=" | "%=" | "insert" | "delete";
export type Mutation = readonly [column: string, mutator: Mutator, value: unknown];

/** Conditions that select one row by UUID. */
export function byUuid(uuid: string | NamedUuid): Condition[] {
  return [["_uuid", "==", uuid]];
}

export interface TransactOptions {
  /** Reply deadline in ms; the transaction may still commit after it passes. */
  timeoutMs?: number;
}

export interface TransactionResult {
  /** The UUID the server gave each row inserted in this transaction, by uuid-name. */
  readonly uuids: ReadonlyMap<string, string>;
  /** Per-operation results (rows for select, count for update/mutate/delete). */
  readonly results: readonly Record<string, unknown>[];
  /**
   * True when a guard showed the change had been applied already: a guardAbsent wait failed, or an insert with a
   * client-chosen uuid was refused as a duplicate.
   */
  readonly alreadyApplied: boolean;
  uuid(ref: NamedUuid): string;
}

interface OpMeta {
  op: string;
  table?: string;
  /** A guardAbsent wait, or an insert with a client-chosen uuid: failing on it means "applied already". */
  guard?: "wait" | "uuid";
}

export interface InsertOptions {
  /**
   * The row's UUID, chosen by the client (the insert's "uuid" member, ovsdb-server 2.17+/3.x): the server refuses
   * a second insert of it with "duplicate uuid", which commit() reports as alreadyApplied, so a derived UUID
   * (stableUuid) makes a retried insert safe without a guardAbsent. Check OvsdbClient.insertUuidSupported first.
   */
  uuid?: string;
}

/**
 * A transaction that tells whether the server takes an insert's "uuid" member, and changes nothing: an insert
 * with a random uuid, then an abort. A server that knows the member answers the insert with the uuid (the abort
 * then discards it); an older one refuses the insert as a syntax error.
 */
export function insertUuidProbe(table: string): Record<string, unknown>[] {
  return [{ op: "insert", table, uuid: randomUUID(), row: {} }, { op: "abort" }];
}

/** The answer of insertUuidProbe's reply: anything but the insert's uuid back counts as not supported. */
export function insertUuidProbeResult(reply: unknown): boolean {
  const first = Array.isArray(reply) ? (reply[0] as Record<string, unknown> | null | undefined) : undefined;
  const uuid = first?.uuid;
  return Array.isArray(uuid) && uuid[0] === "uuid" && typeof uuid[1] === "string";
}

let uuidNameCounter = 0;

export class Transaction<T extends TableMap = TableMap> {
  readonly ops: Record<string, unknown>[] = [];
  readonly meta: OpMeta[] = [];
  private readonly inserted = new Map<string, { table: string; index: number }>();

  constructor(
    private readonly schema: DatabaseSchema,
    private readonly commitFn: (txn: Transaction<T>, opts: TransactOptions) => Promise<TransactionResult>,
  ) {}

  get size(): number {
    return this.ops.length;
  }

  private table(name: string): TableSchema {
    const t = this.schema.tables.get(name);
    if (!t) throw new ValueError(`unknown table ${name} (not in the server's schema)`);
    return t;
  }

  private column(t: TableSchema, name: string): ColumnSchema {
    const c = t.columns.get(name);
    if (!c)
      throw new ValueError(`${t.name}: unknown column ${name} (not in the server's schema)`, t.name, name);
    return c;
  }

  private encodeRow(
    t: TableSchema,
    row: Record<string, unknown>,
    forUpdate: boolean,
  ): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    // for-in, not Object.entries: a row is encoded for every write, and the pairs would be garbage at once.
    for (const k in row) {
      if (!Object.hasOwn(row, k)) continue;
      const v = row[k];
      if (v === undefined || k === "_uuid" || k === "_version") continue;
      const c = t.columns.get(k);
      // Columns the server does not have are left out, so one client works across schema versions.
      if (!c) continue;
      if (forUpdate && !c.mutable)
        throw new ValueError(`${t.name}.${k} is immutable and cannot be updated`, t.name, k);
      out[k] = encodeValue(v, c.type, { table: t.name, column: k });
    }
    return out;
  }

  private encodeWhere(t: TableSchema, where: readonly Condition[]): unknown[] {
    return where.map(([col, fn, value]) => {
      if (col === "_uuid") {
        const v = value instanceof NamedUuid ? ["named-uuid", value.name] : ["uuid", value];
        return [col, fn, v];
      }
      const c = this.column(t, col);
      const partial = fn === "includes" || fn === "excludes";
      return [col, fn, encodeValue(value, c.type, { table: t.name, column: col, cardinality: !partial })];
    });
  }

  private push(op: Record<string, unknown>, meta: OpMeta): number {
    this.ops.push(op);
    this.meta.push(meta);
    return this.ops.length - 1;
  }

  /** Inserts a row; the returned reference can be used in later operations of this transaction. */
  insert<K extends keyof T & string>(
    table: K,
    row: InsertRow<T[K]>,
    uuidName?: string,
    opts: InsertOptions = {},
  ): NamedUuid {
    const t = this.table(table);
    const ref = new NamedUuid(uuidName ?? `row${++uuidNameCounter}`);
    if (this.inserted.has(ref.name))
      throw new ValueError(`uuid-name ${ref.name} is used twice in one transaction`);
    const { uuid } = opts;
    if (uuid !== undefined && !isUuid(uuid)) throw new ValueError(`${table}: invalid row uuid "${uuid}"`);
    const index = this.push(
      {
        op: "insert",
        table,
        ...(uuid !== undefined ? { uuid: uuid.toLowerCase() } : {}),
        row: this.encodeRow(t, row as Record<string, unknown>, false),
        "uuid-name": ref.name,
      },
      uuid !== undefined ? { op: "insert", table, guard: "uuid" } : { op: "insert", table },
    );
    this.inserted.set(ref.name, { table, index });
    return ref;
  }

  update<K extends keyof T & string>(table: K, where: readonly Condition[], row: UpdateRow<T[K]>): this {
    const t = this.table(table);
    this.push(
      {
        op: "update",
        table,
        where: this.encodeWhere(t, where),
        row: this.encodeRow(t, row as Record<string, unknown>, true),
      },
      { op: "update", table },
    );
    return this;
  }

  mutate<K extends keyof T & string>(
    table: K,
    where: readonly Condition[],
    mutations: readonly Mutation[],
  ): this {
    const t = this.table(table);
    const muts = mutations.map(([col, mutator, value]) => {
      const c = this.column(t, col);
      if (!c.mutable) throw new ValueError(`${table}.${col} is immutable and cannot be mutated`, table, col);
      const setLike = mutator === "insert" || mutator === "delete";
      return [
        col,
        mutator,
        encodeValue(value, setLike ? c.type : { ...c.type, kind: "scalar" }, {
          table,
          column: col,
          cardinality: false,
        }),
      ];
    });
    this.push(
      { op: "mutate", table, where: this.encodeWhere(t, where), mutations: muts },
      { op: "mutate", table },
    );
    return this;
  }

  delete<K extends keyof T & string>(table: K, where: readonly Condition[]): this {
    const t = this.table(table);
    this.push({ op: "delete", table, where: this.encodeWhere(t, where) }, { op: "delete", table });
    return this;
  }

  select<K extends keyof T & string>(
    table: K,
    where: readonly Condition[],
    columns?: readonly string[],
  ): number {
    const t = this.table(table);
    return this.push(
      { op: "select", table, where: this.encodeWhere(t, where), ...(columns ? { columns } : {}) },
      { op: "select", table },
    );
  }

  /**
   * Makes the transaction fail unless the rows matching `where`, projected on `columns`, are `rows` (until "==")
   * or are not (until "!="). timeout 0 checks once at commit.
   */
  wait<K extends keyof T & string>(
    table: K,
    where: readonly Condition[],
    columns: readonly string[],
    until: "==" | "!=",
    rows: readonly InsertRow<T[K]>[],
    timeout = 0,
  ): this {
    this.pushWait(table, where, columns, until, rows, timeout, false);
    return this;
  }

  /**
   * Guards a write that must happen once: the transaction applies only if no row matches `where`.
   * If it fails on this guard, the change was applied already (by an earlier attempt whose reply was lost,
   * or by someone else), and commit() resolves with alreadyApplied = true instead of failing.
   */
  guardAbsent<K extends keyof T & string>(table: K, where: readonly Condition[]): this {
    this.pushWait(table, where, ["_uuid"], "==", [], 0, true);
    return this;
  }

  private pushWait(
    table: string,
    where: readonly Condition[],
    columns: readonly string[],
    until: "==" | "!=",
    rows: readonly object[],
    timeout: number,
    guard: boolean,
  ): void {
    const t = this.table(table);
    const encRows = rows.map((r) => this.encodeRow(t, r as Record<string, unknown>, false));
    this.push(
      { op: "wait", table, where: this.encodeWhere(t, where), columns, until, rows: encRows, timeout },
      guard ? { op: "wait", table, guard: "wait" } : { op: "wait", table },
    );
  }

  comment(text: string): this {
    this.push({ op: "comment", comment: text }, { op: "comment" });
    return this;
  }

  abort(): this {
    this.push({ op: "abort" }, { op: "abort" });
    return this;
  }

  /** Marks the transaction durable: the reply waits until the change is on disk. */
  commitDurable(): this {
    this.push({ op: "commit", durable: true }, { op: "commit" });
    return this;
  }

  /**
   * Rows inserted into non-root tables must be referenced from somewhere in the same transaction,
   * or ovsdb-server garbage-collects them at commit without an error.
   */
  checkReferences(): void {
    const nonRoot: [string, { table: string; index: number }][] = [];
    for (const e of this.inserted) if (!this.table(e[1].table).isRoot) nonRoot.push(e);
    if (nonRoot.length === 0) return;
    // Which operations mention each uuid-name, found by walking the encoded operations.
    const mentions = new Map<string, number[]>();
    for (let i = 0; i < this.ops.length; i++) namedUuidMentions(this.ops[i], i, mentions);
    for (const [name, { table, index }] of nonRoot) {
      if (!mentions.get(name)?.some((i) => i !== index)) throw new OrphanRowError(table, name);
    }
  }

  commit(opts: TransactOptions = {}): Promise<TransactionResult> {
    return this.commitFn(this, opts);
  }

  /** Interprets the server's reply to this transaction. */
  interpret(reply: unknown): TransactionResult {
    const results = (Array.isArray(reply) ? reply : []) as (Record<string, unknown> | null)[];
    const failures: OperationFailure[] = [];
    let guardFailed = false;
    let otherFailure = false;
    results.forEach((r, index) => {
      if (r && typeof r.error === "string") {
        const m = this.meta[index];
        failures.push({
          index,
          error: r.error,
          ...(m ? { op: m.op } : {}),
          ...(m?.table ? { table: m.table } : {}),
          ...(typeof r.details === "string" ? { details: r.details } : {}),
        });
        if (
          (m?.guard === "wait" && r.error === "timed out") ||
          (m?.guard === "uuid" && r.error === "duplicate uuid")
        )
          guardFailed = true;
        else if (!(r.error === "aborted" && guardFailed)) otherFailure = true;
      }
    });
    const uuids = new Map<string, string>();
    const outResults: Record<string, unknown>[] = [];
    if (guardFailed && !otherFailure) {
      return { uuids, results: outResults, alreadyApplied: true, uuid: (ref) => missing(ref) };
    }
    if (failures.length > 0) {
      const first = failures.find((f) => f.error !== "aborted") ?? (failures[0] as OperationFailure);
      throw transactionErrorFor(first.error, failures);
    }
    if (results.length < this.ops.length) {
      throw transactionErrorFor("short reply", [
        {
          index: results.length,
          error: `server returned ${results.length} results for ${this.ops.length} operations`,
        },
      ]);
    }
    for (const [name, { index }] of this.inserted) {
      const u = (results[index]?.uuid as unknown[] | undefined)?.[1];
      if (typeof u === "string") uuids.set(name, u);
    }
    for (const r of results) outResults.push(r ?? {});
    return {
      uuids,
      results: outResults,
      alreadyApplied: false,
      uuid: (ref) => uuids.get(ref.name) ?? missing(ref),
    };
  }
}

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Records in `out` under each uuid-name that `v` (an encoded operation) mentions as ["named-uuid", name] that
 * `op` mentions it: the pairs that the operation's JSON text holds as `["named-uuid","name"]`.
 */
export function namedUuidMentions(v: unknown, op: number, out: Map<string, number[]>): void {
  if (Array.isArray(v)) {
    if (v.length === 2 && v[0] === "named-uuid" && typeof v[1] === "string" && NAME_RE.test(v[1])) {
      const list = out.get(v[1]);
      if (!list) out.set(v[1], [op]);
      else if (list[list.length - 1] !== op) list.push(op);
      return;
    }
    for (let i = 0; i < v.length; i++) namedUuidMentions(v[i], op, out);
  } else if (v instanceof NamedUuid) {
    namedUuidMentions(v.toJSON(), op, out);
  } else if (typeof v === "object" && v !== null) {
    for (const k in v) if (Object.hasOwn(v, k)) namedUuidMentions((v as Record<string, unknown>)[k], op, out);
  }
}

function missing(ref: NamedUuid): never {
  throw new ValueError(`no row was inserted under uuid-name ${ref.name} in this transaction`);
}

export type { RowBase };
