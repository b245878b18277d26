// Giving a pod its address and logical switch port, and taking them back. The allocation and the port that holds
// it commit in one NB transaction; the allocators live in memory and are rebuilt from the ports on each switch,
// so NB stays the only durable record and a crash between any two steps leaks nothing.

import { formatIp } from "../ipam/address.ts";
import { SubnetAllocator } from "../ipam/allocator.ts";
import type { Holder } from "../ipam/holder.ts";
import { heldIps } from "../ipam/lsp-addresses.ts";
import { macForAddresses, parseRequestedMac } from "../ipam/mac.ts";
import type { SubnetDefinition } from "../ipam/subnet-spec.ts";
import { findOwned, plan, unlinkAndDelete } from "../ovn/nb-diff.ts";
import { idOf, isOurs, POD_UID_KEY, SUBNET_KEY } from "../ovn/ownership.ts";
import { podNetworksAnnotation, podPortId, podPortRow } from "../ovn/pod-port.ts";
import { nodePodsAddressSet, subnetSwitchName } from "../ovn/topology.ts";
import type { RowEvent } from "../ovsdb/cache.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import type { LogicalSwitchPort, NbTables } from "../ovsdb/models/nb.generated.ts";
import { setHas } from "../ovsdb/set-index.ts";

export const ANNOTATION_IP = "network.zstack.io/ip_address";
export const ANNOTATION_MAC = "network.zstack.io/mac_address";
export const ANNOTATION_POOL = "network.zstack.io/ip_pool";
export const ANNOTATION_SUBNET = "network.zstack.io/subnet";

/** OVN's limit on unicast ports per logical switch with VXLAN (ovn-architecture(7), "Tunnel Encapsulations"). */
export const VXLAN_PORTS_PER_SWITCH = 2048;

export interface PodSpecInfo {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly node?: string;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly statefulSet?: string;
}

export type EnsureResult =
  | {
      readonly ok: true;
      readonly annotation: string;
      readonly ips: readonly string[];
      readonly wrote: boolean;
    }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export interface SubnetProblem {
  readonly subnet: string;
  readonly message: string;
}

interface SubnetState {
  readonly name: string;
  readonly def: SubnetDefinition;
  readonly allocator: SubnetAllocator;
  readonly prefixes: readonly string[];
  readonly gateways: readonly string[];
}

const SWITCH_ID = (subnet: string) => `subnet/${subnet}`;

function addressingOf(sn: SubnetState, ips: readonly string[], mac: string) {
  return {
    subnet: sn.name,
    logicalSwitch: subnetSwitchName(sn.name),
    mac,
    ipsWithPrefix: ips.map((ip, i) => `${ip}/${sn.prefixes[i] ?? (ip.includes(":") ? "128" : "32")}`),
    gateways: sn.gateways,
  };
}

function ownerOf(ns: string, name: string): string {
  return `${ns}/${name}`;
}

