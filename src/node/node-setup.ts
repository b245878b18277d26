// The node's own networking, reconciled continuously: br-int, ovn-controller's settings, the management
// port (OVS side, then the device's address and routes), and egress SNAT with forwarding. A pass changes only
// what differs. Changes others make in the Open_vSwitch database (a key overwritten, br-int deleted,
// ovs-vswitchd recreating the management tap after a restart) are seen through the monitor and trigger a pass;
// what OVSDB cannot show (routes, nftables) is re-applied on a periodic resync.

import { performance } from "node:perf_hooks";
import { Backoff } from "../ovsdb/backoff.ts";
import type { RowEvent } from "../ovsdb/cache.ts";
import { type ChassisConfig, chassisExternalIds, ensureChassisConfig } from "./chassis-config.ts";
import {
  configureMgmtInterface,
  ensureMgmtOvsPort,
  MGMT_IFNAME,
  type MgmtPortSpec,
  mgmtSpecKey,
  waitMgmtDevice,
} from "./mgmt-port.ts";
import { type BridgeSpec, ensureBridge } from "./ovs-bridge.ts";
import { ensureProviderBridges, type ProviderBridge } from "./provider-bridges.ts";
import { ensureReservedPorts } from "./reserved-ports.ts";
import { applyEgressSnat, type EgressSnatSpec, enableForwarding, snatRuleset } from "./snat.ts";
import { changedKeys, rootRow, type VswitchClient } from "./vswitch-db.ts";

export interface NodeSetupLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface NodeSetupConfig {
  client: VswitchClient;
  bridge: BridgeSpec;
  /**
   * ovn-controller's settings; absent: not written yet (External mode, until SB shows the chassis name is free,
   * external-chassis.ts). The other steps run either way.
   */
  chassis?: ChassisConfig;
  /**
   * Provider network bridges (node.bridgeMappings); their mapping goes into chassis.bridgeMappings. Absent or
   * empty: none, and bridges the agent once created for providers are removed.
   */
  providers?: readonly ProviderBridge[];
  /** Absent until the controller has annotated the node. */
  mgmt?: MgmtPortSpec;
  /** Present in gateway mode "local". */
  egress?: EgressSnatSpec;
  /**
   * Reserve the reply policy's ports (61440-65535) in the node's `ip_local_reserved_ports`, merged with the
   * operator's entries (reserved-ports.ts), so the host never picks one as an ephemeral port. The agent sets it.
   */
  reserveReplyPorts?: boolean;
  /** The node's netns path when it is not the agent's own (tests). */
  hostNetns?: string;
  /** Budget of each wait (the management device to appear); default 10 s. */
  budgetMs?: number;
  /** Called when the provider network problems change (the agent turns them into a Node Warning Event). */
  onProviderProblems?: (problems: readonly string[]) => void;
  /** Retry a provider network problem after this long; default 15 s. */
  providerRetryMs?: number;
  /** Re-apply routes and nftables this often; default 60 s, 0 disables. */
  resyncIntervalMs?: number;
  logger?: NodeSetupLogger;
}

export interface ReconcileReport {
  bridge: string[];
  /** Provider bridges created, uplinks added, bridges removed. */
  providers: string[];
  /** Why a provider network's bridge is not as configured (empty when it is); the rest of the pass went on. */
  providerProblems: string[];
  chassis: string[];
  mgmt: string[];
  /** True when the nftables table and forwarding were (re)applied. */
  egress: boolean;
  /** True when this pass added the reply policy's ports to the host's reserved ports. */
  reservedPorts: boolean;
  ms: number;
}

function rowOf(e: RowEvent): Readonly<Record<string, unknown>> {
  return e.kind === "delete" ? e.old : e.row;
}

const silent: NodeSetupLogger = { info() {}, warn() {} };

export class NodeSetup {
  private cfg: NodeSetupConfig;
  private running: Promise<ReconcileReport> | undefined;
  private forceApply = false;
  private mgmtApplied: { key: string; ip: string; ifindex: number } | undefined;
  private egressApplied: string | undefined;
  private portsChecked = false;
  private unsubscribe: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private resync: NodeJS.Timeout | undefined;
  private readonly backoff = new Backoff({ initialMs: 200, maxMs: 10_000 });
  private stopped = false;
  private readonly log: NodeSetupLogger;
  private providerProblemList: readonly string[] = [];
  private providerRetry: NodeJS.Timeout | undefined;

