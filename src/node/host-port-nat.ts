// Pods' hostPorts, as the CNI portmap plugin serves them: a connection to the node on a hostPort is DNATed to the
// pod's address and containerPort. The rules live in their own nftables table, replaced as a whole in one atomic
// `nft -f` transaction built only from typed values (each re-checked here, as service-nat.ts does).
//
// Shape (per family; v4 shown):
//   addr_v4  map  hostIP . proto . hostPort -> goto the mapping's chain   (a given, non-loopback hostIP)
//   any_v4   map  proto . hostPort          -> the same, for any local address (hostIP empty or 0.0.0.0)
//   lo_v4    map  127.0.0.1 . proto . port   -> the same, only from the node itself (output hook)
//   A mapping's chain marks the connection for masquerade when it comes from the node itself (output hook) or
//   from a pod through the management port (hairpin: the reply must come back through the node to be
//   un-DNATed), then DNATs. A connection from outside keeps its source, as portmap does: the pod's replies go to
//   its own node (egress reroute through the management port), where conntrack reverses the DNAT.
//   127.0.0.1 as hostIP: the DNATed packet leaves through the management port with a loopback source, which the
//   kernel routes only with route_localnet=1 on that interface (set by the agent); the masquerade gives it the
//   management address before it leaves, so the pod never sees 127.0.0.1. Loopback destinations are never
//   DNATed in prerouting, and the filter chain drops anything addressed to 127.0.0.0/8 arriving on the
//   management port (route_localnet would otherwise let a pod reach the node's localhost services).

import { createHash } from "node:crypto";
import { formatIp, type IpAddress } from "../ipam/address.ts";
import { type InterfaceName, interfaceNameProblem } from "./interface-name.ts";
import { nftValueChecks } from "./nft-values.ts";
import type { NatProtocol } from "./service-nat.ts";
import { runTool, ToolError } from "./tool.ts";

const { fail, ip: checkedIp, port: checkedPort, protocol: checkedProtocol } = nftValueChecks("hostPort NAT");

export const HOSTPORT_NFT_TABLE = "zstack_ovn_hostport";
/** The packet mark bit that asks our postrouting chain to masquerade (distinct from service-nat's bits). */
export const HOSTPORT_MASQUERADE_MARK = 0x1000;
const LOOPBACK_V4 = 0x7f000001n;

/** One hostPort of one pod, resolved to one family. */
export interface HostPortMapping {
  /** Identity (pod uid, container port index, family): only hashed into a chain name, never printed. */
  key: string;
  protocol: NatProtocol;
  /** undefined: any address of the node in `podIP`'s family. Otherwise of `podIP`'s family. */
  hostIP?: IpAddress | undefined;
  hostPort: number;
  podIP: IpAddress;
  containerPort: number;
}

export interface HostPortNatSpec {
  /** Pods reach the node through the management port: their hairpin connections are masqueraded. */
  mgmtIfname: InterfaceName;
  mappings: readonly HostPortMapping[];
}

/** Whether `ip` is 127.0.0.1, the one loopback hostIP served (from the node itself only). */
export function isLoopbackHostIp(ip: IpAddress): boolean {
  return ip.family === 4 && ip.value === LOOPBACK_V4;
}

function chainName(key: string): string {
  if (typeof key !== "string") fail("a mapping key", key);
  return `h${createHash("sha256").update(key).digest("hex").slice(0, 16)}`;
}

/**
 * The nft script. Declaring the table before deleting it makes the delete valid when the table is absent, and the
 * whole script is one transaction: the rules are never missing in between. Two mappings with one key (the
 * planner prevents it) keep the first, since nft refuses a map with a key twice.
 */
