// Configuration of zstack-ovnkube-node: its settings table, read by the same loader as the controller's (flags,
// ZSTACK_* variables, config file; src/config/loader.ts), with the settings both programs read taken from the
// controller's table, so a key, variable or flag means one thing everywhere. docs/node-agent.md lists them.

import { hostname } from "node:os";
import { CONTROLLER_SETTINGS } from "../config/controller-config.ts";
import {
  ConfigError,
  type LoadOptions,
  loadSettings,
  PORT,
  type Program,
  type Setting,
  settingName,
  settingsHelp,
} from "../config/loader.ts";
import { type Cidr, formatCidr, overlaps, parseCidr } from "../ipam/cidr.ts";
import { chassisNameProblem, DEFAULT_CHASSIS_PREFIX } from "../node/external-chassis.ts";
import { BridgeMappingError, type ProviderBridge, parseBridgeMappings } from "../node/provider-bridges.ts";

export { ConfigError as NodeConfigError } from "../config/loader.ts";

export interface NodeAgentConfig {
  nodeName: string;
  kubeconfig: string;
  /** standalone: the SB is the chart's; external: it is ZStack's (the chassis name and encapsulation are checked). */
  ovnMode: "standalone" | "external";
  /** ovn-controller's system-id: the node name, or in External mode node.chassisPrefix + the node name. */
  chassisName: string;
  /** The SB remotes ovn-controller connects to (ovn-remote). */
  sbdbAddress: string;
  /** Client certificate files for the agent's own SB connection in External mode (ssl: remotes). */
  ssl: { enabled: boolean; verifyHostname: boolean; caCert: string; clientCert: string; clientKey: string };
  tunnel: "vxlan" | "geneve";
  /** Tunnel endpoint, canonical text; "" means the node's InternalIP. */
  encapIp: string;
  /** system (kernel datapath) or netdev (userspace/DPDK). */
  datapathType: "system" | "netdev";
  /** Provider networks: the bridge (and uplink) of each; empty: none, ovn-bridge-mappings left alone. */
  providers: ProviderBridge[];
  clusterCIDRs: Cidr[];
  serviceCIDRs: Cidr[];
  joinCIDR: Cidr;
  gatewayMode: "local";
  /** 0 = derived from the encap interface. */
  mtu: number;
  ovsDb: string;
  cniSocket: string;
  cniConfDir: string;
  cniBinDir: string;
  /** The zstack-ovn-cni executable to install into cniBinDir; empty: do not install. */
  cniBinary: string;
  healthPort: number;
  logLevel: "debug" | "info" | "warn" | "error";
  annotationBudgetMs: number;
  /**
   * Hosts that route the pod network through this node (a control-plane host that is not a node, for the
   * apiserver's proxy to pods): their traffic into the management port is masqueraded to its address so the
   * replies come back through this node. Empty (the default): nothing entering the node is translated.
   */
  podAccessFrom: Cidr[];
}

const SHARED = [
  "ovn.mode",
  "ovn.sbdbAddress",
  "ovn.ssl.enabled",
  "ovn.ssl.verifyHostname",
  "ovn.ssl.caCert",
  "ovn.ssl.clientCert",
  "ovn.ssl.clientKey",
  "network.clusterCIDR",
  "network.serviceCIDR",
  "network.joinCIDR",
  "network.mtu",
  "gateway.mode",
  "tunnel.type",
  "logging.level",
  "kubernetes.kubeconfig",
];

