// Configuration of zstack-ovnkube-controller: its settings table, read by the shared loader (flags, ZSTACK_*
// variables, config file; src/config/loader.ts), then the values it derives and the checks across settings.
// docs/configuration.md lists the same table.

import { hostname } from "node:os";
import { overlaps } from "../ipam/cidr.ts";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "../observability/log.ts";
import {
  ConfigError,
  type LoadOptions,
  loadSettings,
  PORT,
  type Program,
  type Setting,
  type Source,
  settingName,
  settingsHelp,
} from "./loader.ts";

export { ConfigError, type LoadOptions, type Setting, type Source } from "./loader.ts";

export type OvnMode = "standalone" | "external";
export type GatewayMode = "local" | "shared";
export type TunnelType = "vxlan" | "geneve";

export interface ControllerConfig {
  ovn: {
    mode: OvnMode;
    /** OVS remote list, e.g. "ssl:10.0.0.1:6641,ssl:10.0.0.2:6641"; required in external mode. */
    nbdbAddress: string;
    sbdbAddress: string;
    ssl: { enabled: boolean; verifyHostname: boolean; caCert: string; clientCert: string; clientKey: string };
  };
  network: {
    /** One CIDR, or an IPv4 and an IPv6 one separated by a comma. */
    clusterCIDR: string;
    serviceCIDR: string;
    joinCIDR: string;
    nodeSubnetSize: number;
    /** 0: detect from the node's uplink. */
    mtu: number;
  };
  gateway: { mode: GatewayMode; interface: string };
  tunnel: { type: TunnelType; port: number };
  logging: { level: LogLevel; format: LogFormat };
  kubernetes: {
    /** Empty: the in-cluster service account. */
    kubeconfig: string;
  };
  controller: {
    workers: number;
    /** Serves /healthz, /readyz and /metrics. */
    metricsPort: number;
    leaderElect: boolean;
    leaseNamespace: string;
    leaseName: string;
    /** This replica's name in the Lease; the pod name. */
    identity: string;
    /** Empty: off. A file the informers append one JSON line per watch event to (observability/watch-trace.ts). */
    watchTraceFile: string;
  };
}

