// Set columns changed by difference: a port group's ports or an address set's addresses change by mutate
// insert/delete of the members that differ, so one pod's change is one small operation however large the set.

import type { Transaction } from "../ovsdb/transaction.ts";
import { byUuid } from "../ovsdb/transaction.ts";

/** Adds to `txn` the mutations that turn `have` into `want` in `column` of the row; returns how many it added. */
export function mutateMembers(
  txn: Transaction,
  table: string,
  uuid: string,
  column: string,
  have: readonly string[],
  want: readonly string[],
): number {
  const haveSet = new Set(have);
  const wantSet = new Set(want);
  const add = [...wantSet].filter((x) => !haveSet.has(x)).sort();
  const del = [...haveSet].filter((x) => !wantSet.has(x)).sort();
  if (del.length > 0) txn.mutate(table, byUuid(uuid), [[column, "delete", del]]);
  if (add.length > 0) txn.mutate(table, byUuid(uuid), [[column, "insert", add]]);
  return (del.length > 0 ? 1 : 0) + (add.length > 0 ? 1 : 0);
}
