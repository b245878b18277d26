// The conntrack entries a UDP client made towards a Service address before the Service had an endpoint, found
// and deleted when the first endpoint appears, as kube-proxy does. Such an entry was committed without DNAT:
// by OVN when the switch is stateful (any allow-related ACL, e.g. a NetworkPolicy) and the address had no load
// balancer flow yet, or a template load balancer (internalTrafficPolicy Local) had no backend on this chassis;
// by the kernel when a datagram passed before the node agent's rules. A client that keeps sending from one
// source port stays on that entry, and no datagram reaches the new endpoint (upstream e2e "Conntrack should be
// able to preserve UDP traffic when server pod cycles").
//
// The filter matches only entries whose reply comes from the address itself, i.e. never DNATed: an entry that
// was load balanced is never touched, so a deletion is safe to repeat (after ovn-controller has caught up) and
// at start-up for every served address. Arguments are printed from typed values only.

import { formatIp, type IpAddress } from "../ipam/address.ts";
import { nftValueChecks } from "./nft-values.ts";
import { runConntrackDelete } from "./service-conntrack.ts";
import type { NatEndpoint, NatServicePort } from "./service-nat.ts";
import { runTool, ToolError } from "./tool.ts";

const { ip: checkedIp, port: checkedPort } = nftValueChecks("conntrack");

/** Which connection tracker holds the entry: the kernel's (the node agent's nft DNAT) or OVS's (OVN's DNAT). */
export type Tracker = "kernel" | "ovs";

/**
 * The un-NATed UDP entries to delete: towards `ip` (every port when `port` is undefined: a cluster IP, which
 * serves nothing but its Service ports) in `tracker`.
 */
export interface UnnatedUdpTarget {
  readonly tracker: Tracker;
  readonly ip: IpAddress;
  readonly port: number | undefined;
  /**
   * Whose Service asked for it (its namespace): the backlog shares its rate among owners, so one namespace's
   * flapping endpoints cannot hold back another's. Not part of the key.
   */
  readonly owner?: string;
}

export function unnatedTargetKey(t: UnnatedUdpTarget): string {
  return `${t.tracker}/${t.ip.family}/${t.ip.value}/${t.port ?? "*"}`;
}

/**
 * Every UDP destination that has an endpoint for some client it serves on this node, keyed per (tracker,
 * address, port), each with the target whose deletion covers it. A cluster IP is served to pods by OVN and to
 * the node by nft: both trackers, with the endpoints of internalTrafficPolicy (this node's only, when Local). An
 * externalIP or LB IP likewise with the Cluster choice (pods, the node), and in the kernel also when this node
 * has a local endpoint (outside clients with externalTrafficPolicy Local). A NodePort on each node address, in
 * the kernel. A client with no endpoint is rejected or dropped before its entry is confirmed, so a destination
 * served to one client and not another needs nothing when the other gains one.
 */
export function servedUdpDestinations(
  ports: readonly NatServicePort[],
  nodeIps: readonly IpAddress[],
): Map<string, UnnatedUdpTarget> {
  const out = new Map<string, UnnatedUdpTarget>();
  const has = (eps: readonly NatEndpoint[], ip: IpAddress) => eps.some((e) => e.ip.family === ip.family);
  let owner = "";
  const add = (tracker: Tracker, ip: IpAddress, port: number, wholeAddress: boolean) =>
    out.set(`${tracker}/${ip.family}/${ip.value}/${port}`, {
      tracker,
      ip,
      port: wholeAddress ? undefined : port,
      owner,
    });
  for (const p of ports) {
    if (p.protocol !== "udp") continue;
    // The port's key is "<namespace>/<name>/<protocol>/<port>".
    owner = p.key.slice(0, Math.max(0, p.key.indexOf("/")));
    for (const ip of p.clusterIPs) {
      if (!has(p.internalTrafficLocal ? p.localEndpoints : p.endpoints, ip)) continue;
      add("kernel", ip, p.port, true);
      add("ovs", ip, p.port, true);
    }
    const outside = (ip: IpAddress) => p.externalTrafficLocal && has(p.localEndpoints, ip);
    for (const ip of p.externalIPs) {
      if (has(p.endpoints, ip)) add("ovs", ip, p.port, false);
      if (has(p.endpoints, ip) || outside(ip)) add("kernel", ip, p.port, false);
    }
    if (p.nodePort === undefined) continue;
    for (const ip of nodeIps) if (has(p.endpoints, ip) || outside(ip)) add("kernel", ip, p.nodePort, false);
  }
  return out;
}

/**
 * The targets of the destinations `after` serves and `before` did not (their first endpoint appeared), one per
 * target, in order. `before` undefined (the agent's first ruleset since it started): every served destination,
 * since a transition made while the agent was down is not known otherwise.
 */
