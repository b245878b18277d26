// Configuration of zstack-ovnkube-node from environment variables (the DaemonSet sets them from Helm values).
// Every invalid value is reported with the variable, the value and what is allowed.

import { hostname } from "node:os";
import { formatIp, parseIp } from "../ipam/address.ts";
import { type Cidr, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";

export interface NodeAgentConfig {
  nodeName: string;
  kubeconfig: string;
  /** The SB remotes ovn-controller connects to (ovn-remote). */
  sbdbAddress: string;
  tunnel: "vxlan" | "geneve";
  /** Tunnel endpoint, canonical text; "" means the node's InternalIP. */
  encapIp: string;
  /** system (kernel datapath) or netdev (userspace/DPDK). */
  datapathType: "system" | "netdev";
  clusterCIDRs: Cidr[];
  serviceCIDRs: Cidr[];
  joinCIDR: Cidr;
  gatewayMode: "local" | "shared";
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
}

export class NodeConfigError extends Error {}

export function loadNodeConfig(env: NodeJS.ProcessEnv = process.env): NodeAgentConfig {
  const problems: string[] = [];
  const str = (k: string, d: string) => env[k] ?? d;
  const oneOf = <T extends string>(k: string, d: T, allowed: readonly T[]): T => {
    const v = (env[k] ?? d) as T;
    if (!allowed.includes(v)) problems.push(`${k}="${v}": must be ${allowed.join(" or ")}`);
    return v;
  };
  const int = (k: string, d: number, min: number, max: number): number => {
    const raw = env[k];
    if (raw === undefined || raw === "") return d;
    const v = Number(raw);
    if (!Number.isInteger(v) || v < min || v > max)
      problems.push(`${k}="${raw}": must be an integer from ${min} to ${max}`);
    return v;
  };
  // Prefixes become node routes and nftables rules: each is parsed, never passed on as text.
  const cidr = (k: string, text: string, where = k): Cidr | undefined => {
    try {
      return parseCidr(text, where);
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      problems.push(`${k}: ${e.problem.message}`);
      return undefined;
    }
  };
  const cidrs = (k: string, d: string): Cidr[] => {
    const items = str(k, d)
      .split(",")
      .map((s) => s.trim());
    if (items.every((s) => s === "")) {
      problems.push(`${k}="${env[k] ?? d}": must list at least one CIDR, e.g. ${d}`);
      return [];
    }
    return items.flatMap((text) => cidr(k, text) ?? []);
  };
  const ip = (k: string): string => {
    const raw = env[k] ?? "";
    if (raw === "") return "";
    try {
      return formatIp(parseIp(raw, k));
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      problems.push(`${k}: ${e.problem.message}`);
      return "";
    }
  };
  const cfg: NodeAgentConfig = {
    nodeName: str("ZSTACK_NODE_NAME", env.NODE_NAME ?? hostname()),
    kubeconfig: str("ZSTACK_KUBECONFIG", ""),
    sbdbAddress: str("ZSTACK_OVN_SBDB_ADDRESS", ""),
    tunnel: oneOf("ZSTACK_TUNNEL_TYPE", "vxlan", ["vxlan", "geneve"] as const),
    encapIp: ip("ZSTACK_ENCAP_IP"),
    datapathType: oneOf("ZSTACK_DATAPATH_TYPE", "system", ["system", "netdev"] as const),
    clusterCIDRs: cidrs("ZSTACK_CLUSTER_CIDR", "10.244.0.0/16"),
    serviceCIDRs: cidrs("ZSTACK_SERVICE_CIDR", "10.96.0.0/16"),
    joinCIDR:
      cidr("ZSTACK_JOIN_CIDR", str("ZSTACK_JOIN_CIDR", "100.64.0.0/16")) ?? parseCidr("100.64.0.0/16"),
    gatewayMode: oneOf("ZSTACK_GATEWAY_MODE", "local", ["local", "shared"] as const),
    mtu: int("ZSTACK_MTU", 0, 0, 65_535),
    ovsDb: str("ZSTACK_OVS_DB", "unix:/var/run/openvswitch/db.sock"),
    cniSocket: str("ZSTACK_CNI_SOCKET", "/var/run/zstack-ovn/cni-server.sock"),
    cniConfDir: str("ZSTACK_CNI_CONF_DIR", "/etc/cni/net.d"),
    cniBinDir: str("ZSTACK_CNI_BIN_DIR", "/opt/cni/bin"),
    cniBinary: str("ZSTACK_CNI_BINARY", ""),
    healthPort: int("ZSTACK_HEALTH_PORT", 10665, 0, 65_535),
    logLevel: oneOf("ZSTACK_LOG_LEVEL", "info", ["debug", "info", "warn", "error"] as const),
    annotationBudgetMs: int("ZSTACK_ANNOTATION_TIMEOUT_MS", 60_000, 100, 600_000),
  };
  if (!cfg.sbdbAddress)
    problems.push("ZSTACK_OVN_SBDB_ADDRESS is required: the OVN southbound remotes for ovn-controller");
  if (cfg.mtu !== 0 && cfg.mtu < 576)
    problems.push(`ZSTACK_MTU="${cfg.mtu}": must be 0 (derive) or at least 576`);
  if (problems.length > 0) throw new NodeConfigError(`invalid configuration:\n  ${problems.join("\n  ")}`);
  return cfg;
}
