// A node's place in the topology: its management port on the join switch (address from the join CIDR), the
// address set of its pods and its egress reroute policy. The management port holds a second join address, the
// node's service SNAT address: the node agent SNATs Service connections that entered the node to it, so that
// NetworkPolicy's own-node allow (the management address only) does not admit them. The join allocator is
// rebuilt from the management ports on the join switch, like the pod allocators from the pod ports.

import { SubnetAllocator } from "../ipam/allocator.ts";
import { heldIps } from "../ipam/lsp-addresses.ts";
import { macForAddresses } from "../ipam/mac.ts";
import { parseSubnetSpec, type SubnetDefinition } from "../ipam/subnet-spec.ts";
import { findOwned, plan } from "../ovn/nb-diff.ts";
import { isOurs, KIND_KEY, NODE_KEY, SERVICE_SNAT_IP_KEY } from "../ovn/ownership.ts";
import {
  type ClusterNetworks,
  egressPlaceholder,
  mgmtPortName,
  nodePodsAddressSet,
  nodeRows,
  nodeScope,
} from "../ovn/topology.ts";
import type { RowEvent } from "../ovsdb/cache.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import { certainlyNotApplied } from "../ovsdb/errors.ts";
import type { LogicalSwitchPort, NbTables } from "../ovsdb/models/nb.generated.ts";
import { setHas } from "../ovsdb/set-index.ts";
import { byUuid, type Mutation } from "../ovsdb/transaction.ts";

const POD_CHASSIS_INDEX = "zstack.io/pod-requested-chassis";

export { MGMT_PORT_ANNOTATION } from "../ovn/topology.ts";

export interface MgmtPort {
  readonly name: string;
  readonly ip: string; // with prefix
  readonly mac: string;
  readonly gateway: string;
  /** Without prefix. */
  readonly serviceSnatIp: string;
}

const snatOwner = (node: string) => `node/${node}/service-snat`;

export class ManagementPorts {
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
      const snat = p.external_ids[SERVICE_SNAT_IP_KEY];
      for (const address of heldIps(p)) {
        const owner = address === snat ? snatOwner(node ?? "") : `node/${node}`;
        entries.push({
          address,
          holder: node ? { owner, foreign: false } : { owner: p.name, foreign: true },
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
    const snatRes = this.allocator.allocate(snatOwner(node));
    if (!snatRes.ok) {
      if (!res.reused) this.allocator.release(ip, `node/${node}`);
      throw new Error(`node ${node}: no service SNAT address: ${snatRes.message}`);
    }
    const serviceSnatIp = snatRes.addresses[0] as string;
    const existing = findOwned(this.nb.cache as never, "Logical_Switch_Port", `node/${node}/mgmt`);
    const mac =
      (existing?.addresses as readonly string[] | undefined)?.[0]?.split(" ")[0] ?? macForAddresses(res.ips);
    const prefix = this.net.joinCIDR.slice(this.net.joinCIDR.indexOf("/") + 1);
    const mgmt = { name: node, mgmtIP: `${ip}/${prefix}`, mgmtMAC: mac, serviceSnatIP: serviceSnatIp };
    const txn = this.nb.transaction();
    // The address set holds the pods whose port asks for this node, whoever wrote them and whenever: pods
    // that landed before the set existed (a new or re-registered node) are in it from its creation on.
    const want = this.podAddressesOn(node);
    const set = findOwned(this.nb.cache as never, "Address_Set", `node/${node}/pods-v4`);
    const summary = plan(
      this.nb.cache as never,
      this.nb.schema,
      txn as never,
      nodeRows(mgmt, set ? undefined : want),
      nodeScope(node),
    );
    let mutated = false;
    if (set) {
      const have = set.addresses as readonly string[];
      const wanted = new Set(want);
      const missing = want.filter((a) => !setHas(have, a));
      const stale = have.filter((a) => !wanted.has(a));
      // Mutations, not a new value: a pod write landing between our read and our commit is kept.
      const mutations: Mutation[] = [];
      if (missing.length > 0) mutations.push(["addresses", "insert", missing]);
      if (stale.length > 0) mutations.push(["addresses", "delete", stale]);
      if (mutations.length > 0) {
        txn.mutate("Address_Set", byUuid(set._uuid), mutations);
        mutated = true;
      }
    }
    if (!summary.empty || mutated) {
      try {
        await txn.commit();
      } catch (e) {
        if (certainlyNotApplied(e)) {
          if (!res.reused) this.allocator.release(ip, `node/${node}`);
          if (!snatRes.reused) this.allocator.release(serviceSnatIp, snatOwner(node));
        }
        throw e;
      }
    }
    return { name: mgmtPortName(node), ip: mgmt.mgmtIP, mac, gateway: this.net.joinGateway, serviceSnatIp };
  }

  private podsByChassis() {
    const tc = this.nb.cache.table("Logical_Switch_Port");
    if (!tc.hasIndex(POD_CHASSIS_INDEX)) {
      tc.addIndex(POD_CHASSIS_INDEX, (r) =>
        isOurs(r) && r.external_ids[KIND_KEY] === "pod-port" ? r.options["requested-chassis"] : undefined,
      );
    }
    return tc;
  }

  /** The IPv4 addresses of the pods whose port asks for the node's chassis: what its address set must hold. */
  podAddressesOn(node: string): string[] {
    const out = new Set<string>();
    for (const p of this.podsByChassis().lookup(POD_CHASSIS_INDEX, node))
      for (const ip of heldIps(p)) if (!ip.includes(":")) out.add(ip);
    return [...out].sort();
  }

  /**
   * The nodes whose address set misses a pod of theirs after these port changes (the set did not exist when the
   * pod's port was written, or a concurrent write took the address out): their reconcile puts it back.
   */
  nodesMissingPods(events: readonly RowEvent[]): Set<string> {
    const out = new Set<string>();
    const sets = this.nb.cache.table("Address_Set");
    for (const e of events) {
      if (e.kind === "delete") continue;
      const p = e.row as unknown as LogicalSwitchPort;
      const node = p.options["requested-chassis"];
      if (!node || !isOurs(p) || p.external_ids[KIND_KEY] !== "pod-port" || out.has(node)) continue;
      const set = sets.lookupOne("name", nodePodsAddressSet(node, 4));
      const have = (set?.addresses ?? []) as readonly string[];
      if (heldIps(p).some((ip) => !ip.includes(":") && !setHas(have, ip))) out.add(node);
    }
    return out;
  }

  /** Removes everything of a node that left the cluster. */
  async remove(node: string): Promise<boolean> {
    const txn = this.nb.transaction();
    const summary = plan(this.nb.cache as never, this.nb.schema, txn as never, [], nodeScope(node));
    // Nothing left in NB: an earlier remove landed although its reply was lost; its address goes now.
    if (summary.empty)
      return (
        this.allocator.releaseOwner(`node/${node}`).length +
          this.allocator.releaseOwner(snatOwner(node)).length >
        0
      );
    await txn.commit();
    this.allocator.releaseOwner(`node/${node}`);
    this.allocator.releaseOwner(snatOwner(node));
    return true;
  }
}
