// The kernel's conntrack entries of UDP Service flows whose endpoint went away, found and deleted as kube-proxy
// does. A UDP client that keeps one flow (the same source port, a datagram now and then) stays on the entry its
// first datagram made, DNATed to the endpoint chosen then, for as long as it keeps sending: when that endpoint
// is removed (its pod replaced, the Service's target port changed) every later datagram would still go to the
// old address. TCP needs nothing: a connection to a gone endpoint is reset and the client opens a new one.
//
// What changed is computed from the node's Service plans (before and after a ruleset is applied), so only
// flows the Service table DNATed are touched: the entry's original destination is the Service's address and
// port (or, for a NodePort, any address with that port) and its reply source is the endpoint. The stale pairs are
// grouped so that one `conntrack -D` covers every port and Service address where a filter allows it without
// touching a flow the rules still DNAT (groupUdpFlows); arguments are printed from typed values only.

import { formatIp, type IpAddress } from "../ipam/address.ts";
import { nftValueChecks } from "./nft-values.ts";
import type { NatEndpoint, NatServicePort } from "./service-nat.ts";
import { runTool, ToolError } from "./tool.ts";

const { ip: checkedIp, port: checkedPort } = nftValueChecks("conntrack");

/** A UDP flow the Service table DNATs: from a client to `vip:port` (a NodePort: any address), to `endpoint`. */
export interface UdpServiceFlow {
  /** The Service address the client sends to; undefined for a NodePort, reached on any of the node's addresses. */
  readonly vip: IpAddress | undefined;
  /** The Service port, or the NodePort. */
  readonly port: number;
  readonly endpoint: NatEndpoint;
}

/** A flow's identity: two flows with the same key are deleted by the same arguments. */
export function udpFlowKey(f: UdpServiceFlow): string {
  const vip = f.vip ? `${f.vip.family}/${f.vip.value}` : "node";
  return `${vip}/${f.port}/${f.endpoint.ip.family}/${f.endpoint.ip.value}/${f.endpoint.port}`;
}

/** Every UDP (address, port) → endpoint pair the plan's rules may DNAT to, keyed for comparison. */
export function udpServiceFlows(ports: readonly NatServicePort[]): Map<string, UdpServiceFlow> {
  const out = new Map<string, UdpServiceFlow>();
  const add = (f: UdpServiceFlow) => out.set(udpFlowKey(f), f);
  for (const p of ports) {
    if (p.protocol !== "udp") continue;
    // Every endpoint any chain of the port DNATs to (Cluster and Local policies).
    for (const endpoint of [...p.endpoints, ...p.localEndpoints]) {
      for (const vip of [...p.clusterIPs, ...p.externalIPs])
        if (vip.family === endpoint.ip.family) add({ vip, port: p.port, endpoint });
      if (p.nodePort !== undefined) add({ vip: undefined, port: p.nodePort, endpoint });
    }
  }
  return out;
}

/** The flows `before` could DNAT and `after` no longer does: their conntrack entries are stale. */
export function staleUdpFlows(
  before: readonly NatServicePort[],
  after: readonly NatServicePort[],
): UdpServiceFlow[] {
  const now = udpServiceFlows(after);
  return [...udpServiceFlows(before)].filter(([k]) => !now.has(k)).map(([, f]) => f);
}

/** The `conntrack -D` arguments deleting one flow's entries; every value re-checked and printed from numbers. */
export function conntrackDeleteArgs(f: UdpServiceFlow): string[] {
  const ep = checkedIp(f.endpoint.ip);
  const args = ["-D", "-f", ep.family === 4 ? "ipv4" : "ipv6", "-p", "udp"];
  if (f.vip !== undefined) {
    const vip = checkedIp(f.vip);
    if (vip.family !== ep.family)
      throw new TypeError("conntrack: a Service address and endpoint of two families");
    args.push("--orig-dst", formatIp(vip));
  }
  args.push(
    "--orig-port-dst",
    String(checkedPort(f.port)),
    "--reply-src",
    formatIp(ep),
    "--reply-port-src",
    String(checkedPort(f.endpoint.port)),
  );
  return args;
}

/**
 * One `conntrack -D` invocation. `endpoint`: every UDP entry DNATed to the address (`--dst-nat`), for an address
 * no rule DNATs to any more (its pod is gone): one call for all its Service addresses, ports and NodePorts.
 * `pair`: every UDP entry to the Service address DNATed to the endpoint address, whatever the ports. `flow`: one
 * (address, port) → (endpoint, port) pair, when the rules still DNAT that address pair on another port.
 */
export type ConntrackDeletion =
  | { readonly kind: "endpoint"; readonly endpoint: IpAddress }
  | { readonly kind: "pair"; readonly vip: IpAddress; readonly endpoint: IpAddress }
  | { readonly kind: "flow"; readonly flow: UdpServiceFlow };

