// What `zovn uninstall` takes out of a northbound database: every row we own, and every mutation we made to
// rows we do not own, read from a full NB cache. Pure: the plan is computed from the cache and the schema, and
// applied as operations of one transaction, so a test (or --dry-run) sees exactly what would be sent.
//
// Ownership is decided by external_ids alone (OWNER_KEY = CONTROLLER), never by a name, with one exception the
// schema forces: Load_Balancer_Group has no external_ids, so our two Service groups are recognised by their names
// and taken only while every load balancer in them is ours. The mutations we make to foreign rows are all of one kind,
// a reference to one of our rows inserted into a set column (a pod port in a ZStack switch's `ports`, our load
// balancer or group in its `load_balancer`/`load_balancer_group`, an ACL in `acls`, ...), plus the template
// variables our load balancers use in a Chassis_Template_Var row that is not ours. Both are found from our rows,
// so whatever column a later feature links into, uninstall removes the link without knowing the feature.

import type { AnyRow, Cache } from "../ovsdb/cache.ts";
import type { DatabaseSchema, TableSchema } from "../ovsdb/schema.ts";
import { byUuid, type Condition, type Transaction } from "../ovsdb/transaction.ts";
import { CONTROLLER, ID_KEY, isOurs, OWNER_KEY } from "./ownership.ts";
import { TEMPLATE_VAR_PREFIX, variablesOf } from "./service-lb.ts";
import { OUR_LB_GROUPS } from "./topology.ts";

export interface RowRef {
  readonly table: string;
  readonly uuid: string;
  /** The row's name column (or, without one, its zstack.io/id); "" when it has neither. Text from the database. */
  readonly name: string;
}

export interface RowRemoval extends RowRef {
  /** Why the row is ours: "owner" (external_ids) or "name" (the cluster load balancer group). */
  readonly by: "owner" | "name";
  /**
   * For the group taken by name: the load balancers it held when planned (all ours). The delete waits on exactly
   * this set, so a load balancer someone else put in meanwhile keeps its group.
   */
  readonly holds?: readonly string[];
}

/** References to our rows in a set column of a row that is not ours: deleted element by element. */
export interface ReferenceRemoval extends RowRef {
  readonly column: string;
  readonly uuids: readonly string[];
}

/** Map entries of ours in a row that is not ours (Chassis_Template_Var variables): deleted key and value. */
export interface EntryRemoval extends RowRef {
  readonly column: string;
  readonly entries: Readonly<Record<string, string>>;
}

export interface UninstallPlan {
  readonly deletes: readonly RowRemoval[];
  readonly references: readonly ReferenceRemoval[];
  readonly entries: readonly EntryRemoval[];
  /**
   * Why the plan must not run: a row not ours that would go with ours (a non-root row only our rows refer to, which
   * the server would garbage-collect), a reference to our row that cannot be removed (a scalar column), the
   * cluster group holding a load balancer not ours. Empty when it may run.
   */
  readonly refusals: readonly string[];
  readonly empty: boolean;
}

type Row = AnyRow & Record<string, unknown>;

function displayName(row: Row): string {
  if (typeof row.name === "string" && row.name !== "") return row.name;
  if (typeof row.chassis === "string" && row.chassis !== "") return row.chassis;
  const ids = row.external_ids as Readonly<Record<string, string>> | undefined;
  return ids?.[ID_KEY] ?? "";
}

function ours(row: Row): boolean {
  const ids = row.external_ids;
  return (
    ids !== null &&
    typeof ids === "object" &&
    isOurs(row as unknown as { external_ids: Record<string, string> })
  );
}

/** The UUIDs a column value refers to (a UUID, a set of them); maps are not read (NB refers by keys only). */
function referenced(v: unknown): readonly string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v as string[];
  return [];
}

function refColumns(t: TableSchema) {
  return [...t.columns.values()].filter((c) => c.type.key.refTable !== undefined);
}

