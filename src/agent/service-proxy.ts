// The node's Services agent (kube-proxy's job on the host path): follows Services, EndpointSlices and
// ServiceCIDRs, and keeps three things in step with them: the nft table of Service DNAT rules
// (src/node/service-nat.ts), the healthCheckNodePort servers, and the ServiceCIDR routes through the management
// port (reported to whoever owns the routes). Level-triggered: every event only schedules a recompute from the
// informers' stores; a burst of events within the coalescing window becomes one nft transaction, and nothing is
// written when the ruleset text is what was last applied. The first pass after start applies unconditionally,
// so a restarted agent repairs a table that was changed or removed while it was down. Beside the rules, the
// conntrack entries rules cannot reach are deleted by a bounded worker: those of UDP flows whose endpoint went
// away, and those a UDP client made towards a Service address before it had an endpoint.

import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { IpAddress } from "../ipam/address.ts";
import { type Cidr, formatCidr } from "../ipam/cidr.ts";
import type { ApiClient } from "../k8s/api-client.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { ConntrackBacklog, FORGET_PER_ROUND, type UnnatedLimits } from "../node/conntrack-backlog.ts";
import type { InterfaceName } from "../node/interface-name.ts";
import {
  type ConntrackDeletion,
  deleteConntrack,
  staleUdpFlows,
  udpServiceFlows,
} from "../node/service-conntrack.ts";
import {
  type AffinityEntry,
  applyServiceNat,
  type NatServicePort,
  readAffinity,
  serviceRuleset,
  serviceTablePresent,
} from "../node/service-nat.ts";
import {
  deleteUnnated,
  newlyServedTargets,
  servedUdpDestinations,
  type UnnatedUdpTarget,
} from "../node/udp-first-endpoint.ts";
import type { Logger } from "../observability/log.ts";
import { HEADLESS_LABEL, ZONE_LABEL } from "../services/endpoints.ts";
import { API_SERVER_SERVICE, reservedAddresses } from "../services/reserved-addresses.ts";
import { type ClusterRanges, NO_RANGES } from "../services/service-model.ts";
import { CoalescedRunner } from "./coalesced-runner.ts";
import type { HealthCheckServers } from "./health-check-server.ts";
import { planHostServices, SERVICE_NAME_LABEL, sliceServiceKey } from "./host-services.ts";
import { planServiceCidrRoutes, SERVICE_CIDR_PATH, type ServiceCidrObject } from "./service-cidrs.ts";
import type { RouteGuard } from "./subnet-routes.ts";

const SLICES_BY_SERVICE = "service";

export interface ServiceProxyOptions {
  api: ApiClient;
  node: string;
  mgmtIfname: InterfaceName;
  /** Ranges no externalIP or LB IP may claim (cluster, service, join). */
  ranges?: ClusterRanges;
  /** The API server's address as the agent's kubeconfig names it: never a Service's externalIP or LB IP. */
  apiServerIps?: readonly IpAddress[];
  /** Pod networks: a ServiceCIDR overlapping them is not routed. */
  clusterCidrs?: readonly Cidr[];
  /** What ServiceCIDR routes must stay clear of, read at each recompute. */
  routeGuard?: () => RouteGuard;
  /** Told the ServiceCIDR ranges to route whenever the set changes. */
  onServiceCidrs?: (cidrs: readonly Cidr[]) => void;
  healthChecks?: HealthCheckServers;
  /** Installs the script; default `nft -f -` in the agent's netns (or `netns`). */
  apply?: (script: string) => Promise<void>;
  /** Whether the table is still there; default `nft list tables` in the agent's netns. */
  tablePresent?: () => Promise<boolean>;
  /** Check that often that the table was not removed behind our back (then apply again); default 60 s, 0: never. */
  resyncMs?: number;
  /**
   * Runs one grouped deletion of the conntrack entries of UDP flows the rules no longer DNAT (an endpoint removed,
   * a target port changed); resolves with the number deleted. Default `conntrack -D` in the agent's netns.
   */
  forgetFlows?: (deletion: ConntrackDeletion) => Promise<number>;
  /**
   * Deletes the un-NATed entries of one UDP destination that got its first endpoint, in the kernel or OVS;
   * resolves with the number deleted (0 when unknown). Default `conntrack -D` in the agent's netns, or
   * `ovs-appctl dpctl/flush-conntrack` to `ovsTarget`.
   */
  forgetUnnated?: (target: UnnatedUdpTarget) => Promise<number>;
  /** ovs-appctl's `-t` for the node's ovs-vswitchd; default "ovs-vswitchd" (its pid file in OVS's run directory). */
  ovsTarget?: string;
  /** OVS's run directory (ovsRunDir of node.ovsDb): where ovs-appctl finds ovs-vswitchd's pid file. */
  ovsRunDir?: string;
  /**
   * OVS's deletions are queued once more after this long (default 5 s; 0: never): OVN's flows for the first
   * endpoint may be installed after the agent saw it, and a datagram in between makes a new un-NATed entry.
   */
  unnatedRecheckMs?: number;
  /** The rate limits of the first-endpoint deletions (per target, overall; for tests, a clock). */
  unnatedLimits?: UnnatedLimits;
  /** Deletions (conntrack invocations) per round of the deletion worker; default FORGET_PER_ROUND (32). */
  forgetPerRound?: number;
  /** Stale flows kept for deletion at most, the oldest dropped beyond; default BACKLOG_CAP (16384). */
  forgetBacklog?: number;
  /** Reads the affinity entries of the table in place; default `nft -j list table` in the agent's netns. */
  readAffinity?: () => Promise<ReadonlyMap<string, readonly AffinityEntry[]>>;
  netns?: string;
  /** Events within this window are one recompute; default 20 ms. */
  coalesceMs?: number;
  /** Retry a failed apply after this long, doubling up to 30 s; default 500 ms. */
  retryMs?: number;
  log: Logger;
}

