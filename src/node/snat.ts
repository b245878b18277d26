// Egress in gateway mode "local": the cluster router's per-node reroute policy sends pod traffic bound outside
// the cluster to this node's management port; the node forwards it and SNATs it to the node IP, so the outside
// sees the node, and the reply is de-SNATed by conntrack and routed back through the management port. The
// rules live in their own nftables table, replaced as a whole in one atomic `nft -f` transaction.
//
// Pod access (opt-in, `node.podAccessFrom`): hosts that route the pod network through this node, as a
// control-plane host that is not itself a node does for the apiserver's proxy to pods, have their traffic
// into the management port SNATed to this node's service SNAT address (the one NodePort traffic entering the
// node gets). A pod on another node then answers that address, which the cluster router delivers back to this
// node's management port, where conntrack undoes the translation: without it the reply would leave through the
// pod's own node, SNATed to that node's address, and the sender would drop it. Never to the management
// address: NetworkPolicy lets the node's own address through to every pod, the service SNAT address it does
// not; until the controller has given the node a service SNAT address of a family, nothing of it is translated.
//
// Ports: the cluster router returns every packet to a node's own address with a TCP, UDP or SCTP destination port
// of 61440 or more to that node's management port (its reply policy, topology.ts nodeReplyMatch), because the
// agent's own connections that keep the node's address use those source ports. Egress SNATed to the node's
// address must never use them, whatever the pod's own ip_local_port_range says: a reply to such a port sent by
// a pod on another node (its ETP Local NodePort or hostPort kept the address) would be rerouted here, not to the
// node that DNATed it. So the source port of TCP, UDP and SCTP is kept below 61440; ports under 1024 keep the
// kernel's default (they stay under 1024), and other protocols (ICMP) are translated as before.

import { writeFile } from "node:fs/promises";
import { familyBits, formatIp, type IpAddress, isParsedIp } from "../ipam/address.ts";
import { type Cidr, formatCidr } from "../ipam/cidr.ts";
import { NODE_REPLY_PORT_MIN } from "../ovn/topology.ts";
import { type InterfaceName, interfaceNameProblem } from "./interface-name.ts";
import { runTool, ToolError } from "./tool.ts";

export const NFT_TABLE = "zstack_ovn";

/** Where a translated source port of TCP, UDP or SCTP from 1024 up may land: below the reply policy's ports. */
export const EGRESS_PORTS = `1024-${NODE_REPLY_PORT_MIN - 1}`;
/** The match of the packets whose source port is translated into EGRESS_PORTS. */
const PORTED = "meta l4proto { tcp, udp, sctp } th sport >= 1024";

export interface EgressSnatSpec {
  /** The management port device; only traffic arriving from it is SNATed. */
  mgmtIfname: InterfaceName;
  /** Destinations that stay inside: cluster, service and join CIDRs. */
  insideCidrs: readonly Cidr[];
  /** SNAT to these addresses per family; a family without one is masqueraded to the outgoing interface's. */
  nodeIps?: readonly IpAddress[];
  /**
   * Sources whose traffic into the management port is masqueraded to its address (see above). Only what the
   * node's routes send to the management port is affected: the pod network, the Services, the Subnets.
   */
  podAccessSources?: readonly Cidr[];
  /** The node's service SNAT addresses (the management port annotation), the pod access sources' new source. */
  podAccessSnatIps?: readonly IpAddress[];
}

// The script runs as root and nft reads a newline or '}' as syntax, so every value is re-checked to be the typed
// value it claims to be (a cast from a raw string would otherwise slip through) and printed from its numbers.
function checkedIp(ip: IpAddress): IpAddress {
  const ok = isParsedIp(ip);
  if (!ok) throw new TypeError(`egress SNAT: ${JSON.stringify(String(ip))} is not a parsed IP address`);
  return ip;
}

function checkedCidr(c: Cidr): Cidr {
  checkedIp({ family: c?.family, value: c?.network });
  if (!Number.isInteger(c.prefix) || c.prefix < 0 || c.prefix > familyBits(c.family))
    throw new TypeError(`egress SNAT: ${JSON.stringify(String(c))} is not a parsed CIDR`);
  return c;
}

/**
 * The nft script. Declaring the table before deleting it makes the delete valid when the table is absent,
 * and the whole script is one transaction: the rules are never missing in between.
 */
