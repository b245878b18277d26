// The kernel's conntrack entries of UDP Service flows whose endpoint went away, found and deleted as kube-proxy
// does. A UDP client that keeps one flow (the same source port, a datagram now and then) stays on the entry its
// first datagram made, DNATed to the endpoint chosen then, for as long as it keeps sending: when that endpoint
// is removed (its pod replaced, the Service's target port changed) every later datagram would still go to the
// old address. TCP needs nothing: a connection to a gone endpoint is reset and the client opens a new one.
//
// What changed is computed from the node's Service plans (before and after a ruleset is applied), so only
// flows the Service table DNATed are touched: the entry's original destination is the Service's address and
// port (or, for a NodePort, any address with that port) and its reply source is the endpoint. Each deletion is
// one `conntrack -D` with arguments printed from typed values only.

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

const DELETED = /(\d+) flow entries have been deleted/;

/**
 * Deletes the entries of each flow in the node's netns (or `netns`); resolves with how many entries went. A
 * flow with no entry is no failure (conntrack exits 1 then, saying it deleted 0).
 */
export async function deleteUdpFlows(
  flows: readonly UdpServiceFlow[],
  opts: { netns?: string } = {},
): Promise<number> {
  let deleted = 0;
  for (const f of flows) {
    const args = conntrackDeleteArgs(f);
    const r = await runTool("conntrack", args, opts.netns ? { netns: opts.netns } : {});
    const n = DELETED.exec(r.stderr) ?? DELETED.exec(r.stdout);
    if (!n || (r.code !== 0 && n[1] !== "0")) throw new ToolError(["conntrack", ...args], r);
    deleted += Number(n[1]);
  }
  return deleted;
}
