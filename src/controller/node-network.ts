// A node's place in the topology: its management port on the join switch (address from the join CIDR), the
// address set of its pods and its egress reroute policy. The join allocator is rebuilt from the management
// ports on the join switch, like the pod allocators from the pod ports.

import { SubnetAllocator } from "../ipam/allocator.ts";
import { heldIps } from "../ipam/lsp-addresses.ts";
import { macForAddresses } from "../ipam/mac.ts";
import { parseSubnetSpec, type SubnetDefinition } from "../ipam/subnet-spec.ts";
import { findOwned, plan } from "../ovn/nb-diff.ts";
import { NODE_KEY } from "../ovn/ownership.ts";
import {
  type ClusterNetworks,
  egressPlaceholder,
  mgmtPortName,
  nodeRows,
  nodeScope,
} from "../ovn/topology.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import { certainlyNotApplied } from "../ovsdb/errors.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";

export { MGMT_PORT_ANNOTATION } from "../ovn/topology.ts";

export interface MgmtPort {
  readonly name: string;
  readonly ip: string; // with prefix
  readonly mac: string;
  readonly gateway: string;
}

export class NodeNetworks {
  private allocator: SubnetAllocator;
  private readonly def: SubnetDefinition;

  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly net: ClusterNetworks,
  ) {
    const def = parseSubnetSpec({
      cidr: net.joinCIDR,
      gateway: net.joinGateway,
      excludeIPs: [egressPlaceholder(net.joinCIDR)],
    });
    if (!def.ok) throw new Error(`join CIDR ${net.joinCIDR}: ${JSON.stringify(def.problems)}`);
    this.def = def.subnet;
    this.allocator = this.rebuilt();
  }

  /** Rebuilds the join allocator from the management ports in the cache (after a full reload of it). */
  rebuild(): void {
    this.allocator = this.rebuilt();
  }

  private rebuilt(): SubnetAllocator {
    const { nb } = this;
    const entries: { address: string; holder: { owner: string; foreign: boolean } }[] = [];
    const join = findOwned(nb.cache as never, "Logical_Switch", "join");
    const ports = nb.cache.table("Logical_Switch_Port");
    for (const uuid of (join?.ports as readonly string[] | undefined) ?? []) {
      const p = ports.get(uuid);
      const node = p?.external_ids[NODE_KEY];
      if (!p) continue;
      for (const address of heldIps(p)) {
        entries.push({
          address,
          holder: node ? { owner: `node/${node}`, foreign: false } : { owner: p.name, foreign: true },
        });
      }
    }
    return SubnetAllocator.rebuild(this.def, entries).allocator;
  }

  /** Ensures the node's management port, address set and policy; one NB transaction if anything changes. */
  async ensure(node: string): Promise<MgmtPort> {
    const res = this.allocator.allocate(`node/${node}`);
    if (!res.ok) throw new Error(`node ${node}: no management address: ${res.message}`);
    const ip = res.addresses[0] as string;
    const existing = findOwned(this.nb.cache as never, "Logical_Switch_Port", `node/${node}/mgmt`);
    const mac =
      (existing?.addresses as readonly string[] | undefined)?.[0]?.split(" ")[0] ?? macForAddresses(res.ips);
    const prefix = this.net.joinCIDR.slice(this.net.joinCIDR.indexOf("/") + 1);
    const mgmt = { name: node, mgmtIP: `${ip}/${prefix}`, mgmtMAC: mac };
    const txn = this.nb.transaction();
    const summary = plan(
      this.nb.cache as never,
      this.nb.schema,
      txn as never,
      nodeRows(mgmt),
      nodeScope(node),
    );
    if (!summary.empty) {
      try {
        await txn.commit();
      } catch (e) {
        if (!res.reused && certainlyNotApplied(e)) this.allocator.release(ip, `node/${node}`);
        throw e;
      }
    }
    return { name: mgmtPortName(node), ip: mgmt.mgmtIP, mac, gateway: this.net.joinGateway };
  }

  /** Removes everything of a node that left the cluster. */
  async remove(node: string): Promise<boolean> {
    const txn = this.nb.transaction();
    const summary = plan(this.nb.cache as never, this.nb.schema, txn as never, [], nodeScope(node));
    // Nothing left in NB: an earlier remove landed although its reply was lost; its address goes now.
    if (summary.empty) return this.allocator.releaseOwner(`node/${node}`).length > 0;
    await txn.commit();
    this.allocator.releaseOwner(`node/${node}`);
    return true;
  }
}
