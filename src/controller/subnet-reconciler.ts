// Subnets: judges every Subnet against the cluster (overlaps, external switches, datapaths), writes its switch
// and router port (or, for a provider network, its localnet port) and the cluster's inside address set, loads its address allocator, keeps its finalizer
// while ports use it, and reports all of that in its status.

import { SUBNET_PATH, type Subnet, type SubnetStatus } from "../api/subnet.ts";
import type { SubnetDefinition } from "../ipam/subnet-spec.ts";
import { isNotFound } from "../k8s/api-client.ts";
import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import { chassisMacMissingMessage, nodesMissingChassisMac } from "../ovn/chassis-mac-guard.ts";
import {
  externalRouterPortId,
  externalRouterPortName,
  externalRouterPortRows,
  externalSwitchPortId,
  localnetStatelessRows,
  supportsStatelessAcl,
} from "../ovn/external-router-port.ts";
import { isOvnUuid, lookupExternalSwitch } from "../ovn/external-switch.ts";
import { type DesiredRow, findOwned, plan } from "../ovn/nb-diff.ts";
import {
  addressKey,
  CONTROLLER,
  ID_KEY,
  idOf,
  isOurs,
  KIND_KEY,
  OWNER_KEY,
  POD_KEY,
  SUBNET_KEY,
} from "../ovn/ownership.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import {
  CLUSTER_IP_LB_GROUP,
  CLUSTER_LB_GROUP,
  insideSetRow,
  OUR_LB_GROUPS,
  subnetRows,
  subnetScope,
  subnetSwitchName,
} from "../ovn/topology.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import { setSize } from "../ovsdb/live-set.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";
import { setHas } from "../ovsdb/set-index.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { type ControllerContext, type ControllerOptions, SUBNETS } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import type { NodeLite, PodLite } from "./informers.ts";
import type { ExternalSwitchRef, Observation, PodPortAllocator } from "./pod-port-allocator.ts";
import { type ClusterFacts, judgeSubnets, statusFor, type Verdict } from "./subnet-status.ts";

type Txn = ReturnType<OvsdbClient<NbTables>["transaction"]>;

/** The reason (Ready and ClusterPath) of a Subnet whose router port the chassis MAC guard keeps off its switch. */
export const CHASSIS_MAC_MISSING = "ChassisMacMissing";

/**
 * The chassis MAC guard on a foreign switch with localnet ports: "clear" (the port may be there), "unknown" (SB not
 * read yet: the port stays as it is, none is created), or the nodes missing a chassis MAC, by physical network.
 */
type MacGuard =
  | { readonly state: "clear" }
  | { readonly state: "unknown"; readonly message: string }
  | { readonly state: "blocked"; readonly message: string };

/** Keeps a Subnet whose switch still carries ports; the controller removes it once they are gone. */
export const SUBNET_FINALIZER = "network.zstack.io/subnet-protection";

/**
 * A Subnet whose status alone changed (the echo of our own status write, mostly) is reconciled again after
 * this long, as a usage change is: while pods come in, every write's echo would otherwise start the next write
 * at once, one status PATCH per apiserver round trip. Its metadata or spec changing is reconciled at once.
 */
const STATUS_ECHO_DELAY_MS = 1000;

/** Whether only a Subnet's status (and resourceVersion) differs between the two. */
function onlyStatusChanged(o: Subnet, n: Subnet): boolean {
  const a = o.metadata;
  const b = n.metadata;
  return (
    a.generation === b.generation &&
    a.uid === b.uid &&
    a.deletionTimestamp === b.deletionTimestamp &&
    JSON.stringify(a.finalizers) === JSON.stringify(b.finalizers) &&
    JSON.stringify(a.labels) === JSON.stringify(b.labels) &&
    JSON.stringify(a.annotations) === JSON.stringify(b.annotations)
  );
}

