// What the controller's reconcilers share within one term: the fenced NB and apiserver views, the informers,
// the allocators, the Subnet verdicts, and the signals one reconciler sends another (a pod waiting for its
// Subnet is woken when it loads; address usage changing requeues the Subnet). Reconcilers talk through this,
// never through each other's fields.

import type { ApiClient } from "../k8s/api-client.ts";
import type { EventRecorder } from "../k8s/events.ts";
import type { Logger } from "../observability/log.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { WatchTrace } from "../observability/watch-trace.ts";
import type { ClusterNetworks } from "../ovn/topology.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";
import type { SbTables } from "../ovsdb/models/sb.generated.ts";
import type { ReconcilerManager } from "./framework.ts";
import type { ClusterInformers } from "./informers.ts";
import type { ManagementPorts } from "./management-ports.ts";
import type { PodPortAllocator } from "./pod-port-allocator.ts";
import type { PolicyIndex } from "./policy-index.ts";
import type { Verdict } from "./subnet-status.ts";

export interface ControllerOptions {
  api: ApiClient;
  nb: OvsdbClient<NbTables>;
  clusterCIDR: string;
  serviceCIDRs: readonly string[];
  joinCIDR: string;
  tunnel: "vxlan" | "geneve";
  /**
   * external: NB is ZStack's, and Subnets with spec.externalLogicalSwitch put their pods on ZStack's switches
   * (docs/external-mode.md). Default standalone, where such Subnets are judged but take no pods.
   */
  ovnMode?: "standalone" | "external";
  /**
   * External mode: ZStack's SB, monitoring at least Chassis (name, hostname, other_config, external_ids); read
   * only. With it, our router port goes on a flat/VLAN switch only while every chassis of ours mapping its network
   * has a chassis MAC for it (ovn/chassis-mac-guard.ts); without it, that guard is off.
   */
  sb?: OvsdbClient<SbTables>;
  workers?: number;
  /** Every object is enqueued again this often, catching anything a watch missed. Default 5 min. */
  resyncMs?: number;
  log: Logger;
  metrics?: Metrics;
  /** The controller records through events.fenced(term): a deposed term posts no Event. */
  events?: EventRecorder;
  /** Records when each watch event reaches the informers (the watchTraceFile setting); unset: off. */
  watchTrace?: WatchTrace;
}

/** The reconcilers' names: their queues in logs, metrics and health checks. */
export const SUBNETS = "subnets";
export const NODES = "nodes";
export const PODS = "pods";
/**
 * The second stage of a pod: its k8s.ovn.org/pod-networks annotation, derived from its port in NB. A
 * separate queue, so one pod's NB commit overlaps another's PATCH instead of waiting for it.
 */
export const POD_ANNOTATIONS = "pod-annotations";
export const SERVICES = "services";
export const NETWORK_POLICIES = "network-policies";
export const POLICY_PEERS = "policy-peers";
export const POLICY_ISOLATION = "policy-isolation";

export class ControllerContext {
  /** The parsed NetworkPolicies and their peer references (set by the controller before the reconcilers). */
  policies: PolicyIndex | undefined;
  /** Set by the startup steps, once the join switch exists. */
  mgmtPorts: ManagementPorts | undefined;
  /** Every Subnet's verdict as last judged (by the Subnet reconciler). */
  verdicts = new Map<string, Verdict>();
  /** The spec each Subnet's allocator was loaded with: a pod gets addresses only from a loaded Subnet. */
  readonly loadedSpecs = new Map<string, string>();
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

  constructor(
    /** Options whose `nb` and `api` are fenced on the term. */
    readonly o: ControllerOptions,
    readonly net: ClusterNetworks,
    readonly informers: ClusterInformers,
    readonly podPorts: PodPortAllocator,
    private readonly queues: Pick<ReconcilerManager, "add" | "addAfter">,
    /** Ends with the term. */
    readonly term: AbortSignal,
  ) {}

  requeueSubnet(name: string, afterMs?: number): void {
    if (afterMs === undefined) this.queues.add(SUBNETS, name);
    else this.queues.addAfter(SUBNETS, name, afterMs);
  }

  requeueAllSubnets(): void {
    for (const k of this.informers.subnets.keys()) this.queues.add(SUBNETS, k);
  }

  requeueNode(name: string): void {
    this.queues.add(NODES, name);
  }

  requeueService(key: string): void {
    this.queues.add(SERVICES, key);
  }

  requeuePolicy(key: string): void {
    this.queues.add(NETWORK_POLICIES, key);
  }

  requeuePolicyPeer(key: string): void {
    this.queues.add(POLICY_PEERS, key);
  }

  /** `ingress`, `egress` or `node/<name>`. */
  requeueIsolation(key: string): void {
    this.queues.add(POLICY_ISOLATION, key);
  }

  requeuePod(key: string): void {
    this.queues.add(PODS, key);
  }

  requeuePodAnnotation(key: string): void {
    this.queues.add(POD_ANNOTATIONS, key);
  }

  /** Address usage changed: refresh the subnet's status soon, once for a burst of pods. */
  usageChanged(subnet: string | false): void {
    if (!subnet) return;
    this.requeueSubnet(subnet, 1000);
    // Pods waiting for an address on this subnet try again at once.
    const waiting = this.waitingForAddress.get(subnet);
    if (waiting) {
      this.waitingForAddress.delete(subnet);
      for (const k of waiting) this.requeuePod(k);
    }
  }

  /** Parks a pod until an address or a port frees up on the subnet (see usageChanged). */
  waitForAddress(subnet: string, key: string): void {
    const set = this.waitingForAddress.get(subnet) ?? new Set<string>();
    set.add(key);
    this.waitingForAddress.set(subnet, set);
  }

  /** Parks a pod until the subnet ("" for any) loads or goes. */
  waitForSubnet(subnet: string, key: string): void {
    const set = this.waitingForSubnet.get(subnet) ?? new Set<string>();
    set.add(key);
    this.waitingForSubnet.set(subnet, set);
  }

  /** The subnet loaded or went: the pods parked on it reconcile again. */
  wakeWaitingForSubnet(subnet: string): void {
    for (const k of this.waitingForSubnet.get(subnet) ?? []) this.requeuePod(k);
    this.waitingForSubnet.delete(subnet);
  }
}
