// zstack-ovnkube-node: the per-node agent. Parses configuration and wires the pieces: node setup (br-int,
// chassis settings, management port, egress SNAT), Services on the host path (nftables DNAT, healthCheckNodePort,
// ServiceCIDR routes), pods' hostPorts (nftables DNAT), the CNI server and its handler, CNI install, health.

import { KubeConfig } from "@kubernetes/client-node";
import { Gauge } from "prom-client";
import { AgentCniHandler } from "../agent/cni-handler.ts";
import { loadNodeConfig, NodeConfigError, nodeConfigHelp } from "../agent/config.ts";
import { HealthCheckServers } from "../agent/health-check-server.ts";
import { HostPorts } from "../agent/host-ports.ts";
import { encapIpOf, NodeAddressError, nodeInternalIps } from "../agent/node-addresses.ts";
import { NodeProviders } from "../agent/node-providers.ts";
import { NodePods } from "../agent/pod-networks.ts";
import { apiServerIp, routeGuardFor } from "../agent/route-guard.ts";
import { ServiceProxy } from "../agent/service-proxy.ts";
import { mgmtRouteCidrs, SubnetRoutes } from "../agent/subnet-routes.ts";
import { installCniPlugin, writeConflist } from "../cni/install.ts";
import { CniServer } from "../cni/server.ts";
import { formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { type Cidr, formatCidr } from "../ipam/cidr.ts";
import { ApiClient } from "../k8s/api-client.ts";
import { EventRecorder } from "../k8s/events.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { type ChassisCheck, ChassisWatch } from "../node/external-chassis.ts";
import { externalSb } from "../node/external-sb.ts";
import { type HostAnchors, readHostAnchors } from "../node/host-network.ts";
import { parseInterfaceName } from "../node/interface-name.ts";
import { MGMT_IFNAME, MGMT_PORT_ANNOTATION, parseMgmtPortAnnotation } from "../node/mgmt-port.ts";
import { interfaceWithAddress, podMtu } from "../node/mtu.ts";
import { NodeSetup } from "../node/node-setup.ts";
import { INTEGRATION_BRIDGE } from "../node/ovs-bridge.ts";
import { PodAttacher } from "../node/pod-attachment.ts";
import {
  type ProviderGuard,
  providerGuardFrom,
  readHostInterfaces,
  unknownProviderGuard,
} from "../node/provider-guard.ts";
import {
  configuredMappingProblems,
  PROVIDER_BRIDGE_LABEL,
  PROVIDER_UPLINK_LABEL,
} from "../node/provider-labels.ts";
import { type EgressSnatSpec, enableForwarding } from "../node/snat.ts";
import { ovsRunDir as ovsRunDirOf } from "../node/udp-first-endpoint.ts";
import { EventLoopWatch } from "../observability/event-loop-watch.ts";
import { HealthServer, NODE_AGENT_HEALTH_PORT } from "../observability/health-server.ts";
import { createLogger } from "../observability/log.ts";
import { Metrics } from "../observability/metrics.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../ovsdb/models/vswitch.generated.ts";
import { runMain } from "./process-exit.ts";

interface NodeObject extends KubeObject {
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status?: { addresses?: { type: string; address: string }[] };
}

async function main(): Promise<number> {
  if (process.argv.slice(2).some((a) => a === "--help" || a === "-h")) {
    process.stdout.write(nodeConfigHelp());
    return 0;
  }
  let cfg: ReturnType<typeof loadNodeConfig>;
  try {
    cfg = loadNodeConfig(process.env, process.argv.slice(2));
  } catch (e) {
    if (e instanceof NodeConfigError) {
      process.stderr.write(`zstack-ovnkube-node: ${e.message}\n`);
      return await notReadyUntilStopped(e.message);
    }
    throw e;
  }
  const log = createLogger({ level: cfg.logLevel, format: "json", component: "zstack-ovnkube-node" });
  const kc = new KubeConfig();
  if (cfg.kubeconfig) kc.loadFromFile(cfg.kubeconfig);
  else kc.loadFromCluster();
  const api = new ApiClient(kc, { userAgent: `zstack-ovnkube-node/${cfg.nodeName}` });

  const metrics = new Metrics({ defaultLabels: { component: "node", node: cfg.nodeName } });
  const health = new HealthServer({ port: cfg.healthPort || NODE_AGENT_HEALTH_PORT, metrics, logger: log });

  // The Node object: our address (the tunnel endpoint by default) and the controller's management port.
  let node: NodeObject | undefined;
  for (let i = 0; !node; i++) {
    node = await api.request<NodeObject>(`/api/v1/nodes/${cfg.nodeName}`).catch((e) => {
      if (i % 20 === 0) log.warn({ err: (e as Error).message }, "waiting for this node's Node object");
      return undefined;
    });
    if (!node) await new Promise((r) => setTimeout(r, 500));
  }
  let encapAddress: IpAddress;
  try {
    encapAddress = encapIpOf(cfg.encapIp, cfg.nodeName, node);
  } catch (e) {
    if (!(e instanceof NodeAddressError)) throw e;
    log.error({ err: e.message }, "cannot choose the tunnel endpoint");
    process.stderr.write(`zstack-ovnkube-node: ${e.message}\n`);
    return 2;
  }
  const encapIp = formatIp(encapAddress);

  const vswitch = new OvsdbClient<VswitchTables>({
    remotes: cfg.ovsDb,
    model: vswitchModel,
    logger: log.child({ db: "vswitch" }),
    comment: `zstack-ovnkube-node ${cfg.nodeName}`,
  });
  vswitch.on("connectFailed", (e) => log.warn({ err: e.message }, "cannot reach the local OVS database yet"));
  await vswitch.connect({ retry: true });

  const mtu =
    cfg.mtu ||
    podMtu({
      encapMtu: (await interfaceWithAddress(encapIp).catch(() => ({ mtu: 1500 }))).mtu,
      encapType: cfg.tunnel,
    });
  // Pod access sources are SNATed to the service SNAT address, known once the controller's annotation is read.
  const egress: EgressSnatSpec | undefined =
    cfg.gatewayMode === "local"
      ? {
          mgmtIfname: parseInterfaceName(MGMT_IFNAME, "MGMT_IFNAME"),
          insideCidrs: [...cfg.clusterCIDRs, ...cfg.serviceCIDRs, cfg.joinCIDR],
          nodeIps: [encapAddress],
          podAccessSources: cfg.podAccessFrom,
        }
      : undefined;
  let podAccessKey = "";
  let providerEvents: EventRecorder | undefined;
  const nodeRef = { apiVersion: "v1", kind: "Node", name: cfg.nodeName };
  // Provider mappings: node.bridgeMappings with the Node's provider labels applied, following the Node.
  const providers = new NodeProviders({
    node: cfg.nodeName,
    configured: cfg.providers,
    warn: (p) => providerEvents?.warning(nodeRef, "ProviderLabelInvalid", p),
    log,
  });
  // What a provider mapping must never take here: the interfaces holding the node's addresses and routes, br-int,
  // the underlay bridge, a bridge's existing uplink. Read afresh before each use of the labels.
  // A failed read keeps the last one read (a passing hiccup must not take a working provider's bridge away); with
  // none yet, no uplink label is taken.
  let hostInterfaces: ReadonlyMap<string, string> | undefined;
  const readProviderGuard = async (): Promise<ProviderGuard> => {
    try {
      hostInterfaces = await readHostInterfaces();
    } catch (e) {
      log.warn({ err: (e as Error).message }, "cannot read the node's addresses and routes");
      if (hostInterfaces === undefined) return unknownProviderGuard((e as Error).message);
    }
    return providerGuardFrom(vswitch, hostInterfaces);
  };
  const startGuard = await readProviderGuard();
  const badUplinks = configuredMappingProblems(cfg.providers, startGuard.hostInterfaces);
  if (badUplinks.length > 0) {
    const problem = badUplinks.join("; ");
    log.error({ problem }, "bad configuration");
    process.stderr.write(`zstack-ovnkube-node: ${problem}\n`);
    await vswitch.close();
    api.close();
    return await notReadyUntilStopped(problem);
  }
  providers.update(node.metadata.labels, startGuard);
  const bridgeMappings = providers.bridgeMappings;
  let chassisSettings = {
    ovnRemote: cfg.sbdbAddress,
    encapType: cfg.tunnel,
    encapIp,
    systemId: cfg.chassisName,
    bridgeDatapathType: cfg.datapathType,
    hostname: cfg.nodeName,
    ...(bridgeMappings === undefined ? {} : { bridgeMappings }),
  };
  // In External mode ovn-controller gets its settings only once SB shows the chassis name is free.
  let chassisHanded = cfg.ovnMode !== "external";
  // External mode: the SB is ZStack's. ovn-controller gets the chassis name only once SB shows it is free (or
  // already this node's); the encapsulation of ZStack's chassis is compared with ours, following SB.
  const external = cfg.ovnMode === "external" ? startExternalChassis() : undefined;
  function startExternalChassis() {
    // A wrong address or a bad certificate: not Ready naming the setting and the fix, retrying; the certificate
    // files are read at every attempt (a missing or renewed Secret needs no restart).
    const conn = externalSb({
      remotes: cfg.sbdbAddress,
      ...(cfg.ssl.enabled
        ? {
            ssl: {
              caCert: cfg.ssl.caCert,
              clientCert: cfg.ssl.clientCert,
              clientKey: cfg.ssl.clientKey,
              verifyHostname: cfg.ssl.verifyHostname,
            },
          }
        : {}),
      logger: log.child({ db: "sb" }),
    });
    const sb = conn.client;
    const problems = new Gauge({
      name: "zstack_ovn_node_external_problem",
      help: "1 while the External mode check finds the problem: chassis-name-conflict, encap-mismatch",
      labelNames: ["problem"],
      registers: [metrics.registry],
    });
    problems.set({ problem: "chassis-name-conflict" }, 0);
    problems.set({ problem: "encap-mismatch" }, 0);
    const watch = new ChassisWatch({
      client: sb,
      self: {
        name: cfg.chassisName,
        hostname: cfg.nodeName,
        encapType: cfg.tunnel,
        encapSetting: "tunnel.type",
      },
      onChange: (check: ChassisCheck) => {
        const node = { apiVersion: "v1", kind: "Node", name: cfg.nodeName };
        problems.set({ problem: "chassis-name-conflict" }, check.conflict ? 1 : 0);
        problems.set({ problem: "encap-mismatch" }, check.encapMismatch ? 1 : 0);
        if (check.conflict) {
          log.error({ chassis: cfg.chassisName, problem: check.conflict }, "chassis name taken in SB");
          providerEvents?.warning(node, "ChassisNameConflict", check.conflict);
        }
        if (check.encapMismatch) {
          log.warn({ problem: check.encapMismatch }, "encapsulation differs from ZStack's chassis");
          providerEvents?.warning(node, "EncapsulationMismatch", check.encapMismatch);
        }
        if (!check.conflict && !check.encapMismatch)
          log.info({ chassis: cfg.chassisName }, "SB chassis check passed");
      },
      vswitch,
      // Once cleared, the name stays: the chassis of that name is then ovn-controller's own.
      onCleared: () => {
        chassisHanded = true;
        setup.update({ chassis: chassisSettings });
      },
    });
    return { sb, watch, conn };
  }
  const setup = new NodeSetup({
    client: vswitch,
    bridge: { name: INTEGRATION_BRIDGE, datapathType: cfg.datapathType },
    ...(external ? {} : { chassis: chassisSettings }),
    providers: providers.mappings,
    // A provider network problem is the node's: a Warning Event on it (the log has it on every pass).
    onProviderProblems: (problems) => {
      for (const p of problems)
        providerEvents?.warning(
          { apiVersion: "v1", kind: "Node", name: cfg.nodeName },
          "ProviderNetworkProblem",
          p,
        );
    },
    ...(egress ? { egress } : {}),
    reserveReplyPorts: true,
    logger: log,
  });
  const nodeInformer = new Informer<NodeObject>({
    client: api,
    path: "/api/v1/nodes",
    fieldSelector: `metadata.name=${cfg.nodeName}`,
    logger: log.child({ informer: "node" }),
  });
  // The management port needs both the controller's node annotation and the Subnets' routes.
  let mgmtAnnotation: ReturnType<typeof parseMgmtPortAnnotation>;
  let subnetCidrs: readonly Cidr[] = [];
  let serviceCidrRoutes: readonly Cidr[] = [];
  const applyMgmt = () => {
    const ann = mgmtAnnotation;
    if (!ann) return;
    setup.update({
      mgmt: {
        bridge: INTEGRATION_BRIDGE,
        lspName: ann.name,
        mac: ann.mac,
        ip: ann.ip,
        gateway: ann.gateway,
        routeCidrs: mgmtRouteCidrs(
          [...cfg.clusterCIDRs, ...cfg.serviceCIDRs, ...serviceCidrRoutes],
          subnetCidrs,
        ),
        mtu,
      },
    });
  };
  // What Subnet routes must stay clear of follows the Node (its addresses) and the host (its default gateways
  // and uplink networks, re-read on every Node event), not a snapshot taken at startup.
  const apiServer = apiServerIp(kc.getCurrentCluster()?.server);
  let nodeNow: NodeObject = node;
  let host: HostAnchors | undefined;
  const guard = () =>
    routeGuardFor({
      joinCidr: cfg.joinCIDR,
      serviceCidrs: cfg.serviceCIDRs,
      encapIp: encapAddress,
      node: nodeNow,
      apiServer,
      host,
    });
  const readHost = () =>
    readHostAnchors(encapAddress).then(
      (h) => {
        host = h;
      },
      (e) => log.warn({ err: (e as Error).message }, "cannot read the node's default gateways and uplink"),
    );
  await readHost();
  const subnetRoutes = new SubnetRoutes(
    api,
    guard(),
    (cidrs) => {
      log.info({ subnets: cidrs.map(formatCidr) }, "Subnet routes via the management port");
      subnetCidrs = cidrs;
      applyMgmt();
    },
    log,
  );
  // Services on the host path: DNAT for the node's own and external traffic, kube-proxy's job.
  const services = new ServiceProxy({
    api,
    node: cfg.nodeName,
    mgmtIfname: parseInterfaceName(MGMT_IFNAME, "MGMT_IFNAME"),
    ranges: { clusterCIDRs: cfg.clusterCIDRs, serviceCIDRs: cfg.serviceCIDRs, joinCIDRs: [cfg.joinCIDR] },
    ...(apiServer ? { apiServerIps: [apiServer] } : {}),
    clusterCidrs: cfg.clusterCIDRs,
    routeGuard: guard,
    onServiceCidrs: (cidrs) => {
      log.info({ serviceCidrs: cidrs.map(formatCidr) }, "ServiceCIDR routes via the management port");
      serviceCidrRoutes = cidrs;
      applyMgmt();
    },
    healthChecks: new HealthCheckServers(log.child({ component: "health-check-node-port" })),
    // With DPDK the chart mounts OVS's run directory at dpdk.socketDir: ovs-appctl looks for ovs-vswitchd there.
    ...(ovsRunDirOf(cfg.ovsDb) === undefined ? {} : { ovsRunDir: ovsRunDirOf(cfg.ovsDb) }),
    log: log.child({ component: "services" }),
  });
  services.setNodeIps(nodeInternalIps(node));
  // External traffic to a NodePort is forwarded to pods whatever the gateway mode.
  await enableForwarding([...new Set([...cfg.clusterCIDRs.map((c) => c.family)])]);
  let providerPass = Promise.resolve();
  const onNode = (n: NodeObject) => {
    nodeNow = n;
    // One after another, each with the labels of the latest Node and a fresh guard.
    providerPass = providerPass
      .then(async () => {
        const labels = nodeNow.metadata.labels;
        // The guard costs three processes; a Node without provider labels (most updates) does not need it.
        const used = Object.keys(labels ?? {}).some(
          (k) => k.startsWith(PROVIDER_BRIDGE_LABEL) || k.startsWith(PROVIDER_UPLINK_LABEL),
        );
        if (!providers.update(labels, used ? await readProviderGuard() : undefined)) return;
        const value = providers.bridgeMappings;
        chassisSettings = { ...chassisSettings, ...(value === undefined ? {} : { bridgeMappings: value }) };
        setup.update({
          providers: providers.mappings,
          ...(chassisHanded ? { chassis: chassisSettings } : {}),
        });
      })
      .catch((e) => log.error({ err: (e as Error).message }, "cannot apply the Node's provider labels"));
    services.setNodeIps(nodeInternalIps(n));
    subnetRoutes.setGuard(guard());
    services.guardChanged();
    void readHost().then(() => {
      subnetRoutes.setGuard(guard());
      services.guardChanged();
    });
    const ann = parseMgmtPortAnnotation(
      n.metadata.annotations?.[MGMT_PORT_ANNOTATION],
      { node: cfg.nodeName, joinCidr: cfg.joinCIDR },
      (why) => log.warn({ annotation: MGMT_PORT_ANNOTATION, why }, "ignoring the management port annotation"),
      (why) =>
        log.warn(
          { annotation: MGMT_PORT_ANNOTATION, why },
          "ignoring a field of the management port annotation",
        ),
    );
    if (!ann) return;
    mgmtAnnotation = ann;
    const serviceSnatIps = ann.serviceSnatIp ? [parseIp(ann.serviceSnatIp)] : [];
    services.setServiceSnatIps(serviceSnatIps);
    services.setNodeReplyIps((ann.nodeReplyIps ?? []).map((t) => parseIp(t)));
    const accessKey = serviceSnatIps.map(formatIp).join(",");
    if (egress && cfg.podAccessFrom.length > 0 && accessKey !== podAccessKey) {
      podAccessKey = accessKey;
      setup.update({ egress: { ...egress, podAccessSnatIps: serviceSnatIps } });
    }
    applyMgmt();
  };
  nodeInformer.addHandlers({ onAdd: onNode, onUpdate: (_o, n) => onNode(n) }, { replay: true });
  nodeInformer.start();
  subnetRoutes.start();
  void services.start().catch((e) => log.error({ err: (e as Error).message }, "Services did not start"));
  setup.start();

  const attacher = new PodAttacher({
    client: vswitch,
    mtu,
    userspaceDatapath: cfg.datapathType === "netdev",
  });
  const pods = new NodePods(api, cfg.nodeName, log);
  // Pods' hostPorts, the portmap plugin's job, from the same informer of this node's pods.
  const events = new EventRecorder({
    client: api,
    component: "zstack-ovnkube-node",
    host: cfg.nodeName,
    logger: log,
  });
  providerEvents = events;
  for (const p of providers.problems) events.warning(nodeRef, "ProviderLabelInvalid", p);
  // After the recorder exists, so that the first check's Events are not lost.
  if (external) {
    external.watch.start();
    void external.sb.connect({ retry: true }).catch((e) => log.error({ err: (e as Error).message }, "SB"));
  }
  const hostPorts = new HostPorts({
    pods: pods.informer,
    mgmtIfname: parseInterfaceName(MGMT_IFNAME, "MGMT_IFNAME"),
    events,
    log: log.child({ component: "host-ports" }),
  });
  pods.start();
  void hostPorts.start().catch((e) => log.error({ err: (e as Error).message }, "hostPorts did not start"));
  await pods.informer.waitForSync();
  const notReady = () => {
    if (!vswitch.connected) return `not connected to the local OVS database ${cfg.ovsDb}`;
    if (external) {
      const check = external.watch.check;
      if (!check)
        return (
          external.conn.problem() ?? `connected to ZStack's SB ${cfg.sbdbAddress}, chassis check pending`
        );
      if (check.conflict) return check.conflict;
      if (check.encapMismatch) return check.encapMismatch;
    }
    if (!setup.mgmtConfigured)
      return "the management port is not set up yet (waiting for zstack-ovnkube-controller's node annotation)";
    return undefined;
  };
  const handler = new AgentCniHandler({
    attacher,
    pods,
    log,
    notReady,
    annotationBudgetMs: cfg.annotationBudgetMs,
    routeDestinations: [...cfg.clusterCIDRs, ...cfg.serviceCIDRs, cfg.joinCIDR],
  });
  const server = new CniServer({
    socketPath: cfg.cniSocket,
    handler,
    logger: log,
    registry: metrics.registry,
  });
  await server.listen();
  if (cfg.cniBinary) await installCniPlugin(cfg.cniBinary, cfg.cniBinDir);
  // The conflist comes last: its presence tells the runtime the network is ready.
  await writeConflist(cfg.cniConfDir, {
    ...(cfg.cniSocket !== "/var/run/zstack-ovn/cni-server.sock" ? { socketPath: cfg.cniSocket } : {}),
    mtu,
  });
  const loop = new EventLoopWatch();
  loop.start();
  health.addLivenessCheck("event-loop", loop.check);
  health.addReadinessCheck("agent", () => notReady() ?? true);
  await health.start();
  log.info({ node: cfg.nodeName, encapIp, mtu, datapath: cfg.datapathType, tunnel: cfg.tunnel }, "started");

  await new Promise<void>((resolve) => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => resolve());
  });
  log.info({}, "shutting down");
  await server.close();
  setup.stop();
  external?.watch.stop();
  await external?.sb.close();
  await hostPorts.stop();
  await Promise.all([pods.stop(), nodeInformer.stop(), subnetRoutes.stop(), services.stop()]);
  await events.close();
  await vswitch.close();
  loop.stop();
  await health.stop();
  api.close();
  return 0;
}

/**
 * Bad configuration: the agent stays up, not Ready, with the problem on /readyz and in its log, instead of exiting
 * into a crash loop; a fixed configuration takes effect when the pod is restarted.
 */
async function notReadyUntilStopped(problem: string): Promise<number> {
  const port = Number.parseInt(process.env.ZSTACK_HEALTH_PORT ?? "", 10);
  const health = new HealthServer({
    port: port > 0 && port < 65536 ? port : NODE_AGENT_HEALTH_PORT,
    metrics: new Metrics({ defaultLabels: { component: "node" } }),
  });
  health.addReadinessCheck("configuration", () => `bad configuration: ${problem}`);
  try {
    await health.start();
  } catch (e) {
    process.stderr.write(`zstack-ovnkube-node: cannot serve /readyz: ${(e as Error).message}\n`);
  }
  await new Promise<void>((resolve) => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => resolve());
  });
  await health.stop();
  return 2;
}

runMain("zstack-ovnkube-node", main);