export function snatRuleset(spec: EgressSnatSpec): string {
  const why = typeof spec.mgmtIfname === "string" ? interfaceNameProblem(spec.mgmtIfname) : "is not a string";
  if (why) throw new TypeError(`egress SNAT: management interface ${JSON.stringify(spec.mgmtIfname)} ${why}`);
  const dev = JSON.stringify(spec.mgmtIfname);
  const insideAll = spec.insideCidrs.map(checkedCidr);
  const nodeIps = (spec.nodeIps ?? []).map(checkedIp);
  const accessAll = (spec.podAccessSources ?? []).map(checkedCidr);
  const accessSnat = (spec.podAccessSnatIps ?? []).map(checkedIp);
  const lines = [`table inet ${NFT_TABLE}`, `delete table inet ${NFT_TABLE}`, `table inet ${NFT_TABLE} {`];
  const rules: string[] = [];
  for (const fam of [4, 6] as const) {
    const inside = insideAll.filter((c) => c.family === fam).map(formatCidr);
    const nodeIp = nodeIps.find((ip) => ip.family === fam);
    const proto = fam === 4 ? "ip" : "ip6";
    const set = `inside_v${fam}`;
    const setType = fam === 4 ? "ipv4_addr" : "ipv6_addr";
    if (inside.length > 0) {
      lines.push(
        `  set ${set} {`,
        `    type ${setType}; flags interval;`,
        `    elements = { ${inside.join(", ")} }`,
        "  }",
      );
    }
    const notInside = inside.length > 0 ? ` ${proto} daddr != @${set}` : "";
    // nft writes an IPv6 address followed by a port in brackets.
    const withPorts = nodeIp && (fam === 4 ? formatIp(nodeIp) : `[${formatIp(nodeIp)}]`);
    const ported = nodeIp
      ? `snat ${proto} to ${withPorts}:${EGRESS_PORTS}`
      : `masquerade to :${EGRESS_PORTS}`;
    const action = nodeIp ? `snat ${proto} to ${formatIp(nodeIp)}` : "masquerade";
    // Without an inside CIDR of this family there is no cluster traffic of it to tell apart: only egress.
    if (fam === 4 || inside.length > 0 || nodeIp) {
      const match = `iifname ${dev} oifname != ${dev} meta nfproto ipv${fam}${notInside}`;
      rules.push(`    ${match} ${PORTED} ${ported}`, `    ${match} ${action}`);
    }
    const access = accessAll.filter((c) => c.family === fam).map(formatCidr);
    const accessTo = accessSnat.find((ip) => ip.family === fam);
    if (access.length > 0 && accessTo) {
      lines.push(
        `  set access_v${fam} {`,
        `    type ${setType}; flags interval;`,
        `    elements = { ${access.join(", ")} }`,
        "  }",
      );
      rules.push(
        `    iifname != ${dev} oifname ${dev} meta nfproto ipv${fam} ${proto} saddr @access_v${fam} snat ${proto} to ${formatIp(accessTo)}`,
      );
    }
  }
  lines.push(
    "  chain postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    ...rules,
    "  }",
    "}",
  );
  return `${lines.join("\n")}\n`;
}

/** Installs (or replaces) the table in the node's netns: one process. */
export async function applyEgressSnat(spec: EgressSnatSpec, opts: { netns?: string } = {}): Promise<void> {
  const r = await runTool("nft", ["-f", "-"], { input: snatRuleset(spec), ...opts });
  if (r.code !== 0) throw new ToolError(["nft", "-f", "-"], r);
}

/** The table as nft lists it, or undefined when absent. */
export async function listEgressSnat(opts: { netns?: string } = {}): Promise<string | undefined> {
  const r = await runTool("nft", ["list", "table", "inet", NFT_TABLE], opts);
  return r.code === 0 ? r.stdout : undefined;
}

/**
 * Turns on forwarding for the families used. The sysctl files belong to the netns of whoever opens them, so in
 * the agent's own netns they are written directly, and elsewhere through one sysctl process.
 */
export async function enableForwarding(
  families: readonly (4 | 6)[],
  opts: { netns?: string } = {},
): Promise<void> {
  const keys = families.map((f) => (f === 4 ? "net.ipv4.ip_forward" : "net.ipv6.conf.all.forwarding"));
  if (keys.length === 0) return;
  if (!opts.netns) {
    for (const k of keys) await writeFile(`/proc/sys/${k.replaceAll(".", "/")}`, "1\n");
    return;
  }
  const args = ["-q", "-w", ...keys.map((k) => `${k}=1`)];
  const r = await runTool("sysctl", args, { netns: opts.netns });
  if (r.code !== 0) throw new ToolError(["sysctl", ...args], r);
}