export const NODE_SETTINGS: readonly Setting[] = [
  {
    key: "node.name",
    env: "ZSTACK_NODE_NAME",
    flag: "node-name",
    kind: { type: "string" },
    default: undefined,
    doc: "The Kubernetes node, also the chassis system-id; default $NODE_NAME, else the host name.",
  },
  ...SHARED.map((k) => CONTROLLER_SETTINGS.find((s) => s.key === k) as Setting),
  {
    key: "node.chassisPrefix",
    env: "ZSTACK_CHASSIS_PREFIX",
    flag: "chassis-prefix",
    kind: { type: "string" },
    default: DEFAULT_CHASSIS_PREFIX,
    doc: "ovn.mode=external only: the chassis (system-id) is this prefix + the node name, so that it cannot be one of ZStack's hosts (named by management IP). Letters, digits, '.', '_', '-'; not empty.",
  },
  {
    key: "node.encapIp",
    env: "ZSTACK_ENCAP_IP",
    flag: "encap-ip",
    kind: { type: "ip" },
    default: "",
    doc: "Tunnel endpoint; empty: the node's InternalIP.",
  },
  {
    key: "node.datapathType",
    env: "ZSTACK_DATAPATH_TYPE",
    flag: "datapath-type",
    kind: { type: "enum", values: ["system", "netdev"] },
    default: "system",
    doc: "system (kernel datapath) or netdev (userspace/DPDK; pod TX checksum offload off).",
  },
  {
    key: "node.bridgeMappings",
    env: "ZSTACK_BRIDGE_MAPPINGS",
    flag: "bridge-mappings",
    kind: { type: "string" },
    default: "",
    doc: "Provider networks of this node, provider:bridge[:uplink],... (ovn-bridge-mappings); with an uplink the agent creates the bridge. Empty: none, and ovn-bridge-mappings is left alone.",
  },
  {
    key: "node.ovsDb",
    env: "ZSTACK_OVS_DB",
    flag: "ovs-db",
    kind: { type: "remotes" },
    default: "unix:/var/run/openvswitch/db.sock",
    doc: "The node's OVS database.",
  },
  {
    key: "node.podAccessFrom",
    env: "ZSTACK_POD_ACCESS_FROM",
    flag: "pod-access-from",
    kind: { type: "string" },
    default: "",
    doc: "Comma-separated CIDRs of hosts that route the pod network through this node (a control-plane host that is not a node, for the apiserver's proxy to pods); their traffic is SNATed to this node's service SNAT address (never the management address, which NetworkPolicy admits) so replies return here. Empty: none.",
  },
  {
    key: "node.healthPort",
    env: "ZSTACK_HEALTH_PORT",
    flag: "health-port",
    kind: PORT,
    default: 10665,
    doc: "Serves /healthz, /readyz and /metrics.",
  },
  {
    key: "cni.socket",
    env: "ZSTACK_CNI_SOCKET",
    flag: "cni-socket",
    kind: { type: "string" },
    default: "/var/run/zstack-ovn/cni-server.sock",
    doc: "The CNI server's unix socket (mode 0600).",
  },
  {
    key: "cni.confDir",
    env: "ZSTACK_CNI_CONF_DIR",
    flag: "cni-conf-dir",
    kind: { type: "string" },
    default: "/etc/cni/net.d",
    doc: "Where the conflist goes.",
  },
  {
    key: "cni.binDir",
    env: "ZSTACK_CNI_BIN_DIR",
    flag: "cni-bin-dir",
    kind: { type: "string" },
    default: "/opt/cni/bin",
    doc: "Where the zstack-ovn-cni executable goes.",
  },
  {
    key: "cni.binary",
    env: "ZSTACK_CNI_BINARY",
    flag: "cni-binary",
    kind: { type: "string" },
    default: "",
    doc: "The zstack-ovn-cni executable to install (write-then-rename); empty: install nothing.",
  },
  {
    key: "cni.annotationTimeoutMs",
    env: "ZSTACK_ANNOTATION_TIMEOUT_MS",
    flag: "annotation-timeout-ms",
    kind: { type: "int", min: 100, max: 600_000 },
    default: 60_000,
    doc: "How long an ADD waits for the pod's annotation (CNI code 100 after).",
  },
];

const NODE: Program = { name: "zstack-ovnkube-node", settings: NODE_SETTINGS };

interface Values {
  node: {
    name?: string;
    chassisPrefix: string;
    encapIp: string;
    datapathType: "system" | "netdev";
    bridgeMappings: string;
    ovsDb: string;
    healthPort: number;
    podAccessFrom: string;
  };
  ovn: {
    mode: "standalone" | "external";
    sbdbAddress: string;
    ssl: NodeAgentConfig["ssl"];
  };
  network: { clusterCIDR: string; serviceCIDR: string; joinCIDR: string; mtu: number };
  gateway: { mode: "local" | "shared" };
  tunnel: { type: "vxlan" | "geneve" };
  logging: { level: NodeAgentConfig["logLevel"] };
  kubernetes: { kubeconfig: string };
  cni: { socket: string; confDir: string; binDir: string; binary: string; annotationTimeoutMs: number };
}

/** Prefixes become node routes and nftables rules: the loader checked the text, here it becomes typed. */
const prefixes = (text: string): Cidr[] => text.split(",").map((c) => parseCidr(c.trim()));

/** At most this many pod-access sources: each is a host or network the operator names. */
export const MAX_POD_ACCESS_SOURCES = 32;

/**
 * `node.podAccessFrom`: zero or more CIDRs, any family. A /0 would let any host on the uplink into the pod
 * network with the node's identity, and overlapping entries would make an invalid nftables interval set: both
 * are refused, with the rest of the problems.
 */
export function parsePodAccessFrom(text: string, setting: string, problems: string[]): Cidr[] {
  const parts = text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  if (parts.length > MAX_POD_ACCESS_SOURCES) {
    problems.push(`${setting} lists ${parts.length} CIDRs; at most ${MAX_POD_ACCESS_SOURCES}`);
    return [];
  }
  const out: Cidr[] = [];
  for (const part of parts) {
    let c: Cidr;
    try {
      c = parseCidr(part, setting);
    } catch (e) {
      problems.push(`${setting}: ${(e as Error).message}`);
      continue;
    }
    if (c.prefix === 0) {
      problems.push(`${setting}: ${formatCidr(c)} would admit every host; list the hosts or networks`);
      continue;
    }
    const other = out.find((o) => overlaps(o, c));
    if (other) {
      problems.push(`${setting}: ${formatCidr(c)} overlaps ${formatCidr(other)}; list each address once`);
      continue;
    }
    out.push(c);
  }
  return out;
}

