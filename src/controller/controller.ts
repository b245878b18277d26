// zstack-ovnkube-controller for one term of leadership: builds the informers, the shared context and one
// reconciler per kind (Subnets, Nodes, Pods, pod annotations, Services, NetworkPolicies and their peers and
// isolation) on the reconciler framework, and runs the
// startup steps every reconciler relies on (the cluster router and join switch, the default Subnet). Runs only
// while this process leads (see supervisor.ts and cli/zstack-ovnkube-controller.ts).

import { SUBNET_PATH, type Subnet, type SubnetProtocol, type SubnetSpec } from "../api/subnet.ts";
import { formatIp, ipFromValue } from "../ipam/address.ts";
import { formatCidr, parseCidr } from "../ipam/cidr.ts";
import { isAlreadyExists } from "../k8s/api-client.ts";
import { plan, type Scope } from "../ovn/nb-diff.ts";
import { type ClusterNetworks, coreRows, externalPodsRows, OUR_LB_GROUPS } from "../ovn/topology.ts";
import { ControllerContext, type ControllerOptions } from "./context.ts";
import { ReconcilerManager } from "./framework.ts";
import { type ClusterInformers, clusterInformers } from "./informers.ts";
import { ManagementPorts } from "./management-ports.ts";
import { NetworkPolicyReconciler } from "./network-policy-reconciler.ts";
import { NodeReconciler } from "./node-reconciler.ts";
import { PodAnnotationReconciler } from "./pod-annotation-reconciler.ts";
import { PodPortAllocator } from "./pod-port-allocator.ts";
import { PodReconciler } from "./pod-reconciler.ts";
import { PolicyIndex, policyAddressHolders } from "./policy-index.ts";
import { PolicyIsolationReconciler } from "./policy-isolation-reconciler.ts";
import { PolicyPeerReconciler } from "./policy-peer-reconciler.ts";
import { ServiceReconciler } from "./service-reconciler.ts";
import { SubnetReconciler } from "./subnet-reconciler.ts";

