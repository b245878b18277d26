// zstack-ovnkube-controller's reconcilers: Subnets, Nodes and Pods. Informer events only enqueue keys;
// each reconcile reads the informer stores and the NB cache, computes what NB should hold and applies the
// difference in one transaction. Runs only while this process leads (see cli/zstack-ovnkube-controller.ts).

import {
  SUBNET_PATH,
  type Subnet,
  type SubnetProtocol,
  type SubnetSpec,
  type SubnetStatus,
} from "../api/subnet.ts";
import { formatIp, ipFromValue } from "../ipam/address.ts";
import { formatCidr, parseCidr } from "../ipam/cidr.ts";
import type { ApiClient } from "../k8s/api-client.ts";
import { isAlreadyExists, isNotFound } from "../k8s/api-client.ts";
import type { EventRecorder } from "../k8s/events.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { WorkQueue } from "../k8s/workqueue.ts";
import type { Logger } from "../observability/log.ts";
import type { Metrics } from "../observability/metrics.ts";
import { findOwned, plan, type Scope } from "../ovn/nb-diff.ts";
import {
  CONTROLLER,
  KIND_KEY,
  NODE_KEY,
  OWNER_KEY,
  POD_KEY,
  POD_UID_KEY,
  STATEFULSET_KEY,
  SUBNET_KEY,
} from "../ovn/ownership.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import {
  type ClusterNetworks,
  coreRows,
  insideSetRow,
  subnetRows,
  subnetScope,
  subnetSwitchName,
} from "../ovn/topology.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";
import { ManagementPorts, MGMT_PORT_ANNOTATION } from "./management-ports.ts";
import { ANNOTATION_SUBNET, type Observation, PodPortAllocator } from "./pod-port-allocator.ts";
import { type ClusterFacts, judgeSubnets, statusFor, type Verdict } from "./subnet-status.ts";

/** Keeps a Subnet whose switch still carries ports; the controller removes it once they are gone. */
export const SUBNET_FINALIZER = "network.zstack.io/subnet-protection";

export interface ControllerOptions {
  api: ApiClient;
  nb: OvsdbClient<NbTables>;
  clusterCIDR: string;
  serviceCIDRs: readonly string[];
  joinCIDR: string;
  tunnel: "vxlan" | "geneve";
  workers?: number;
  /** Every object is enqueued again this often, catching anything a watch missed. Default 5 min. */
  resyncMs?: number;
  log: Logger;
  metrics?: Metrics;
  events?: EventRecorder;
}

interface PodLite extends KubeObject {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    /** Name of the owning StatefulSet. */
    statefulSet?: string;
  };
  spec: { nodeName?: string; hostNetwork?: boolean };
  status: { phase?: string };
}

interface StatefulSetLite extends KubeObject {
  metadata: { name: string; namespace: string; deletionTimestamp?: string };
  spec: { replicas?: number; ordinals?: { start?: number } };
}

interface NodeLite extends KubeObject {
  metadata: { name: string; annotations?: Record<string, string> };
  status: { addresses?: { type: string; address: string }[] };
}

/** Keeps only what the reconcilers read: pods are the bulk of the informer memory. */
function slimPod(o: KubeObject): PodLite {
  const p = o as unknown as {
    metadata: PodLite["metadata"] & Record<string, unknown>;
    spec?: PodLite["spec"];
    status?: PodLite["status"];
  };
  const m = p.metadata;
  const sts = (m.ownerReferences as { kind: string; name: string; controller?: boolean }[] | undefined)?.find(
    (o) => o.kind === "StatefulSet" && o.controller !== false,
  );
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      ...(sts ? { statefulSet: sts.name } : {}),
      ...(m.annotations ? { annotations: m.annotations } : {}),
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
    },
    spec: { nodeName: p.spec?.nodeName, hostNetwork: p.spec?.hostNetwork },
    status: { phase: p.status?.phase },
  };
}

/** The first usable address of each CIDR in a comma-separated list: the gateways of the default Subnet. */
function firstAddresses(cidrs: string): string {
  return splitList(cidrs)
    .map((c) => {
      const cidr = parseCidr(c);
      return formatIp(ipFromValue(cidr.family, cidr.network + 1n));
    })
    .join(",");
}

/** How long a run waits for NB, and for each informer's first list, before it fails. */
const START_WAIT_MS = 60_000;

/**
 * The default Subnet for a cluster CIDR list: its protocol follows the families listed, because the CRD
 * defaults protocol to IPv4 and refuses an IPv6 or dual-stack cidr without it.
 */
export function defaultSubnetSpec(clusterCIDR: string): SubnetSpec {
  const cidrs = splitList(clusterCIDR).map((c) => parseCidr(c));
  const families = new Set(cidrs.map((c) => c.family));
  const protocol: SubnetProtocol = families.size > 1 ? "Dual" : families.has(6) ? "IPv6" : "IPv4";
  return {
    cidr: cidrs.map(formatCidr).join(","),
    gateway: firstAddresses(clusterCIDR),
    protocol,
    default: true,
  };
}