/**
 * External mode: the chassis name must not be able to name one of ZStack's hosts, and ssl: remotes (ZStack's SB)
 * need the client certificate files, which the agent uses for its own SB connection (the chassis and encapsulation
 * check) as ovn-controller uses them for its own.
 */
function externalProblems(v: Values, nodeName: string, name: (key: string) => string): string[] {
  const problems: string[] = [];
  const chassis = chassisNameProblem(v.node.chassisPrefix, nodeName, name("node.chassisPrefix"));
  if (chassis) problems.push(chassis);
  const remotes = v.ovn.sbdbAddress.split(",").map((r) => r.trim());
  if (v.ovn.ssl.enabled) {
    for (const key of ["ovn.ssl.caCert", "ovn.ssl.clientCert", "ovn.ssl.clientKey"] as const) {
      const field = key.slice("ovn.ssl.".length) as "caCert" | "clientCert" | "clientKey";
      if (!v.ovn.ssl[field])
        problems.push(
          `${name("ovn.ssl.enabled")}=true needs ${name(key)}: the file ovn-controller's certificate is in`,
        );
    }
  } else if (remotes.some((r) => r.startsWith("ssl:"))) {
    problems.push(
      `${name("ovn.sbdbAddress")} has ssl: remotes: set ${name("ovn.ssl.enabled")}=true and the client certificate files (${name("ovn.ssl.caCert")}, ${name("ovn.ssl.clientCert")}, ${name("ovn.ssl.clientKey")})`,
    );
  }
  return problems;
}

/** @throws NodeConfigError listing every problem. */
export function loadNodeConfig(
  env: NodeJS.ProcessEnv = process.env,
  argv: readonly string[] = [],
): NodeAgentConfig {
  const opts: LoadOptions = { env, argv };
  const r = loadSettings(NODE, opts);
  const problems = r.problems;
  const v = r.values as unknown as Values;
  const name = (key: string) => settingName(NODE, key);
  const nodeName = v.node?.name || env.NODE_NAME || hostname();
  if (problems.length === 0) {
    if (v.ovn.mode === "external") problems.push(...externalProblems(v, nodeName, name));
    if (!v.ovn.sbdbAddress)
      problems.push(`${name("ovn.sbdbAddress")} is required: the OVN southbound remotes for ovn-controller`);
    if (v.gateway.mode === "shared")
      problems.push(
        `${name("gateway.mode")}=shared is not supported yet: pod egress goes through the node's kernel; set it to local`,
      );
    try {
      parseBridgeMappings(v.node.bridgeMappings, name("node.bridgeMappings"));
    } catch (e) {
      if (!(e instanceof BridgeMappingError)) throw e;
      problems.push(...e.problems);
    }
    if (v.network.joinCIDR.includes(","))
      problems.push(`${name("network.joinCIDR")}="${v.network.joinCIDR}": the join network is one IPv4 CIDR`);
  }
  const podAccessFrom =
    problems.length === 0
      ? parsePodAccessFrom(v.node.podAccessFrom, name("node.podAccessFrom"), problems)
      : [];
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    nodeName,
    kubeconfig: v.kubernetes.kubeconfig,
    ovnMode: v.ovn.mode,
    chassisName: v.ovn.mode === "external" ? `${v.node.chassisPrefix}${nodeName}` : nodeName,
    sbdbAddress: v.ovn.sbdbAddress,
    ssl: v.ovn.ssl,
    tunnel: v.tunnel.type,
    encapIp: v.node.encapIp,
    datapathType: v.node.datapathType,
    providers: parseBridgeMappings(v.node.bridgeMappings),
    clusterCIDRs: prefixes(v.network.clusterCIDR),
    serviceCIDRs: prefixes(v.network.serviceCIDR),
    joinCIDR: prefixes(v.network.joinCIDR)[0] as Cidr,
    gatewayMode: "local",
    mtu: v.network.mtu,
    ovsDb: v.node.ovsDb,
    cniSocket: v.cni.socket,
    cniConfDir: v.cni.confDir,
    cniBinDir: v.cni.binDir,
    cniBinary: v.cni.binary,
    healthPort: v.node.healthPort,
    logLevel: v.logging.level,
    annotationBudgetMs: v.cni.annotationTimeoutMs,
    podAccessFrom,
  };
}

/** --help text: every flag with its variable and default. */
export function nodeConfigHelp(): string {
  return settingsHelp(NODE);
}
