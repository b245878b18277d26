// Giving a pod its address and logical switch port, and taking them back. The allocation and the port that holds
// it commit in one NB transaction; the allocators live in memory, follow the ports on each switch as the NB
// monitor reports them and are rebuilt from them after a restart or a full resync, so NB stays the only durable
// record: a crash or a lost reply between any two steps leaks nothing and hands nothing out twice.

import { formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { SubnetAllocator } from "../ipam/allocator.ts";
import { formatCidr } from "../ipam/cidr.ts";
import type { ForeignHolder } from "../ipam/foreign-holdings.ts";
import { describeHolders, type Holder } from "../ipam/holder.ts";
import { heldIps } from "../ipam/lsp-addresses.ts";
import { macForAddresses, parseMac, parseRequestedMac, randomLocalMac } from "../ipam/mac.ts";
import { formatRange } from "../ipam/range.ts";
import type { SubnetDefinition } from "../ipam/subnet-spec.ts";
import type { Logger } from "../observability/log.ts";
import {
  type ClusterRouteTargets,
  externalPodRoutes,
  externalRouterPortId,
  externalRouterPortName,
} from "../ovn/external-router-port.ts";
import { ForeignSwitchHoldings, type HoldingsChange } from "../ovn/foreign-switch-holdings.ts";
import {
  type DesiredRow,
  findAllOwned,
  findOwned,
  type ParentRef,
  plan,
  unlinkAndDelete,
} from "../ovn/nb-diff.ts";
import {
  addressKey,
  ID_KEY,
  idOf,
  isOurs,
  KIND_KEY,
  POD_KEY,
  POD_UID_KEY,
  SUBNET_KEY,
} from "../ovn/ownership.ts";
import { podNetworksAnnotation, podPortId, podPortName, podPortRow } from "../ovn/pod-port.ts";
import { EXTERNAL_PODS_ADDRESS_SET_V4, nodePodsAddressSet, subnetSwitchName } from "../ovn/topology.ts";
import type { RowEvent } from "../ovsdb/cache.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import { ConstraintViolationError, certainlyNotApplied, WaitFailedError } from "../ovsdb/errors.ts";
import type { LogicalSwitchPort, NbTables } from "../ovsdb/models/nb.generated.ts";
import { setHas } from "../ovsdb/set-index.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { nodeGroupId } from "../policy/nb-names.ts";

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
  /**
   * Ids of the port groups a new port joins in the transaction that inserts it (its NetworkPolicy isolation), so
   * it never exists in NB without them; a port whose node changes joins them too (its new own-node group).
   * Other changes of an existing port's groups are their reconcilers'.
   */
  readonly portGroups?: readonly string[];
  /**
   * The rows that create a group of portGroups that NB does not hold yet (a port group and its ACLs, parents
   * first): created, guarded, in the port's transaction with the port in it. A group without rows here is left to
   * its reconciler. The own-node group of a pod's node goes this way, so the first isolated pod of a new node is
   * never in the default deny without its node's allow.
   */
  readonly portGroupRows?: readonly DesiredRow[];
}

/**
 * Address sets of ours that hold pod addresses as privileges (NetworkPolicy peer and named-port sets): the uuid of
 * each set holding one of `ips`, with the ones it holds.
 */
export type AddressHolders = (ips: readonly string[]) => ReadonlyMap<string, readonly string[]>;

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

/** A foreign (ZStack) switch a Subnet's pods join (External mode): ours are only the pod ports we put on it. */
export interface ExternalSwitchRef {
  readonly uuid: string;
  readonly name: string;
}

interface SubnetState {
  readonly name: string;
  /** The definition as the Subnet gives it (without the switch's exclude_ips). */
  readonly def: SubnetDefinition;
  readonly allocator: SubnetAllocator;
  readonly prefixes: readonly string[];
  readonly gateways: readonly string[];
  /** Set for a Subnet on a foreign switch: the switch, and the live view of every address its rows show. */
  readonly external?: ExternalSwitchRef & { readonly holdings: ForeignSwitchHoldings };
  /** Addresses held by one of our pods and by a foreign row at once (ZStack added a VM with it), with a message. */
  readonly conflicts: Map<string, string>;
}

const SWITCH_ID = (subnet: string) => `subnet/${subnet}`;

/** The allocator's name for our router port on the Subnet's foreign switch (a foreign holder, as foreignOwner names it). */
function routerPortHolder(subnet: string): string {
  return `Logical_Router_Port ${externalRouterPortName(subnet)}`;
}

/** The allocator's name for a foreign row holding an address: a port by its name, anything else by table too. */
function foreignOwner(h: ForeignHolder): string {
  return h.table === "Logical_Switch_Port" ? h.name : `${h.table} ${h.name}`;
}

function addressingOf(
  sn: SubnetState,
  ips: readonly string[],
  mac: string,
  routes?: readonly { dest: string; nextHop: string }[],
) {
  return {
    subnet: sn.name,
    // On ZStack's switch its UUID: ZStack's names may hold what the agent's parser refuses (spaces, CJK), and a
    // rename by ZStack leaves the pods' annotations as they are.
    logicalSwitch: sn.external?.uuid ?? subnetSwitchName(sn.name),
    mac,
    ipsWithPrefix: ips.map((ip, i) => `${ip}/${sn.prefixes[i] ?? (ip.includes(":") ? "128" : "32")}`),
    gateways: sn.gateways,
    ...(routes && routes.length > 0 ? { routes } : {}),
  };
}

function ownerOf(ns: string, name: string): string {
  return `${ns}/${name}`;
}

/** Our pod port's owner ("namespace/name"), or undefined for anyone else's port. */
function podOwnerOf(p: LogicalSwitchPort): string | undefined {
  if (!isOurs(p) || !idOf(p)?.startsWith("pod/")) return undefined;
  return (p.external_ids[POD_KEY] as string | undefined) ?? p.name;
}

function macOf(p: LogicalSwitchPort): string | undefined {
  const first = p.addresses[0]?.trim().split(/\s+/)[0];
  if (!first || first === "router" || first === "unknown" || first === "dynamic") return undefined;
  try {
    return parseMac(first);
  } catch {
    return undefined;
  }
}