export function hostPortRuleset(spec: HostPortNatSpec): string {
  const why = typeof spec.mgmtIfname === "string" ? interfaceNameProblem(spec.mgmtIfname) : "is not a string";
  if (why)
    throw new TypeError(`hostPort NAT: management interface ${JSON.stringify(spec.mgmtIfname)} ${why}`);
  const dev = JSON.stringify(spec.mgmtIfname);
  const t = HOSTPORT_NFT_TABLE;
  const mark = `0x${HOSTPORT_MASQUERADE_MARK.toString(16)}`;
  const lines: string[] = [];
  const chains: string[] = [];
  const pre: string[] = [];
  const out: string[] = [];
  const seenChains = new Set<string>();
  for (const family of [4, 6] as const) {
    const ipk = family === 4 ? "ip" : "ip6";
    const addrType = family === 4 ? "ipv4_addr" : "ipv6_addr";
    const addr: string[] = [];
    const any: string[] = [];
    const lo: string[] = [];
    const taken = new Set<string>();
    for (const m of spec.mappings) {
      const podIP = checkedIp(m.podIP);
      if (podIP.family !== family) continue;
      const proto = checkedProtocol(m.protocol);
      const hostPort = checkedPort(m.hostPort);
      const containerPort = checkedPort(m.containerPort);
      const hostIP = m.hostIP === undefined ? undefined : checkedIp(m.hostIP);
      if (hostIP && hostIP.family !== family) fail(`an address of the pod's family (IPv${family})`, m.hostIP);
      const c = chainName(m.key);
      if (seenChains.has(c)) fail("a unique mapping key", m.key);
      const k = hostIP ? `${formatIp(hostIP)} . ${proto} . ${hostPort}` : `${proto} . ${hostPort}`;
      const space = !hostIP ? "any" : isLoopbackHostIp(hostIP) ? "lo" : "addr";
      if (taken.has(`${space} ${k}`)) continue;
      taken.add(`${space} ${k}`);
      seenChains.add(c);
      const target =
        family === 4 ? `${formatIp(podIP)}:${containerPort}` : `[${formatIp(podIP)}]:${containerPort}`;
      chains.push(
        `  chain ${c} {`,
        `    meta iif 0 meta mark set meta mark | ${mark}`,
        `    iifname ${dev} meta mark set meta mark | ${mark}`,
        `    meta l4proto ${proto} dnat ${ipk} to ${target}`,
        "  }",
      );
      (space === "any" ? any : space === "lo" ? lo : addr).push(`${k} : goto ${c}`);
    }
    const decl = (name: string, type: string, elements: readonly string[]) => {
      if (elements.length === 0) return false;
      lines.push(
        `  map ${name} {`,
        `    type ${type} : verdict`,
        `    elements = { ${elements.join(", ")} }`,
        "  }",
      );
      return true;
    };
    const v = `_v${family}`;
    const full = `${addrType} . inet_proto . inet_service`;
    // Only traffic to the node itself is ever taken: a hostIP that is not (or no longer) the node's own address
    // captures nothing passing through it.
    if (decl(`addr${v}`, full, addr)) {
      const rule = `    fib daddr type local ${ipk} daddr . meta l4proto . th dport vmap @addr${v}`;
      pre.push(rule);
      out.push(rule);
    }
    if (decl(`lo${v}`, full, lo)) out.push(`    ${ipk} daddr . meta l4proto . th dport vmap @lo${v}`);
    if (decl(`any${v}`, "inet_proto . inet_service", any)) {
      const nf = family === 4 ? "ipv4" : "ipv6";
      pre.push(`    meta nfproto ${nf} fib daddr type local meta l4proto . th dport vmap @any${v}`);
      // A wildcard is every address of the node but loopback: the node's own services bound to 127.0.0.1 stay
      // its own (only an explicit hostIP 127.0.0.1 maps loopback).
      const loopback = family === 4 ? "ip daddr != 127.0.0.0/8" : "ip6 daddr != ::1";
      out.push(
        `    meta nfproto ${nf} ${loopback} fib daddr type local meta l4proto . th dport vmap @any${v}`,
      );
    }
  }
  // One line at a time: a spread of tens of thousands of lines overflows the call stack.
  for (const c of chains) lines.push(c);
  lines.push(
    // A loopback destination from outside is a martian the kernel would drop after routing; DNATed before
    // routing it would reach the pod, so it is never DNATed here, and the management port (with
    // route_localnet=1) refuses it outright.
    "  chain filter_prerouting {",
    "    type filter hook prerouting priority -110; policy accept;",
    `    iifname ${dev} ip daddr 127.0.0.0/8 drop`,
    "  }",
    "  chain nat_prerouting {",
    "    type nat hook prerouting priority -100; policy accept;",
    "    ip daddr 127.0.0.0/8 return",
    "    ip6 daddr ::1 return",
    ...pre,
    "  }",
    "  chain nat_output {",
    "    type nat hook output priority -100; policy accept;",
    ...out,
    "  }",
    "  chain nat_postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    `    meta mark & ${mark} != 0 masquerade`,
    "  }",
  );
  // The table carries the digest of its own content: a restarted agent compares it and writes nothing when equal.
  const body = `${lines.join("\n")}\n`;
  const digest = createHash("sha256").update(body).digest("hex").slice(0, 16);
  return `table inet ${t}\ndelete table inet ${t}\ntable inet ${t} {\n  comment "${digest}"\n${body}}\n`;
}

