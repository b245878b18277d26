// The agent's handle on the local Open_vSwitch database: the client type, the single root row, secondary
// indexes on the cache, and changing single keys of a map column. Other programs (ovn-controller, an admin,
// ovs-vswitchd itself) write the same rows, so the agent never rewrites a whole map: it deletes and inserts
// only its own keys, in one transaction, which cannot clobber a key someone else set meanwhile.

import type { TableCache } from "../ovsdb/cache.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import type { RowBase } from "../ovsdb/model.ts";
import type { OpenVSwitch, VswitchTables } from "../ovsdb/models/vswitch.generated.ts";
import { byUuid, type Transaction } from "../ovsdb/transaction.ts";

export type VswitchClient = OvsdbClient<VswitchTables>;
export type VswitchTxn = Transaction<VswitchTables>;

/** The external_ids key naming the component that created a row. */
export { OWNER_KEY } from "../ovsdb/ownership.ts";
export const NODE_AGENT = "zstack-ovnkube-node";

export function rootRow(client: VswitchClient): OpenVSwitch | undefined {
  return client.cache.table("Open_vSwitch").values().next().value;
}

/**
 * The Open_vSwitch root row, inserted when the database is empty (a packaged OVS's init script does this with
 * `ovs-vsctl init`; a bare database has none). Guarded, so two writers racing insert one row.
 */
export async function ensureRootRow(client: VswitchClient, timeoutMs = 5000): Promise<OpenVSwitch> {
  const row = rootRow(client);
  if (row) return row;
  await client.transact((txn) => {
    txn.guardAbsent("Open_vSwitch", []);
    txn.insert("Open_vSwitch", {});
  });
  return client.waitForRow("Open_vSwitch", () => true, { timeoutMs, description: "(the root row)" });
}

/** Adds a secondary index once per cache; later calls reuse it. */
export function ensureIndex<R extends RowBase>(
  table: TableCache<R>,
  name: string,
  fn: (row: R) => string | readonly string[] | undefined,
): TableCache<R> {
  try {
    table.lookup(name, "");
  } catch {
    table.addIndex(name, fn);
  }
  return table;
}

/** The keys of `desired` whose value in `current` differs (or is missing). */
export function changedKeys(
  current: Readonly<Record<string, string>>,
  desired: Readonly<Record<string, string>>,
): string[] {
  return Object.keys(desired).filter((k) => current[k] !== desired[k]);
}

/**
 * Sets the given keys of a map column to the desired values, leaving every other key alone. Adds nothing to
 * the transaction and returns [] when they already hold those values.
 */
export function setMapKeys<K extends keyof VswitchTables & string>(
  txn: VswitchTxn,
  table: K,
  uuid: string,
  column: string,
  current: Readonly<Record<string, string>>,
  desired: Readonly<Record<string, string>>,
): string[] {
  const keys = changedKeys(current, desired);
  if (keys.length === 0) return [];
  const values: Record<string, string> = {};
  for (const k of keys) values[k] = desired[k] as string;
  // "insert" leaves an existing key's value alone, so the old pair goes first.
  txn.mutate(table, byUuid(uuid), [
    [column, "delete", keys],
    [column, "insert", values],
  ]);
  return keys;
}