export function planUninstall(cache: Cache, schema: DatabaseSchema): UninstallPlan {
  const deletes: RowRemoval[] = [];
  const references: ReferenceRemoval[] = [];
  const entries: EntryRemoval[] = [];
  const refusals: string[] = [];
  const gone = new Map<string, Set<string>>(); // table -> UUIDs deleted
  const mark = (table: string, row: Row, by: RowRemoval["by"], holds?: readonly string[]) => {
    deletes.push({ table, uuid: row._uuid, name: displayName(row), by, ...(holds ? { holds } : {}) });
    const s = gone.get(table) ?? new Set<string>();
    gone.set(table, s);
    s.add(row._uuid);
  };
  const isGone = (table: string, uuid: string) => gone.get(table)?.has(uuid) === true;
  const describe = (table: string, row: Row) => `${table} ${row._uuid} ${JSON.stringify(displayName(row))}`;

  for (const t of schema.tables.values()) {
    if (!t.columns.has("external_ids")) continue;
    for (const row of cache.table(t.name).values() as Iterable<Row>) {
      if (!ours(row)) continue;
      // `chassis` is unique in Chassis_Template_Var: whoever else needs variables on a chassis we wrote first must
      // add them to our row. Such a row is handed over (our variables and our keys out), not deleted with theirs.
      if (t.name === "Chassis_Template_Var") {
        const vars = row.variables as Readonly<Record<string, string>>;
        const foreign = Object.keys(vars).filter((k) => !k.startsWith(TEMPLATE_VAR_PREFIX));
        if (foreign.length > 0) {
          const pick = (m: Readonly<Record<string, string>>, keep: (k: string) => boolean) =>
            Object.fromEntries(
              Object.entries(m)
                .filter(([k]) => keep(k))
                .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
            );
          const base = { table: t.name, uuid: row._uuid, name: displayName(row) };
          const mine = pick(vars, (k) => k.startsWith(TEMPLATE_VAR_PREFIX));
          if (Object.keys(mine).length > 0) entries.push({ ...base, column: "variables", entries: mine });
          entries.push({
            ...base,
            column: "external_ids",
            entries: pick(row.external_ids as Readonly<Record<string, string>>, (k) =>
              k.startsWith("zstack.io/"),
            ),
          });
          continue;
        }
      }
      mark(t.name, row, "owner");
    }
  }
  if (schema.tables.has("Load_Balancer_Group")) {
    for (const g of cache.table("Load_Balancer_Group").values() as Iterable<Row>) {
      if (!OUR_LB_GROUPS.includes(String(g.name))) continue;
      const foreign = referenced(g.load_balancer).filter((u) => !isGone("Load_Balancer", u));
      if (foreign.length === 0)
        mark("Load_Balancer_Group", g, "name", [...referenced(g.load_balancer)].sort());
      else
        refusals.push(
          `${describe("Load_Balancer_Group", g)} holds load balancers that are not ours (${foreign.join(", ")}); it is left, and so is every reference to it`,
        );
    }
  }

  // References from rows that stay to rows that go; and rows that stay but would go with ours.
  const strongHolders = new Map<string, number>(); // "table\0uuid" of non-root rows -> referrers that stay
  const heldByGone = new Map<string, Row>();
  for (const t of schema.tables.values()) {
    const cols = refColumns(t);
    if (cols.length === 0) continue;
    for (const row of cache.table(t.name).values() as Iterable<Row>) {
      const rowGone = isGone(t.name, row._uuid);
      for (const c of cols) {
        const target = c.type.key.refTable as string;
        const uuids = referenced(row[c.name]);
        if (uuids.length === 0) continue;
        const strong = c.type.key.refType !== "weak";
        const targetRoot = schema.tables.get(target)?.isRoot ?? true;
        if (!rowGone) {
          const ourTargets = uuids.filter((u) => isGone(target, u));
          if (ourTargets.length > 0) {
            if (c.type.kind === "set" || c.type.kind === "optional")
              references.push({
                table: t.name,
                uuid: row._uuid,
                name: displayName(row),
                column: c.name,
                uuids: [...ourTargets].sort(),
              });
            else
              refusals.push(
                `${describe(t.name, row)} refers to our ${target} in ${c.name}, which cannot be emptied`,
              );
          }
        }
        if (!strong || targetRoot) continue;
        for (const u of uuids) {
          if (isGone(target, u)) continue;
          const key = `${target}\0${u}`;
          if (rowGone) {
            const r = cache.table(target).get(u) as Row | undefined;
            if (r) heldByGone.set(key, r);
          } else strongHolders.set(key, (strongHolders.get(key) ?? 0) + 1);
        }
      }
    }
  }
  for (const [key, r] of heldByGone) {
    if ((strongHolders.get(key) ?? 0) > 0) continue;
    const table = key.slice(0, key.indexOf("\0"));
    refusals.push(
      `${describe(table, r)} is not ours, and only our rows refer to it: the server would delete it with them`,
    );
  }

  // Template variables our load balancers use, in Chassis_Template_Var rows that are not ours.
  if (schema.tables.has("Chassis_Template_Var") && schema.tables.has("Load_Balancer")) {
    const ourVars = new Set<string>();
    for (const lb of cache.table("Load_Balancer").values() as Iterable<Row>)
      if (isGone("Load_Balancer", lb._uuid))
        for (const v of variablesOf(lb.vips as Record<string, string>)) ourVars.add(v);
    for (const row of cache.table("Chassis_Template_Var").values() as Iterable<Row>) {
      // Ours (deleted), or ours and handed over (its entries are planned above).
      if (isGone("Chassis_Template_Var", row._uuid) || ours(row)) continue;
      const have = row.variables as Readonly<Record<string, string>>;
      const mine = Object.entries(have).filter(([k]) => ourVars.has(k));
      if (mine.length > 0)
        entries.push({
          table: "Chassis_Template_Var",
          uuid: row._uuid,
          name: displayName(row),
          column: "variables",
          entries: Object.fromEntries(mine.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
        });
    }
  }

  const order = (a: RowRef, b: RowRef) =>
    a.table < b.table ? -1 : a.table > b.table ? 1 : a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0;
  deletes.sort(order);
  references.sort((a, b) => order(a, b) || (a.column < b.column ? -1 : a.column > b.column ? 1 : 0));
  entries.sort(order);
  return {
    deletes,
    references,
    entries,
    refusals,
    empty: deletes.length + references.length + entries.length === 0,
  };
}

/**
 * Adds the plan's operations to `txn`: references and entries first, then the deletes. Every delete names the
 * row by UUID and by what made it ours (the owner key, or the group's name), so a row that stopped being ours
 * since the cache was read is not deleted; every mutation deletes named elements only, so a retry changes nothing.
 */
export function applyUninstall(txn: Transaction, plan: UninstallPlan): void {
  if (plan.refusals.length > 0) throw new Error(`uninstall refused: ${plan.refusals.join("; ")}`);
  for (const d of plan.deletes)
    if (d.holds)
      txn.wait(d.table as never, byUuid(d.uuid), ["load_balancer"], "==", [
        { load_balancer: d.holds } as never,
      ]);
  for (const r of plan.references)
    txn.mutate(r.table as never, byUuid(r.uuid), [[r.column, "delete", r.uuids]] as never);
  for (const e of plan.entries)
    txn.mutate(e.table as never, byUuid(e.uuid), [[e.column, "delete", e.entries]] as never);
  for (const d of plan.deletes) {
    const guard: Condition[] =
      d.by === "owner"
        ? [["external_ids", "includes", { [OWNER_KEY]: CONTROLLER }]]
        : [["name", "==", d.name]];
    txn.delete(d.table as never, [...byUuid(d.uuid), ...guard]);
  }
}

/** One line per operation, as --dry-run prints them (names quoted as JSON: they come from the database). */
export function describePlan(plan: UninstallPlan): string[] {
  const q = (s: string) => JSON.stringify(s);
  const lines: string[] = [];
  for (const r of plan.references)
    lines.push(`unlink  ${r.table} ${r.uuid} ${q(r.name)} ${r.column} -= ${r.uuids.join(" ")}`);
  for (const e of plan.entries)
    lines.push(
      `unset   ${e.table} ${e.uuid} ${q(e.name)} ${e.column} -= ${Object.keys(e.entries).map(q).join(" ")}`,
    );
  for (const d of plan.deletes)
    lines.push(
      `delete  ${d.table} ${d.uuid} ${q(d.name)}${d.by === "name" ? " (ours by name: no external_ids)" : ""}`,
    );
  for (const r of plan.refusals) lines.push(`refuse  ${r}`);
  return lines;
}

/** "12 rows in 5 tables, 3 references from 2 rows not ours, 0 map entries" */
export function summarizePlan(plan: UninstallPlan): string {
  const tables = new Set(plan.deletes.map((d) => d.table));
  const holders = new Set(plan.references.map((r) => `${r.table} ${r.uuid}`));
  const refs = plan.references.reduce((n, r) => n + r.uuids.length, 0);
  const ents = plan.entries.reduce((n, e) => n + Object.keys(e.entries).length, 0);
  return `${plan.deletes.length} rows of ours in ${tables.size} tables; ${refs} references to them in ${holders.size} rows not ours; ${ents} map entries of ours in rows not ours`;
}
