// The node's hostPorts (the CNI portmap plugin's job): follows the pods bound to this node (the agent's node pods
// informer) and keeps the nft table of hostPort DNAT rules (src/node/host-port-nat.ts) in step with them.
// Level-triggered like the Services agent: every event only schedules a recompute from the informer's store; a
// burst within the coalescing window becomes one nft transaction; nothing is written when the ruleset text is
// what was last applied. After a restart the installed table is compared by the digest of its content that it
// carries (a restart with nothing changed writes nothing), and a periodic check applies it again if it was
// removed.

import type { EventRecorder } from "../k8s/events.ts";
import type { Informer } from "../k8s/informer.ts";
import {
  applyHostPortNat,
  enableRouteLocalnet,
  hostPortRuleset,
  hostPortTablePresent,
  installedHostPortDigest,
  isLoopbackHostIp,
  rulesetDigest,
} from "../node/host-port-nat.ts";
import type { InterfaceName } from "../node/interface-name.ts";
import type { Logger } from "../observability/log.ts";
import { CoalescedRunner } from "./coalesced-runner.ts";
import { type HostPortPod, type HostPortProblem, planHostPorts } from "./host-port-plan.ts";

export interface HostPortsOptions {
  /** The informer of this node's pods (fieldSelector spec.nodeName), started by its owner. */
  pods: Informer<HostPortPod>;
  mgmtIfname: InterfaceName;
  /** Warning Events on pods whose hostPort is refused or held by another pod; none when absent. */
  events?: EventRecorder;
  /** Installs the script; default `nft -f -` in the agent's netns (or `netns`). */
  apply?: (script: string) => Promise<void>;
  /** Whether the table is still there; default `nft list tables` in the agent's netns. */
  tablePresent?: () => Promise<boolean>;
  /** The digest the installed table carries (undefined: none); default `nft list table` in the agent's netns. */
  installedDigest?: () => Promise<string | undefined>;
  /**
   * Allows (on) or refuses (off) loopback-sourced packets on the management port (hostIP 127.0.0.1); default
   * sysctl in the netns.
   */
  routeLocalnet?: (on: boolean) => Promise<void>;
  /** Check that often that the table was not removed behind our back; default 60 s, 0: never. */
  resyncMs?: number;
  netns?: string;
  /** Events within this window are one recompute; default 20 ms. */
  coalesceMs?: number;
  /** Retry a failed apply after this long, doubling up to 30 s; default 500 ms. */
  retryMs?: number;
  log: Logger;
}

const problemKey = (p: HostPortProblem) => `${p.pod.uid}\0${p.reason}\0${p.message}`;

export class HostPorts {
  /** plans: recomputes; applies: nft transactions; failures: failed applies. */
  readonly stats = { plans: 0, applies: 0, failures: 0 };
  private applied: string | undefined;
  private localnet = false;
  private stopped = false;
  private readonly runner: CoalescedRunner;
  private resyncTimer: NodeJS.Timeout | undefined;
  /** Problems already reported, so a recompute does not report them again (until the next resync). */
  private reported = new Set<string>();
  private readonly apply: (script: string) => Promise<void>;
  private readonly tablePresent: () => Promise<boolean>;
  private readonly installedDigest: () => Promise<string | undefined>;
  private readonly routeLocalnet: (on: boolean) => Promise<void>;
  private readonly removeHandlers: () => void;

  constructor(private readonly opts: HostPortsOptions) {
    this.runner = new CoalescedRunner({
      run: () => this.recompute(),
      onError: (e) => {
        this.stats.failures++;
        this.opts.log.error({ err: e.message }, "cannot apply the hostPort rules; retrying");
      },
      ...(opts.coalesceMs !== undefined ? { coalesceMs: opts.coalesceMs } : {}),
      ...(opts.retryMs !== undefined ? { retryMs: opts.retryMs } : {}),
    });
    const where = opts.netns ? { netns: opts.netns } : {};
    this.apply = opts.apply ?? ((script) => applyHostPortNat(script, where));
    this.tablePresent = opts.tablePresent ?? (() => hostPortTablePresent(where));
    this.installedDigest = opts.installedDigest ?? (() => installedHostPortDigest(where));
    this.routeLocalnet =
      opts.routeLocalnet ?? ((on) => enableRouteLocalnet(opts.mgmtIfname, { ...where, off: !on }));
    this.removeHandlers = opts.pods.addHandlers({
      onAdd: () => this.runner.schedule(),
      onUpdate: () => this.runner.schedule(),
      onDelete: () => this.runner.schedule(),
    });
  }