const DIGEST_LINE = /^\s*comment "([0-9a-f]{16})"$/m;

/** The digest a script (from hostPortRuleset) writes into the table. */
export function rulesetDigest(script: string): string | undefined {
  return DIGEST_LINE.exec(script)?.[1];
}

/** The digest of the table installed now, from `nft list table` text; undefined when absent or not ours. */
export async function installedHostPortDigest(opts: { netns?: string } = {}): Promise<string | undefined> {
  const r = await runTool("nft", ["list", "table", "inet", HOSTPORT_NFT_TABLE], opts);
  if (r.code !== 0) return undefined;
  // The table's comment comes before its first set, map or chain.
  const head = r.stdout.split(/\n\s*(?:map|set|chain) /)[0] ?? "";
  return DIGEST_LINE.exec(head)?.[1];
}

/** Installs (or replaces) the table: one process, one transaction. */
export async function applyHostPortNat(script: string, opts: { netns?: string } = {}): Promise<void> {
  const r = await runTool("nft", ["-f", "-"], { input: script, ...opts });
  if (r.code !== 0) throw new ToolError(["nft", "-f", "-"], r);
}

/** Whether the table exists (someone may have flushed the ruleset by hand). */
export async function hostPortTablePresent(opts: { netns?: string } = {}): Promise<boolean> {
  const r = await runTool("nft", ["list", "tables", "inet"], opts);
  if (r.code !== 0) throw new ToolError(["nft", "list", "tables", "inet"], r);
  return r.stdout.split("\n").some((l) => l.trim() === `table inet ${HOSTPORT_NFT_TABLE}`);
}

/**
 * Lets the management port route packets with a loopback source (a hostIP 127.0.0.1 connection after DNAT, and
 * its replies), as portmap does on its bridge. Written only from a checked interface name.
 */
export async function enableRouteLocalnet(
  ifname: InterfaceName,
  opts: { netns?: string; off?: boolean } = {},
): Promise<void> {
  const why = typeof ifname === "string" ? interfaceNameProblem(ifname) : "is not a string";
  if (why) throw new TypeError(`route_localnet: interface ${JSON.stringify(ifname)} ${why}`);
  const key = `net/ipv4/conf/${ifname}/route_localnet`;
  const args = ["-q", "-w", `${key}=${opts.off ? 0 : 1}`];
  const r = await runTool("sysctl", args, opts.netns !== undefined ? { netns: opts.netns } : {});
  if (r.code !== 0) throw new ToolError(["sysctl", ...args], r);
}