export class PodNetworks {
  private readonly subnets = new Map<string, SubnetState>();

  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly opts: { tunnel: "vxlan" | "geneve" } = { tunnel: "vxlan" },
  ) {}

  /**
   * Registers a subnet and rebuilds its allocator from the ports on its switch: ours by pod, anyone else's
   * as foreign holders. Returns the problems found (duplicate addresses and the like) for the Subnet status.
   */
  loadSubnet(name: string, def: SubnetDefinition): SubnetProblem[] {
    const entries: { address: string; holder: Holder }[] = [];
    const ls = findOwned(this.nb.cache as never, "Logical_Switch", SWITCH_ID(name));
    const ports = this.nb.cache.table("Logical_Switch_Port");
    for (const uuid of (ls?.ports as readonly string[] | undefined) ?? []) {
      const p = ports.get(uuid);
      if (!p) continue;
      for (const ip of heldIps(p)) entries.push({ address: ip, holder: this.holderOf(p) });
    }
    const { allocator, problems } = SubnetAllocator.rebuild(def, entries);
    this.subnets.set(name, {
      name,
      def,
      allocator,
      prefixes: def.cidrs.map((c) => String(c.prefix)),
      gateways: def.gateways.map((g) => formatIp(g)),
    });
    return problems.map((p) => ({ subnet: name, message: p.message }));
  }

  /** Forgets a subnet whose switch is gone: its allocator no longer counts or hands out anything. */
  unloadSubnet(name: string): void {
    this.subnets.delete(name);
  }

  /**
   * Keeps the allocators in step with ports that others add to our switches, change, or remove at run time
   * (a ZStack VM, an operator's port): their addresses count as used while they exist. Our own pod ports are
   * left to ensure/remove. Returns the subnets whose usage changed, and the problems (an address someone took
   * that a pod already holds) for logs and Events.
   */
  observeForeign(events: readonly RowEvent[]): { changed: Set<string>; problems: SubnetProblem[] } {
    const changed = new Set<string>();
    const problems: SubnetProblem[] = [];
    for (const e of events) {
      const before = e.kind === "add" ? undefined : (e.old as unknown as LogicalSwitchPort);
      const after = e.kind === "delete" ? undefined : (e.row as unknown as LogicalSwitchPort);
      const port = (after ?? before) as LogicalSwitchPort;
      if (!this.holderOf(port).foreign) continue;
      if (
        before &&
        after &&
        before.addresses.join("\n") === after.addresses.join("\n") &&
        before.dynamic_addresses === after.dynamic_addresses
      )
        continue;
      if (before) {
        for (const ip of heldIps(before))
          for (const sn of this.subnets.values())
            if (sn.allocator.forgetForeign(ip, before.name)) changed.add(sn.name);
      }
      if (after) {
        const sn = this.subnetHolding(after._uuid);
        if (!sn) continue;
        for (const ip of heldIps(after)) {
          const problem = sn.allocator.recordHolder(ip, { owner: after.name, foreign: true });
          if (problem?.kind === "duplicate") problems.push({ subnet: sn.name, message: problem.message });
          changed.add(sn.name);
        }
      }
    }
    return { changed, problems };
  }

  /** The loaded subnet whose switch holds the port (few subnets; O(1) membership each). */
  private subnetHolding(portUuid: string): SubnetState | undefined {
    for (const sn of this.subnets.values()) {
      const ls = findOwned(this.nb.cache as never, "Logical_Switch", SWITCH_ID(sn.name));
      if (ls && setHas(ls.ports as readonly string[], portUuid)) return sn;
    }
    return undefined;
  }

  allocatorOf(subnet: string): SubnetAllocator | undefined {
    return this.subnets.get(subnet)?.allocator;
  }

  private holderOf(p: LogicalSwitchPort): Holder {
    if (isOurs(p) && idOf(p)?.startsWith("pod/")) {
      const ref = (p.external_ids["zstack.io/pod"] as string | undefined) ?? p.name;
      return { owner: ref, foreign: false };
    }
    return { owner: p.name, foreign: true };
  }

  /** The pod's port as NB holds it, if any. */
  portOf(namespace: string, name: string): LogicalSwitchPort | undefined {
    return findOwned(this.nb.cache as never, "Logical_Switch_Port", podPortId(namespace, name)) as
      | LogicalSwitchPort
      | undefined;
  }

  /**
   * The pod-networks annotation for the port of this pod incarnation (by UID), as NB holds it; undefined when
   * there is no such port or its subnet is not loaded.
   */
  annotationFor(namespace: string, name: string, uid: string): string | undefined {
    const p = this.portOf(namespace, name);
    if (!p || p.external_ids[POD_UID_KEY] !== uid) return undefined;
    const sn = this.subnets.get((p.external_ids["zstack.io/subnet"] as string | undefined) ?? "");
    if (!sn) return undefined;
    return podNetworksAnnotation(addressingOf(sn, heldIps(p), p.addresses[0]?.split(" ")[0] ?? ""));
  }

  /** Ensures the pod's port exists with its address; one NB transaction when anything must change, none otherwise. */
  async ensure(pod: PodSpecInfo, wanted: string): Promise<EnsureResult> {
    const cache = this.nb.cache as never;
    const existing = findOwned(cache, "Logical_Switch_Port", podPortId(pod.namespace, pod.name)) as
      | LogicalSwitchPort
      | undefined;
    // A pod keeps the subnet its port is on: a Subnet created later that names its namespace applies to new
    // pods only. Moving the port would leave it on two switches and its address outside the new CIDR.
    const current = existing?.external_ids[SUBNET_KEY] as string | undefined;
    const subnetName = current !== undefined && this.subnets.has(current) ? current : wanted;
    const sn = this.subnets.get(subnetName);
    if (!sn) return { ok: false, reason: "SubnetNotReady", message: `subnet ${subnetName} is not ready yet` };
    const ls = findOwned(cache, "Logical_Switch", SWITCH_ID(subnetName));
    if (!ls) {
      return {
        ok: false,
        reason: "SubnetNotReady",
        message: `the logical switch of subnet ${subnetName} does not exist yet`,
      };
    }
    const owner = ownerOf(pod.namespace, pod.name);
    let ips: string[];
    let mac: string;
    let allocated = false;
    if (existing) {
      ips = heldIps(existing);
      mac = existing.addresses[0]?.split(" ")[0] ?? "";
    } else {
      if ((ls.ports as readonly string[]).length >= VXLAN_PORTS_PER_SWITCH && this.opts.tunnel === "vxlan") {
        return {
          ok: false,
          reason: "PortCapacityExceeded",
          message:
            `subnet ${subnetName}: its logical switch already holds ${VXLAN_PORTS_PER_SWITCH} ports, OVN's limit per switch ` +
            "with VXLAN; put this namespace on another subnet, or switch the tunnel to Geneve",
        };
      }
      const res = this.allocate(sn, pod, owner);
      if (!res.ok) return res;
      ips = res.ips;
      mac = res.mac;
      allocated = res.fresh;
    }
    const addressing = { ...addressingOf(sn, ips, mac), ...(pod.node ? { node: pod.node } : {}) };
    const txn = this.nb.transaction();
    plan(cache, this.nb.schema, txn as never, [
      podPortRow(pod, addressing, { table: "Logical_Switch", id: SWITCH_ID(subnetName), column: "ports" }),
    ]);
    // The pod's address joins its node's address set, which the node's egress policy matches on.
    const prevNode = existing?.options["requested-chassis"];
    const v4 = ips.filter((ip) => !ip.includes(":"));
    if (prevNode !== pod.node && v4.length > 0) {
      if (prevNode) this.addressSetMutation(txn, prevNode, "delete", v4);
      if (pod.node) this.addressSetMutation(txn, pod.node, "insert", v4);
    }
    // The plan and the address-set mutations both land in txn: anything in it is a write.
    const wrote = txn.size > 0;
    if (wrote) {
      try {
        await txn.commit();
      } catch (e) {
        if (allocated) for (const ip of ips) sn.allocator.release(ip, owner);
        throw e;
      }
    }
    return { ok: true, annotation: podNetworksAnnotation(addressing), ips, wrote };
  }

  private addressSetMutation(
    txn: ReturnType<OvsdbClient<NbTables>["transaction"]>,
    node: string,
    op: "insert" | "delete",
    ips: string[],
  ): void {
    const set = this.nb.cache.table("Address_Set").lookupOne("name", nodePodsAddressSet(node, 4));
    if (set) txn.mutate("Address_Set", [["_uuid", "==", set._uuid]], [["addresses", op, ips]]);
  }

  private allocate(
    sn: SubnetState,
    pod: PodSpecInfo,
    owner: string,
  ):
    | { ok: true; ips: string[]; mac: string; fresh: boolean }
    | { ok: false; reason: string; message: string } {
    const ann = pod.annotations ?? {};
    const where = `pod ${pod.namespace}/${pod.name}`;
    let res: ReturnType<SubnetAllocator["allocate"]>;
    if (ann[ANNOTATION_IP]) res = sn.allocator.allocateStatic(ann[ANNOTATION_IP], owner);
    else if (ann[ANNOTATION_POOL]) res = sn.allocator.allocateFromPool(ann[ANNOTATION_POOL], owner);
    else res = sn.allocator.allocate(owner);
    if (!res.ok) {
      const reason = res.code === "exhausted" ? "AddressesExhausted" : "AddressConflict";
      return { ok: false, reason, message: `${where}: ${res.message}` };
    }
    let mac: string;
    try {
      mac = ann[ANNOTATION_MAC]
        ? parseRequestedMac(ann[ANNOTATION_MAC], ANNOTATION_MAC)
        : macForAddresses(res.ips);
    } catch (e) {
      if (!res.reused) for (const ip of res.addresses) sn.allocator.release(ip, owner);
      return { ok: false, reason: "InvalidMAC", message: `${where}: ${(e as Error).message}` };
    }
    return { ok: true, ips: [...res.addresses], mac, fresh: !res.reused };
  }

  /**
   * Removes the pod's port and frees its address. With `uid`, only the port of that pod incarnation is removed:
   * a late delete of an old pod never takes the port of a newer pod with the same name. Returns the subnet the
   * port was on, or false when there was nothing to remove.
   */
  async remove(namespace: string, name: string, uid?: string): Promise<string | false> {
    const cache = this.nb.cache as never;
    const p = findOwned(cache, "Logical_Switch_Port", podPortId(namespace, name)) as
      | LogicalSwitchPort
      | undefined;
    if (!p) return false;
    if (uid !== undefined && p.external_ids[POD_UID_KEY] !== uid) return false;
    const subnet = p.external_ids["zstack.io/subnet"] as string | undefined;
    const ips = heldIps(p);
    const txn = this.nb.transaction();
    unlinkAndDelete(cache, this.nb.schema, txn as never, "Logical_Switch_Port", p._uuid);
    const node = p.options["requested-chassis"];
    const v4 = ips.filter((ip) => !ip.includes(":"));
    if (node && v4.length > 0) this.addressSetMutation(txn, node, "delete", v4);
    await txn.commit();
    const sn = subnet ? this.subnets.get(subnet) : undefined;
    if (sn) for (const ip of ips) sn.allocator.release(ip, ownerOf(namespace, name));
    return subnet ?? "";
  }
}