function splitList(text: string): string[] {
  return text
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
}

export class OvnController {
  readonly subnets: Informer<Subnet>;
  readonly nodes: Informer<NodeLite>;
  readonly pods: Informer<PodLite>;
  readonly statefulSets: Informer<StatefulSetLite>;
  private readonly subnetQ: WorkQueue;
  private readonly nodeQ: WorkQueue;
  private readonly podQ: WorkQueue;
  /**
   * The second stage of a pod: its k8s.ovn.org/pod-networks annotation, derived from its port in NB. A
   * separate queue, so one pod's NB commit overlaps another's PATCH instead of waiting for it.
   */
  private readonly annotationQ: WorkQueue;
  private readonly podPorts: PodPortAllocator;
  private mgmtPorts: ManagementPorts | undefined;
  private readonly net: ClusterNetworks;
  private readonly loadedSpecs = new Map<string, string>();
  private verdicts = new Map<string, Verdict>();
  private resyncTimer: NodeJS.Timeout | undefined;
  /**
   * Pods that found their subnet exhausted or its switch full, by subnet: an address released or a port
   * removed there wakes them.
   */
  private readonly waitingForAddress = new Map<string, Set<string>>();
  /**
   * Pods whose subnet is not serving yet, by subnet name ("" when no Subnet applies at all): the subnet
   * loading wakes them, instead of each pod polling.
   */
  private readonly waitingForSubnet = new Map<string, Set<string>>();

  private readonly o: ControllerOptions;
  /**
   * Ends with this controller's run. NB and the apiserver are reached through views fenced on it: once the
   * run ends (leadership lost), no reconcile still in flight can write to either, and the run's NB cache
   * subscriptions are gone.
   */
  private readonly term = new AbortController();
  private synced = false;

  constructor(options: ControllerOptions) {
    const o: ControllerOptions = {
      ...options,
      nb: options.nb.fenced(this.term.signal),
      api: options.api.fenced(this.term.signal),
    };
    this.o = o;
    this.net = {
      clusterCIDRs: splitList(o.clusterCIDR),
      serviceCIDRs: o.serviceCIDRs,
      joinCIDR: o.joinCIDR,
      joinGateway: firstAddresses(o.joinCIDR),
    };
    const log = o.log;
    this.subnets = new Informer<Subnet>({
      client: o.api,
      path: SUBNET_PATH,
      logger: log.child({ informer: "subnets" }),
    });
    this.nodes = new Informer<NodeLite>({
      client: o.api,
      path: "/api/v1/nodes",
      logger: log.child({ informer: "nodes" }),
    });
    this.pods = new Informer<PodLite>({
      client: o.api,
      path: "/api/v1/pods",
      transform: slimPod,
      logger: log.child({ informer: "pods" }),
    });
    this.statefulSets = new Informer<StatefulSetLite>({
      client: o.api,
      path: "/apis/apps/v1/statefulsets",
      transform: (x) => {
        const s = x as StatefulSetLite;
        return {
          metadata: {
            name: s.metadata.name,
            namespace: s.metadata.namespace,
            ...(s.metadata.deletionTimestamp ? { deletionTimestamp: s.metadata.deletionTimestamp } : {}),
          },
          spec: {
            replicas: s.spec?.replicas,
            ...(s.spec?.ordinals?.start !== undefined ? { ordinals: { start: s.spec.ordinals.start } } : {}),
          },
        };
      },
      logger: log.child({ informer: "statefulsets" }),
    });
    const queue = (
      name: string,
      reconcile: (key: string) => Promise<{ requeueAfterMs: number } | undefined>,
    ) =>
      new WorkQueue({
        name,
        reconcile,
        workers: name === "pods" || name === "pod-annotations" ? (o.workers ?? 8) : 2,
        logger: log.child({ queue: name }),
        ...(o.metrics ? { hooks: o.metrics.queueHooks(name) } : {}),
      });
    this.subnetQ = queue("subnets", (k) => this.reconcileSubnet(k));
    this.nodeQ = queue("nodes", (k) => this.reconcileNode(k));
    this.podQ = queue("pods", (k) => this.reconcilePod(k));
    this.annotationQ = queue("pod-annotations", (k) => this.reconcileAnnotation(k));
    this.podPorts = new PodPortAllocator(o.nb, { tunnel: o.tunnel, onObservation: (x) => this.observed(x) });
  }

