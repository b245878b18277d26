// br-int, the integration bridge ovn-controller programs: fail-mode secure (no flows until OVN installs them,
// so nothing is switched unfiltered), the datapath type of the node (system, or netdev for the userspace
// datapath), and in-band control off (OVN is the only controller; in-band flows would let traffic reach it).

import { ConstraintViolationError } from "../ovsdb/errors.ts";
import type { Bridge } from "../ovsdb/models/vswitch.generated.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { ensureRootRow, NODE_AGENT, OWNER_KEY, setMapKeys, type VswitchClient } from "./vswitch-db.ts";

export type DatapathType = "system" | "netdev";

export const INTEGRATION_BRIDGE = "br-int";

export interface BridgeSpec {
  name: string;
  datapathType: DatapathType;
}

/** What ensureBridge changed: "created", or the columns/keys it corrected. Empty when all was in place. */
export type BridgeChanges = string[];

export function findBridge(client: VswitchClient, name: string): Bridge | undefined {
  return client.cache.table("Bridge").lookupOne("name", name);
}

const BRIDGE_OTHER_CONFIG = { "disable-in-band": "true" };

/**
 * Creates the bridge, with its local internal port as `ovs-vsctl add-br` would, or corrects the settings
 * above on an existing one (ovn-controller may have created it first, with its own defaults).
 */
export async function ensureBridge(client: VswitchClient, spec: BridgeSpec): Promise<BridgeChanges> {
  const root = await ensureRootRow(client);
  for (let attempt = 0; ; attempt++) {
    const existing = findBridge(client, spec.name);
    const txn = client.transaction();
    const changes: string[] = [];
    if (!existing) {
      const iface = txn.insert("Interface", { name: spec.name, type: "internal" });
      const port = txn.insert("Port", { name: spec.name, interfaces: [iface] });
      const br = txn.insert("Bridge", {
        name: spec.name,
        ports: [port],
        fail_mode: "secure",
        datapath_type: spec.datapathType,
        other_config: BRIDGE_OTHER_CONFIG,
        external_ids: { [OWNER_KEY]: NODE_AGENT },
      });
      txn.mutate("Open_vSwitch", byUuid(root._uuid), [["bridges", "insert", [br]]]);
      changes.push("created");
    } else {
      const cols: { fail_mode?: "secure"; datapath_type?: string } = {};
      if (existing.fail_mode !== "secure") cols.fail_mode = "secure";
      if (existing.datapath_type !== spec.datapathType) cols.datapath_type = spec.datapathType;
      if (Object.keys(cols).length > 0) {
        txn.update("Bridge", byUuid(existing._uuid), cols);
        changes.push(...Object.keys(cols));
      }
      const keys = setMapKeys(
        txn,
        "Bridge",
        existing._uuid,
        "other_config",
        existing.other_config,
        BRIDGE_OTHER_CONFIG,
      );
      // Bridge is not a root table: a bridge that exists is linked from the root row already.
      changes.push(...keys.map((k) => `other_config:${k}`));
    }
    if (changes.length === 0) return changes;
    try {
      await txn.commit();
      return changes;
    } catch (e) {
      // ovn-controller created the bridge between our read and our write: correct its settings instead.
      if (e instanceof ConstraintViolationError && !existing && attempt === 0) {
        await client.waitForRow("Bridge", (r) => r.name === spec.name, { timeoutMs: 5000 });
        continue;
      }
      throw e;
    }
  }
}
