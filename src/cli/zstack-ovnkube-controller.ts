// zstack-ovnkube-controller: parses configuration and wires the pieces together. Only the Lease holder
// reconciles, one fresh controller per term of leadership (controller/supervisor.ts); the others stand by,
// serving health and metrics.

import { KubeConfig } from "@kubernetes/client-node";
import { type ConnectionSettings, connectionProblem } from "../config/connection-problem.ts";
import { ConfigError, controllerConfigHelp, loadControllerConfig } from "../config/controller-config.ts";
import { OvnController } from "../controller/controller.ts";
import { ControllerSupervisor } from "../controller/supervisor.ts";
import { ApiClient } from "../k8s/api-client.ts";
import { EventRecorder } from "../k8s/events.ts";
import { EventLoopWatch } from "../observability/event-loop-watch.ts";
import { CONTROLLER_HEALTH_PORT, HealthServer } from "../observability/health-server.ts";
import { createLogger } from "../observability/log.ts";
import { Metrics } from "../observability/metrics.ts";
import { WatchTrace } from "../observability/watch-trace.ts";
import { CHASSIS_GUARD_MONITOR } from "../ovn/chassis-mac-guard.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { type SbTables, sbModel } from "../ovsdb/models/sb.generated.ts";
import { notReadyUntilStopped } from "./not-ready.ts";
import { runMain } from "./process-exit.ts";

/** A reconcile running this long is wedged (awaiting something that never settles): liveness fails. */
const STALLED_RECONCILE_MS = 10 * 60_000;