export type { ControllerOptions } from "./context.ts";
export { SUBNET_FINALIZER } from "./subnet-reconciler.ts";

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
  readonly informers: ClusterInformers;
  private readonly manager: ReconcilerManager;
  private readonly subnetReconciler: SubnetReconciler;
  private readonly ctx: ControllerContext;
  private readonly net: ClusterNetworks;
  private readonly o: ControllerOptions;

  constructor(options: ControllerOptions) {
    this.manager = new ReconcilerManager({
      log: options.log,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      ...(options.resyncMs !== undefined ? { resyncMs: options.resyncMs } : {}),
      startWaitMs: START_WAIT_MS,
      // A leader that cannot reach NB gives leadership up after a while: another replica may reach it.
      waitFor: (ms) => this.o.nb.whenReady(ms),
      prepare: () => this.prepare(),
    });
    // NB and the apiserver (Events included) are reached through views fenced on the term: once the run ends
    // (leadership lost), no reconcile still in flight can write to either, and the run's NB cache
    // subscriptions are gone.
    const term = this.manager.term;
    const o: ControllerOptions = {
      ...options,
      nb: options.nb.fenced(term),
      api: options.api.fenced(term),
      ...(options.events ? { events: options.events.fenced(term) } : {}),
    };
    this.o = o;
    this.net = {
      clusterCIDRs: splitList(o.clusterCIDR),
      serviceCIDRs: o.serviceCIDRs,
      joinCIDR: o.joinCIDR,
      joinGateway: firstAddresses(o.joinCIDR),
    };
    const inf = clusterInformers(o.api, o.log, o.watchTrace);
    this.informers = inf;
    this.manager.informer("subnets", inf.subnets);
    this.manager.informer("nodes", inf.nodes);
    this.manager.informer("pods", inf.pods);
    this.manager.informer("statefulsets", inf.statefulSets);
    this.manager.informer("services", inf.services);
    this.manager.informer("endpointslices", inf.endpointSlices);
    this.manager.informer("networkpolicies", inf.networkPolicies);
    this.manager.informer("namespaces", inf.namespaces);
    // The pod allocators follow NB from construction on; what they learn goes to the Subnets' status.
    const podPorts = new PodPortAllocator(o.nb, {
      tunnel: o.tunnel,
      log: o.log,
      onObservation: (x) => this.subnetReconciler.observed(x),
      // A freed address leaves the NetworkPolicy peer and named-port sets in the port's delete.
      addressHolders: policyAddressHolders(o.nb),
      // Pods on ZStack's switches reach the cluster's networks through our router port there.
      ...(o.ovnMode === "external" ? { externalRoutes: this.net } : {}),
    });
    // They follow NB until the term ends, however it ends (a start that fails included); a new term gets new ones.
    this.manager.term.addEventListener("abort", () => podPorts.close(), { once: true });
    const ctx = new ControllerContext(o, this.net, inf, podPorts, this.manager, term);
    this.ctx = ctx;
    this.subnetReconciler = new SubnetReconciler(ctx);
    this.manager.register(this.subnetReconciler);
    this.manager.register(new NodeReconciler(ctx));
    this.manager.register(new PodReconciler(ctx));
    this.manager.register(new PodAnnotationReconciler(ctx));
    this.manager.register(new ServiceReconciler(ctx));
    // NetworkPolicy: the policy reconciler first, since its policy handlers keep the shared index current.
    ctx.policies = new PolicyIndex(o.nb, inf.networkPolicies, inf.pods, inf.namespaces);
    this.manager.register(new NetworkPolicyReconciler(ctx));
    this.manager.register(new PolicyPeerReconciler(ctx));
    this.manager.register(new PolicyIsolationReconciler(ctx));
  }

  /**
   * Runs until `signal` aborts: waits for NB and the informers, syncs everything once (then calls onSynced),
   * then follows events.
   * Rejects when starting fails, resolves when the run was ended (`signal` or stop()). Either way everything
   * it started is stopped before it settles, and the controller cannot run again: a new run (a new term of
   * leadership) needs a new OvnController.
   */
  run(signal: AbortSignal, onSynced?: () => void): Promise<void> {
    return this.manager.run(signal, onSynced);
  }

  /** True from the end of the initial sync until the run ends. */
  isSynced(): boolean {
    return this.manager.isSynced();
  }

  /** Reconciles that have run for more than maxMs ("queue key" each): wedged workers, for liveness. */
  stalledReconciles(maxMs: number, now = Date.now()): string[] {
    return this.manager.stalledReconciles(maxMs, now);
  }

  /** Ends the run: no NB write passes from now on, and what the run started is stopped. */
  stop(): Promise<void> {
    return this.manager.stop();
  }

  /** Once the informers have synced: the topology every reconciler relies on. */
  private async prepare(): Promise<void> {
    await this.ensureCore();
    await this.ensureDefaultSubnet();
    this.ctx.mgmtPorts = new ManagementPorts(this.o.nb, this.net);
  }

  private async ensureCore(): Promise<void> {
    const { nb } = this.o;
    const txn = nb.transaction();
    const core: Scope = {
      tables: ["Logical_Router", "Logical_Switch", "Logical_Router_Port", "Logical_Switch_Port"],
      owns: (id) => id === "cluster-router" || id === "join" || id.startsWith("join-"),
    };
    // The inside set already lists the Subnets that will be accepted, so their reconciles write nothing more.
    this.subnetReconciler.judge();
    plan(
      nb.cache as never,
      nb.schema,
      txn as never,
      [
        ...coreRows(this.net, this.subnetReconciler.acceptedCidrs()),
        // Pods on ZStack's switches are reached through the cluster router, not rerouted as egress.
        ...(this.o.ovnMode === "external" ? externalPodsRows() : []),
      ],
      core,
    );
    // The Service load-balancer groups: a name is unique in NB, so a retried insert cannot make a second one.
    for (const name of OUR_LB_GROUPS)
      if (!nb.cache.table("Load_Balancer_Group").lookupOne("name", name))
        txn.insert("Load_Balancer_Group", { name });
    if (txn.size > 0) await txn.commit();
  }

  private async ensureDefaultSubnet(): Promise<void> {
    if (this.informers.subnets.list().some((s) => s.spec.default)) return;
    const body: Subnet = {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "default" },
      spec: defaultSubnetSpec(this.o.clusterCIDR),
    };
    this.manager.term.throwIfAborted();
    try {
      await this.o.api.request(SUBNET_PATH, { method: "POST", body });
      this.o.log.info({ cidr: this.o.clusterCIDR }, "created the default Subnet from the cluster CIDR");
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
    }
  }
}