export function newlyServedTargets(
  before: ReadonlyMap<string, UnnatedUdpTarget> | undefined,
  after: ReadonlyMap<string, UnnatedUdpTarget>,
): UnnatedUdpTarget[] {
  const out = new Map<string, UnnatedUdpTarget>();
  for (const [k, t] of after) if (!before?.has(k)) out.set(unnatedTargetKey(t), t);
  return [...out.values()];
}

/**
 * The `conntrack -D` arguments: original destination the address (and port), reply source the same, so only
 * entries never DNATed match.
 */
export function kernelUnnatedArgs(t: UnnatedUdpTarget): string[] {
  const ip = formatIp(checkedIp(t.ip));
  const args = ["-D", "-f", t.ip.family === 4 ? "ipv4" : "ipv6", "-p", "udp", "--orig-dst", ip];
  if (t.port !== undefined) args.push("--orig-port-dst", String(checkedPort(t.port)));
  args.push("--reply-src", ip);
  if (t.port !== undefined) args.push("--reply-port-src", String(checkedPort(t.port)));
  return args;
}

/**
 * The `ovs-appctl dpctl/flush-conntrack` arguments (after the target daemon): a partial original tuple and a
 * partial reply tuple, both required to match, with no zone: OVS 3.1 then looks in every zone (each pod's
 * logical port has its own).
 */
export function ovsUnnatedArgs(t: UnnatedUdpTarget): string[] {
  const ip = formatIp(checkedIp(t.ip));
  const field = t.ip.family === 4 ? "ct_nw" : "ct_ipv6";
  const port = t.port === undefined ? undefined : String(checkedPort(t.port));
  const orig = [`${field}_dst=${ip}`, "ct_nw_proto=17", ...(port ? [`ct_tp_dst=${port}`] : [])];
  const reply = [`${field}_src=${ip}`, "ct_nw_proto=17", ...(port ? [`ct_tp_src=${port}`] : [])];
  return ["dpctl/flush-conntrack", orig.join(","), reply.join(",")];
}

export interface UnnatedOptions {
  /** The kernel's tracker of this netns (default the agent's own). */
  netns?: string;
  /** ovs-appctl's `-t`: a daemon name found in OVS's run directory, or a control socket path; default ovs-vswitchd. */
  ovsTarget?: string;
  /**
   * OVS's run directory, where ovs-vswitchd's pid file and control socket are (ovsRunDir of the agent's OVS
   * database address); default ovs-appctl's own (/var/run/openvswitch).
   */
  ovsRunDir?: string;
}

/**
 * OVS's run directory from the agent's OVS database address: the directory of the first `unix:` socket (the
 * chart puts db.sock beside ovs-vswitchd's pid file, at dpdk.socketDir with DPDK). Undefined for a TCP/SSL
 * address or anything that is not a plain absolute path.
 */
export function ovsRunDir(ovsDb: string): string | undefined {
  for (const remote of ovsDb.split(",")) {
    const r = remote.trim();
    if (!r.startsWith("unix:")) continue;
    const path = r.slice("unix:".length);
    const slash = path.lastIndexOf("/");
    // Printable, no NUL, no "..": it becomes an environment value, never a command line.
    if (!path.startsWith("/") || slash < 1 || !/^[\x21-\x7e]+$/.test(path) || path.split("/").includes(".."))
      return undefined;
    return path.slice(0, slash);
  }
  return undefined;
}

/** The ovs-appctl call that deletes an OVS target's un-NATed entries: its arguments and environment. */
export function ovsUnnatedInvocation(
  t: UnnatedUdpTarget,
  opts: UnnatedOptions = {},
): { args: string[]; env: Record<string, string> } {
  return {
    args: ["--timeout=10", "-t", opts.ovsTarget ?? "ovs-vswitchd", ...ovsUnnatedArgs(t)],
    env: opts.ovsRunDir === undefined ? {} : { OVS_RUNDIR: opts.ovsRunDir },
  };
}

/**
 * Deletes one target's un-NATed entries; resolves with how many went in the kernel (no entry is no failure), or
 * 0 for OVS, whose flush does not count.
 */
export async function deleteUnnated(t: UnnatedUdpTarget, opts: UnnatedOptions = {}): Promise<number> {
  if (t.tracker === "ovs") {
    const { args, env } = ovsUnnatedInvocation(t, opts);
    const r = await runTool("ovs-appctl", args, { env });
    if (r.code !== 0) throw new ToolError(["ovs-appctl", ...args], r);
    return 0;
  }
  return runConntrackDelete(kernelUnnatedArgs(t), opts.netns ? { netns: opts.netns } : {});
}