  /**
   * Runs until `signal` aborts: waits for NB and the informers, syncs everything once (then calls onSynced),
   * then follows events.
   * Rejects when starting fails, resolves when the run was ended (`signal` or stop()). Either way everything
   * it started is stopped before it settles, and the controller cannot run again: a new run (a new term of
   * leadership) needs a new OvnController.
   */
  async run(signal: AbortSignal, onSynced?: () => void): Promise<void> {
    const endTerm = () => this.term.abort(signal.reason);
    if (signal.aborted) endTerm();
    signal.addEventListener("abort", endTerm, { once: true });
    const term = this.term.signal;
    try {
      if (!term.aborted) await this.start();
      // The term may have ended while the last steps of starting ran.
      if (!term.aborted) {
        this.synced = true;
        this.o.log.info(
          { subnets: this.subnets.size, nodes: this.nodes.size, pods: this.pods.size },
          "controller running",
        );
        onSynced?.();
        await new Promise<void>((resolve) => term.addEventListener("abort", () => resolve(), { once: true }));
      }
    } catch (err) {
      // Starting cut short by the end of the term (a refused write, a stopped informer) is no failure.
      if (!term.aborted) throw err;
    } finally {
      signal.removeEventListener("abort", endTerm);
      await this.stop();
    }
  }

  /** True from the end of the initial sync until the run ends. */
  isSynced(): boolean {
    return this.synced;
  }

  /** Reconciles that have run for more than maxMs ("queue key" each): wedged workers, for liveness. */
  stalledReconciles(maxMs: number, now = Date.now()): string[] {
    const queues = {
      subnets: this.subnetQ,
      nodes: this.nodeQ,
      pods: this.podQ,
      "pod-annotations": this.annotationQ,
    };
    return Object.entries(queues).flatMap(([name, q]) =>
      q.stalled(maxMs, now).map((s) => `${name} ${s.key} (${Math.round(s.runningMs / 1000)} s)`),
    );
  }

  /** Settles like `p`, or rejects as soon as the run ends, so that stopping never waits for a slow start. */
  private unlessStopped<T>(p: Promise<T>): Promise<T> {
    const term = this.term.signal;
    if (term.aborted) return Promise.reject(term.reason);
    return new Promise<T>((resolve, reject) => {
      const onEnd = () => reject(term.reason);
      term.addEventListener("abort", onEnd, { once: true });
      p.then(resolve, reject).finally(() => term.removeEventListener("abort", onEnd));
    });
  }