/** The labels of a slice the plan reads: its Service's name, and the headless label that takes it away. */
const SLICE_LABELS = [SERVICE_NAME_LABEL, HEADLESS_LABEL] as const;

function slimSlice(o: KubeObject): V1EndpointSlice {
  const s = o as V1EndpointSlice;
  const labels: Record<string, string> = {};
  for (const l of SLICE_LABELS) {
    const v = s.metadata?.labels?.[l];
    if (v !== undefined) labels[l] = v;
  }
  return {
    metadata: {
      name: s.metadata?.name,
      namespace: s.metadata?.namespace,
      ...(s.metadata?.resourceVersion ? { resourceVersion: s.metadata.resourceVersion } : {}),
      ...(Object.keys(labels).length === 0 ? {} : { labels }),
    },
    addressType: s.addressType,
    endpoints: (s.endpoints ?? []).map((e) => ({
      addresses: e.addresses,
      ...(e.conditions ? { conditions: e.conditions } : {}),
      ...(e.nodeName === undefined ? {} : { nodeName: e.nodeName }),
      ...(e.hints ? { hints: e.hints } : {}),
    })),
    ...(s.ports ? { ports: s.ports } : {}),
  } as V1EndpointSlice;
}

/** What the proxy reads of a Node: its addresses, which no externalIP may claim, and its zone. */
type NodeAddressesObject = KubeObject & { status?: { addresses?: { type?: string; address?: string }[] } };

function slimNode(o: KubeObject): NodeAddressesObject {
  const n = o as NodeAddressesObject;
  const zone = n.metadata?.labels?.[ZONE_LABEL];
  return {
    metadata: {
      name: n.metadata?.name,
      ...(n.metadata?.resourceVersion ? { resourceVersion: n.metadata.resourceVersion } : {}),
      ...(typeof zone === "string" ? { labels: { [ZONE_LABEL]: zone } } : {}),
    },
    status: { addresses: (n.status?.addresses ?? []).map((a) => ({ address: a.address })) },
  } as NodeAddressesObject;
}

