// zstack-ovnkube-controller: parses configuration and wires the pieces together. Only the Lease holder
// reconciles; the others wait, serving health and metrics.

import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, controllerConfigHelp, loadControllerConfig } from "../config/controller-config.ts";
import { OvnController } from "../controller/controller.ts";
import { ApiClient } from "../k8s/api-client.ts";
import { EventRecorder } from "../k8s/events.ts";
import { LeaderElector } from "../k8s/leader-election.ts";
import { HealthServer } from "../observability/health-server.ts";
import { createLogger } from "../observability/log.ts";
import { Metrics } from "../observability/metrics.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { runMain } from "./process-exit.ts";

async function main(): Promise<number> {
  let loaded: ReturnType<typeof loadControllerConfig>;
  try {
    loaded = loadControllerConfig({ argv: process.argv.slice(2), env: process.env });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`zstack-ovnkube-controller: ${e.message}\n`);
      return 2;
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

  const kc = new KubeConfig();
  if (cfg.kubernetes.kubeconfig) kc.loadFromFile(cfg.kubernetes.kubeconfig);
  else kc.loadFromCluster();
  const api = new ApiClient(kc, { userAgent: "zstack-ovnkube-controller" });

  const ssl = cfg.ovn.ssl;
  const nb = new OvsdbClient<NbTables>({
    remotes: cfg.ovn.nbdbAddress,
    model: nbModel,
    ...(ssl.enabled
      ? {
          tls: {
            ca: readFileSync(ssl.caCert),
            cert: readFileSync(ssl.clientCert),
            key: readFileSync(ssl.clientKey),
            verifyHostname: ssl.verifyHostname,
          },
        }
      : {}),
    logger: log.child({ db: "nb" }),
    // ovsdb-tool show-log names the replica behind each write.
    comment: `zstack-ovnkube-controller ${cfg.controller.identity}`,
  });
  nb.on("connectFailed", (e) => log.warn({ err: e.message }, "cannot reach the OVN northbound database yet"));

  const metrics = new Metrics({ defaultLabels: { component: "controller" } });
  const health = new HealthServer({ port: cfg.controller.metricsPort, metrics, logger: log });
  health.addLivenessCheck("event-loop", () => true);
  health.addReadinessCheck("ovn-nb", () => (nb.connected ? true : `not connected to ${cfg.ovn.nbdbAddress}`));
  await health.start();
  const events = new EventRecorder({
    client: api,
    component: "zstack-ovnkube-controller",
    host: cfg.controller.identity,
    logger: log,
  });

  const connecting = nb.connect({ retry: true });
  const lead = async (signal: AbortSignal) => {
    metrics.leader.set(1);
    signal.addEventListener("abort", () => metrics.leader.set(0), { once: true });
    await connecting;
    const ctl = new OvnController({
      api,
      nb,
      clusterCIDR: cfg.network.clusterCIDR,
      serviceCIDRs: cfg.network.serviceCIDR.split(",").map((s) => s.trim()),
      joinCIDR: cfg.network.joinCIDR,
      tunnel: cfg.tunnel.type,
      workers: cfg.controller.workers,
      log,
      metrics,
      events,
    });
    await ctl.run(signal);
  };

  const stopping = new AbortController();
  let elector: LeaderElector | undefined;
  let running: Promise<void> | undefined;
  if (cfg.controller.leaderElect) {
    elector = new LeaderElector({
      client: api,
      namespace: cfg.controller.leaseNamespace,
      name: cfg.controller.leaseName,
      identity: cfg.controller.identity,
      onStartedLeading: (signal) => lead(signal),
      onStoppedLeading: () => log.warn({}, "lost leadership; no longer writing"),
      onNewLeader: (id) => log.info({ leader: id }, "leader"),
      logger: log,
    });
    elector.start();
  } else {
    running = lead(stopping.signal);
  }
  log.info(
    { nb: cfg.ovn.nbdbAddress, port: cfg.controller.metricsPort, leaderElect: cfg.controller.leaderElect },
    "started",
  );

  await new Promise<void>((resolve) => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => resolve());
  });
  log.info({}, "shutting down");
  stopping.abort();
  // Releasing the Lease lets another replica take over at once instead of after the lease duration.
  await elector?.stop({ release: true });
  await running?.catch(() => {});
  await events.close();
  await nb.close();
  await health.stop();
  api.close();
  return 0;
}

runMain("zstack-ovnkube-controller", main);