  private async start(): Promise<void> {
    const { nb } = this.o;
    // A leader that cannot reach NB gives leadership up after a while: another replica may reach it.
    await this.unlessStopped(nb.whenReady(START_WAIT_MS));
    for (const inf of [this.subnets, this.nodes, this.pods, this.statefulSets]) inf.start();
    await this.unlessStopped(
      Promise.all([
        this.subnets.waitForSync(START_WAIT_MS),
        this.nodes.waitForSync(START_WAIT_MS),
        this.pods.waitForSync(START_WAIT_MS),
        this.statefulSets.waitForSync(START_WAIT_MS),
      ]),
    );
    await this.ensureCore();
    await this.ensureDefaultSubnet();
    this.mgmtPorts = new ManagementPorts(nb, this.net);
    const enqueueAllSubnets = () => {
      for (const k of this.subnets.keys()) this.subnetQ.add(k);
    };
    this.subnets.addHandlers(
      {
        onAdd: enqueueAllSubnets,
        // A spec change can change every Subnet's verdict (overlaps, datapaths); a status change, such as
        // our own status write, concerns only that Subnet.
        onUpdate: (o, n) => {
          if (JSON.stringify(o.spec) !== JSON.stringify(n.spec)) enqueueAllSubnets();
          else this.subnetQ.add(n.metadata.name);
        },
        onDelete: (s) => {
          this.subnetQ.add(s.metadata.name);
          enqueueAllSubnets();
        },
      },
      { replay: true },
    );
    this.nodes.addHandlers(
      {
        onAdd: (n) => {
          this.nodeQ.add(n.metadata.name);
          enqueueAllSubnets();
        },
        onUpdate: (o, n) => {
          this.nodeQ.add(n.metadata.name);
          // Node addresses take part in the subnets' overlap checks.
          if (JSON.stringify(o.status.addresses) !== JSON.stringify(n.status.addresses)) enqueueAllSubnets();
        },
        onDelete: (n) => {
          this.nodeQ.add(n.metadata.name);
          enqueueAllSubnets();
        },
      },
      { replay: true },
    );
    const podKey = (p: PodLite) => `${p.metadata.namespace}/${p.metadata.name}`;
    this.pods.addHandlers(
      {
        onAdd: (p) => {
          this.podQ.add(podKey(p));
          if (p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]) this.annotationQ.add(podKey(p));
        },
        onUpdate: (a, b) => {
          if (
            a.spec.nodeName !== b.spec.nodeName ||
            a.status.phase !== b.status.phase ||
            a.metadata.uid !== b.metadata.uid
          ) {
            this.podQ.add(podKey(b));
          }
          // Someone else changed or removed the annotation: put ours back.
          if (
            a.metadata.annotations?.[POD_NETWORKS_ANNOTATION] !==
            b.metadata.annotations?.[POD_NETWORKS_ANNOTATION]
          ) {
            this.annotationQ.add(podKey(b));
          }
        },
        onDelete: (p) => this.podQ.add(podKey(p)),
      },
      { replay: true },
    );
    // A StatefulSet scaled down or deleted releases the ports it was keeping for its missing pods.
    const stsChanged = (sts: StatefulSetLite) => {
      for (const p of nb.cache.table("Logical_Switch_Port").values()) {
        const ids = p.external_ids;
        if (
          ids[STATEFULSET_KEY] === sts.metadata.name &&
          ids[POD_KEY]?.startsWith(`${sts.metadata.namespace}/`)
        ) {
          this.podQ.add(ids[POD_KEY]);
        }
      }
    };
    this.statefulSets.addHandlers({
      // Only fewer replicas or a deletion can free kept ports; status updates (replicas becoming ready) cannot.
      onUpdate: (o, n) => {
        // A new ordinals.start moves the kept range: ordinals below it are no longer wanted.
        const shrank =
          (n.spec.replicas ?? 1) < (o.spec.replicas ?? 1) ||
          (n.spec.ordinals?.start ?? 0) !== (o.spec.ordinals?.start ?? 0);
        if (shrank || (n.metadata.deletionTimestamp && !o.metadata.deletionTimestamp)) stsChanged(n);
      },
      onDelete: stsChanged,
    });
    // A pod port written or changed in NB (by us, or restored from the database) is what the annotation says.
    nb.cache.subscribe("Logical_Switch_Port", (events) => {
      for (const e of events) {
        if (e.kind === "delete") continue;
        const ids = e.row.external_ids as Readonly<Record<string, string>>;
        if (ids[KIND_KEY] === "pod-port" && ids[POD_KEY]) this.annotationQ.add(ids[POD_KEY]);
      }
      // A pod whose node's address set lacks it (the set came later, or went with a re-registered Node).
      for (const node of this.mgmtPorts?.nodesMissingPods(events) ?? []) this.nodeQ.add(node);
    });
    // The pod allocators follow NB from construction on (see observed()); a new leadership term gets new ones.
    this.term.signal.addEventListener("abort", () => this.podPorts.close(), { once: true });
    // After a full reload of the NB cache, the join allocator is rebuilt from the cache like the pod ones.
    const onNbReady = (info: { fullSnapshot: boolean }) => {
      if (info.fullSnapshot) this.mgmtPorts?.rebuild();
    };
    nb.on("ready", onNbReady);
    this.term.signal.addEventListener("abort", () => nb.off("ready", onNbReady), { once: true });
    // A foreign logical switch created or removed (ZStack's, in External mode) changes the verdict of the
    // Subnets that name it.
    nb.cache.subscribe("Logical_Switch", (events) => {
      const names = new Set<string>();
      for (const e of events) {
        if (e.kind !== "update") {
          names.add((e.kind === "add" ? e.row : e.old).name as string);
          continue;
        }
        // Ports added to or removed from a subnet's switch (by us or by others) change its status; a port
        // gone may let a pod waiting for room on the switch in.
        const ids = e.row.external_ids as Readonly<Record<string, string>>;
        const sn = ids[SUBNET_KEY];
        const delta = (e.row.ports as readonly string[]).length - (e.old.ports as readonly string[]).length;
        if (sn && ids[KIND_KEY] === "subnet-switch" && delta !== 0) {
          if (delta < 0) this.usageChanged(sn);
          else this.subnetQ.addAfter(sn, 1000);
        }
      }
      if (names.size === 0) return;
      for (const s of this.subnets.list()) {
        const ext = s.spec.externalLogicalSwitch;
        if (ext && names.has(ext)) this.subnetQ.add(s.metadata.name);
      }
      this.datapathsChanged();
    });
    // A node's pod address set created, or shrunk (by a pod leaving, or by a write racing another): its
    // reconcile compares it with the node's pods again.
    nb.cache.subscribe("Address_Set", (events) => {
      for (const e of events) {
        if (e.kind === "delete") continue;
        const ids = e.row.external_ids as Readonly<Record<string, string>>;
        const node = ids[NODE_KEY];
        if (ids[KIND_KEY] !== "node-pods" || !node) continue;
        const shrank =
          e.kind === "update" &&
          (e.row.addresses as readonly string[]).length < (e.old.addresses as readonly string[]).length;
        if (e.kind === "add" || shrank) this.nodeQ.add(node);
      }
    });
    nb.cache.subscribe("Logical_Router", (events) => {
      if (events.some((e) => e.kind !== "update")) this.datapathsChanged();
    });
    // Subnets and nodes deleted while we were not running still have rows in NB: reconcile them too.
    for (const ls of nb.cache.table("Logical_Switch").values()) {
      const sn = ls.external_ids[SUBNET_KEY];
      if (ls.external_ids[KIND_KEY] === "subnet-switch" && sn && !this.subnets.get(sn)) this.subnetQ.add(sn);
    }
    for (const p of nb.cache.table("Logical_Switch_Port").values()) {
      const node = p.external_ids[NODE_KEY];
      if (p.external_ids[KIND_KEY] === "mgmt-port" && node && !this.nodes.get(node)) this.nodeQ.add(node);
    }
    // Ports of pods deleted while we were not running: their keys are reconciled too, and removed.
    for (const p of nb.cache.table("Logical_Switch_Port").values()) {
      if (p.external_ids[KIND_KEY] === "pod-port" && p.external_ids[POD_KEY])
        this.podQ.add(p.external_ids[POD_KEY]);
    }
    this.subnetQ.start();
    this.nodeQ.start();
    this.podQ.start();
    for (const k of this.pods.keys()) this.annotationQ.add(k);
    this.annotationQ.start();
    this.resyncTimer = setInterval(() => {
      for (const k of this.pods.keys()) {
        this.podQ.add(k);
        this.annotationQ.add(k);
      }
      for (const k of this.nodes.keys()) this.nodeQ.add(k);
      enqueueAllSubnets();
    }, this.o.resyncMs ?? 300_000);
    this.resyncTimer.unref();
  }

  /** Ends the run: no NB write passes from now on, and what the run started is stopped. */
  async stop(): Promise<void> {
    this.term.abort(new Error("controller stopped"));
    this.synced = false;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await Promise.all([
      this.subnetQ.shutdown({ timeoutMs: 5000 }),
      this.nodeQ.shutdown({ timeoutMs: 5000 }),
      this.podQ.shutdown({ timeoutMs: 5000 }),
      this.annotationQ.shutdown({ timeoutMs: 5000 }),
    ]);
    await Promise.all([this.subnets.stop(), this.nodes.stop(), this.pods.stop(), this.statefulSets.stop()]);
  }

  private async ensureCore(): Promise<void> {
    const { nb } = this.o;
    const txn = nb.transaction();
    const core: Scope = {
      tables: ["Logical_Router", "Logical_Switch", "Logical_Router_Port", "Logical_Switch_Port"],
      owns: (id) => id === "cluster-router" || id === "join" || id.startsWith("join-"),
    };
    // The inside set already lists the Subnets that will be accepted, so their reconciles write nothing more.
    this.judge();
    const s = plan(
      nb.cache as never,
      nb.schema,
      txn as never,
      coreRows(this.net, this.acceptedCidrs()),
      core,
    );
    if (!s.empty) await txn.commit();
  }

  private async ensureDefaultSubnet(): Promise<void> {
    if (this.subnets.list().some((s) => s.spec.default)) return;
    const body: Subnet = {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "default" },
      spec: defaultSubnetSpec(this.o.clusterCIDR),
    };
    this.term.signal.throwIfAborted();
    try {
      await this.o.api.request(SUBNET_PATH, { method: "POST", body });
      this.o.log.info({ cidr: this.o.clusterCIDR }, "created the default Subnet from the cluster CIDR");
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
    }
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
      serviceCIDRs: this.o.serviceCIDRs,
      joinCIDR: this.o.joinCIDR,
      nodeIPs,
      switchExists: (name) => ls.findOne((r) => r.name === name) !== undefined,
      tunnel: this.o.tunnel,
      datapaths: ls.size + this.o.nb.cache.table("Logical_Router").size,
      subnetSwitchExists: (subnet) =>
        findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${subnet}`) !== undefined,
    };
  }

  /** Judges every Subnet against the cluster (overlaps, external switches, datapaths). */
  private judge(): void {
    this.verdicts = judgeSubnets(
      this.subnets.list().map((s) => ({
        name: s.metadata.name,
        creationTimestamp: String((s.metadata as { creationTimestamp?: string }).creationTimestamp ?? ""),
        spec: s.spec as unknown as Record<string, unknown>,
      })),
      this.facts(),
    );
  }

  /**
   * The CIDRs of the Subnets accepted now whose switches are ours, on the cluster router; a Subnet being
   * deleted counts until its last port is gone.
   */
  private acceptedCidrs(): string[] {
    const cidrs: string[] = [];
    for (const s of this.subnets.list()) {
      const name = s.metadata.name;
      if (s.metadata.deletionTimestamp && this.subnetHolders(name).length === 0) continue;
      if (this.verdicts.get(name)?.definition && !s.spec.externalLogicalSwitch)
        cidrs.push(...s.spec.cidr.split(",").map((c) => c.trim()));
    }
    return cidrs;
  }

  private insideSet() {
    return insideSetRow(this.net, this.acceptedCidrs());
  }

  async reconcileSubnet(name: string): Promise<{ requeueAfterMs: number } | undefined> {
    const { nb } = this.o;
    const found = this.subnets.get(name);
    // A Subnet being deleted keeps its switch while ports use it (its finalizer holds the object); once they
    // are gone, it is treated as absent: its rows go, then the finalizer.
    const holders = found?.metadata.deletionTimestamp ? this.subnetHolders(name) : [];
    const subnet = found?.metadata.deletionTimestamp && holders.length === 0 ? undefined : found;
    this.judge();
    const v = subnet ? this.verdicts.get(name) : undefined;
    const scope = subnetScope(name);
    const externalSwitch = subnet?.spec.externalLogicalSwitch;
    const desired =
      subnet && v?.definition && !externalSwitch
        ? subnetRows({
            name,
            cidrs: subnet.spec.cidr.split(",").map((c) => c.trim()),
            gateways: subnet.spec.gateway.split(",").map((g) => g.trim()),
          })
        : [];
    // A failed subnet keeps its switch (its pods keep working) unless the Subnet object is gone. The inside
    // set follows the accepted Subnets, in the same transaction as the switch it concerns.
    const txn = nb.transaction();
    const s =
      subnet === undefined || v?.definition
        ? plan(nb.cache as never, nb.schema, txn as never, [...desired, this.insideSet()], scope)
        : plan(nb.cache as never, nb.schema, txn as never, [this.insideSet()]);
    if (!s.empty) await txn.commit();
    if (!subnet) {
      this.loadedSpecs.delete(name);
      this.podPorts.unloadSubnet(name);
      this.o.metrics?.deleteSubnet(name);
      if (found) await this.setFinalizer(found, false);
      // Pods that waited on this Subnet now go wherever their namespace leads (another Subnet, or none).
      for (const k of this.waitingForSubnet.get(name) ?? []) this.podQ.add(k);
      this.waitingForSubnet.delete(name);
      return undefined;
    }
    if (!subnet.metadata.deletionTimestamp) await this.setFinalizer(subnet, true);
    if (v?.definition && !externalSwitch) {
      const specKey = JSON.stringify(subnet.spec);
      if (this.loadedSpecs.get(name) !== specKey) {
        await nb.echo(); // the switch we just wrote is in the cache before the allocator is rebuilt from it
        const problems = this.podPorts.loadSubnet(name, v.definition);
        for (const p of problems)
          this.o.log.warn({ subnet: name, problem: p.message }, "address problem on the subnet's switch");
        this.loadedSpecs.set(name, specKey);
        for (const p of this.pods.list())
          if (!p.metadata.annotations?.[POD_NETWORKS_ANNOTATION])
            this.podQ.add(`${p.metadata.namespace}/${p.metadata.name}`);
        for (const waiting of [name, ""]) {
          for (const k of this.waitingForSubnet.get(waiting) ?? []) this.podQ.add(k);
          this.waitingForSubnet.delete(waiting);
        }
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
    await this.writeSubnetStatus(subnet, v, holders);
    return undefined;
  }

  /**
   * What keeps a Subnet being deleted: the ports on its switch other than its own router port, pods by
   * namespace/name (a StatefulSet's kept port included), anyone else's by port name. Sorted.
   */
  private subnetHolders(name: string): string[] {
    const ls = findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${name}`);
    if (!ls) return [];
    const ports = this.o.nb.cache.table("Logical_Switch_Port");
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
   * Adds or removes the Subnet's finalizer. The patch carries the resourceVersion it read, so a concurrent
   * edit of the finalizers (someone else's) makes it fail with a conflict and retry, never overwrite.
   */
  private async setFinalizer(subnet: Subnet, present: boolean): Promise<void> {
    const list = subnet.metadata.finalizers ?? [];
    if (list.includes(SUBNET_FINALIZER) === present) return;
    const finalizers = present ? [...list, SUBNET_FINALIZER] : list.filter((f) => f !== SUBNET_FINALIZER);
    try {
      await this.o.api.request(`${SUBNET_PATH}/${subnet.metadata.name}`, {
        method: "PATCH",
        body: { metadata: { finalizers, resourceVersion: subnet.metadata.resourceVersion } },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  private async writeSubnetStatus(
    subnet: Subnet,
    v: Verdict | undefined,
    holders: readonly string[],
  ): Promise<void> {
    if (!v) return;
    const name = subnet.metadata.name;
    const alloc = this.podPorts.allocatorOf(name);
    const ls = findOwned(this.o.nb.cache as never, "Logical_Switch", `subnet/${name}`);
    const capacity = alloc?.capacity();
    const body = statusFor(
      v,
      {
        ...(capacity ? { capacity } : {}),
        ports: ((ls?.ports as readonly string[] | undefined) ?? []).length,
        logicalSwitch: subnet.spec.externalLogicalSwitch || subnetSwitchName(name),
        ...(subnet.metadata.deletionTimestamp ? { deleting: { holders } } : {}),
      },
      { tunnel: this.o.tunnel },
      subnet.status?.conditions?.find((c) => c.type === "Ready") as never,
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
      (cur.message ?? "") === body.message &&
      cur.conditions?.[0]?.status === body.conditions[0]?.status &&
      cur.conditions?.[0]?.reason === body.conditions[0]?.reason;
    if (same) return;
    await this.o.api.request(`${SUBNET_PATH}/${name}/status`, {
      method: "PATCH",
      body: { status: body as unknown as SubnetStatus },
    });
  }

  async reconcileNode(name: string): Promise<undefined> {
    const nn = this.mgmtPorts as ManagementPorts;
    const node = this.nodes.get(name);
    if (!node) {
      await nn.remove(name);
      return undefined;
    }
    const mgmt = await nn.ensure(name);
    const value = JSON.stringify(mgmt);
    if (node.metadata.annotations?.[MGMT_PORT_ANNOTATION] !== value) {
      await this.o.api.request(`/api/v1/nodes/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [MGMT_PORT_ANNOTATION]: value } } },
      });
    }
    return undefined;
  }

  /**
   * A StatefulSet pod keeps its address when recreated under the same name (as with Kube-OVN): its port stays
   * while the StatefulSet exists and still wants that ordinal.
   */
  private statefulSetKeeps(ns: string, name: string): boolean {
    const port = this.podPorts.portOf(ns, name);
    const stsName = port?.external_ids[STATEFULSET_KEY];
    if (!stsName) return false;
    const sts = this.statefulSets.get(`${ns}/${stsName}`);
    const m = /-(\d+)$/.exec(name);
    // A StatefulSet being deleted keeps nothing, even while its finalizers hold the object.
    if (!sts || sts.metadata.deletionTimestamp || !m || !name.startsWith(`${stsName}-`)) return false;
    // The StatefulSet wants ordinals start .. start+replicas-1 (spec.ordinals.start, default 0).
    const ordinal = Number(m[1]);
    const start = sts.spec.ordinals?.start ?? 0;
    return ordinal >= start && ordinal < start + (sts.spec.replicas ?? 1);
  }

  /** A switch or router came or went: Subnets refused for want of a VXLAN datapath are judged again. */
  private datapathsChanged(): void {
    for (const [name, v] of this.verdicts)
      if (v.reason === "DatapathCapacityExceeded") this.subnetQ.add(name);
  }

  /**
   * Parks a pod until its subnet ("" for any) loads. A Subnet that exists but was refused, or one that does
   * not exist, gets a Warning Event on the pod; one still being set up does not.
   */
  private waitForSubnet(
    key: string,
    subnet: string,
    refusal?: { reason: string; message: string },
  ): undefined {
    const set = this.waitingForSubnet.get(subnet) ?? new Set<string>();
    set.add(key);
    this.waitingForSubnet.set(subnet, set);
    const pod = this.pods.get(key);
    const verdict = subnet ? this.verdicts.get(subnet) : undefined;
    const sub = subnet ? this.subnets.get(subnet) : undefined;
    const problem =
      refusal?.message ??
      (subnet === ""
        ? "no Subnet applies to this pod: none lists its namespace and none is the default"
        : !sub
          ? `Subnet ${subnet} does not exist`
          : sub.metadata.deletionTimestamp
            ? `Subnet ${subnet} is being deleted and takes no new pods`
            : verdict && !verdict.definition
              ? `Subnet ${subnet} is ${verdict.phase}: ${verdict.message}`
              : undefined);
    if (pod && problem) {
      this.o.events?.warning(
        {
          apiVersion: "v1",
          kind: "Pod",
          namespace: pod.metadata.namespace,
          name: pod.metadata.name,
          uid: pod.metadata.uid,
        },
        refusal?.reason ?? "SubnetNotReady",
        refusal ? problem : `${problem}; the pod gets its address once the Subnet is ready`,
      );
    }
    return undefined;
  }

  /** What the pod allocators learnt from NB: usage changed, or an address is now held twice. */
  private observed({ changed, problems }: Observation): void {
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
    for (const sn of changed) this.usageChanged(sn);
  }

  /** Address usage changed: refresh the subnet's status soon, once for a burst of pods. */
  private usageChanged(subnet: string | false): void {
    if (!subnet) return;
    this.subnetQ.addAfter(subnet, 1000);
    // Pods waiting for an address on this subnet try again at once.
    const waiting = this.waitingForAddress.get(subnet);
    if (waiting) {
      this.waitingForAddress.delete(subnet);
      for (const k of waiting) this.podQ.add(k);
    }
  }

  /**
   * The Subnet the pod's addresses come from: the first that lists its namespace, else the default. A pod may
   * name another (annotation network.zstack.io/subnet) only among those that list its namespace, so a pod
   * cannot put itself on a Subnet meant for other namespaces.
   */
  private subnetFor(pod: PodLite): { subnet?: string; refused?: string } {
    const ns = pod.metadata.namespace;
    const all = this.subnets.list();
    const listing = all.filter((s) => s.spec.namespaces?.includes(ns)).map((s) => s.metadata.name);
    const fallback = listing[0] ?? all.find((s) => s.spec.default)?.metadata.name;
    const wanted = pod.metadata.annotations?.[ANNOTATION_SUBNET];
    if (wanted === undefined || wanted === fallback) return fallback ? { subnet: fallback } : {};
    if (listing.includes(wanted)) return { subnet: wanted };
    return {
      refused:
        `${ANNOTATION_SUBNET} asks for Subnet ${JSON.stringify(wanted)}, which does not list namespace ${ns} in spec.namespaces` +
        (listing.length > 0 ? ` (Subnets that do: ${listing.join(", ")})` : "") +
        "; add the namespace to that Subnet, or remove the annotation",
    };
  }

  async reconcilePod(key: string): Promise<{ requeueAfterMs: number } | undefined> {
    const slash = key.indexOf("/");
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const pod = this.pods.get(key);
    if (!pod) {
      if (this.statefulSetKeeps(ns, name)) return undefined;
      this.usageChanged(await this.podPorts.remove(ns, name));
      return undefined;
    }
    if (pod.spec.hostNetwork) return undefined;
    if (pod.status.phase === "Succeeded" || pod.status.phase === "Failed") {
      // Finished pods (Jobs) give their address back at once; nothing blocks their deletion.
      this.usageChanged(await this.podPorts.remove(ns, name, pod.metadata.uid));
      return undefined;
    }
    // A pod with a port stays on the port's subnet while the port exists: it waits for that subnet, never moves.
    const held = this.podPorts.subnetOfPort(ns, name);
    const choice = held !== undefined ? { subnet: held } : this.subnetFor(pod);
    if (choice.refused) {
      const wanted = pod.metadata.annotations?.[ANNOTATION_SUBNET] ?? "";
      return this.waitForSubnet(key, wanted, { reason: "SubnetNotAllowed", message: choice.refused });
    }
    const subnet = choice.subnet;
    if (!subnet) return this.waitForSubnet(key, "");
    const sub = this.subnets.get(subnet);
    // A Subnet being deleted serves the pods it has, and no new one.
    if (sub?.metadata.deletionTimestamp && !this.podPorts.portOf(ns, name))
      return this.waitForSubnet(key, subnet);
    if (sub?.spec.externalLogicalSwitch) {
      // Pods on ZStack's switches need External mode, which this controller does not implement yet.
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        "ExternalModeNotSupported",
        `subnet ${subnet} uses externalLogicalSwitch ${sub.spec.externalLogicalSwitch}; attaching pods to an external switch needs External mode, which is not implemented yet`,
      );
      return { requeueAfterMs: 60_000 };
    }
    if (!this.loadedSpecs.has(subnet)) return this.waitForSubnet(key, subnet);
    const res = await this.podPorts.ensure(
      {
        namespace: ns,
        name,
        uid: pod.metadata.uid,
        ...(pod.metadata.statefulSet ? { statefulSet: pod.metadata.statefulSet } : {}),
        ...(pod.spec.nodeName ? { node: pod.spec.nodeName } : {}),
        ...(pod.metadata.annotations ? { annotations: pod.metadata.annotations } : {}),
      },
      subnet,
    );
    if (!res.ok) {
      if (res.reason === "AddressesExhausted" || res.reason === "PortCapacityExceeded") {
        const set = this.waitingForAddress.get(subnet) ?? new Set<string>();
        set.add(key);
        this.waitingForAddress.set(subnet, set);
      }
      this.o.log.warn({ pod: key, reason: res.reason, message: res.message }, "pod network not set up");
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        res.reason,
        res.message,
      );
      return { requeueAfterMs: res.reason === "SubnetNotReady" ? 1000 : 30_000 };
    }
    if (res.wrote) this.usageChanged(subnet);
    // The port change also reaches the annotation stage through the NB cache; this covers a port that was
    // already right while the annotation is not.
    if (pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION] !== res.annotation) this.annotationQ.add(key);
    return undefined;
  }

  /** Makes the pod's k8s.ovn.org/pod-networks annotation say what its port in NB holds. */
  async reconcileAnnotation(key: string): Promise<undefined> {
    const pod = this.pods.get(key);
    if (!pod || pod.spec.hostNetwork) return undefined;
    if (pod.status.phase === "Succeeded" || pod.status.phase === "Failed") return undefined;
    const slash = key.indexOf("/");
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    // No port yet, or the port of an earlier pod with this name: the pod stage has work to do first, and
    // its port landing in the cache brings this key back.
    const have = pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION];
    let want: string | null | undefined = this.podPorts.annotationFor(ns, name, pod.metadata.uid);
    if (want === undefined) {
      // An annotation with no port of this pod behind it was not written by us (or is left from an earlier
      // pod with this name): nothing may act on it, so it goes. With a port whose subnet is still loading, wait.
      const port = this.podPorts.portOf(ns, name);
      if (have === undefined || (port && port.external_ids[POD_UID_KEY] === pod.metadata.uid))
        return undefined;
      want = null;
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        "ForeignPodNetworks",
        `removed a ${POD_NETWORKS_ANNOTATION} annotation that zstack-ovnkube-controller did not write; only the controller assigns pod networks`,
      );
    }
    if (have === want) return undefined;
    try {
      await this.o.api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [POD_NETWORKS_ANNOTATION]: want } } },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    return undefined;
  }
}