export class ServiceProxy {
  readonly services: Informer<V1Service & KubeObject>;
  /** Every Node: an externalIP equal to any node's address would take that node's ports from this node too. */
  readonly nodes: Informer<NodeAddressesObject>;
  readonly slices: Informer<V1EndpointSlice & KubeObject>;
  readonly serviceCidrs: Informer<ServiceCidrObject>;
  /**
   * plans: recomputes; applies: nft transactions; failures: failed applies; flowsForgotten: conntrack entries
   * of stale UDP flows deleted; forgetRounds: rounds of the deletion worker; forgetFailures: failed deletions
   * (retried at the next recompute); flowsDropped: stale flows dropped, never deleted, because the backlog was full;
   * unnatedDeletions: deletions of the un-NATed entries of a UDP destination that got its first endpoint (kernel
   * and OVS), unnatedEntries: kernel entries they deleted; unnatedFailures: those that failed (retried with
   * backoff), unnatedGivenUp: destinations given up after repeated failures.
   */
  readonly stats = {
    plans: 0,
    applies: 0,
    failures: 0,
    flowsForgotten: 0,
    forgetRounds: 0,
    forgetFailures: 0,
    flowsDropped: 0,
    unnatedDeletions: 0,
    unnatedEntries: 0,
    unnatedFailures: 0,
    unnatedGivenUp: 0,
  };
  private nodeIps: readonly IpAddress[] = [];
  private serviceSnatIps: readonly IpAddress[] = [];
  private nodeReplyIps: readonly IpAddress[] = [];
  private applied: string | undefined;
  /** The ports of the last applied ruleset: what the kernel's conntrack entries may have been DNATed by. */
  private appliedPorts: readonly NatServicePort[] | undefined;
  /** Stale UDP flows not deleted yet; the deletion worker takes them in bounded rounds. */
  private readonly backlog: ConntrackBacklog;
  private readonly forgetFlows: (deletion: ConntrackDeletion) => Promise<number>;
  private readonly forgetUnnated: (target: UnnatedUdpTarget) => Promise<number>;
  /** The UDP destinations with an endpoint in the last applied ruleset; undefined before the first. */
  private served: ReadonlyMap<string, UnnatedUdpTarget> | undefined;
  private readonly rechecks = new Set<NodeJS.Timeout>();
  /** The next round for deferred first-endpoint deletions, and when. */
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAt: number | undefined;
  /** Trackers whose last un-NATed deletion failed (said once until one works again). */
  private readonly unnatedFailing = new Set<string>();
  private stopped = false;
  private readonly runner: CoalescedRunner;
  /** The deletion worker: single-flight, apart from the rules' runner so that rules never wait for it. */
  private readonly forgetRunner: CoalescedRunner;
  private lastCidrs: string | undefined;
  private lastCidrRefusals = "";
  private readonly apply: (script: string) => Promise<void>;
  private readonly readAffinity: () => Promise<ReadonlyMap<string, readonly AffinityEntry[]>>;
  private readonly tablePresent: () => Promise<boolean>;
  private resyncTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ServiceProxyOptions) {
    // Any failure (planning, building, nft, a health-check port) is logged and retried with backoff, never thrown.
    this.runner = new CoalescedRunner({
      run: () => this.recompute(),
      onError: (e) => {
        this.stats.failures++;
        this.opts.log.error({ err: e.message }, "cannot apply the Service rules; retrying");
      },
      ...(opts.coalesceMs !== undefined ? { coalesceMs: opts.coalesceMs } : {}),
      ...(opts.retryMs !== undefined ? { retryMs: opts.retryMs } : {}),
    });
    // Never rejects (each deletion's failure is handled in the round); the guard only logs the unexpected.
    this.forgetRunner = new CoalescedRunner({
      run: () => this.forgetRound(),
      onError: (e) => this.opts.log.error({ err: e.message }, "conntrack deletion round failed"),
      coalesceMs: 0,
      ...(opts.retryMs !== undefined ? { retryMs: opts.retryMs } : {}),
    });
    this.backlog = new ConntrackBacklog(opts.forgetBacklog, opts.unnatedLimits);
    const where = opts.netns ? { netns: opts.netns } : {};
    this.apply = opts.apply ?? ((script) => applyServiceNat(script, where));
    this.readAffinity = opts.readAffinity ?? (() => readAffinity(where));
    this.forgetFlows = opts.forgetFlows ?? ((d) => deleteConntrack(d, where));
    this.forgetUnnated =
      opts.forgetUnnated ??
      ((t) =>
        deleteUnnated(t, {
          ...where,
          ...(opts.ovsTarget ? { ovsTarget: opts.ovsTarget } : {}),
          ...(opts.ovsRunDir ? { ovsRunDir: opts.ovsRunDir } : {}),
        }));
    this.tablePresent = opts.tablePresent ?? (() => serviceTablePresent(where));
    const log = opts.log;
    this.services = new Informer<V1Service & KubeObject>({
      client: opts.api,
      path: "/api/v1/services",
      logger: log.child({ informer: "services" }),
    });
    this.slices = new Informer<V1EndpointSlice & KubeObject>({
      client: opts.api,
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      transform: (o) => slimSlice(o) as V1EndpointSlice & KubeObject,
      indexers: { [SLICES_BY_SERVICE]: (s) => [sliceServiceKey(s) ?? ""].filter(Boolean) },
      logger: log.child({ informer: "endpointslices" }),
    });
    this.nodes = new Informer<NodeAddressesObject>({
      client: opts.api,
      path: "/api/v1/nodes",
      transform: slimNode,
      logger: log.child({ informer: "nodes" }),
    });
    this.serviceCidrs = new Informer<ServiceCidrObject>({
      client: opts.api,
      path: SERVICE_CIDR_PATH,
      logger: log.child({ informer: "servicecidrs" }),
    });
    const changed = {
      onAdd: () => this.schedule(),
      onUpdate: () => this.schedule(),
      onDelete: () => this.schedule(),
    };
    this.services.addHandlers(changed);
    this.slices.addHandlers(changed);
    // Nodes update their status often; only a change of addresses matters here.
    this.nodes.addHandlers({
      onAdd: () => this.schedule(),
      onUpdate: (a, b) => {
        if (
          JSON.stringify(a.status?.addresses) !== JSON.stringify(b.status?.addresses) ||
          a.metadata?.labels?.[ZONE_LABEL] !== b.metadata?.labels?.[ZONE_LABEL]
        )
          this.schedule();
      },
      onDelete: () => this.schedule(),
    });
    const cidrs = () => this.recomputeCidrs();
    this.serviceCidrs.addHandlers({ onAdd: cidrs, onUpdate: cidrs, onDelete: cidrs });
  }

  /** Starts following the API; the first ruleset is applied once Services and EndpointSlices are listed. */
  async start(): Promise<void> {
    this.services.start();
    this.slices.start();
    this.nodes.start();
    this.serviceCidrs.start();
    // A ruleset from a partial view would drop Services that work now (or serve a node's address as an
    // externalIP); wait for the whole picture.
    for (const informer of [this.services, this.slices, this.nodes]) {
      while (!this.stopped) {
        try {
          await informer.waitForSync(60_000);
          break;
        } catch (e) {
          this.opts.log.warn(
            { err: (e as Error).message },
            "still waiting to list Services, EndpointSlices and Nodes (are the chart's zstack-ovn:node ClusterRole and binding applied?)",
          );
        }
      }
    }
    if (this.stopped) return;
    this.runner.enable();
    this.forgetRunner.enable();
    this.runner.schedule(0);
    const every = this.opts.resyncMs ?? 60_000;
    if (every > 0) {
      this.resyncTimer = setInterval(() => void this.checkTable(), every);
      this.resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const ended = Promise.all([this.runner.stop(), this.forgetRunner.stop()]);
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const t of this.rechecks) clearTimeout(t);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.rechecks.clear();
    await Promise.all([
      this.services.stop(),
      this.slices.stop(),
      this.nodes.stop(),
      this.serviceCidrs.stop(),
    ]);
    await ended;
    await this.opts.healthChecks?.close();
  }

  /** The node's InternalIPs: NodePorts answer on them. */
  setNodeIps(ips: readonly IpAddress[]): void {
    const key = (l: readonly IpAddress[]) => l.map((ip) => `${ip.family}/${ip.value}`).join(",");
    if (key(ips) === key(this.nodeIps)) return;
    this.nodeIps = [...ips];
    this.schedule();
  }

  /**
   * The node's service SNAT address(es) from the controller's annotation: the source of Service connections
   * that entered the node, so NetworkPolicy does not take them for the node's own.
   */
  setServiceSnatIps(ips: readonly IpAddress[]): void {
    const key = (l: readonly IpAddress[]) => l.map((ip) => `${ip.family}/${ip.value}`).join(",");
    if (key(ips) === key(this.serviceSnatIps)) return;
    this.serviceSnatIps = [...ips];
    this.schedule();
  }

  /**
   * The node's addresses the controller's reply policy holds (from its annotation): the node's own connections
   * from them to an ETP Local Service keep them as source (service-nat.ts `_sc`).
   */
  setNodeReplyIps(ips: readonly IpAddress[]): void {
    const key = (l: readonly IpAddress[]) => l.map((ip) => `${ip.family}/${ip.value}`).join(",");
    if (key(ips) === key(this.nodeReplyIps)) return;
    this.nodeReplyIps = [...ips];
    this.schedule();
  }

  /** The ServiceCIDR routes are recomputed too when what they must stay clear of changes. */
  guardChanged(): void {
    if (this.serviceCidrs.hasSynced()) this.recomputeCidrs();
  }

  /**
   * Resolves once every change seen so far is applied (or has failed) and the deletion rounds it started have
   * ended. For tests and shutdown.
   */
  async settled(): Promise<void> {
    await this.runner.settled();
    await this.forgetRunner.settled();
  }

  private schedule(delay?: number): void {
    this.runner.schedule(delay);
  }

  private async recompute(): Promise<void> {
    this.stats.plans++;
    const sliceOf = (ns: string, name: string) => this.slices.byIndex(SLICES_BY_SERVICE, `${ns}/${name}`);
    const reserved = reservedAddresses(
      this.nodes.list(),
      sliceOf(API_SERVER_SERVICE.namespace, API_SERVER_SERVICE.name),
      { nodeAddresses: this.nodeIps, apiServerAddresses: this.opts.apiServerIps ?? [] },
    );
    const zone = this.nodes.get(this.opts.node)?.metadata?.labels?.[ZONE_LABEL];
    const plan = planHostServices(
      this.services.list(),
      sliceOf,
      this.opts.node,
      { ...(this.opts.ranges ?? NO_RANGES), reserved },
      zone,
    );
    for (const r of plan.refused) this.opts.log.warn(r, "not serving a healthCheckNodePort");
    const spec = {
      mgmtIfname: this.opts.mgmtIfname,
      nodeIps: this.nodeIps,
      serviceSnatIps: this.serviceSnatIps,
      nodeReplyIps: this.nodeReplyIps,
      ports: plan.ports,
    };
    const script = serviceRuleset(spec);
    if (script !== this.applied) {
      // Replacing the table would forget which endpoint each client sticks to: carry the entries over.
      const sticky = plan.ports.some((p) => p.affinityTimeoutSeconds !== undefined);
      await this.apply(sticky ? serviceRuleset({ ...spec, affinity: await this.readAffinity() }) : script);
      this.applied = script;
      this.stats.applies++;
      this.opts.log.info({ ports: plan.ports.length }, "Service rules applied");
      // Only once the new rules are in: a datagram in between would make a new entry to the old endpoint.
      if (this.appliedPorts) {
        const dropped = this.backlog.add(staleUdpFlows(this.appliedPorts, plan.ports));
        if (dropped > 0) {
          this.stats.flowsDropped += dropped;
          this.opts.log.warn(
            { dropped, backlog: this.backlog.size },
            "too many stale UDP flows waiting for deletion: dropped the oldest (they expire with the UDP timeout)",
          );
        }
      }
      this.appliedPorts = plan.ports;
      // Level-triggered on the plan: a destination served now and not by the last ruleset got its first
      // endpoint. After a restart every served destination counts (the filter spares DNATed entries).
      const served = servedUdpDestinations(plan.ports, this.nodeIps);
      this.queueUnnated(newlyServedTargets(this.served, served), true);
      this.served = served;
    }
    // Not awaited: the deletions run in their own worker, and the next recompute never waits for them. A backlog
    // left by failures is tried again at each recompute.
    if (this.backlog.size > 0) this.forgetRunner.schedule(0);
    await this.opts.healthChecks?.sync(plan.healthChecks);
  }

  /** Queues un-NATed deletions; OVS's once more after unnatedRecheckMs (when `recheck`). */
  private queueUnnated(targets: readonly UnnatedUdpTarget[], recheck: boolean): void {
    if (targets.length === 0 || this.stopped) return;
    const dropped = this.backlog.addUnnated(targets);
    if (dropped > 0) {
      this.stats.flowsDropped += dropped;
      this.opts.log.warn(
        { dropped, backlog: this.backlog.size },
        "too many UDP destinations waiting for deletion of their un-NATed entries: dropped the oldest",
      );
    }
    this.forgetRunner.schedule(0);
    const ovs = targets.filter((t) => t.tracker === "ovs");
    const after = this.opts.unnatedRecheckMs ?? 5_000;
    if (!recheck || ovs.length === 0 || after <= 0) return;
    const timer = setTimeout(() => {
      this.rechecks.delete(timer);
      this.queueUnnated(ovs, false);
    }, after);
    timer.unref();
    this.rechecks.add(timer);
  }

  /**
   * One round of the deletion worker: at most forgetPerRound grouped deletions, oldest first, against the rules
   * applied now. A deleted group is never redone; a failed one goes to the back of the backlog. Another round
   * follows at once while rounds make progress; after failures only, the next recompute tries again.
   */
  private async forgetRound(): Promise<void> {
    if (this.stopped) return;
    const live = udpServiceFlows(this.appliedPorts ?? []);
    const max = this.opts.forgetPerRound ?? FORGET_PER_ROUND;
    // Clients wait on the first-endpoint deletions: they go first, within the same cap.
    const targets = this.backlog.unnatedRound(max);
    const round = this.backlog.round(live, max - targets.length);
    if (round.length === 0 && targets.length === 0) {
      this.wakeForUnnated();
      return;
    }
    this.stats.forgetRounds++;
    let deleted = 0;
    let entries = 0;
    let failed: { err: string; args: number } | undefined;
    for (const t of targets) {
      if (this.stopped) return;
      try {
        const n = await this.forgetUnnated(t);
        this.backlog.unnatedDone(t);
        this.stats.unnatedDeletions++;
        this.stats.unnatedEntries += n;
        deleted++;
        if (this.unnatedFailing.delete(t.tracker))
          this.opts.log.info({ tracker: t.tracker }, "un-NATed conntrack entries can be deleted again");
        if (n > 0)
          this.opts.log.info(
            { entries: n },
            "deleted the un-NATed conntrack entries of a UDP Service address that got its first endpoint",
          );
      } catch (e) {
        this.stats.forgetFailures++;
        this.stats.unnatedFailures++;
        const gaveUp = this.backlog.unnatedFailed(t);
        if (gaveUp) this.stats.unnatedGivenUp++;
        // A tracker that cannot be reached (ovs-vswitchd's control socket not found, ...) fails every target
        // alike: said once until it works again, not at every round.
        if (!this.unnatedFailing.has(t.tracker)) {
          this.unnatedFailing.add(t.tracker);
          this.opts.log.warn(
            { tracker: t.tracker, err: (e as Error).message },
            "cannot delete the un-NATed conntrack entries of UDP Service addresses; retrying with backoff, each address given up after a few failures",
          );
        }
      }
    }
    for (const d of round) {
      if (this.stopped) return;
      try {
        entries += await this.forgetFlows(d.deletion);
        this.backlog.done(d);
        deleted++;
      } catch (e) {
        this.stats.forgetFailures++;
        this.backlog.failed(d);
        failed = { err: (e as Error).message, args: d.covers.length };
      }
    }
    this.stats.flowsForgotten += entries;
    if (entries > 0)
      this.opts.log.info({ entries }, "deleted the conntrack entries of removed UDP endpoints");
    if (failed)
      this.opts.log.warn(
        { err: failed.err, backlog: this.backlog.size },
        "cannot delete the conntrack entries of removed UDP endpoints; trying again at the next change",
      );
    if (deleted > 0 && this.backlog.size > 0) this.forgetRunner.schedule(0);
    this.wakeForUnnated();
  }

  /** A round when the next deferred first-endpoint deletion is due (rate limit, backoff). */
  private wakeForUnnated(): void {
    const at = this.backlog.nextUnnatedAt();
    if (at === undefined || this.stopped) return;
    if (this.wakeTimer && this.wakeAt !== undefined && this.wakeAt <= at) return;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(
      () => {
        this.wakeTimer = undefined;
        this.wakeAt = undefined;
        this.forgetRunner.schedule(0);
      },
      Math.max(0, at - (this.opts.unnatedLimits?.clock ?? Date.now)()),
    );
    this.wakeTimer.unref();
  }

  /** A table removed by hand (or by a ruleset flush) is applied again; a table edited in place is not noticed. */
  private async checkTable(): Promise<void> {
    if (this.applied === undefined || this.runner.running || this.stopped) return;
    const present = await this.tablePresent().catch((e) => {
      this.opts.log.warn({ err: (e as Error).message }, "cannot list nft tables");
      return true;
    });
    if (present || this.runner.running) return;
    this.opts.log.warn({}, "the Service table is gone; applying it again");
    this.applied = undefined;
    this.schedule(0);
  }

  private recomputeCidrs(): void {
    const guard = this.opts.routeGuard?.();
    if (!guard || !this.opts.onServiceCidrs) return;
    const plan = planServiceCidrRoutes(this.serviceCidrs.list(), guard, this.opts.clusterCidrs ?? []);
    const refusals = JSON.stringify(plan.refused);
    if (refusals !== this.lastCidrRefusals) {
      this.lastCidrRefusals = refusals;
      for (const r of plan.refused)
        this.opts.log.warn(r, "not routing a ServiceCIDR through the management port");
    }
    const key = plan.cidrs.map(formatCidr).join(",");
    if (key === this.lastCidrs) return;
    this.lastCidrs = key;
    this.opts.onServiceCidrs(plan.cidrs);
  }
}