export const CONTROLLER_SETTINGS: readonly Setting[] = [
  {
    key: "ovn.mode",
    env: "ZSTACK_OVN_MODE",
    flag: "ovn-mode",
    kind: { type: "enum", values: ["standalone", "external"] },
    default: "standalone",
    doc: "standalone: the chart runs OVN central; external: use the NB/SB of an existing OVN (ZStack), given by ovn.nbdbAddress and ovn.sbdbAddress (docs/external-mode.md).",
  },
  {
    key: "ovn.nbdbAddress",
    env: "ZSTACK_OVN_NBDB_ADDRESS",
    flag: "nbdb-address",
    kind: { type: "remotes" },
    default: "",
    doc: "Northbound DB remotes, comma-separated tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH. Required in external mode.",
  },
  {
    key: "ovn.sbdbAddress",
    env: "ZSTACK_OVN_SBDB_ADDRESS",
    flag: "sbdb-address",
    kind: { type: "remotes" },
    default: "",
    doc: "Southbound DB remotes, same form. Required in external mode.",
  },
  {
    key: "ovn.ssl.enabled",
    env: "ZSTACK_OVN_SSL_ENABLED",
    flag: "ovn-ssl",
    kind: { type: "bool" },
    default: false,
    doc: "Use TLS (ssl: remotes) with the three files below.",
  },
  {
    key: "ovn.ssl.verifyHostname",
    env: "ZSTACK_OVN_SSL_VERIFY_HOSTNAME",
    flag: "ovn-ssl-verify-hostname",
    kind: { type: "bool" },
    default: false,
    doc: "Also check the ssl: remote's host name against its certificate. OVS itself checks only that the certificate chains to the CA (ovs-pki certificates name no host); turn this on when the certificates carry the names or addresses the remotes use.",
  },
  {
    key: "ovn.ssl.caCert",
    env: "ZSTACK_OVN_SSL_CA",
    flag: "ovn-ssl-ca",
    kind: { type: "string" },
    default: "",
    doc: "CA certificate file that signed the OVN servers' certificates.",
  },
  {
    key: "ovn.ssl.clientCert",
    env: "ZSTACK_OVN_SSL_CERT",
    flag: "ovn-ssl-cert",
    kind: { type: "string" },
    default: "",
    doc: "Client certificate file.",
  },
  {
    key: "ovn.ssl.clientKey",
    env: "ZSTACK_OVN_SSL_KEY",
    flag: "ovn-ssl-key",
    kind: { type: "string" },
    default: "",
    doc: "Client private key file.",
  },
  {
    key: "network.clusterCIDR",
    env: "ZSTACK_CLUSTER_CIDR",
    flag: "cluster-cidr",
    kind: { type: "cidrs" },
    default: "10.244.0.0/16",
    doc: "Pod network; an IPv4 and an IPv6 CIDR separated by a comma for dual stack.",
  },
  {
    key: "network.serviceCIDR",
    env: "ZSTACK_SERVICE_CIDR",
    flag: "service-cidr",
    kind: { type: "cidrs" },
    default: "10.96.0.0/16",
    doc: "Service network; must match kube-apiserver's --service-cluster-ip-range.",
  },
  {
    key: "network.joinCIDR",
    env: "ZSTACK_JOIN_CIDR",
    flag: "join-cidr",
    kind: { type: "cidrs" },
    default: "100.64.0.0/16",
    doc: "Join network between the cluster router and the nodes' management ports.",
  },
  {
    key: "network.nodeSubnetSize",
    env: "ZSTACK_NODE_SUBNET_SIZE",
    flag: "node-subnet-size",
    kind: { type: "int", min: 8, max: 30 },
    default: 24,
    doc: "IPv4 prefix length of a per-node pod subnet.",
  },
  {
    key: "network.mtu",
    env: "ZSTACK_MTU",
    flag: "mtu",
    kind: { type: "int", min: 0, max: 9000, note: "0 (detect) or an integer from 576 to 9000" },
    default: 0,
    doc: "Pod interface MTU; 0 detects it from the uplink minus the tunnel overhead.",
  },
  {
    key: "gateway.mode",
    env: "ZSTACK_GATEWAY_MODE",
    flag: "gateway-mode",
    kind: { type: "enum", values: ["local", "shared"] },
    default: "local",
    doc: "local: egress through the node's kernel; shared: through OVS on the node's uplink.",
  },
  {
    key: "gateway.interface",
    env: "ZSTACK_GATEWAY_INTERFACE",
    flag: "gateway-interface",
    kind: { type: "string" },
    default: "",
    doc: "Uplink for shared mode; empty: the interface of the default route.",
  },
  {
    key: "tunnel.type",
    env: "ZSTACK_TUNNEL_TYPE",
    flag: "tunnel-type",
    kind: { type: "enum", values: ["vxlan", "geneve"] },
    default: "vxlan",
    doc: "Overlay encapsulation between nodes.",
  },
  {
    key: "tunnel.port",
    env: "ZSTACK_TUNNEL_PORT",
    flag: "tunnel-port",
    kind: PORT,
    default: undefined,
    doc: "UDP port of the tunnel; default 4789 for vxlan, 6081 for geneve.",
  },
  {
    key: "logging.level",
    env: "ZSTACK_LOG_LEVEL",
    flag: "log-level",
    kind: { type: "enum", values: LOG_LEVELS },
    default: "info",
    doc: "Least severe level logged.",
  },
  {
    key: "logging.format",
    env: "ZSTACK_LOG_FORMAT",
    flag: "log-format",
    kind: { type: "enum", values: LOG_FORMATS },
    default: "json",
    doc: "json: one JSON object per line; text: one readable line.",
  },
  {
    key: "kubernetes.kubeconfig",
    env: "ZSTACK_KUBECONFIG",
    flag: "kubeconfig",
    kind: { type: "string" },
    default: "",
    doc: "Kubeconfig file; empty: the pod's service account (in-cluster).",
  },
  {
    key: "controller.workers",
    env: "ZSTACK_WORKERS",
    flag: "workers",
    kind: { type: "int", min: 1, max: 64 },
    default: 4,
    doc: "Reconcile workers of the pods queue, and as many of the pod-annotations queue; the Services queue has four times as many (a Service reconcile mostly waits for NB's answer).",
  },
  {
    key: "controller.metricsPort",
    env: "ZSTACK_METRICS_PORT",
    flag: "metrics-port",
    kind: PORT,
    default: 10660,
    doc: "Port of /healthz, /readyz and /metrics.",
  },
  {
    key: "controller.leaderElect",
    env: "ZSTACK_LEADER_ELECT",
    flag: "leader-elect",
    kind: { type: "bool" },
    default: true,
    doc: "Elect one active replica through a Lease; turn off only with a single replica.",
  },
  {
    key: "controller.leaseNamespace",
    env: "ZSTACK_LEASE_NAMESPACE",
    flag: "lease-namespace",
    kind: { type: "string" },
    default: "kube-system",
    doc: "Namespace of the leader-election Lease.",
  },
  {
    key: "controller.leaseName",
    env: "ZSTACK_LEASE_NAME",
    flag: "lease-name",
    kind: { type: "string" },
    default: "zstack-ovnkube-controller",
    doc: "Name of the leader-election Lease.",
  },
  {
    key: "controller.identity",
    env: "ZSTACK_POD_NAME",
    flag: "identity",
    kind: { type: "string" },
    default: undefined,
    doc: "This replica's identity in the Lease; default the host name (the pod name in a pod).",
  },
  {
    key: "controller.watchTraceFile",
    env: "ZSTACK_WATCH_TRACE_FILE",
    flag: "watch-trace-file",
    kind: { type: "string" },
    default: "",
    doc: 'For benchmarks and latency debugging: a file to which every watch event reaching the controller\'s informers appends one JSON line, `{"resource","type","key","rv","t"}`, `t` being the arrival in ms since the Unix epoch (`performance.timeOrigin + performance.now()`). Grows without bound; empty (the default): off.',
  },
];