  /** Applies the first ruleset once the node's pods are listed (a partial view would drop working ports). */
  async start(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.opts.pods.waitForSync(60_000);
        break;
      } catch (e) {
        this.opts.log.warn({ err: (e as Error).message }, "still waiting to list this node's pods");
      }
    }
    if (this.stopped) return;
    this.runner.enable();
    this.runner.schedule(0);
    const every = this.opts.resyncMs ?? 60_000;
    if (every > 0) {
      this.resyncTimer = setInterval(() => void this.checkTable(), every);
      this.resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.removeHandlers();
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await this.runner.stop();
  }

  /** Resolves once every change seen so far is applied (or has failed). For tests and shutdown. */
  settled(): Promise<void> {
    return this.runner.settled();
  }

  private async recompute(): Promise<void> {
    this.stats.plans++;
    const plan = planHostPorts(this.opts.pods.list());
    this.report(plan.problems);
    const script = hostPortRuleset({ mgmtIfname: this.opts.mgmtIfname, mappings: plan.mappings });
    // route_localnet is on only while a hostIP 127.0.0.1 is served and the table (whose filter chain drops
    // loopback destinations arriving on the management port) is in place: set after the table, cleared first.
    const wantLocalnet = plan.mappings.some((m) => m.hostIP !== undefined && isLoopbackHostIp(m.hostIP));
    if (script !== this.applied) {
      // After a restart (or a removed table) the kernel's table is compared by the digest it carries: the same
      // ruleset is not written again.
      if (this.applied === undefined && (await this.installedDigest()) === rulesetDigest(script)) {
        this.applied = script;
        this.opts.log.info({ mappings: plan.mappings.length }, "hostPort rules already in place");
      } else {
        try {
          await this.apply(script);
        } catch (e) {
          await this.setLocalnet(false);
          throw e;
        }
        this.applied = script;
        this.stats.applies++;
        this.opts.log.info({ mappings: plan.mappings.length }, "hostPort rules applied");
      }
    }
    if (wantLocalnet !== this.localnet) await this.setLocalnet(wantLocalnet);
  }

  private async setLocalnet(on: boolean): Promise<void> {
    try {
      await this.routeLocalnet(on);
      this.localnet = on;
    } catch (e) {
      // Off is best effort (the management port may be gone); on is retried with the next recompute.
      this.opts.log.warn(
        { err: (e as Error).message, on },
        "cannot set route_localnet on the management port",
      );
      if (on) throw e;
      this.localnet = false;
    }
  }

  private report(problems: readonly HostPortProblem[]): void {
    const now = new Set<string>();
    for (const p of problems) {
      const key = problemKey(p);
      now.add(key);
      if (this.reported.has(key)) continue;
      this.opts.log.warn(
        { pod: `${p.pod.namespace}/${p.pod.name}`, field: p.field, why: p.message },
        p.reason,
      );
      this.opts.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: p.pod.namespace, name: p.pod.name, uid: p.pod.uid },
        p.reason,
        p.message,
      );
    }
    // A problem that went away and comes back is reported again.
    this.reported = now;
  }

  /**
   * At each resync: problems still there are reported again (folded by the recorder into their Event, whose
   * count grows), route_localnet is set again, and a table removed by hand (or by a ruleset flush) is applied
   * again; a table edited in place is not noticed.
   */
  private async checkTable(): Promise<void> {
    if (this.stopped) return;
    if (this.reported.size > 0) {
      this.reported.clear();
      this.runner.schedule(0);
    }
    if (this.applied === undefined || this.runner.running) return;
    const present = await this.tablePresent().catch((e) => {
      this.opts.log.warn({ err: (e as Error).message }, "cannot list nft tables");
      return true;
    });
    if (this.runner.running) return;
    if (present) {
      // A management port recreated by node setup comes back with the default (0).
      if (this.localnet) await this.setLocalnet(true).catch(() => undefined);
      return;
    }
    // Without the table its loopback guard is gone too: route_localnet off until it is back.
    this.opts.log.warn({}, "the hostPort table is gone; applying it again");
    await this.setLocalnet(false);
    this.applied = undefined;
    this.runner.schedule(0);
  }
}