/** A deletion with the keys of the stale flows it covers. */
export interface GroupedDeletion {
  readonly key: string;
  readonly deletion: ConntrackDeletion;
  readonly covers: readonly string[];
}

const ipKey = (a: IpAddress) => `${a.family}/${a.value}`;

/**
 * The fewest invocations that delete every stale flow and no flow of `live` (what the rules DNAT now): an endpoint
 * address no live flow DNATs to is one `endpoint` deletion; else a Service address → endpoint address pair with
 * no live flow is one `pair` deletion; else each flow its own. In the order of each group's first flow.
 */
export function groupUdpFlows(
  stale: Iterable<readonly [string, UdpServiceFlow]>,
  live: ReadonlyMap<string, UdpServiceFlow>,
): GroupedDeletion[] {
  const liveIps = new Set<string>();
  const livePairs = new Set<string>();
  for (const f of live.values()) {
    liveIps.add(ipKey(f.endpoint.ip));
    if (f.vip) livePairs.add(`${ipKey(f.vip)}>${ipKey(f.endpoint.ip)}`);
  }
  const groups = new Map<string, { deletion: ConntrackDeletion; covers: string[] }>();
  for (const [k, f] of stale) {
    if (live.has(k)) continue;
    const ep = ipKey(f.endpoint.ip);
    const pair = f.vip ? `${ipKey(f.vip)}>${ep}` : undefined;
    let key: string;
    let deletion: ConntrackDeletion;
    if (!liveIps.has(ep)) {
      key = `endpoint/${ep}`;
      deletion = { kind: "endpoint", endpoint: f.endpoint.ip };
    } else if (f.vip && pair && !livePairs.has(pair)) {
      key = `pair/${pair}`;
      deletion = { kind: "pair", vip: f.vip, endpoint: f.endpoint.ip };
    } else {
      key = `flow/${k}`;
      deletion = { kind: "flow", flow: f };
    }
    const g = groups.get(key);
    if (g) g.covers.push(k);
    else groups.set(key, { deletion, covers: [k] });
  }
  return [...groups].map(([key, g]) => ({ key, ...g }));
}

/** The `conntrack -D` arguments of one grouped deletion; every value re-checked and printed from numbers. */
export function conntrackDeletionArgs(d: ConntrackDeletion): string[] {
  if (d.kind === "flow") return conntrackDeleteArgs(d.flow);
  const ep = checkedIp(d.endpoint);
  const args = ["-D", "-f", ep.family === 4 ? "ipv4" : "ipv6", "-p", "udp"];
  if (d.kind === "pair") {
    const vip = checkedIp(d.vip);
    if (vip.family !== ep.family)
      throw new TypeError("conntrack: a Service address and endpoint of two families");
    args.push("--orig-dst", formatIp(vip));
  }
  args.push("--dst-nat", formatIp(ep));
  return args;
}

const DELETED = /(\d+) flow entries have been deleted/;

/**
 * Runs one deletion in the node's netns (or `netns`); resolves with how many entries went. No entry is no failure
 * (conntrack exits 1 then, saying it deleted 0).
 */
export async function deleteConntrack(d: ConntrackDeletion, opts: { netns?: string } = {}): Promise<number> {
  return runConntrackDelete(conntrackDeletionArgs(d), opts);
}

/**
 * Runs `conntrack` with deletion arguments built from typed values; resolves with how many entries went. No
 * entry is no failure (conntrack exits 1 then, saying it deleted 0).
 */
export async function runConntrackDelete(args: string[], opts: { netns?: string } = {}): Promise<number> {
  const r = await runTool("conntrack", args, opts.netns ? { netns: opts.netns } : {});
  const n = DELETED.exec(r.stderr) ?? DELETED.exec(r.stdout);
  if (!n || (r.code !== 0 && n[1] !== "0")) throw new ToolError(["conntrack", ...args], r);
  return Number(n[1]);
}

/**
 * Deletes the entries of each flow (grouped against the flows `live` still DNATs, one invocation per group) in
 * the node's netns (or `netns`); resolves with how many entries went.
 */
export async function deleteUdpFlows(
  flows: readonly UdpServiceFlow[],
  live: ReadonlyMap<string, UdpServiceFlow>,
  opts: { netns?: string } = {},
): Promise<number> {
  let deleted = 0;
  const where = opts.netns ? { netns: opts.netns } : {};
  for (const g of groupUdpFlows(
    flows.map((f) => [udpFlowKey(f), f] as const),
    live,
  ))
    deleted += await deleteConntrack(g.deletion, where);
  return deleted;
}