async function main(): Promise<number> {
  let loaded: ReturnType<typeof loadControllerConfig>;
  try {
    loaded = loadControllerConfig({ argv: process.argv.slice(2), env: process.env });
  } catch (e) {
    if (e instanceof ConfigError) {
      // Not a crash loop: the pod stays up, not Ready, naming the problem, until it is restarted fixed.
      process.stderr.write(`zstack-ovnkube-controller: ${e.message}\n`);
      const port = Number.parseInt(process.env.ZSTACK_METRICS_PORT ?? "", 10);
      return await notReadyUntilStopped({
        program: "zstack-ovnkube-controller",
        component: "controller",
        port: port > 0 && port < 65536 ? port : CONTROLLER_HEALTH_PORT,
        problem: e.message,
      });
    }
    throw e;
  }
  if (loaded.help) {
    process.stdout.write(controllerConfigHelp());
    return 0;
  }
  const cfg = loaded.config;
  const log = createLogger({
    level: cfg.logging.level,
    format: cfg.logging.format,
    component: "zstack-ovnkube-controller",
  });
  for (const w of loaded.warnings) log.warn({ warning: w }, "configuration");

  let watchTrace: WatchTrace | undefined;
  if (cfg.controller.watchTraceFile) {
    try {
      watchTrace = WatchTrace.open(cfg.controller.watchTraceFile, log);
    } catch (e) {
      process.stderr.write(`zstack-ovnkube-controller: watch trace file: ${(e as Error).message}\n`);
      return 2;
    }
    log.info({ file: cfg.controller.watchTraceFile }, "tracing watch event arrivals");
  }

  const kc = new KubeConfig();
  if (cfg.kubernetes.kubeconfig) kc.loadFromFile(cfg.kubernetes.kubeconfig);
  else kc.loadFromCluster();
  const api = new ApiClient(kc, { userAgent: "zstack-ovnkube-controller" });

  const ssl = cfg.ovn.ssl;
  const nbSettings: ConnectionSettings = {
    what: "the OVN northbound database",
    addressSetting: "ovn.nbdbAddress (ZSTACK_OVN_NBDB_ADDRESS)",
    remotes: cfg.ovn.nbdbAddress,
    ...(ssl.enabled
      ? { ssl: { caCert: ssl.caCert, clientCert: ssl.clientCert, clientKey: ssl.clientKey } }
      : {}),
  };
  // NB and SB alike.
  const tls = ssl.enabled
    ? {
        tls: {
          ca: ssl.caCert,
          cert: ssl.clientCert,
          key: ssl.clientKey,
          verifyHostname: ssl.verifyHostname,
        },
      }
    : {};
  const nb = new OvsdbClient<NbTables>({
    remotes: cfg.ovn.nbdbAddress,
    model: nbModel,
    // File paths, read at every connection attempt: a fixed or renewed certificate Secret is used without a
    // restart, and a file that cannot be read is a reason on /readyz, not a crash.
    ...tls,
    logger: log.child({ db: "nb" }),
    // ovsdb-tool show-log names the replica behind each write.
    comment: `zstack-ovnkube-controller ${cfg.controller.identity}`,
  });
  let nbError: Error | undefined;
  nb.on("connectFailed", (e) => {
    nbError = e;
    log.warn(
      { err: e.message, problem: connectionProblem(nbSettings, e) },
      "cannot reach the OVN northbound database yet",
    );
  });
  nb.on("disconnected", (e) => {
    if (e) nbError = e;
  });

  // External mode: ZStack's SB, read only, for the chassis MAC guard (ovn/chassis-mac-guard.ts). Followed from any
  // member (no writes); while it is unreachable, the guard keeps router ports on flat/VLAN switches as they are.
  const sb =
    cfg.ovn.mode === "external" && cfg.ovn.sbdbAddress
      ? new OvsdbClient<SbTables>({
          remotes: cfg.ovn.sbdbAddress,
          model: sbModel,
          leaderOnly: false,
          monitor: CHASSIS_GUARD_MONITOR,
          ...tls,
          logger: log.child({ db: "sb" }),
        })
      : undefined;
  sb?.on("connectFailed", (e) =>
    log.warn({ err: e.message }, "cannot reach ZStack's southbound database yet (chassis MAC guard)"),
  );
  sb?.connect({ retry: true }).catch((err: unknown) => log.error({ err }, "cannot connect to ZStack's SB"));

  const metrics = new Metrics({ defaultLabels: { component: "controller" } });
  // Never posts itself: each term's controller records through events.fenced(term), so a deposed term's
  // Events are refused like its other writes; closing this one at shutdown flushes the current term's.
  const events = new EventRecorder({
    client: api,
    component: "zstack-ovnkube-controller",
    host: cfg.controller.identity,
    logger: log,
  });
  const connecting = nb.connect({ retry: true });
  const supervisor = new ControllerSupervisor({
    newController: () =>
      new OvnController({
        api,
        nb,
        clusterCIDR: cfg.network.clusterCIDR,
        serviceCIDRs: cfg.network.serviceCIDR.split(",").map((s) => s.trim()),
        joinCIDR: cfg.network.joinCIDR,
        tunnel: cfg.tunnel.type,
        ovnMode: cfg.ovn.mode,
        ...(sb ? { sb } : {}),
        workers: cfg.controller.workers,
        log,
        metrics,
        events,
        ...(watchTrace ? { watchTrace } : {}),
      }),
    ...(cfg.controller.leaderElect
      ? {
          election: {
            client: api,
            namespace: cfg.controller.leaseNamespace,
            name: cfg.controller.leaseName,
            identity: cfg.controller.identity,
          },
        }
      : {}),
    metrics,
    log,
  });

  // Readiness: a standby is ready (standing by, NB reachable), so that rollouts proceed; a replica holding
  // the Lease is ready once its controller finished the initial sync. Whether this replica is the one
  // reconciling is /leaderz and the zstack_ovn_leader gauge.
  const loop = new EventLoopWatch();
  loop.start();
  const health = new HealthServer({ port: cfg.controller.metricsPort, metrics, logger: log });
  health.addLivenessCheck("event-loop", loop.check);
  health.addLivenessCheck("workqueues", () => {
    const stalled = supervisor.stalledReconciles(STALLED_RECONCILE_MS);
    return stalled.length === 0 || `reconciles wedged: ${stalled.slice(0, 5).join(", ")}`;
  });
  health.addReadinessCheck("ovn-nb", () => (nb.connected ? true : connectionProblem(nbSettings, nbError)));
  health.addReadinessCheck("leadership", () => {
    const s = supervisor.status();
    return !s.holdsLease || s.synced || "holding the Lease, initial sync not finished";
  });
  health.addLeaderCheck("leading", () => {
    const s = supervisor.status();
    if (s.synced) return true;
    if (s.holdsLease) return "leading, initial sync not finished";
    const failed = s.lastFailure ? `; last term failed: ${s.lastFailure}` : "";
    return `standing by, the leader is ${s.leader || "unknown"}${failed}`;
  });
  await health.start();

  // The connection attempt runs in the background, and a replica campaigns for the Lease only once it has
  // reached NB: one that cannot (a wrong address, a bad certificate) would otherwise win the Lease when the
  // leader restarts and hold it, reconciling nothing, until its term gives up. A leader that loses NB later
  // keeps the term's own handling (it waits for NB inside the controller).
  let stopping = false;
  connecting.then(
    () => {
      if (!stopping) supervisor.start();
    },
    (err: unknown) => log.error({ err }, "cannot connect to the OVN northbound database"),
  );
  log.info(
    { nb: cfg.ovn.nbdbAddress, port: cfg.controller.metricsPort, leaderElect: cfg.controller.leaderElect },
    "started",
  );

  await new Promise<void>((resolve) => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => resolve());
  });
  log.info({}, "shutting down");
  stopping = true;
  // Releasing the Lease lets another replica take over at once instead of after the lease duration.
  await supervisor.stop();
  loop.stop();
  await events.close();
  await watchTrace?.close();
  await nb.close();
  await sb?.close();
  await health.stop();
  api.close();
  return 0;
}

runMain("zstack-ovnkube-controller", main);