/** What the allocators learnt from NB: the subnets whose usage changed, and addresses claimed twice. */
export interface Observation {
  readonly changed: Set<string>;
  readonly problems: SubnetProblem[];
}

/** NB refused the insert (its name index, or a guard): a port of this pod is there that the cache does not show yet. */
const RETRY = Symbol("retry");
/** NB refused the insert: another port holds the address, although the allocator had it free. */
export const ADDRESS_REFUSED = "NB refused a fresh address: a port not in this controller's view holds it";
class AddressTaken {
  constructor(readonly ip: string) {}
}
/**
 * How long a reconcile waits for NB to be connected before it throws and its key is retried with backoff;
 * the wait also ends with the term (the NB view is fenced on it).
 */
export const NB_READY_WAIT_MS = 30_000;
const LSP_MAC_INDEX = "zstack.io/mac";
const LSP_ROUTER_PORT_INDEX = "zstack.io/router-port";
const LRP_MAC_INDEX = "zstack.io/mac";

export class PodPortAllocator {
  private readonly subnets = new Map<string, SubnetState>();
  /**
   * Owners with an ensure under way. Their cache events only ever add holdings: what the write did is settled
   * by the write itself once its outcome is known, so a late delete event of an earlier port cannot free an
   * address the ensure reuses. (A remove is not marked: its own delete event frees the address as soon as NB
   * shows the port gone, before the pods woken by that change look for one.)
   */
  private readonly busy = new Set<string>();
  /** Addresses allocated for a port insert under way, by owner: not in NB yet, and not free either. */
  private readonly pending = new Map<string, { subnet: string; ips: readonly string[]; mac: string }>();
  /** annotationFor's text of a port row on one of our switches, with the subnet state it was made for. */
  private readonly annotations = new WeakMap<object, { sn: SubnetState; text: string }>();
  /** Port inserts under way, by subnet: the switch's port count in the cache does not show them yet. */
  private readonly pendingPorts = new Map<string, number>();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly opts: {
      tunnel: "vxlan" | "geneve";
      /** Told what the allocators learnt from NB changes (ports added or removed by anyone, full resyncs). */
      onObservation?: (o: Observation) => void;
      /** How long ensure and remove wait for NB to be connected (default NB_READY_WAIT_MS). */
      readyWaitMs?: number;
      /**
       * Sets whose pod addresses leave them in the transaction that frees the address (the port's delete), and
       * that a fresh address leaves in the transaction that hands it out, in case a set still holds it: a new
       * pod never inherits a peer-set membership of the pod that had its address before.
       */
      addressHolders?: AddressHolders;
      /**
       * The cluster's networks a pod on ZStack's switch reaches through our router port there (its annotation's
       * routes). When set, such a pod gets its port only once that router port is in NB (external-router-port.ts).
       */
      externalRoutes?: ClusterRouteTargets;
      log?: Logger;
    } = { tunnel: "vxlan" },
  ) {
    // The allocators follow NB: every port added, changed or removed, and the whole cache after a reload.
    this.unsubscribe.push(
      nb.cache.subscribe("Logical_Switch_Port", (events) => this.report(this.observe(events))),
    );
    const onReady = (info: { fullSnapshot: boolean }) => {
      if (info.fullSnapshot) this.report(this.resync());
    };
    nb.on("ready", onReady);
    this.unsubscribe.push(() => nb.off("ready", onReady));
  }

  /** Stops following NB (a controller that lost leadership). */
  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
    for (const sn of this.subnets.values()) sn.external?.holdings.close();
  }

  private report(o: Observation): void {
    if (o.changed.size > 0 || o.problems.length > 0) this.opts.onObservation?.(o);
  }

  /**
   * Registers a subnet and rebuilds its allocator from the ports on its switch: ours by pod, anyone else's
   * as foreign holders. Returns the problems found (duplicate addresses and the like) for the Subnet status.
   */
  loadSubnet(name: string, def: SubnetDefinition, external?: ExternalSwitchRef): SubnetProblem[] {
    const entries: { address: string | IpAddress; holder: Holder }[] = [];
    const ls = external
      ? this.nb.cache.table("Logical_Switch").get(external.uuid)
      : findOwned(this.nb.cache as never, "Logical_Switch", SWITCH_ID(name));
    const ports = this.nb.cache.table("Logical_Switch_Port");
    for (const uuid of (ls?.ports as readonly string[] | undefined) ?? []) {
      const p = ports.get(uuid);
      if (!p) continue;
      // On a foreign switch, the foreign rows' addresses come from the holdings view below.
      if (external && !this.podPortOf(p, name)) continue;
      for (const ip of heldIps(p)) entries.push({ address: ip, holder: this.holderOf(p) });
    }
    // Addresses of port inserts still under way are in no row yet; dropping them would hand them out twice.
    for (const [owner, r] of this.pending)
      if (r.subnet === name)
        for (const ip of r.ips) entries.push({ address: ip, holder: { owner, foreign: false } });
    this.subnets.get(name)?.external?.holdings.close();
    let holdings: ForeignSwitchHoldings | undefined;
    let effective = def;
    if (external) {
      // Every address ZStack's rows show is taken (ipam.md, "External mode"); the switch's exclude_ips ranges are
      // reservations of the allocator, the single addresses foreign holders.
      holdings = new ForeignSwitchHoldings(this.nb.cache, external.uuid, {
        cidrs: def.cidrs,
        // This Subnet's pods are the allocator's own holders; anything else on the switch (a VM, a pod of another
        // Subnet naming the same switch) is a foreign holder.
        skipPort: (p) => this.podPortOf(p, name),
      });
      effective = {
        ...def,
        excluded: [
          ...def.excluded,
          ...holdings.holdings.ranges().map((r) => ({
            range: r.range,
            field: `Logical_Switch ${external.uuid} other_config:exclude_ips`,
            text: r.holder.entry ?? formatRange(r.range),
          })),
        ],
      };
      for (const ip of holdings.holdings.addresses())
        for (const h of holdings.holdings.holdersOf(ip))
          if (h.source !== "other_config:exclude_ips")
            entries.push({ address: ip, holder: { owner: foreignOwner(h), foreign: true } });
    }
    const { allocator, problems } = SubnetAllocator.rebuild(effective, entries);
    const state: SubnetState = {
      name,
      def,
      allocator,
      prefixes: def.cidrs.map((c) => String(c.prefix)),
      gateways: def.gateways.map((g) => formatIp(g)),
      ...(external && holdings ? { external: { ...external, holdings } } : {}),
      conflicts: new Map(),
    };
    this.subnets.set(name, state);
    if (holdings) {
      const view = holdings;
      for (const e of allocator.entries())
        if (!e.holder.foreign || e.holder.owner === routerPortHolder(name))
          this.noteConflict(state, e.address);
      view.onChange((change) => {
        if (this.subnets.get(name) !== state) return;
        this.report(this.foreignChanged(state, change));
      });
      view.onListenerError = (e) =>
        this.opts.log?.error(
          { subnet: name, err: (e as Error).message },
          "following a foreign switch failed",
        );
    }
    // ZStack's rows show one address in several places (its router port, DHCP's server and router): not a problem.
    const real = external
      ? problems.filter((p) => !(p.kind === "duplicate" && (p.holders ?? []).every((h) => h.foreign)))
      : problems;
    return real.map((p) => ({ subnet: name, message: p.message }));
  }

  /** Whether the port is one of our pod ports of that Subnet. */
  private podPortOf(p: LogicalSwitchPort, subnet: string): boolean {
    return podOwnerOf(p) !== undefined && p.external_ids[SUBNET_KEY] === subnet;
  }

  /** The addresses on the Subnet's foreign switch that a pod of ours and a foreign row both hold. */
  conflictsOf(subnet: string): readonly string[] {
    const sn = this.subnets.get(subnet);
    if (!sn) return [];
    // A pod released since, or a VM gone: the entry is checked again before it is reported.
    for (const key of [...sn.conflicts.keys()]) this.noteConflict(sn, parseIp(key));
    return [...sn.conflicts.keys()].sort().map((k) => sn.conflicts.get(k) as string);
  }

  /** Records or clears the conflict on one address: one of our pods and a foreign row both holding it. */
  private noteConflict(sn: SubnetState, ip: IpAddress): boolean {
    const key = formatIp(ip);
    const holders = sn.allocator.holdersOf(ip);
    const before = sn.conflicts.get(key);
    if (holders.some((h) => !h.foreign) && holders.some((h) => h.foreign)) {
      const message = `${key} is held by ${describeHolders(holders)}: ZStack uses an address a pod holds; give the VM another address, or delete the pod (it gets a free one)`;
      sn.conflicts.set(key, message);
      return before !== message;
    }
    // Our router port on the switch is recorded as a foreign holder (the switch's rows show it like ZStack's):
    // anything else holding its address is ZStack's, and takes the pods' path to the cluster.
    const ours = routerPortHolder(sn.name);
    const others = holders.filter((h) => h.owner !== ours);
    if (sn.external && others.length > 0 && others.length < holders.length) {
      const message = `${key} is held by the cluster router's port ${JSON.stringify(externalRouterPortName(sn.name))} on the switch and by ${describeHolders(others)}: ZStack uses the address of our router port, which the pods' routes to the cluster go through; give the VM another address`;
      sn.conflicts.set(key, message);
      return before !== message;
    }
    sn.conflicts.delete(key);
    return before !== undefined;
  }

  /**
   * The foreign switch's rows changed (ZStack added or removed a VM, changed exclude_ips...): the allocator
   * follows. A new exclude range rebuilds it; single addresses are held or freed one by one.
   */
  private foreignChanged(sn: SubnetState, change: HoldingsChange): Observation {
    const changed = new Set<string>([sn.name]);
    const problems: SubnetProblem[] = [];
    const ext = sn.external;
    if (!ext) return { changed, problems };
    if (change.ranges.length > 0) {
      problems.push(...this.loadSubnet(sn.name, sn.def, { uuid: ext.uuid, name: ext.name }));
      const now = this.subnets.get(sn.name);
      for (const m of now?.conflicts.values() ?? []) problems.push({ subnet: sn.name, message: m });
      return { changed, problems };
    }
    for (const ip of change.addresses) {
      const want = new Set(
        ext.holdings
          .holdersOf(ip)
          .filter((h) => h.source !== "other_config:exclude_ips")
          .map(foreignOwner),
      );
      for (const h of sn.allocator.holdersOf(ip))
        if (h.foreign && !want.has(h.owner)) sn.allocator.forgetForeign(ip, h.owner);
      for (const owner of want) sn.allocator.recordHolder(ip, { owner, foreign: true });
      if (this.noteConflict(sn, ip)) {
        const m = sn.conflicts.get(formatIp(ip));
        if (m) problems.push({ subnet: sn.name, message: m });
      }
    }
    return { changed, problems };
  }

  /** Forgets a subnet whose switch is gone: its allocator no longer counts or hands out anything. */
  unloadSubnet(name: string): void {
    this.subnets.get(name)?.external?.holdings.close();
    this.subnets.delete(name);
  }

  /** The foreign switch a loaded Subnet's pods join, if it is on one. */
  externalSwitchOf(subnet: string): ExternalSwitchRef | undefined {
    const e = this.subnets.get(subnet)?.external;
    return e ? { uuid: e.uuid, name: e.name } : undefined;
  }

  /**
   * After the NB client reloaded its whole cache (a reconnect without resume), whatever the allocators learnt
   * from single events may have missed changes: rebuild them all from the cache.
   */
  resync(): Observation {
    const problems: SubnetProblem[] = [];
    for (const sn of [...this.subnets.values()])
      problems.push(
        ...this.loadSubnet(
          sn.name,
          sn.def,
          sn.external ? { uuid: sn.external.uuid, name: sn.external.name } : undefined,
        ),
      );
    return { changed: new Set(this.subnets.keys()), problems };
  }

  /**
   * Keeps the allocators in step with the ports on our switches as NB reports them: anyone's port added,
   * changed or removed, ours included (a port that landed although its reply was lost, one an operator
   * deleted). Returns the subnets whose usage changed, and the problems (an address held twice).
   */
  observe(events: readonly RowEvent[]): Observation {
    const changed = new Set<string>();
    const problems: SubnetProblem[] = [];
    for (const e of events) {
      const before = e.kind === "add" ? undefined : (e.old as unknown as LogicalSwitchPort);
      const after = e.kind === "delete" ? undefined : (e.row as unknown as LogicalSwitchPort);
      const port = (after ?? before) as LogicalSwitchPort;
      if (
        before &&
        after &&
        before.addresses.join("\n") === after.addresses.join("\n") &&
        before.dynamic_addresses === after.dynamic_addresses &&
        before.external_ids[SUBNET_KEY] === after.external_ids[SUBNET_KEY]
      )
        continue;
      const owner = podOwnerOf(port);
      if (owner !== undefined) this.observeOwn(owner, before, after, changed, problems);
      else this.observeForeign(before, after, changed, problems);
    }
    return { changed, problems };
  }

  private observeOwn(
    owner: string,
    before: LogicalSwitchPort | undefined,
    after: LogicalSwitchPort | undefined,
    changed: Set<string>,
    problems: SubnetProblem[],
  ): void {
    if (after) {
      const sn = this.subnets.get((after.external_ids[SUBNET_KEY] as string | undefined) ?? "");
      if (sn) {
        for (const ip of heldIps(after)) {
          // Our own writes hold their addresses already; a port that appeared unseen changes the usage.
          if (!sn.allocator.holdersOf(ip).some((h) => h.owner === owner && !h.foreign)) changed.add(sn.name);
          const problem = sn.allocator.recordHolder(ip, { owner, foreign: false });
          if (problem?.kind === "duplicate") problems.push({ subnet: sn.name, message: problem.message });
          if (sn.external) this.noteConflict(sn, parseIp(ip));
        }
      }
    }
    if (!before || this.busy.has(owner)) return;
    // What the owner's rows in NB still hold stays held (another row with the same id, or the row's new value).
    const still = new Set(
      findAllOwned(this.nb.cache as never, "Logical_Switch_Port", idOf(before) ?? "").flatMap((r) =>
        heldIps(r as unknown as LogicalSwitchPort),
      ),
    );
    for (const ip of heldIps(before)) {
      if (still.has(ip)) continue;
      for (const sn of this.subnets.values())
        if (sn.allocator.release(ip, owner).released) changed.add(sn.name);
    }
  }

  private observeForeign(
    before: LogicalSwitchPort | undefined,
    after: LogicalSwitchPort | undefined,
    changed: Set<string>,
    problems: SubnetProblem[],
  ): void {
    if (before) {
      // A foreign switch's holders are the holdings view's to keep (a row may show an address in several columns).
      for (const ip of heldIps(before))
        for (const sn of this.subnets.values())
          if (!sn.external && sn.allocator.forgetForeign(ip, before.name)) changed.add(sn.name);
    }
    if (after) {
      const sn = this.subnetHolding(after._uuid);
      if (!sn) return;
      for (const ip of heldIps(after)) {
        const problem = sn.allocator.recordHolder(ip, { owner: after.name, foreign: true });
        if (problem?.kind === "duplicate") problems.push({ subnet: sn.name, message: problem.message });
        changed.add(sn.name);
      }
    }
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
    const owner = podOwnerOf(p);
    return owner !== undefined ? { owner, foreign: false } : { owner: p.name, foreign: true };
  }

  /** The pod's port as NB holds it, if any. */
  portOf(namespace: string, name: string): LogicalSwitchPort | undefined {
    return findOwned(this.nb.cache as never, "Logical_Switch_Port", podPortId(namespace, name)) as
      | LogicalSwitchPort
      | undefined;
  }

  /** The Subnet the pod's port is on, if it has one: the pod stays there as long as the port exists. */
  subnetOfPort(namespace: string, name: string): string | undefined {
    return this.portOf(namespace, name)?.external_ids[SUBNET_KEY] as string | undefined;
  }

  /**
   * The pod-networks annotation for the port of this pod incarnation (by UID), as NB holds it; undefined when
   * there is no such port or its subnet is not loaded.
   */
  annotationFor(namespace: string, name: string, uid: string): string | undefined {
    const p = this.portOf(namespace, name);
    if (!p || p.external_ids[POD_UID_KEY] !== uid) return undefined;
    const sn = this.subnets.get((p.external_ids[SUBNET_KEY] as string | undefined) ?? "");
    if (!sn) return undefined;
    // Asked about three times per pod (the pod stage, the annotation stage, the echo of the PATCH): the text is
    // kept with the row it was made from. Rows never change, and the subnet state is replaced when the Subnet
    // is reloaded, so a kept text whose subnet state is still the current one is what building it would give.
    // Only on our own switches, whose routes are always none; a foreign switch's depend on our router port there.
    const kept = sn.external ? undefined : this.annotations.get(p);
    if (kept?.sn === sn) return kept.text;
    const routes = this.routesOf(sn);
    if (routes === undefined) return undefined;
    const text = podNetworksAnnotation(
      addressingOf(sn, heldIps(p), p.addresses[0]?.split(" ")[0] ?? "", routes),
    );
    if (!sn.external) this.annotations.set(p, { sn, text });
    return text;
  }

  /**
   * The routes of a pod on the Subnet: [] on our own switches; on ZStack's switches (flat and VLAN ones included), the cluster's networks via our router port there, or undefined while that port is not in NB (the pod waits for it: a pod wired without the
   * routes would stay unreachable from its node, as the agent wires a pod once).
   */
  private routesOf(sn: SubnetState): readonly { dest: string; nextHop: string }[] | undefined {
    const targets = this.opts.externalRoutes;
    if (!sn.external || !targets) return [];
    const lrp = findOwned(this.nb.cache as never, "Logical_Router_Port", externalRouterPortId(sn.name));
    const networks = (lrp?.networks as readonly string[] | undefined) ?? [];
    if (networks.length === 0) return undefined;
    return externalPodRoutes(
      networks.map((n) => n.slice(0, n.indexOf("/"))),
      sn.def.cidrs.map((c) => formatCidr(c)),
      targets,
    );
  }

  /**
   * A free address per family of the Subnet on its foreign switch for our router port `lrpName` there. It is held
   * at once under the name the switch's holdings will give the port once NB shows it (`Logical_Router_Port
   * <name>`, a foreign holder like any router port on the switch), so no pod takes it meanwhile and no conflict is
   * seen when the holdings report it. A write that did not land gives it back with dropRouterAddresses.
   */
  reserveRouterAddresses(
    subnet: string,
    prefer?: readonly string[],
  ): { ips: string[] } | { problem: string } {
    const sn = this.subnets.get(subnet);
    if (!sn?.external) return { problem: `subnet ${subnet} is not loaded on a foreign switch` };
    const view = sn.external.holdings;
    const picker = `\0router-port/${subnet}`;
    // The port's earlier addresses (it was taken off the switch and comes back), when nothing holds them now.
    const takenOrBad = (ip: string) => {
      try {
        return view.isTaken(parseIp(ip));
      } catch {
        return true;
      }
    };
    if (prefer && prefer.length > 0 && !prefer.some(takenOrBad)) {
      const res = sn.allocator.allocateStatic(prefer, picker);
      if (res.ok) {
        for (const ip of res.ips) sn.allocator.release(ip, picker);
        for (const ip of res.ips)
          sn.allocator.recordHolder(ip, { owner: routerPortHolder(subnet), foreign: true });
        return { ips: [...res.addresses] };
      }
    }
    for (let round = 0; round < 8; round++) {
      const res = sn.allocator.allocate(picker);
      if (!res.ok) return { problem: res.message };
      for (const ip of res.ips) sn.allocator.release(ip, picker);
      const seen = res.ips.filter((ip) => view.isTaken(ip));
      if (seen.length === 0) {
        for (const ip of res.ips)
          sn.allocator.recordHolder(ip, { owner: routerPortHolder(subnet), foreign: true });
        return { ips: [...res.addresses] };
      }
      for (const ip of seen)
        for (const h of view.holdersOf(ip))
          if (h.source !== "other_config:exclude_ips")
            sn.allocator.recordHolder(ip, { owner: foreignOwner(h), foreign: true });
    }
    return { problem: `no address on ${sn.external.name} stayed free long enough to take` };
  }

  /** Gives back what reserveRouterAddresses held, unless the switch's holdings show the port holding it. */
  dropRouterAddresses(subnet: string, ips: readonly string[]): void {
    const sn = this.subnets.get(subnet);
    if (!sn?.external) return;
    for (const ip of ips)
      if (!sn.external.holdings.isTaken(parseIp(ip)))
        sn.allocator.forgetForeign(ip, routerPortHolder(subnet));
  }

  /**
   * Makes the owner hold exactly `ips` in `subnet` (what its port in NB holds) and nothing anywhere else: the
   * outcome of a write is settled from NB, never guessed.
   */
  private holdExactly(owner: string, subnet: string | undefined, ips: readonly string[]): SubnetProblem[] {
    const want = new Set(ips);
    for (const sn of this.subnets.values())
      for (const ip of sn.allocator.addressesOf(owner))
        if (sn.name !== subnet || !want.has(formatIp(ip))) sn.allocator.release(ip, owner);
    const sn = subnet === undefined ? undefined : this.subnets.get(subnet);
    const problems: SubnetProblem[] = [];
    if (sn) {
      for (const ip of ips) {
        const problem = sn.allocator.recordHolder(ip, { owner, foreign: false });
        if (problem?.kind === "duplicate") problems.push({ subnet: sn.name, message: problem.message });
      }
    }
    return problems;
  }

  /**
   * Ensures the pod's port exists with its address; one NB transaction when anything must change, none
   * otherwise. A write whose reply is lost keeps its address reserved until NB tells the next call whether
   * it landed.
   */
  async ensure(pod: PodSpecInfo, wanted: string): Promise<EnsureResult> {
    const owner = ownerOf(pod.namespace, pod.name);
    // After a reconnect the cache is reloaded before the client is ready again: read NB as it is now.
    await this.nb.whenReady(this.opts.readyWaitMs ?? NB_READY_WAIT_MS);
    this.busy.add(owner);
    try {
      for (let attempt = 1; ; attempt++) {
        const r = await this.ensureOnce(pod, wanted, owner);
        if (r !== RETRY && !(r instanceof AddressTaken)) return r;
        if (attempt >= 3) {
          return r === RETRY
            ? {
                ok: false,
                reason: "PortConflict",
                message: `pod ${owner}: a port for it keeps appearing in NB before this controller sees it`,
              }
            : {
                ok: false,
                reason: "AddressConflict",
                message: `pod ${owner}: NB refused address ${r.ip}: a port this controller does not see yet holds it`,
              };
        }
        // NB refused the insert for a port the cache does not show yet (this pod's, or the holder of the address):
        // wait until it does, so the next attempt reads it.
        await this.nb.echo(this.opts.readyWaitMs ?? NB_READY_WAIT_MS);
      }
    } finally {
      this.busy.delete(owner);
    }
  }

  private async ensureOnce(
    pod: PodSpecInfo,
    wanted: string,
    owner: string,
  ): Promise<EnsureResult | typeof RETRY | AddressTaken> {
    const cache = this.nb.cache as never;
    const id = podPortId(pod.namespace, pod.name);
    const rows = findAllOwned(cache, "Logical_Switch_Port", id) as unknown as readonly LogicalSwitchPort[];
    // Two rows with one id come from a write applied twice: keep this incarnation's (or any one), drop the rest.
    const existing = rows.find((r) => r.external_ids[POD_UID_KEY] === pod.uid) ?? rows[0];
    const extras = rows.filter((r) => r !== existing);
    // A pod keeps the subnet its port is on, and waits for it when it is not serving: moving the port would
    // leave it on two switches with the addresses and gateways of both.
    const current = existing?.external_ids[SUBNET_KEY] as string | undefined;
    const subnetName = existing && current !== undefined ? current : wanted;
    const sn = this.subnets.get(subnetName);
    if (!sn) {
      return {
        ok: false,
        reason: "SubnetNotReady",
        message:
          subnetName !== wanted
            ? `the pod's port is on subnet ${subnetName}, which is not serving; the pod waits for it and does not move to ${wanted}`
            : `subnet ${subnetName} is not ready yet`,
      };
    }
    const ls = sn.external
      ? (this.nb.cache.table("Logical_Switch").get(sn.external.uuid) as Record<string, unknown> | undefined)
      : findOwned(cache, "Logical_Switch", SWITCH_ID(subnetName));
    if (!ls) {
      return {
        ok: false,
        reason: "SubnetNotReady",
        message: sn.external
          ? `subnet ${subnetName}: the external logical switch ${sn.external.name} (${sn.external.uuid}) is not in NB`
          : `the logical switch of subnet ${subnetName} does not exist yet`,
      };
    }
    const routes = this.routesOf(sn);
    if (routes === undefined) {
      return {
        ok: false,
        reason: "SubnetNotReady",
        message: `subnet ${subnetName}: the cluster router's port on ${sn.external?.name ?? "its switch"} is not in NB yet`,
      };
    }
    let ips: string[];
    let mac: string;
    let fresh = false;
    if (existing) {
      ips = heldIps(existing);
      mac = existing.addresses[0]?.split(" ")[0] ?? "";
      this.holdExactly(owner, subnetName, ips);
    } else {
      const inFlight = this.pendingPorts.get(subnetName) ?? 0;
      if (
        this.opts.tunnel === "vxlan" &&
        (ls.ports as readonly string[]).length + inFlight >= VXLAN_PORTS_PER_SWITCH
      ) {
        return {
          ok: false,
          reason: "PortCapacityExceeded",
          message:
            `subnet ${subnetName}: its logical switch already holds ${VXLAN_PORTS_PER_SWITCH} ports, OVN's limit per switch ` +
            "with VXLAN; put this namespace on another subnet, or switch the tunnel to Geneve",
        };
      }
      // No port in NB: whatever the owner still holds is left from a write that did not land.
      this.holdExactly(owner, undefined, []);
      const res = this.allocate(sn, pod, owner, ls);
      if (!res.ok) return res;
      ips = res.ips;
      mac = res.mac;
      fresh = true;
    }
    const addressing = { ...addressingOf(sn, ips, mac, routes), ...(pod.node ? { node: pod.node } : {}) };
    const txn = this.nb.transaction();
    let sent = false;
    /** Index of the wait guarding each fresh address, in txn. */
    const addressGuards = new Map<number, string>();
    /** Indexes of the waits guarding the port groups this write creates. */
    const groupGuards = new Set<number>();
    if (fresh) {
      this.pending.set(owner, { subnet: subnetName, ips, mac });
      this.pendingPorts.set(subnetName, (this.pendingPorts.get(subnetName) ?? 0) + 1);
    }
    try {
      // A retried insert whose first attempt landed unseen adds no second row: NB's unique index on the port's
      // name (`namespace_name`, one per pod: neither holds an underscore) refuses it, and the refusal is read
      // as RETRY below. A wait on external_ids would do the same by scanning every port of NB, each time.
      // NB itself refuses a second port with a fresh address: the allocator's view can lag NB (a lost reply whose
      // insert lands after the retry read the cache, a new Raft leader still applying its predecessor's
      // commits), and a duplicate must not commit however wrong that view is.
      if (fresh) {
        for (const ip of ips) {
          addressGuards.set(txn.size, ip);
          txn.wait(
            "Logical_Switch_Port",
            [["external_ids", "includes", { [addressKey(ip)]: subnetName }]],
            ["_uuid"],
            "==",
            [],
          );
        }
      }
      // The switch must still be there when this lands: a port added to a switch deleted meanwhile (its Subnet
      // removed) would be dropped by OVSDB with no error, leaving the pod an address without a port. A failed
      // wait is a refusal, so the reservation is released and the pod tried again.
      txn.wait("Logical_Switch", [["_uuid", "==", ls._uuid]], ["name"], "==", [{ name: ls.name as string }]);
      const guards = txn.size;
      // On a foreign switch, the port joins it by a mutate that inserts our port's reference only: ZStack's
      // ports, written by ZStack at the same time, are never rewritten.
      const parent: ParentRef = sn.external
        ? { table: "Logical_Switch", uuid: sn.external.uuid, column: "ports" }
        : { table: "Logical_Switch", id: SWITCH_ID(subnetName), column: "ports" };
      const planned = plan(cache, this.nb.schema, txn as never, [podPortRow(pod, addressing, parent)]);
      // The new port joins its isolation groups in its own insert (by named uuid): no NB state has it without.
      // A port given its node joins that node's own-node group in the same write.
      const prevNode = existing?.options["requested-chassis"];
      const ref = existing ? existing._uuid : planned.refOf("Logical_Switch_Port", id);
      if (ref !== undefined && (!existing || prevNode !== pod.node))
        for (const g of pod.portGroups ?? []) {
          const pg = findOwned(cache, "Port_Group", g);
          if (pg) {
            if (!existing || !setHas(pg.ports as readonly string[], existing._uuid))
              txn.mutate("Port_Group", byUuid(pg._uuid), [["ports", "insert", [ref]]]);
            continue;
          }
          const rows = (pod.portGroupRows ?? []).filter((r) => r.id === g || r.parent?.id === g);
          if (!rows.some((r) => r.table === "Port_Group" && r.id === g)) continue;
          // The group's reconciler may be creating it too: whichever lands second is refused by its guard.
          for (const r of rows) {
            if (findOwned(cache, r.table, r.id)) continue;
            groupGuards.add(txn.size);
            txn.guardAbsent(r.table as keyof NbTables & string, [
              ["external_ids", "includes", { [ID_KEY]: r.id }],
            ]);
          }
          plan(
            cache,
            this.nb.schema,
            txn as never,
            rows.map((r) =>
              r.table === "Port_Group" && r.id === g ? { ...r, row: { ...r.row, ports: [ref] } } : r,
            ),
          );
        }
      // A port moved to another node leaves its old node's own-node group in the same write: that node's
      // management address no longer speaks for the pod.
      if (existing && prevNode && prevNode !== pod.node) {
        const old = findOwned(cache, "Port_Group", nodeGroupId(prevNode));
        if (old && setHas(old.ports as readonly string[], existing._uuid))
          txn.mutate("Port_Group", byUuid(old._uuid), [["ports", "delete", [existing._uuid]]]);
      }
      if (fresh) this.withdraw(txn, ips);
      for (const extra of extras)
        unlinkAndDelete(cache, this.nb.schema, txn as never, "Logical_Switch_Port", extra._uuid);
      // The pod's address joins its node's address set, which the node's egress policy matches on.
      const v4 = ips.filter((ip) => !ip.includes(":"));
      // On ZStack's switch it is in the external pods' set too (level-triggered: a port without it gets it).
      if (sn.external) this.externalPodsMutation(txn, "insert", v4);
      if (prevNode !== pod.node && v4.length > 0) {
        if (prevNode) this.addressSetMutation(txn, prevNode, "delete", v4);
        if (pod.node) this.addressSetMutation(txn, pod.node, "insert", v4);
      }
      // The plan and the address-set mutations both land in txn: anything beyond the guards is a write.
      if (txn.size === guards)
        return { ok: true, annotation: podNetworksAnnotation(addressing), ips, wrote: false };
      sent = true;
      const result = await txn.commit();
      if (result.alreadyApplied) {
        if (fresh) this.releaseAll(owner, subnetName, ips);
        return RETRY;
      }
    } catch (e) {
      // Only a refusal is known not to have landed; otherwise the reservation stays until NB tells.
      if (fresh && (!sent || certainlyNotApplied(e))) this.releaseAll(owner, subnetName, ips);
      const taken =
        e instanceof WaitFailedError ? e.failures.find((f) => addressGuards.has(f.index)) : undefined;
      if (taken) {
        const ip = addressGuards.get(taken.index) as string;
        this.opts.log?.info({ pod: owner, ip }, ADDRESS_REFUSED);
        return new AddressTaken(ip);
      }
      // A port of this name is in NB: ours landed unseen (a lost reply, a zombie leader), or somebody else's.
      if (
        !existing &&
        e instanceof ConstraintViolationError &&
        e.violatesIndex("Logical_Switch_Port", "name")
      ) {
        const name = podPortName(pod.namespace, pod.name);
        const other = this.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === name);
        if (other && podOwnerOf(other as unknown as LogicalSwitchPort) !== owner) {
          return {
            ok: false,
            reason: "PortNameTaken",
            message: `pod ${owner}: NB already has a logical switch port named ${name} that this controller does not own (${other._uuid}); delete or rename that port, or give the pod another name`,
          };
        }
        return RETRY;
      }
      // A group this write meant to create came first from its reconciler: join it once the view shows it.
      if (e instanceof WaitFailedError && e.failures.some((f) => groupGuards.has(f.index))) return RETRY;
      throw e;
    } finally {
      if (fresh) {
        this.pending.delete(owner);
        this.pendingPorts.set(subnetName, (this.pendingPorts.get(subnetName) ?? 1) - 1);
      }
    }
    // The extras' addresses, and anything else the owner held, go: NB now holds just this port for it.
    this.holdExactly(owner, subnetName, ips);
    return { ok: true, annotation: podNetworksAnnotation(addressing), ips, wrote: true };
  }

  private releaseAll(owner: string, subnet: string, ips: readonly string[]): void {
    const sn = this.subnets.get(subnet);
    if (sn) for (const ip of ips) sn.allocator.release(ip, owner);
  }

  /** Takes the addresses out of every set that holds them as a pod's privilege. */
  private withdraw(txn: ReturnType<OvsdbClient<NbTables>["transaction"]>, ips: readonly string[]): void {
    if (ips.length === 0 || !this.opts.addressHolders) return;
    for (const [uuid, held] of this.opts.addressHolders(ips))
      txn.mutate("Address_Set", byUuid(uuid), [["addresses", "delete", [...held]]]);
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

  /**
   * Adds to or removes from the external pods' set (topology.ts externalPodsRows) the addresses it lacks or holds;
   * nothing when it already says so, or when the set does not exist (Standalone mode).
   */
  private externalPodsMutation(
    txn: ReturnType<OvsdbClient<NbTables>["transaction"]>,
    op: "insert" | "delete",
    ips: readonly string[],
  ): void {
    const set = this.nb.cache.table("Address_Set").lookupOne("name", EXTERNAL_PODS_ADDRESS_SET_V4);
    if (!set || !isOurs(set)) return;
    const todo = ips.filter((ip) => setHas(set.addresses as readonly string[], ip) === (op === "delete"));
    if (todo.length > 0) txn.mutate("Address_Set", [["_uuid", "==", set._uuid]], [["addresses", op, todo]]);
  }

  /** Who on the switch (or on the node side of the cluster) already uses the MAC, if anyone. O(1) by indexes. */
  private macHolder(mac: string, ls: Record<string, unknown>, owner: string): string | undefined {
    const ports = this.nb.cache.table("Logical_Switch_Port");
    if (!ports.hasIndex(LSP_MAC_INDEX)) ports.addIndex(LSP_MAC_INDEX, (r) => macOf(r as never));
    if (!ports.hasIndex(LSP_ROUTER_PORT_INDEX)) {
      ports.addIndex(LSP_ROUTER_PORT_INDEX, (r) =>
        r.type === "router" ? r.options["router-port"] : undefined,
      );
    }
    const routerPorts = this.nb.cache.table("Logical_Router_Port");
    if (!routerPorts.hasIndex(LRP_MAC_INDEX)) routerPorts.addIndex(LRP_MAC_INDEX, (r) => parseMacSafe(r.mac));
    const onSwitch = (uuid: string) => setHas(ls.ports as readonly string[], uuid);
    for (const lrp of routerPorts.lookup(LRP_MAC_INDEX, mac)) {
      if (ports.lookup(LSP_ROUTER_PORT_INDEX, lrp.name).some((p) => onSwitch(p._uuid)))
        return `the subnet's router port ${lrp.name}`;
    }
    for (const p of ports.lookup(LSP_MAC_INDEX, mac)) {
      const mgmt = p.external_ids[KIND_KEY] === "mgmt-port" && isOurs(p);
      if (!mgmt && !onSwitch(p._uuid)) continue;
      const other = podOwnerOf(p as never);
      if (other === owner) continue;
      if (mgmt) return `node management port ${p.name}`;
      return other !== undefined ? `pod ${other} (port ${p.name})` : `port ${p.name}`;
    }
    // Ports being inserted are not in the cache yet: two pods asking for one MAC at once must not both get it.
    for (const [other, p] of this.pending)
      if (other !== owner && p.mac === mac) return `pod ${other} (its port is being created)`;
    return undefined;
  }

  private allocate(
    sn: SubnetState,
    pod: PodSpecInfo,
    owner: string,
    ls: Record<string, unknown>,
    round = 0,
  ): { ok: true; ips: string[]; mac: string } | { ok: false; reason: string; message: string } {
    const ann = pod.annotations ?? {};
    const where = `pod ${pod.namespace}/${pod.name}`;
    let requestedMac: string | undefined;
    if (ann[ANNOTATION_MAC]) {
      try {
        requestedMac = parseRequestedMac(ann[ANNOTATION_MAC], ANNOTATION_MAC);
      } catch (e) {
        return { ok: false, reason: "InvalidMAC", message: `${where}: ${(e as Error).message}` };
      }
      // Two ports with one MAC on a switch break both (and the router's breaks the whole subnet).
      const holder = this.macHolder(requestedMac, ls, owner);
      if (holder) {
        return {
          ok: false,
          reason: "MACConflict",
          message: `${where}: the requested MAC ${requestedMac} (${ANNOTATION_MAC}) is already used by ${holder}; request another one or none`,
        };
      }
    }
    let res: ReturnType<SubnetAllocator["allocate"]>;
    if (ann[ANNOTATION_IP]) res = sn.allocator.allocateStatic(ann[ANNOTATION_IP], owner);
    else if (ann[ANNOTATION_POOL]) res = sn.allocator.allocateFromPool(ann[ANNOTATION_POOL], owner);
    else res = sn.allocator.allocate(owner);
    if (!res.ok) {
      const reason = res.code === "exhausted" ? "AddressesExhausted" : "AddressConflict";
      return { ok: false, reason, message: `${where}: ${res.message}` };
    }
    // On a foreign switch, the holdings view has the last word: an address it shows taken is never handed out.
    // The allocator is told (it missed it), and a dynamic request tries again; few rounds, each takes one more.
    const view = sn.external?.holdings;
    const seen = view ? res.ips.filter((ip) => view.isTaken(ip)) : [];
    if (view && seen.length > 0) {
      for (const ip of res.ips) sn.allocator.release(ip, owner);
      for (const ip of seen)
        for (const h of view.holdersOf(ip))
          if (h.source !== "other_config:exclude_ips")
            sn.allocator.recordHolder(ip, { owner: foreignOwner(h), foreign: true });
      const dynamic = !ann[ANNOTATION_IP] && !ann[ANNOTATION_POOL];
      if (dynamic && round < 8) return this.allocate(sn, pod, owner, ls, round + 1);
      const shown = seen.map((ip) => `${formatIp(ip)} (${view.holdersOf(ip).map(foreignOwner).join(", ")})`);
      return {
        ok: false,
        reason: "AddressConflict",
        message: `${where}: ${shown.join(", ")} is used on ZStack's switch ${sn.external?.name}; request another address`,
      };
    }
    if (requestedMac) return { ok: true, ips: [...res.addresses], mac: requestedMac };
    // The MAC derived from the address can be taken by a pod that asked for it: then a random local one.
    let mac = macForAddresses(res.ips);
    while (this.macHolder(mac, ls, owner)) mac = randomLocalMac();
    return { ok: true, ips: [...res.addresses], mac };
  }

  /**
   * Removes the pod's port and frees its address. With `uid`, only the port of that pod incarnation is removed:
   * a late delete of an old pod never takes the port of a newer pod with the same name. Returns the subnet the
   * port was on (or whose addresses were freed), or false when there was nothing to remove.
   */
  async remove(namespace: string, name: string, uid?: string): Promise<string | false> {
    const owner = ownerOf(namespace, name);
    await this.nb.whenReady(this.opts.readyWaitMs ?? NB_READY_WAIT_MS);
    const cache = this.nb.cache as never;
    const rows = findAllOwned(
      cache,
      "Logical_Switch_Port",
      podPortId(namespace, name),
    ) as unknown as readonly LogicalSwitchPort[];
    if (rows.length === 0) {
      // No port in NB: an earlier remove landed although its reply was lost, or an insert never did.
      for (const sn of this.subnets.values())
        if (sn.allocator.addressesOf(owner).length > 0) {
          this.holdExactly(owner, undefined, []);
          return sn.name;
        }
      return false;
    }
    const doomed = uid === undefined ? rows : rows.filter((r) => r.external_ids[POD_UID_KEY] === uid);
    if (doomed.length === 0) return false;
    const txn = this.nb.transaction();
    // An address another row of the owner keeps (a write applied twice) keeps its memberships too.
    const keeps = new Set(rows.filter((r) => !doomed.includes(r)).flatMap((r) => heldIps(r)));
    for (const p of doomed) {
      unlinkAndDelete(cache, this.nb.schema, txn as never, "Logical_Switch_Port", p._uuid);
      const node = p.options["requested-chassis"];
      const v4 = heldIps(p).filter((ip) => !ip.includes(":"));
      if (node && v4.length > 0) this.addressSetMutation(txn, node, "delete", v4);
      this.externalPodsMutation(
        txn,
        "delete",
        v4.filter((ip) => !keeps.has(ip)),
      );
      this.withdraw(
        txn,
        heldIps(p).filter((ip) => !keeps.has(ip)),
      );
    }
    // Outcome unknown on a throw: nothing is freed, and the retry finds the port or finds it gone.
    await txn.commit();
    const kept = rows.filter((r) => !doomed.includes(r));
    const keptOn = kept[0]?.external_ids[SUBNET_KEY] as string | undefined;
    this.holdExactly(
      owner,
      keptOn,
      kept.flatMap((r) => heldIps(r)),
    );
    return (doomed[0]?.external_ids[SUBNET_KEY] as string | undefined) ?? "";
  }
}

function parseMacSafe(text: string): string | undefined {
  try {
    return parseMac(text);
  } catch {
    return undefined;
  }
}