export class SubnetReconciler implements Reconciler {
  readonly name = SUBNETS;
  readonly workers = 2;
  private readonly o: ControllerOptions;
  private readonly subnets: Informer<Subnet>;
  private readonly nodes: Informer<NodeLite>;
  private readonly pods: Informer<PodLite>;
  private readonly podPorts: PodPortAllocator;
  /** Subnets already warned that ZStack's NB cannot take the localnet group's ACLs (once each). */
  private readonly warnedNoStatelessAcl = new Set<string>();
  private readonly warnedDefaultAclDrop = new Set<string>();
  /**
   * The addresses of router ports the chassis MAC guard removed, by Subnet: the port takes them again when it comes
   * back (if still free), so the routes its pods were wired with keep their next hop.
   */
  private readonly guardedRouterIps = new Map<string, string[]>();

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    this.subnets = ctx.informers.subnets;
    this.nodes = ctx.informers.nodes;
    this.pods = ctx.informers.pods;
    this.podPorts = ctx.podPorts;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    const nb = this.o.nb;
    const enqueueAllSubnets = () => ctx.requeueAllSubnets();
    return [
      this.subnets.addHandlers(
        {
          onAdd: enqueueAllSubnets,
          // A spec change can change every Subnet's verdict (overlaps, datapaths); a status change, such as
          // our own status write, concerns only that Subnet, and is coalesced with the next ones.
          onUpdate: (o, n) => {
            if (JSON.stringify(o.spec) !== JSON.stringify(n.spec)) enqueueAllSubnets();
            else if (onlyStatusChanged(o, n)) ctx.requeueSubnet(n.metadata.name, STATUS_ECHO_DELAY_MS);
            else ctx.requeueSubnet(n.metadata.name);
          },
          onDelete: (s) => {
            ctx.requeueSubnet(s.metadata.name);
            enqueueAllSubnets();
          },
        },
        { replay: true },
      ),
      this.nodes.addHandlers(
        {
          onAdd: enqueueAllSubnets,
          // Node addresses take part in the subnets' overlap checks.
          onUpdate: (o, n) => {
            if (JSON.stringify(o.status.addresses) !== JSON.stringify(n.status.addresses))
              enqueueAllSubnets();
          },
          onDelete: enqueueAllSubnets,
        },
        { replay: true },
      ),
      // A foreign logical switch created, removed, renamed or changed (ZStack's, in External mode) changes the
      // verdict of the Subnets that name it (by name or UUID): they are all judged again, there are few.
      nb.cache.subscribe("Logical_Switch", (events) => {
        let foreign = false;
        for (const e of events) {
          if (e.kind !== "update") {
            if (!isOurs((e.kind === "add" ? e.row : e.old) as never)) foreign = true;
            continue;
          }
          if (!isOurs(e.row as never)) foreign = true;
          // Ports added to or removed from a subnet's switch (by us or by others) change its status; a port
          // gone may let a pod waiting for room on the switch in.
          const ids = e.row.external_ids as Readonly<Record<string, string>>;
          const sn = ids[SUBNET_KEY];
          // setSize: counting the old row's ports would otherwise rebuild its superseded value (O(n) per port).
          const delta = setSize(e.row, "ports") - setSize(e.old, "ports");
          if (sn && ids[KIND_KEY] === "subnet-switch" && delta !== 0) {
            if (delta < 0) ctx.usageChanged(sn);
            else ctx.requeueSubnet(sn, 1000);
          }
        }
        if (foreign) this.externalChanged();
        if (events.some((e) => e.kind !== "update")) this.datapathsChanged();
      }),
      // What a foreign switch's router ports and DHCP options say is what its Subnet is checked against.
      nb.cache.subscribe("Logical_Router_Port", (events) => {
        if (events.some((e) => !isOurs((e.kind === "delete" ? e.old : e.row) as never)))
          this.externalChanged();
      }),
      nb.cache.subscribe("DHCP_Options", () => this.externalChanged()),
      // ZStack turning default_acl_drop on or off decides whether our localnet groups may exist (localnetRows).
      nb.cache.subscribe("NB_Global", (events) => {
        const drop = (r: unknown) =>
          (r as { options?: Readonly<Record<string, string>> } | undefined)?.options?.default_acl_drop;
        if (events.some((e) => e.kind !== "update" || drop(e.row) !== drop(e.old))) this.externalChanged();
      }),
      nb.cache.subscribe("Logical_Router", (events) => {
        if (events.some((e) => e.kind !== "update")) this.datapathsChanged();
      }),
      ...this.watchChassis(),
    ];
  }

  /**
   * A chassis registered, gone, or its mappings changed in SB (and SB read again after a reconnect): the Subnets on
   * foreign switches are judged again by the chassis MAC guard.
   */
  private watchChassis(): Disposer[] {
    const sb = this.o.sb;
    if (!sb) return [];
    const again = () => this.externalChanged();
    const onState = (state: string) => {
      if (state === "ready") again();
    };
    sb.on("state", onState);
    return [sb.cache.subscribe("Chassis", again), () => sb.off("state", onState)];
  }

  /**
   * Whether our router port may be on the foreign switch: a switch without localnet ports, or without SB to read,
   * has no guard; else every chassis of ours mapping a localnet port's network must have a chassis MAC for it.
   */
  private macGuard(switchUuid: string): MacGuard {
    const { sb, nb } = this.o;
    if (!sb) return { state: "clear" };
    const ls = nb.cache.table("Logical_Switch").get(switchUuid);
    const ports = nb.cache.table("Logical_Switch_Port");
    const networks = new Set<string>();
    for (const u of (ls?.ports ?? []) as readonly string[]) {
      const p = ports.get(u);
      const network = p?.type === "localnet" ? p.options.network_name : undefined;
      if (network) networks.add(network);
    }
    if (networks.size === 0) return { state: "clear" };
    if (!sb.connected)
      return {
        state: "unknown",
        message: `waiting to read ZStack's SB (ovn.sbdbAddress): the cluster router's port goes on ${ls?.name ?? switchUuid} once every node of ours mapping its physical network is known to have a chassis MAC for it`,
      };
    const nodeNames = new Set(this.nodes.list().map((n) => n.metadata.name));
    const missing = nodesMissingChassisMac(sb.cache.table("Chassis").values(), nodeNames, networks);
    if (missing.size === 0) return { state: "clear" };
    return { state: "blocked", message: chassisMacMissingMessage(ls?.name ?? switchUuid, missing) };
  }

  /** Subnets deleted while we were not running still have rows in NB: reconcile them too. */
  *startupKeys(): Iterable<string> {
    for (const ls of this.o.nb.cache.table("Logical_Switch").values()) {
      const sn = ls.external_ids[SUBNET_KEY];
      if (ls.external_ids[KIND_KEY] === "subnet-switch" && sn && !this.subnets.get(sn)) yield sn;
    }
    // A Subnet on ZStack's switch has no switch of ours: its router port there stands for it.
    for (const lrp of this.o.nb.cache.table("Logical_Router_Port").values()) {
      const sn = lrp.external_ids[SUBNET_KEY];
      if (sn && idOf(lrp) === externalRouterPortId(sn) && !this.subnets.get(sn)) yield sn;
    }
  }

  resyncKeys(): Iterable<string> {
    return this.subnets.keys();
  }

  private facts(): ClusterFacts {
    const nodeIPs = new Map<string, string[]>();
    for (const n of this.nodes.list())
      nodeIPs.set(
        n.metadata.name,
        (n.status.addresses ?? []).map((a) => a.address),
      );
    const ls = this.o.nb.cache.table("Logical_Switch");
    return {
      clusterCIDRs: this.ctx.net.clusterCIDRs,
      serviceCIDRs: this.o.serviceCIDRs,
      joinCIDR: this.o.joinCIDR,
      nodeIPs,
      switchExists: (name) => ls.findOne((r) => r.name === name) !== undefined,
      externalSwitch: (ref) => lookupExternalSwitch(this.o.nb.cache, ref),
      tunnel: this.o.tunnel,
      datapaths: ls.size + this.o.nb.cache.table("Logical_Router").size,
      subnetSwitchExists: (subnet) =>
        findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${subnet}`) !== undefined,
    };
  }

  /** Judges every Subnet against the cluster (overlaps, external switches, datapaths). */
  judge(): void {
    this.ctx.verdicts = judgeSubnets(
      this.subnets.list().map((s) => ({
        name: s.metadata.name,
        creationTimestamp: String((s.metadata as { creationTimestamp?: string }).creationTimestamp ?? ""),
        spec: s.spec as unknown as Record<string, unknown>,
        ...this.boundSwitchOf(s),
      })),
      this.facts(),
    );
  }

  /**
   * The switch a Subnet on ZStack's switch is bound to: the one its allocator is loaded with, else the one its
   * status records (after a restart).
   */
  private boundSwitchOf(s: Subnet): { boundSwitch?: string } {
    if (!s.spec.externalLogicalSwitch) return {};
    const recorded = s.status?.logicalSwitchUUID;
    const bound =
      this.podPorts.externalSwitchOf(s.metadata.name)?.uuid ??
      (typeof recorded === "string" && isOvnUuid(recorded) ? recorded : undefined);
    return bound ? { boundSwitch: bound } : {};
  }

  /**
   * The CIDRs of the Subnets accepted now whose switches are ours and on the cluster router (not provider
   * networks); a Subnet being deleted counts until its last port is gone.
   */
  acceptedCidrs(): string[] {
    const cidrs: string[] = [];
    for (const s of this.subnets.list()) {
      const name = s.metadata.name;
      if (
        s.metadata.deletionTimestamp &&
        this.subnetHolders(name, Boolean(s.spec.externalLogicalSwitch)).length === 0
      )
        continue;
      const def = this.ctx.verdicts.get(name)?.definition;
      // A provider network subnet is not on the cluster router: its addresses are outside, reached through a node.
      if (def && !def.provider && !s.spec.externalLogicalSwitch)
        cidrs.push(...s.spec.cidr.split(",").map((c) => c.trim()));
    }
    return cidrs;
  }

  private insideSet() {
    return insideSetRow(this.ctx.net, this.acceptedCidrs());
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const { nb } = this.o;
    const found = this.subnets.get(name);
    // A Subnet being deleted keeps its switch while ports use it (its finalizer holds the object); once they
    // are gone, it is treated as absent: its rows go, then the finalizer.
    const holders = found?.metadata.deletionTimestamp
      ? this.subnetHolders(name, Boolean(found.spec.externalLogicalSwitch))
      : [];
    const subnet = found?.metadata.deletionTimestamp && holders.length === 0 ? undefined : found;
    this.judge();
    const v = subnet ? this.ctx.verdicts.get(name) : undefined;
    const scope = subnetScope(name);
    const externalSwitch = subnet?.spec.externalLogicalSwitch;
    // The controller's core step made the Service load-balancer group; every switch we own refers to it.
    const lbGroup = nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP)?._uuid;
    if (subnet && v?.definition && !externalSwitch && !lbGroup)
      throw new Error(`the load-balancer group ${CLUSTER_LB_GROUP} is not in NB yet`);
    // ZStack's switches refer to the group of cluster-IP load balancers only (never a tenant's externalIPs).
    const ipLbGroup = nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_IP_LB_GROUP)?._uuid;
    // Our router port on ZStack's switch, once written, stays as it is (its address never moves); it is written
    // the first time by ensureExternalRouterPort below, once the Subnet's allocator is loaded. A switch with a
    // localnet port (flat/VLAN) gets one too: the nodes' chassis MACs (node agent, ovn-chassis-mac-mappings) keep
    // its MAC off the physical network.
    const ext = v?.externalSwitch;
    const onExternal = Boolean(
      subnet && v?.definition && externalSwitch && ext && this.o.ovnMode === "external",
    );
    // On a flat/VLAN switch, a node of ours without a chassis MAC for its network would put the router port's MAC
    // on ZStack's wire: the port is not there while one is (removed with its guards, group and load-balancer
    // reference, as a Subnet deletion removes them).
    const guard: MacGuard = onExternal && ext ? this.macGuard(ext.uuid) : { state: "clear" };
    const blocked = guard.state === "blocked";
    if (blocked) this.rememberRouterIps(name);
    const routerPort = onExternal && ext && !blocked ? this.existingExternalRouterPort(name, ext.uuid) : [];
    const desired =
      subnet && v?.definition && !externalSwitch
        ? subnetRows(
            {
              name,
              cidrs: subnet.spec.cidr.split(",").map((c) => c.trim()),
              gateways: subnet.spec.gateway.split(",").map((g) => g.trim()),
              ...(v.definition.provider
                ? { provider: { name: v.definition.provider, vlanID: v.definition.vlanID } }
                : {}),
            },
            lbGroup,
          )
        : routerPort;
    // A failed subnet keeps its switch (its pods keep working) unless the Subnet object is gone. The inside
    // set follows the accepted Subnets, in the same transaction as the switch it concerns.
    const txn = nb.transaction();
    // Removing the switch: only if its ports are still the ones counted above. A pod port that landed since (its
    // insert raced this deletion) makes the transaction fail, and the retry counts it as a holder. The wait goes
    // first: it must see the switch before this transaction deletes it.
    const ls = subnet ? undefined : findOwned(nb.cache as never, "Logical_Switch", `subnet/${name}`);
    if (ls)
      txn.wait("Logical_Switch", [["_uuid", "==", ls._uuid]], ["ports"], "==", [
        { ports: ls.ports as readonly string[] as never },
      ]);
    const s =
      subnet === undefined || v?.definition
        ? plan(nb.cache as never, nb.schema, txn as never, [...desired, this.insideSet()], scope)
        : plan(nb.cache as never, nb.schema, txn as never, [this.insideSet()]);
    // ZStack's switch refers to our cluster-IP load-balancer group while a router port of ours is on it, and no
    // longer once none is (the last Subnet on it gone): one mutate of our own
    // reference each way, never a rewrite. A reference to the full group (an earlier version's) goes in the same
    // transaction as the cluster-IP group's comes.
    let lbLinked = false;
    if (routerPort.length > 0 && ext) {
      if (ipLbGroup) lbLinked = this.linkLbGroup(txn, ext.uuid, ipLbGroup, "insert");
      if (lbGroup) lbLinked = this.linkLbGroup(txn, ext.uuid, lbGroup, "delete") || lbLinked;
    }
    if (!subnet || blocked) lbLinked = this.unlinkLbGroupsOf(txn, name, found, ext?.uuid) || lbLinked;
    if (!s.empty || lbLinked) await txn.commit();
    if (blocked && !s.empty)
      this.o.log.warn(
        { subnet: name, switch: ext?.uuid, removed: s.deleted },
        "the cluster router's port is off the external switch: a node maps its network without a chassis MAC",
      );
    if (!subnet) {
      this.guardedRouterIps.delete(name);
      this.ctx.loadedSpecs.delete(name);
      this.podPorts.unloadSubnet(name);
      this.o.metrics?.deleteSubnet(name);
      if (found) await this.setFinalizer(found, false);
      // Pods that waited on this Subnet now go wherever their namespace leads (another Subnet, or none).
      this.ctx.wakeWaitingForSubnet(name);
      return undefined;
    }
    // Gone before it got its finalizer: nothing more to serve; its delete event brings the key back.
    if (!subnet.metadata.deletionTimestamp && !(await this.setFinalizer(subnet, true))) return undefined;
    // External mode: a Subnet on ZStack's switch loads its allocator from the switch's rows (every address they
    // show is taken), and loads it again when its spec or the switch it resolves to changes. One that stopped
    // matching its switch stays loaded for its pods, and the pod reconciler gives it no new one.
    let routerPortProblem: string | undefined;
    if (v?.definition && externalSwitch && ext && this.o.ovnMode === "external") {
      const specKey = JSON.stringify([subnet.spec, ext.uuid, ext.name]);
      if (this.ctx.loadedSpecs.get(name) !== specKey) this.loadAllocator(name, specKey, v.definition, ext);
      if (routerPort.length === 0 && guard.state === "clear")
        routerPortProblem = await this.ensureExternalRouterPort(name, ext.uuid, ipLbGroup);
      // Pods parked while the switch did not match (the allocator stayed loaded) go on once it matches again.
      this.ctx.wakeWaitingForSubnet(name);
    }
    if (v?.definition && !externalSwitch) {
      const specKey = JSON.stringify(subnet.spec);
      if (this.ctx.loadedSpecs.get(name) !== specKey) {
        await nb.echo(); // the switch we just wrote is in the cache before the allocator is rebuilt from it
        this.loadAllocator(name, specKey, v.definition);
      }
    }
    const ref = {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      name,
      uid: String(subnet.metadata.uid ?? ""),
    };
    if (subnet.metadata.deletionTimestamp) {
      this.o.events?.warning(
        ref,
        "SubnetInUse",
        `deletion waits for ${holders.length} port${holders.length === 1 ? "" : "s"} on the subnet: ${holders.slice(0, 10).join(", ")}${holders.length > 10 ? ", ..." : ""}`,
      );
    } else if (v && !v.ready) {
      this.o.events?.warning(ref, v.reason, v.message);
    }
    // Its pods wait for the router port (their routes go through it); tried again as addresses free up.
    if (routerPortProblem) this.o.events?.warning(ref, "RouterPortNotCreated", routerPortProblem);
    if (guard.state === "blocked") this.o.events?.warning(ref, CHASSIS_MAC_MISSING, guard.message);
    await this.writeSubnetStatus(
      subnet,
      v,
      holders,
      onExternal ? this.clusterPathOf(name, guard) : undefined,
    );
    // SB not read yet: its "ready" brings the Subnet back too; the delay covers a connection that stays down.
    if (guard.state === "unknown") return { requeueAfterMs: 10_000 };
    return routerPortProblem ? { requeueAfterMs: 30_000 } : undefined;
  }

  /**
   * The ClusterPath condition of a Subnet on a foreign switch while the chassis MAC guard keeps our router port off
   * it (or cannot tell yet and there is none); undefined (no condition) otherwise.
   */
  private clusterPathOf(
    name: string,
    guard: MacGuard,
  ): { up: boolean; reason: string; message: string } | undefined {
    if (guard.state === "blocked") return { up: false, reason: CHASSIS_MAC_MISSING, message: guard.message };
    if (
      guard.state === "unknown" &&
      !findOwned(this.o.nb.cache as never, "Logical_Router_Port", externalRouterPortId(name))
    )
      return { up: false, reason: "ChassisUnknown", message: guard.message };
    return undefined;
  }

  /** Keeps the addresses of the Subnet's router port before the guard removes it (see guardedRouterIps). */
  private rememberRouterIps(name: string): void {
    const lrp = findOwned(this.o.nb.cache as never, "Logical_Router_Port", externalRouterPortId(name));
    const networks = (lrp?.networks as readonly string[] | undefined) ?? [];
    if (networks.length > 0)
      this.guardedRouterIps.set(
        name,
        networks.map((n) => n.slice(0, n.indexOf("/"))),
      );
  }

  /** Our router port rows on the switch as NB holds them (its networks kept), or [] when there is none yet. */
  private existingExternalRouterPort(name: string, switchUuid: string): DesiredRow[] {
    const lrp = findOwned(this.o.nb.cache as never, "Logical_Router_Port", externalRouterPortId(name));
    const networks = (lrp?.networks as readonly string[] | undefined) ?? [];
    return networks.length > 0
      ? [
          ...externalRouterPortRows({ subnet: name, switchUuid, networks }),
          ...this.localnetRows(name, switchUuid, networks),
        ]
      : [];
  }

  /**
   * On a switch with localnet ports (flat/VLAN), the group of ours holding them and its ACLs, which keep what
   * crosses the localnet ports out of their conntrack zone and the physical network off our router port
   * (localnetStatelessRows). Each row is inserted with its chosen UUID unless NB holds a row under it already (not
   * ours: ours is found by id), so a retried insert after a lost reply is refused instead of duplicated.
   */
  private localnetRows(name: string, switchUuid: string, networks: readonly string[]): DesiredRow[] {
    const cache = this.o.nb.cache;
    const ls = cache.table("Logical_Switch").get(switchUuid);
    const ports = cache.table("Logical_Switch_Port");
    const localnet = ((ls?.ports ?? []) as readonly string[]).filter(
      (u) => ports.get(u)?.type === "localnet",
    );
    if (localnet.length > 0 && !supportsStatelessAcl(this.o.nb.schema)) {
      if (!this.warnedNoStatelessAcl.has(name)) {
        this.warnedNoStatelessAcl.add(name);
        this.o.log.warn(
          { subnet: name, switch: switchUuid },
          "ZStack's NB has no ACL action allow-stateless: the localnet group is not written, so answers routed back through another node's localnet port are dropped by its conntrack zone (docs/external-mode.md)",
        );
      }
      return [];
    }
    // ZStack's NB may make every switch with ACLs drop by default (NB_Global options:default_acl_drop): a group of
    // ours holding the switch's localnet port would make ZStack's switch one "with ACLs" and cut its VMs off. Then
    // no group (an existing one goes with this reconcile): a pod's answer routed back through another node's
    // localnet port is dropped by that port's conntrack zone, as without allow-stateless.
    if (localnet.length > 0 && defaultAclDrop(cache)) {
      if (!this.warnedDefaultAclDrop.has(name)) {
        this.warnedDefaultAclDrop.add(name);
        this.o.log.warn(
          { subnet: name, switch: switchUuid },
          "ZStack's NB sets NB_Global options:default_acl_drop=true: the localnet group is not written (it would make ZStack's switch drop its VMs' traffic by default), so answers routed back through another node's localnet port are dropped by its conntrack zone (docs/external-mode.md)",
        );
      }
      return [];
    }
    this.warnedDefaultAclDrop.delete(name);
    // ZStack's own load balancers on the switch (rows, or groups not ours): its localnet port was in conntrack for
    // them before we came, so only the cluster's own traffic skips it.
    const groups = cache.table("Load_Balancer_Group");
    const foreignLbs =
      ((ls?.load_balancer ?? []) as readonly string[]).length > 0 ||
      ((ls?.load_balancer_group ?? []) as readonly string[]).some(
        (u) => !OUR_LB_GROUPS.includes(String(groups.get(u)?.name)),
      );
    const net = this.ctx.net;
    const opts = foreignLbs ? { onlyInside6: [...net.clusterCIDRs, ...net.serviceCIDRs, net.joinCIDR] } : {};
    return localnetStatelessRows(name, localnet, networks, opts).map((r) => {
      if (r.uuid === undefined || !cache.table(r.table as never).get(r.uuid)) return r;
      const { uuid: _taken, ...rest } = r;
      return rest;
    });
  }

  /**
   * Adds the mutate that makes ZStack's switch refer to our load-balancer group (insert) or no longer (delete),
   * when it is needed; true when one was added.
   */
  private linkLbGroup(txn: Txn, switchUuid: string, lbGroup: string, op: "insert" | "delete"): boolean {
    const ls = this.o.nb.cache.table("Logical_Switch").get(switchUuid);
    if (!ls || setHas(ls.load_balancer_group as readonly string[], lbGroup) === (op === "insert"))
      return false;
    txn.mutate("Logical_Switch", byUuid(switchUuid), [["load_balancer_group", op, [lbGroup]]]);
    return true;
  }

  /**
   * The Subnet is gone: ZStack's switch it is bound to stops referring to our
   * load-balancer groups, unless a router port of another Subnet of ours stays on it. The switch is the one the
   * Subnet is bound to (its status, or the verdict), not found through our port on it: ZStack may have rewritten
   * its `ports` without ours (the port row then went with its last reference) before the Subnet was deleted.
   */
  private unlinkLbGroupsOf(
    txn: Txn,
    name: string,
    found: Subnet | undefined,
    bound: string | undefined,
  ): boolean {
    const cache = this.o.nb.cache;
    const ownPort = findOwned(cache as never, "Logical_Switch_Port", externalSwitchPortId(name));
    const switches = cache.table("Logical_Switch");
    const uuid = bound ?? found?.status?.logicalSwitchUUID;
    const ls =
      (uuid !== undefined ? switches.get(uuid) : undefined) ??
      (ownPort ? switches.findOne((r) => !isOurs(r) && setHas(r.ports, ownPort._uuid)) : undefined);
    if (!ls || isOurs(ls)) return false;
    const ports = cache.table("Logical_Switch_Port");
    const mine = externalSwitchPortId(name);
    const othersStay = ls.ports.some((u) => {
      const p = ports.get(u);
      const id = p ? idOf(p) : undefined;
      return id !== undefined && id !== mine && /^subnet\/.+\/ext-etor$/.test(id);
    });
    if (othersStay) return false;
    let changed = false;
    for (const group of OUR_LB_GROUPS) {
      const g = cache.table("Load_Balancer_Group").lookupOne("name", group)?._uuid;
      if (g) changed = this.linkLbGroup(txn, ls._uuid, g, "delete") || changed;
    }
    return changed;
  }

  /**
   * Writes our router port on ZStack's switch the first time: an address from the Subnet's allocator (one no row
   * shows, re-checked against the live holdings), the router port, its peer joined to the switch by `mutate ports
   * insert`, and the switch's reference to our load-balancer group, in one transaction. Guarded: a retry after a
   * lost reply finds the rows there and fails instead of adding second ones, a pod port that took the address
   * meanwhile makes it fail, and so does the switch gone. The address is held in the allocator under the name the
   * switch's holdings give the port, so once NB shows the row its `networks` simply go on holding it. Returns why
   * it could not be written when no address is free (the Subnet's pods wait; tried again later).
   */
  private async ensureExternalRouterPort(
    name: string,
    switchUuid: string,
    lbGroup: string | undefined,
  ): Promise<string | undefined> {
    const { nb } = this.o;
    const cache = nb.cache as never;
    if (findOwned(cache, "Logical_Router_Port", externalRouterPortId(name))) return undefined;
    const ls = nb.cache.table("Logical_Switch").get(switchUuid);
    if (!ls) return undefined;
    const lrpName = externalRouterPortName(name);
    const got = this.podPorts.reserveRouterAddresses(name, this.guardedRouterIps.get(name));
    if ("problem" in got)
      return `no address for the cluster router's port ${lrpName} on ${ls.name} (${switchUuid}): ${got.problem}; the Subnet's pods wait for it`;
    const def = this.ctx.verdicts.get(name)?.definition;
    const networks = got.ips.map((ip) => {
      const fam = ip.includes(":") ? 6 : 4;
      const c = def?.cidrs.find((x) => x.family === fam);
      return `${ip}/${c?.prefix ?? (fam === 6 ? 128 : 32)}`;
    });
    let landed = false;
    try {
      const txn = nb.transaction();
      txn.guardAbsent("Logical_Router_Port", [
        ["external_ids", "includes", { [ID_KEY]: externalRouterPortId(name) }],
      ]);
      txn.guardAbsent("Logical_Switch_Port", [
        ["external_ids", "includes", { [ID_KEY]: externalSwitchPortId(name) }],
      ]);
      for (const ip of got.ips)
        txn.guardAbsent("Logical_Switch_Port", [["external_ids", "includes", { [addressKey(ip)]: name }]]);
      txn.wait("Logical_Switch", [["_uuid", "==", switchUuid]], ["name"], "==", [{ name: ls.name }]);
      plan(cache, nb.schema, txn as never, [
        ...externalRouterPortRows({ subnet: name, switchUuid, networks }),
        ...this.localnetRows(name, switchUuid, networks),
      ]);
      if (lbGroup) this.linkLbGroup(txn, switchUuid, lbGroup, "insert");
      await txn.commit();
      landed = true;
      this.guardedRouterIps.delete(name);
      await nb.echo();
      this.o.log.info(
        { subnet: name, networks },
        "the cluster router's port on the external switch is written",
      );
    } finally {
      // Not landed, or not known to: the hold goes unless the holdings show the port. Should it have landed after
      // all, a pod insert given the address is refused by NB on the port's address key, and the view catches up.
      if (!landed) this.podPorts.dropRouterAddresses(name, got.ips);
    }
    // Pods waiting for the router port (their routes go through it) go on.
    for (const p of this.pods.list())
      if (!p.metadata.annotations?.[POD_NETWORKS_ANNOTATION])
        this.ctx.requeuePod(`${p.metadata.namespace}/${p.metadata.name}`);
    this.ctx.wakeWaitingForSubnet(name);
    return undefined;
  }

  /**
   * (Re)loads the Subnet's address allocator from its switch's rows (ZStack's switch `ext`, or ours), then gives
   * the pods without an address, and those parked on this Subnet or on none, another go.
   */
  private loadAllocator(name: string, specKey: string, def: SubnetDefinition, ext?: ExternalSwitchRef): void {
    const problems = this.podPorts.loadSubnet(name, def, ext);
    for (const p of problems)
      this.o.log.warn(
        { subnet: name, problem: p.message },
        ext ? "address problem on the external switch" : "address problem on the subnet's switch",
      );
    this.ctx.loadedSpecs.set(name, specKey);
    for (const p of this.pods.list())
      if (!p.metadata.annotations?.[POD_NETWORKS_ANNOTATION])
        this.ctx.requeuePod(`${p.metadata.namespace}/${p.metadata.name}`);
    for (const waiting of [name, ""]) this.ctx.wakeWaitingForSubnet(waiting);
  }

  /**
   * What keeps a Subnet being deleted: the ports on its switch other than its own router port, pods by
   * namespace/name (a StatefulSet's kept port included), anyone else's by port name. Sorted.
   */
  private subnetHolders(name: string, external = false): string[] {
    const ports = this.o.nb.cache.table("Logical_Switch_Port");
    // On a foreign switch only our pod ports hold the Subnet; ZStack's ports are ZStack's.
    if (external)
      return ports
        .find(
          (p) => p.external_ids[KIND_KEY] === "pod-port" && p.external_ids[SUBNET_KEY] === name && isOurs(p),
        )
        .map((p) => `pod ${p.external_ids[POD_KEY] ?? p.name}`)
        .sort();
    const ls = findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${name}`);
    if (!ls) return [];
    const holders: string[] = [];
    for (const uuid of ls.ports as readonly string[]) {
      const p = ports.get(uuid);
      if (!p) continue;
      const ids = p.external_ids as Readonly<Record<string, string>>;
      if (ids[KIND_KEY] === "pod-port") holders.push(`pod ${ids[POD_KEY] ?? p.name}`);
      else if (ids[OWNER_KEY] !== CONTROLLER) holders.push(`port ${p.name}`);
    }
    return holders.sort();
  }

  /**
   * Adds or removes the Subnet's finalizer; false when the Subnet is gone. The patch carries the resourceVersion it read, so a concurrent
   * edit of the finalizers (someone else's) makes it fail with a conflict and retry, never overwrite.
   */
  private async setFinalizer(subnet: Subnet, present: boolean): Promise<boolean> {
    const list = subnet.metadata.finalizers ?? [];
    if (list.includes(SUBNET_FINALIZER) === present) return true;
    const finalizers = present ? [...list, SUBNET_FINALIZER] : list.filter((f) => f !== SUBNET_FINALIZER);
    try {
      await this.o.api.request(`${SUBNET_PATH}/${subnet.metadata.name}`, {
        method: "PATCH",
        body: { metadata: { finalizers, resourceVersion: subnet.metadata.resourceVersion } },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      return false;
    }
    return true;
  }

  private async writeSubnetStatus(
    subnet: Subnet,
    v: Verdict | undefined,
    holders: readonly string[],
    clusterPath?: { up: boolean; reason: string; message: string },
  ): Promise<void> {
    if (!v) return;
    const name = subnet.metadata.name;
    const alloc = this.podPorts.allocatorOf(name);
    const ext = subnet.spec.externalLogicalSwitch ? this.podPorts.externalSwitchOf(name) : undefined;
    const ls = ext
      ? this.o.nb.cache.table("Logical_Switch").get(ext.uuid)
      : findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${name}`);
    const capacity = alloc?.capacity();
    const conflicts = ext ? this.podPorts.conflictsOf(name) : [];
    // The binding, once made, is kept in the status: a restart judges the Subnet against it too.
    const boundUuid = v.externalSwitch?.uuid ?? this.boundSwitchOf(subnet).boundSwitch;
    const body = statusFor(
      v,
      {
        ...(capacity ? { capacity } : {}),
        ports: ((ls?.ports as readonly string[] | undefined) ?? []).length,
        logicalSwitch:
          v.externalSwitch?.name ?? (subnet.spec.externalLogicalSwitch || subnetSwitchName(name)),
        ...(boundUuid !== undefined ? { logicalSwitchUUID: boundUuid } : {}),
        ...(subnet.metadata.deletionTimestamp ? { deleting: { holders } } : {}),
        ...(ext ? { conflicts } : {}),
        ...(clusterPath
          ? {
              clusterPath: {
                ...clusterPath,
                previous: subnet.status?.conditions?.find((c) => c.type === "ClusterPath") as never,
              },
            }
          : {}),
      },
      { tunnel: this.o.tunnel },
      subnet.status?.conditions?.find((c) => c.type === "Ready") as never,
      undefined,
      subnet.status?.conditions?.find((c) => c.type === "AddressConflict") as never,
    );
    const generation = subnet.metadata.generation;
    if (generation !== undefined) {
      body.observedGeneration = generation;
      for (const c of body.conditions) c.observedGeneration = generation;
    }
    if (capacity) this.o.metrics?.setSubnetUsage(name, { used: body.usedIPs, available: body.availableIPs });
    const cur = subnet.status ?? {};
    const same =
      cur.phase === body.phase &&
      cur.observedGeneration === body.observedGeneration &&
      cur.availableIPs === body.availableIPs &&
      cur.usedIPs === body.usedIPs &&
      cur.portCapacity === body.portCapacity &&
      cur.logicalSwitch === body.logicalSwitch &&
      cur.logicalSwitchUUID === body.logicalSwitchUUID &&
      (cur.message ?? "") === body.message &&
      (cur.conditions ?? []).length === body.conditions.length &&
      body.conditions.every(
        (c, i) =>
          cur.conditions?.[i]?.type === c.type &&
          cur.conditions?.[i]?.status === c.status &&
          cur.conditions?.[i]?.reason === c.reason &&
          cur.conditions?.[i]?.message === c.message,
      );
    if (same) return;
    await this.o.api.request(`${SUBNET_PATH}/${name}/status`, {
      method: "PATCH",
      body: { status: body as unknown as SubnetStatus },
    });
  }

  /** A switch or router came or went: Subnets refused for want of a VXLAN datapath are judged again. */
  private datapathsChanged(): void {
    for (const [name, v] of this.ctx.verdicts)
      if (v.reason === "DatapathCapacityExceeded") this.ctx.requeueSubnet(name);
  }

  /** A foreign switch or the rows it is checked against changed: every Subnet on a foreign switch is judged again. */
  private externalChanged(): void {
    for (const s of this.subnets.list())
      if (s.spec.externalLogicalSwitch) this.ctx.requeueSubnet(s.metadata.name);
  }

  /** What the pod allocators learnt from NB: usage changed, or an address is now held twice. */
  observed({ changed, problems }: Observation): void {
    for (const p of problems) {
      this.o.log.warn({ subnet: p.subnet, problem: p.message }, "an address is held by two ports");
      const sub = this.subnets.get(p.subnet);
      this.o.events?.warning(
        {
          apiVersion: "network.zstack.io/v1",
          kind: "Subnet",
          name: p.subnet,
          uid: String(sub?.metadata.uid ?? ""),
        },
        "AddressConflict",
        `${p.message}; remove the other port or give it another address`,
      );
    }
    for (const sn of changed) this.ctx.usageChanged(sn);
  }
}

/** Whether NB_Global's `options:default_acl_drop` is "true" (OVN: switches and routers with ACLs drop by default). */
export function defaultAclDrop(cache: {
  table(name: "NB_Global"): { values(): Iterable<{ readonly options?: Readonly<Record<string, string>> }> };
}): boolean {
  for (const row of cache.table("NB_Global").values())
    if (row.options?.default_acl_drop === "true") return true;
  return false;
}