export interface LoadedConfig {
  config: ControllerConfig;
  /** Where each setting's value came from, by key. */
  sources: Record<string, Source>;
  configFile?: string;
  /** Keys in the config file this program does not read (other Helm values, or typos). */
  warnings: string[];
  /** --help was given: print controllerConfigHelp() and exit. */
  help: boolean;
}

const CONTROLLER: Program = { name: "zstack-ovnkube-controller", settings: CONTROLLER_SETTINGS };

export function loadControllerConfig(opts: LoadOptions = {}): LoadedConfig {
  const r = loadSettings(CONTROLLER, opts);
  const problems = r.problems;
  const c = r.values as unknown as ControllerConfig;
  if (problems.length === 0) {
    c.tunnel.port ??= c.tunnel.type === "geneve" ? 6081 : 4789;
    c.controller.identity ??= opts.hostname ?? hostname();
    problems.push(...crossCheck(c));
  }
  if (problems.length > 0 && !r.help) throw new ConfigError(problems);
  return {
    config: c,
    sources: r.sources,
    ...(r.configFile ? { configFile: r.configFile } : {}),
    warnings: r.warnings,
    help: r.help,
  };
}

function crossCheck(c: ControllerConfig): string[] {
  const problems: string[] = [];
  const name = (key: string) => settingName(CONTROLLER, key);
  // External mode: the NB and SB are ZStack's, on another host; there is no default to fall back on.
  if (c.ovn.mode === "external") {
    for (const key of ["ovn.nbdbAddress", "ovn.sbdbAddress"] as const) {
      const db = key === "ovn.nbdbAddress" ? "northbound" : "southbound";
      const port = key === "ovn.nbdbAddress" ? 6641 : 6642;
      if (!c.ovn[key === "ovn.nbdbAddress" ? "nbdbAddress" : "sbdbAddress"])
        problems.push(
          `${name("ovn.mode")}=external needs ${name(key)}: the ${db} database ZStack manages, e.g. tcp:ZSTACK_OVN_HOST:${port} (every Raft member, comma-separated)`,
        );
    }
  }
  // Accepted by the schema (seed §8) so that values files keep their shape, refused until it is built: a
  // setting that is silently ignored is worse than one that stops the controller with the reason.
  if (c.gateway.mode === "shared")
    problems.push(
      `${name("gateway.mode")}=shared is not supported yet: pod egress goes through the node's kernel; set it to local`,
    );
  const remotes = [c.ovn.nbdbAddress, c.ovn.sbdbAddress].flatMap((r) => (r ? r.split(",") : []));
  if (c.ovn.ssl.enabled) {
    for (const key of ["ovn.ssl.caCert", "ovn.ssl.clientCert", "ovn.ssl.clientKey"] as const) {
      const field = key.split(".")[2] as "caCert" | "clientCert" | "clientKey";
      if (!c.ovn.ssl[field]) problems.push(`ovn.ssl.enabled=true needs ${name(key)}`);
    }
  } else if (remotes.some((r) => r.startsWith("ssl:"))) {
    problems.push(`ssl: remotes need ${name("ovn.ssl.enabled")}=true and its certificate files`);
  }
  const nets = [
    ["network.clusterCIDR", c.network.clusterCIDR],
    ["network.serviceCIDR", c.network.serviceCIDR],
    ["network.joinCIDR", c.network.joinCIDR],
  ] as const;
  for (let i = 0; i < nets.length; i++) {
    for (let j = i + 1; j < nets.length; j++) {
      const [ka, va] = nets[i] as (typeof nets)[number];
      const [kb, vb] = nets[j] as (typeof nets)[number];
      for (const a of va.split(",")) {
        for (const b of vb.split(",")) {
          if (overlaps(a, b)) problems.push(`${ka}=${a} overlaps ${kb}=${b}: the networks must be disjoint`);
        }
      }
    }
  }
  const v4 = c.network.clusterCIDR.split(",").find((x) => !x.includes(":"));
  if (v4) {
    const prefix = Number(v4.split("/")[1]);
    if (c.network.nodeSubnetSize <= prefix)
      problems.push(
        `network.nodeSubnetSize=${c.network.nodeSubnetSize} must be longer than the clusterCIDR prefix /${prefix}, so the cluster network holds several node subnets`,
      );
  }
  return problems;
}

/** --help text: every flag with its variable and default. */
export function controllerConfigHelp(): string {
  return settingsHelp(CONTROLLER);
}