  constructor(cfg: NodeSetupConfig) {
    this.cfg = cfg;
    this.log = cfg.logger ?? silent;
  }

  /** Changes the desired state (e.g. the management port annotation appeared) and schedules a pass. */
  update(
    patch: Partial<Pick<NodeSetupConfig, "chassis" | "mgmt" | "egress" | "bridge" | "providers">>,
  ): void {
    this.cfg = { ...this.cfg, ...patch };
    this.schedule(0);
  }

  /** The provider network problems of the last pass (the agent reports them; empty when all is in place). */
  get providerProblems(): readonly string[] {
    return this.providerProblemList;
  }

  /** Another pass later for a provider problem (an admin may fix the bridge without any event we watch). */
  private retryProviders(): void {
    if (this.stopped || this.providerRetry) return;
    this.providerRetry = setTimeout(() => {
      this.providerRetry = undefined;
      this.schedule(0);
    }, this.cfg.providerRetryMs ?? 15_000);
    this.providerRetry.unref();
  }

  /** Whether a pass has set up the management port (by any pass: the first, or a retry after a failure). */
  get mgmtConfigured(): boolean {
    return this.mgmtApplied !== undefined;
  }

  /** One pass; concurrent calls share a pass, and a call during a pass gets a fresh one after it. */
  reconcile(): Promise<ReconcileReport> {
    // The fresh pass runs whether the current one succeeds or fails; its own result is what the caller gets.
    if (this.running)
      return this.running.then(
        () => this.reconcile(),
        () => this.reconcile(),
      );
    this.running = this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<ReconcileReport> {
    const start = performance.now();
    const force = this.forceApply;
    this.forceApply = false;
    const { client } = this.cfg;
    const host = this.cfg.hostNetns ? { netns: this.cfg.hostNetns } : {};
    const bridge = await ensureBridge(client, this.cfg.bridge);
    // A provider network's misconfiguration fails alone: the overlay (chassis settings, management port, egress)
    // is set up regardless. A provider whose bridge cannot be made still gets its mapping (ovn-controller picks it
    // up once the bridge exists); the problem is logged and kept in providerProblems, and the step is retried.
    let providers: string[] = [];
    let providerProblems: string[];
    try {
      const prov = await ensureProviderBridges(
        client,
        this.cfg.providers ?? [],
        this.cfg.bridge.datapathType,
      );
      providers = prov.changes;
      providerProblems = prov.problems;
    } catch (err) {
      const mappings = (this.cfg.providers ?? []).map(
        (p) => `${p.provider}:${p.bridge}${p.uplink ? `:${p.uplink}` : ""}`,
      );
      providerProblems = [
        `provider network bridges (node.bridgeMappings ${mappings.join(",")}) could not be set up: ${(err as Error).message}; fix the bridges or node.bridgeMappings`,
      ];
    }
    for (const p of providerProblems) this.log.warn({ problem: p }, "provider network bridge");
    const changed = providerProblems.join("\n") !== this.providerProblemList.join("\n");
    this.providerProblemList = providerProblems;
    if (changed) this.cfg.onProviderProblems?.(providerProblems);
    if (providerProblems.length > 0) this.retryProviders();
    const chassis = this.cfg.chassis ? await ensureChassisConfig(client, this.cfg.chassis) : [];
    const mgmt: string[] = [];
    if (this.cfg.mgmt) {
      const spec = this.cfg.mgmt;
      const port = await ensureMgmtOvsPort(client, spec);
      mgmt.push(...port.changed);
      const row = await waitMgmtDevice(client, port.interfaceUuid, this.cfg.budgetMs ?? 10_000);
      const key = mgmtSpecKey(spec);
      const ifindex = row.ifindex ?? 0;
      const applied = this.mgmtApplied;
      if (force || !applied || applied.key !== key || applied.ifindex !== ifindex) {
        // A new device starts empty; an old one may carry an address from a previous spec (or agent run).
        const flush = !applied || applied.ip !== spec.ip;
        const removed = await configureMgmtInterface(spec, { ...host, flush });
        this.mgmtApplied = { key, ip: spec.ip, ifindex };
        mgmt.push(applied?.ifindex !== ifindex ? "configured" : "reconfigured");
        mgmt.push(...removed.map((r) => `route-removed:${r}`));
      }
    }
    let egress = false;
    if (this.cfg.egress) {
      // The script is the spec in canonical text (addresses are bigints, which JSON cannot hold).
      const key = snatRuleset(this.cfg.egress);
      if (force || this.egressApplied !== key) {
        const families = new Set(this.cfg.egress.insideCidrs.map((c) => c.family));
        await enableForwarding([...families], host);
        await applyEgressSnat(this.cfg.egress, host);
        this.egressApplied = key;
        egress = true;
      }
    }
    let reservedPorts = false;
    // Checked on the first pass and on every resync: an operator may rewrite the list meanwhile.
    if (this.cfg.reserveReplyPorts && (force || !this.portsChecked)) {
      reservedPorts = await ensureReservedPorts(host);
      this.portsChecked = true;
    }
    const report = {
      bridge,
      providers,
      providerProblems,
      chassis,
      mgmt,
      egress,
      reservedPorts,
      ms: performance.now() - start,
    };
    if (bridge.length + providers.length + chassis.length + mgmt.length > 0 || egress || reservedPorts)
      this.log.info(report, "node setup changed");
    return report;
  }

  /** Keeps the state reconciled until stop(): OVSDB changes trigger a pass, failures retry with backoff. */
  start(): void {
    const { client } = this.cfg;
    const onRoot = () => {
      const root = rootRow(client);
      const want = this.cfg.chassis;
      if (!want) return;
      if (!root || changedKeys(root.external_ids, chassisExternalIds(want)).length > 0) this.schedule(50);
    };
    const onBridge = (events: readonly RowEvent[]) => {
      // Pod ports change br-int's ports all the time; only its own settings matter here.
      const drifted = (r: Readonly<Record<string, unknown>>) =>
        r.fail_mode !== "secure" ||
        r.datapath_type !== this.cfg.bridge.datapathType ||
        (r.other_config as Record<string, string>)["disable-in-band"] !== "true";
      if (
        events.some((e) => rowOf(e).name === this.cfg.bridge.name && (e.kind === "delete" || drifted(e.row)))
      )
        this.schedule(50);
      // A provider bridge removed (or created by an admin) changes what the next pass does.
      const providerBridges = new Set((this.cfg.providers ?? []).map((p) => p.bridge));
      if (events.some((e) => e.kind !== "update" && providerBridges.has(rowOf(e).name as string)))
        this.schedule(50);
    };
    const onInterface = (events: readonly RowEvent[]) => {
      if (!this.cfg.mgmt) return;
      const name = this.cfg.mgmt.ifname ?? MGMT_IFNAME;
      // ovs-vswitchd recreating the tap shows as a new ifindex; the agent's own update does not.
      const touched = events.some(
        (e) =>
          rowOf(e).name === name &&
          (e.kind === "delete" || (rowOf(e).ifindex ?? 0) !== (this.mgmtApplied?.ifindex ?? 0)),
      );
      if (touched) this.schedule(50);
    };
    this.unsubscribe = [
      client.cache.subscribe("Open_vSwitch", onRoot),
      client.cache.subscribe("Bridge", onBridge),
      client.cache.subscribe("Interface", onInterface),
    ];
    const every = this.cfg.resyncIntervalMs ?? 60_000;
    if (every > 0) {
      this.resync = setInterval(() => {
        this.forceApply = true;
        this.schedule(0);
      }, every);
      this.resync.unref();
    }
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    for (const u of this.unsubscribe) u();
    this.unsubscribe = [];
    if (this.timer) clearTimeout(this.timer);
    if (this.resync) clearInterval(this.resync);
    if (this.providerRetry) clearTimeout(this.providerRetry);
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.reconcile().then(
        () => this.backoff.reset(),
        (err: Error) => {
          const retryMs = this.backoff.next();
          this.log.warn({ err: err.message, retryMs }, "node setup failed; retrying");
          this.schedule(retryMs);
        },
      );
    }, delayMs);
    this.timer.unref();
  }
}
