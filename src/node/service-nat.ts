// Services for everything that enters the node's own network stack, kube-proxy style: traffic the node itself
// sends (hostNetwork pods, the kubelet) to a Service address, and traffic from outside (or from pods, through
// the management port) to a NodePort, an externalIP or a load balancer IP. OVN load balancers serve pod
// clients; a connection the node makes must be DNATed by the node, because a reply from a host-network endpoint
// could not come back through OVN. The rules live in their own nftables table, replaced as a whole in one
// atomic `nft -f` transaction built only from typed values.
//
// Shape (per family; v4 shown):
//   vips_v4      map  clusterIP . proto . port       -> goto the internal chain (ITP applied)
//   ext_v4       map  externalIP/LB IP . proto . port -> goto the external chain (ETP applied)
//   nodeports_v4 map  proto . nodePort                -> the same, for destinations in node_ips_v4
//   noep_v4 / noep_ports_v4: the same keys for ports with no endpoint at all: rejected in filter chains that run
//   before NAT (TCP reset, ICMP port unreachable otherwise), so a client is refused at once instead of hanging.
//   A service port's chains: `_all` (every endpoint, masquerade), `_int` (ITP Local: this node's endpoints,
//   masquerade), `_ext` (ETP Local: pods via the management port and the node itself get `_all`, outside
//   clients get `_loc`: this node's endpoints, no masquerade, so the pod sees the client's address), and one
//   chain per endpoint that DNATs (and records the client for session affinity).
//   Masquerade is marked per hook: the node's own connections (sent by its stack, the output hook: kubelet, host
//   processes, node -> Service) keep the management address, which NetworkPolicy treats as the node itself;
//   connections that entered the node (outside clients, other nodes' hosts, pods through the management port)
//   are SNATed to the node's service SNAT address when they go to a pod (out of the management port), which no
//   own-node allow or ipBlock expansion holds; to a host-network endpoint they are masqueraded as before.
//   One exception keeps the node's own address, as kube-proxy does: the node's own connection to an ETP Local
//   Service (`_ext`) from one of the addresses the controller's reply policy holds goes to `_sc`, every endpoint,
//   where a pod on another node sees the node's address with the source port remapped into 61440-65535: the
//   cluster router returns such replies to this node's management port (topology.ts nodeReplyMatch), so this
//   node's conntrack un-DNATs them. A pod on this node still sees the management address (the own-node allow).

import { createHash } from "node:crypto";
import { familyBits, formatIp, type IpAddress, tryParseIp } from "../ipam/address.ts";
import { type Cidr, cidrContains, formatCidr } from "../ipam/cidr.ts";
import { NODE_REPLY_PORT_MAX, NODE_REPLY_PORT_MIN } from "../ovn/topology.ts";
import { type InterfaceName, interfaceNameProblem } from "./interface-name.ts";
import { type NatProtocol, nftValueChecks } from "./nft-values.ts";
import { EGRESS_PORTS } from "./snat.ts";
import { runTool, ToolError } from "./tool.ts";

const { fail, ip: checkedIp, port: checkedPort, protocol: checkedProtocol } = nftValueChecks("service NAT");

export const SERVICE_NFT_TABLE = "zstack_ovn_svc";
/** The packet mark bit that asks the postrouting chain to masquerade a DNATed connection of the node's own. */
export const MASQUERADE_MARK = 0x4000;
/** The mark bit for a DNATed connection that entered the node: SNAT to the service SNAT address. */
export const SERVICE_SNAT_MARK = 0x2000;
/** The mark bit for the node's own connection to a pod elsewhere that keeps the node's address (`_sc`). */
export const NODE_ADDRESS_MARK = 0x800;
/**
 * What makes a connection the node's own: it was sent by this node's stack (the output hook, where a packet has
 * no input interface), not that its source is a local address. With `accept_local=1` the kernel accepts packets
 * from outside carrying a local source; judged by source, they would be masqueraded to the management address,
 * which NetworkPolicy lets in as the node itself. A packet in prerouting always has its input interface.
 */
const FROM_NODE = "meta iif 0";
const ENTERED = "meta iif != 0";
/** Kubernetes caps sessionAffinityConfig.clientIP.timeoutSeconds at a day. */
export const MAX_AFFINITY_TIMEOUT_SECONDS = 86_400;

export type { NatProtocol } from "./nft-values.ts";

export interface NatEndpoint {
  ip: IpAddress;
  port: number;
}

/** One port of one Service, with the addresses it is reached on and the endpoints chosen for it. */
export interface NatServicePort {
  /**
   * Identity of the port (namespace, name, port name, protocol). Only hashed into chain names: never printed,
   * so a hostile name cannot reach the script.
   */
  key: string;
  protocol: NatProtocol;
  port: number;
  nodePort?: number | undefined;
  clusterIPs: readonly IpAddress[];
  /** spec.externalIPs and status.loadBalancer.ingress[].ip. */
  externalIPs: readonly IpAddress[];
  /**
   * Those of externalIPs (the LB IPs) only `sourceRanges` may reach, in each family that has a range: every
   * other source is dropped before DNAT, on both hooks (outside clients, pods through the management port, the
   * node itself), as kube-proxy does. When a range holds one of the node's addresses the LB IPs themselves are
   * allowed as sources too (an LB IP configured on the node loops back with itself as source).
   */
  firewalledIPs?: readonly IpAddress[] | undefined;
  sourceRanges?: readonly Cidr[] | undefined;
  affinityTimeoutSeconds?: number | undefined;
  /** Every endpoint kube-proxy would choose. */
  endpoints: readonly NatEndpoint[];
  /** The same choice among this node's endpoints (used only with a Local traffic policy). */
  localEndpoints: readonly NatEndpoint[];
  internalTrafficLocal: boolean;
  externalTrafficLocal: boolean;
}

/** A client address remembered for session affinity, with the seconds it has left. */
export interface AffinityEntry {
  ip: IpAddress;
  expiresSeconds: number;
}

export interface ServiceNatSpec {
  /** Pods arrive through the management port: a NodePort from a pod is always Cluster, with masquerade. */
  mgmtIfname: InterfaceName;
  /** The node's InternalIPs: NodePorts answer on these. */
  nodeIps: readonly IpAddress[];
  ports: readonly NatServicePort[];
  /**
   * The node's service SNAT address per family (on the join network, routed back to the management port by
   * OVN, never configured on an interface): the source of masqueraded connections that entered the node. A
   * family without one masquerades them to the management address, as before.
   */
  serviceSnatIps?: readonly IpAddress[] | undefined;
  /**
   * The node's addresses whose replies the cluster router returns to this node's management port (the
   * controller's annotation says its reply policy holds them; IPv4 only). The node's own connection from one of
   * them (also one of nodeIps) to an ETP Local Service keeps it as source to a pod on another node. None: such
   * connections are masqueraded to the management address, as every other node-local connection.
   */
  nodeReplyIps?: readonly IpAddress[] | undefined;
  /**
   * Affinity entries to carry over, by set name (read back from the table being replaced): replacing the table
   * would otherwise forget every client's endpoint whenever any Service changes.
   */
  affinity?: ReadonlyMap<string, readonly AffinityEntry[]>;
}

// The script runs as root and nft reads a newline or '}' as syntax, so every value is re-checked to be the typed
// value it claims to be (a cast from a raw string would otherwise slip through) and printed from its numbers.

function checkedTimeout(t: number): number {
  if (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > MAX_AFFINITY_TIMEOUT_SECONDS)
    fail(`a timeout of 1..${MAX_AFFINITY_TIMEOUT_SECONDS} seconds`, t);
  return t;
}

function checkedCidr(c: Cidr): Cidr {
  const ok =
    typeof c === "object" &&
    c !== null &&
    (c.family === 4 || c.family === 6) &&
    typeof c.prefix === "number" &&
    Number.isInteger(c.prefix) &&
    c.prefix >= 0 &&
    c.prefix <= familyBits(c.family) &&
    typeof c.network === "bigint" &&
    c.network >= 0n &&
    (c.network >> BigInt(familyBits(c.family) - c.prefix)) << BigInt(familyBits(c.family) - c.prefix) ===
      c.network &&
    c.network < 1n << BigInt(familyBits(c.family));
  if (!ok) fail("a parsed CIDR", c);
  return c;
}

function checkedEndpoint(e: NatEndpoint): NatEndpoint {
  if (typeof e !== "object" || e === null) fail("an endpoint", e);
  return { ip: checkedIp(e.ip), port: checkedPort(e.port) };
}

/** A chain-name stem from the port's identity and family: hex only, whatever the key holds. */
function stem(key: string, family: 4 | 6): string {
  if (typeof key !== "string") fail("a service port key", key);
  return `s${createHash("sha256").update(`${family}\0${key}`).digest("hex").slice(0, 16)}`;
}

const fmtIp = (ip: IpAddress) => formatIp(checkedIp(ip));
const fmtEndpoint = (e: NatEndpoint) =>
  e.ip.family === 4 ? `${fmtIp(e.ip)}:${checkedPort(e.port)}` : `[${fmtIp(e.ip)}]:${checkedPort(e.port)}`;

interface FamilyParts {
  sets: string[];
  chains: string[];
  vips: string[];
  ext: string[];
  nodeports: string[];
  noep: string[];
  noepPorts: string[];
  fw: string[];
}

function endpointKey(e: NatEndpoint): string {
  return `${e.ip.family}/${e.ip.value}/${e.port}`;
}

/** Names of affinity sets: the port's stem and the endpoint's own hash, so a set keeps its name as others come and go. */
const AFFINITY_SET = /^s[0-9a-f]{16}_a[0-9a-f]{12}$/;

function affinitySetName(stemName: string, e: NatEndpoint): string {
  return `${stemName}_a${createHash("sha256").update(endpointKey(e)).digest("hex").slice(0, 12)}`;
}

function carried(spec: ServiceNatSpec, set: string, family: 4 | 6, timeout: number): string {
  const entries = spec.affinity?.get(set) ?? [];
  const out: string[] = [];
  for (const a of entries) {
    const ip = checkedIp(a.ip);
    const left = a.expiresSeconds;
    if (typeof left !== "number" || !Number.isInteger(left)) fail("a whole number of seconds", left);
    // An entry about to expire, or one that outlives a shortened timeout, is simply not carried.
    if (ip.family !== family || left < 1 || left > timeout) continue;
    out.push(`${formatIp(ip)} expires ${left}s`);
  }
  return out.length === 0 ? "" : `    elements = { ${out.join(", ")} }`;
}

function familyParts(spec: ServiceNatSpec, family: 4 | 6, dev: string, replySet?: string): FamilyParts {
  const ipk = family === 4 ? "ip" : "ip6";
  const addrType = family === 4 ? "ipv4_addr" : "ipv6_addr";
  const out: FamilyParts = {
    sets: [],
    chains: [],
    vips: [],
    ext: [],
    nodeports: [],
    noep: [],
    noepPorts: [],
    fw: [],
  };
  const seenStems = new Set<string>();
  // Two Services may claim one externalIP and port (the API allows it) and nft refuses a map with a key twice,
  // which would fail the whole transaction: the first port in the given order keeps an address, as it is sorted.
  const taken = new Set<string>();
  const claim = (space: string, key: string) =>
    !taken.has(`${space} ${key}`) && !!taken.add(`${space} ${key}`);
  for (const p of spec.ports) {
    const proto = checkedProtocol(p.protocol);
    const port = checkedPort(p.port);
    const nodePort = p.nodePort === undefined ? undefined : checkedPort(p.nodePort);
    const timeout =
      p.affinityTimeoutSeconds === undefined ? undefined : checkedTimeout(p.affinityTimeoutSeconds);
    const ofFamily = (ips: readonly IpAddress[]) => ips.map(checkedIp).filter((ip) => ip.family === family);
    const clusterIPs = ofFamily(p.clusterIPs);
    const externalIPs = ofFamily(p.externalIPs);
    if (clusterIPs.length === 0 && externalIPs.length === 0 && nodePort === undefined) continue;
    // A NodePort answers on the node's addresses of each family the Service has endpoints or addresses in.
    const dedup = (eps: readonly NatEndpoint[]) => {
      const seen = new Set<string>();
      return eps
        .map(checkedEndpoint)
        .filter((e) => e.ip.family === family)
        .filter((e) => !seen.has(endpointKey(e)) && seen.add(endpointKey(e)));
    };
    const all = dedup(p.endpoints);
    const local = dedup(p.localEndpoints);
    if (clusterIPs.length === 0 && externalIPs.length === 0 && all.length === 0) continue;
    const s = stem(p.key, family);
    if (seenStems.has(s)) fail("a unique service port key", p.key);
    seenStems.add(s);

    const keyOf = (ip: IpAddress) => `${formatIp(ip)} . ${proto} . ${port}`;
    const ranges = (p.sourceRanges ?? []).map(checkedCidr).filter((c) => c.family === family);
    const filtered = ofFamily(p.firewalledIPs ?? []).filter((ip) =>
      externalIPs.some((e) => e.value === ip.value),
    );
    if (ranges.length > 0 && filtered.length > 0) {
      const mine = spec.nodeIps.map(checkedIp).filter((ip) => ip.family === family);
      const fromNode = ranges.some((c) => mine.some((ip) => cidrContains(c, ip)));
      const allowed = [...ranges.map(formatCidr), ...(fromNode ? filtered.map((ip) => formatIp(ip)) : [])];
      out.chains.push(
        `  chain ${s}_fw {`,
        `    ${ipk} saddr { ${[...new Set(allowed)].join(", ")} } return`,
        "    drop",
        "  }",
      );
      for (const ip of filtered) if (claim("fw", keyOf(ip))) out.fw.push(`${keyOf(ip)} : goto ${s}_fw`);
    }
    if (all.length === 0) {
      for (const ip of [...clusterIPs, ...externalIPs]) if (claim("vip", keyOf(ip))) out.noep.push(keyOf(ip));
      const np = `${proto} . ${nodePort}`;
      if (nodePort !== undefined && claim("nodeport", np)) out.noepPorts.push(np);
      continue;
    }

    // One chain per endpoint, shared by the selections; its index names the chain.
    const index = new Map<string, number>();
    const affinitySet = new Map<string, string>();
    for (const e of [...all, ...local]) {
      const k = endpointKey(e);
      if (index.has(k)) continue;
      const i = index.size;
      index.set(k, i);
      const rules: string[] = [];
      if (timeout !== undefined) {
        const set = affinitySetName(s, e);
        affinitySet.set(k, set);
        const elements = carried(spec, set, family, timeout);
        out.sets.push(
          `  set ${set} {`,
          `    type ${addrType}`,
          "    flags dynamic,timeout",
          `    timeout ${timeout}s`,
          ...(elements ? [elements] : []),
          "  }",
        );
        rules.push(`    update @${set} { ${ipk} saddr }`);
      }
      rules.push(`    meta l4proto ${proto} dnat ${ipk} to ${fmtEndpoint(e)}`);
      out.chains.push(`  chain ${s}_e${i} {`, ...rules, "  }");
    }
    const lbChain = (
      name: string,
      eps: readonly NatEndpoint[],
      masquerade: boolean,
      via: (e: NatEndpoint) => string = (e) => `${s}_e${index.get(endpointKey(e))}`,
    ) => {
      const rules: string[] = [];
      if (masquerade)
        rules.push(
          `    ${FROM_NODE} meta mark set meta mark | 0x${MASQUERADE_MARK.toString(16)}`,
          `    ${ENTERED} meta mark set meta mark | 0x${SERVICE_SNAT_MARK.toString(16)}`,
        );
      const targets = eps.map(via);
      if (timeout !== undefined)
        for (const [i, t] of targets.entries())
          rules.push(`    ${ipk} saddr @${affinitySet.get(endpointKey(eps[i]!))} goto ${t}`);
      if (targets.length === 0) rules.push("    drop");
      else if (targets.length === 1) rules.push(`    goto ${targets[0]}`);
      else
        rules.push(
          `    numgen random mod ${targets.length} vmap { ${targets.map((t, i) => `${i} : goto ${t}`).join(", ")} }`,
        );
      out.chains.push(`  chain ${name} {`, ...rules, "  }");
    };
    lbChain(`${s}_all`, all, true);
    let internal = `${s}_all`;
    if (p.internalTrafficLocal) {
      internal = `${s}_int`;
      lbChain(internal, local, true);
    }
    let external = `${s}_all`;
    if (p.externalTrafficLocal) {
      external = `${s}_ext`;
      lbChain(`${s}_loc`, local, false);
      if (replySet) {
        // Every endpoint, the node's address kept towards pods elsewhere; this node's own pods see the management
        // address (NetworkPolicy's own-node allow), as through `_all`.
        const isLocal = new Set(local.map(endpointKey));
        for (const e of all) {
          const i = index.get(endpointKey(e));
          const mark = isLocal.has(endpointKey(e)) ? MASQUERADE_MARK : NODE_ADDRESS_MARK;
          out.chains.push(
            `  chain ${s}_k${i} {`,
            `    meta mark set meta mark | 0x${mark.toString(16)}`,
            `    goto ${s}_e${i}`,
            "  }",
          );
        }
        lbChain(`${s}_sc`, all, false, (e) => `${s}_k${index.get(endpointKey(e))}`);
      }
      out.chains.push(
        `  chain ${external} {`,
        // Pods (through their egress reroute) and the node itself are in-cluster clients: Cluster, as kube-proxy.
        `    iifname ${dev} goto ${s}_all`,
        ...(replySet
          ? [`    ${FROM_NODE} ${family === 4 ? "ip" : "ip6"} saddr @${replySet} goto ${s}_sc`]
          : []),
        `    ${FROM_NODE} goto ${s}_all`,
        `    goto ${s}_loc`,
        "  }",
      );
    }
    for (const ip of clusterIPs)
      if (claim("vip", keyOf(ip))) out.vips.push(`${keyOf(ip)} : goto ${internal}`);
    for (const ip of externalIPs)
      if (claim("vip", keyOf(ip))) out.ext.push(`${keyOf(ip)} : goto ${external}`);
    const np = `${proto} . ${nodePort}`;
    if (nodePort !== undefined && claim("nodeport", np)) out.nodeports.push(`${np} : goto ${external}`);
  }
  return out;
}

/**
 * The nft script. Declaring the table before deleting it makes the delete valid when the table is absent,
 * and the whole script is one transaction: the rules are never missing in between.
 */
export function serviceRuleset(spec: ServiceNatSpec): string {
  const why = typeof spec.mgmtIfname === "string" ? interfaceNameProblem(spec.mgmtIfname) : "is not a string";
  if (why) throw new TypeError(`service NAT: management interface ${JSON.stringify(spec.mgmtIfname)} ${why}`);
  const dev = JSON.stringify(spec.mgmtIfname);
  const nodeIps = spec.nodeIps.map(checkedIp);
  const snatIps = (spec.serviceSnatIps ?? []).map(checkedIp);
  // Only addresses that are the node's own: the reply policy returns nothing else to this node.
  const replyIps = (spec.nodeReplyIps ?? [])
    .map(checkedIp)
    .filter((ip) => ip.family === 4 && nodeIps.some((n) => n.family === 4 && n.value === ip.value));
  const t = SERVICE_NFT_TABLE;
  const lines = [`table inet ${t}`, `delete table inet ${t}`, `table inet ${t} {`];
  const nat: string[] = [];
  const filter: string[] = [];
  const body: string[] = [];
  for (const family of [4, 6] as const) {
    const ipk = family === 4 ? "ip" : "ip6";
    const addrType = family === 4 ? "ipv4_addr" : "ipv6_addr";
    const v = `_v${family}`;
    const replies = [...new Set(replyIps.filter((ip) => ip.family === family).map(formatIp))];
    const parts = familyParts(spec, family, dev, replies.length > 0 ? `node_reply${v}` : undefined);
    const mine = nodeIps.filter((ip) => ip.family === family).map(formatIp);
    const decl = (kind: "set" | "map", name: string, type: string, elements: readonly string[]) => {
      if (elements.length === 0) return false;
      lines.push(
        `  ${kind} ${name} {`,
        `    type ${type}`,
        `    elements = { ${elements.join(", ")} }`,
        "  }",
      );
      return true;
    };
    const vipType = `${addrType} . inet_proto . inet_service`;
    if (decl("map", `vips${v}`, `${vipType} : verdict`, parts.vips))
      nat.push(`    ${ipk} daddr . meta l4proto . th dport vmap @vips${v}`);
    if (decl("map", `ext${v}`, `${vipType} : verdict`, parts.ext))
      nat.push(`    ${ipk} daddr . meta l4proto . th dport vmap @ext${v}`);
    const haveNodeIps = decl("set", `node_ips${v}`, addrType, [...new Set(mine)]);
    decl("set", `node_reply${v}`, addrType, replies);
    if (haveNodeIps && decl("map", `nodeports${v}`, "inet_proto . inet_service : verdict", parts.nodeports))
      nat.push(`    ${ipk} daddr @node_ips${v} meta l4proto . th dport vmap @nodeports${v}`);
    const refuse = (match: string) => {
      filter.push(`    ${match} meta l4proto tcp reject with tcp reset`, `    ${match} reject`);
    };
    // Source ranges first: a refused source is dropped whether or not the port has endpoints.
    if (decl("map", `fw${v}`, `${vipType} : verdict`, parts.fw))
      filter.push(`    ${ipk} daddr . meta l4proto . th dport vmap @fw${v}`);
    if (decl("set", `noep${v}`, vipType, parts.noep))
      refuse(`${ipk} daddr . meta l4proto . th dport @noep${v}`);
    if (haveNodeIps && decl("set", `noep_ports${v}`, "inet_proto . inet_service", parts.noepPorts))
      refuse(`${ipk} daddr @node_ips${v} meta l4proto . th dport @noep_ports${v}`);
    lines.push(...parts.sets);
    body.push(...parts.chains);
  }
  lines.push(...body);
  // The filter chains run just before DNAT (-100) on both paths into the stack.
  for (const [hook, chain] of [
    ["prerouting", "filter_prerouting"],
    ["output", "filter_output"],
  ] as const)
    lines.push(
      `  chain ${chain} {`,
      `    type filter hook ${hook} priority -110; policy accept;`,
      ...filter,
      "  }",
    );
  for (const [hook, chain] of [
    ["prerouting", "nat_prerouting"],
    ["output", "nat_output"],
  ] as const)
    lines.push(
      `  chain ${chain} {`,
      `    type nat hook ${hook} priority -100; policy accept;`,
      ...nat,
      "  }",
    );
  // Only towards pods (the management port): a connection DNATed to a host-network endpoint leaves another
  // interface and is masqueraded to that interface's address, whose replies come back to this node.
  const snat: string[] = [];
  // The node's own connections that keep its address towards a pod elsewhere: only the source port changes, into
  // the range the reply policy matches. Before the rules below: such a packet carries none of their marks.
  for (const ip of replyIps) {
    const a = formatIp(ip);
    snat.push(
      `    meta nfproto ipv4 meta mark & 0x${NODE_ADDRESS_MARK.toString(16)} != 0 oifname ${dev} ip saddr ${a} meta l4proto { tcp, udp, sctp } snat ip to ${a}:${NODE_REPLY_PORT_MIN}-${NODE_REPLY_PORT_MAX}`,
    );
  }
  for (const family of [4, 6] as const) {
    const ip = snatIps.find((a) => a.family === family);
    if (!ip) continue;
    const ipk = family === 4 ? "ip" : "ip6";
    snat.push(
      `    meta nfproto ${family === 4 ? "ipv4" : "ipv6"} meta mark & 0x${SERVICE_SNAT_MARK.toString(16)} != 0 oifname ${dev} snat ${ipk} to ${formatIp(ip)}`,
    );
  }
  const masqMarks = (MASQUERADE_MARK | SERVICE_SNAT_MARK).toString(16);
  lines.push(
    "  chain nat_postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    ...snat,
    // Towards a host-network endpoint on another node this is the node's address: a translated source port
    // stays below the reply policy's range (snat.ts EGRESS_PORTS), as egress does.
    `    meta mark & 0x${masqMarks} != 0 meta l4proto { tcp, udp, sctp } th sport >= 1024 masquerade to :${EGRESS_PORTS}`,
    `    meta mark & 0x${masqMarks} != 0 masquerade`,
    "  }",
    "}",
  );
  return `${lines.join("\n")}\n`;
}

/**
 * The affinity entries in `nft -j list table` output of our table: each set named as ours, with each element an
 * address of the set's family and its seconds left. Anything else in the text is ignored.
 */
export function affinityFromNftJson(text: string): Map<string, AffinityEntry[]> {
  const out = new Map<string, AffinityEntry[]>();
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return out;
  }
  const items = (doc as { nftables?: unknown })?.nftables;
  if (!Array.isArray(items)) return out;
  for (const item of items) {
    const set = (item as { set?: Record<string, unknown> })?.set;
    if (!set || set.table !== SERVICE_NFT_TABLE || set.family !== "inet") continue;
    const name = set.name;
    const family = set.type === "ipv4_addr" ? 4 : set.type === "ipv6_addr" ? 6 : undefined;
    if (typeof name !== "string" || !AFFINITY_SET.test(name) || !family || !Array.isArray(set.elem)) continue;
    const entries: AffinityEntry[] = [];
    for (const el of set.elem) {
      const inner = (el as { elem?: { val?: unknown; expires?: unknown } })?.elem;
      const ip = typeof inner?.val === "string" ? tryParseIp(inner.val) : undefined;
      const left = inner?.expires;
      if (!ip || ip.family !== family || typeof left !== "number" || !Number.isInteger(left) || left < 1)
        continue;
      entries.push({ ip, expiresSeconds: left });
    }
    if (entries.length > 0) out.set(name, entries);
  }
  return out;
}

/** The affinity entries of the table as it is now (none when it is absent). */
export async function readAffinity(opts: { netns?: string } = {}): Promise<Map<string, AffinityEntry[]>> {
  const r = await runTool("nft", ["-j", "list", "table", "inet", SERVICE_NFT_TABLE], opts);
  return r.code === 0 ? affinityFromNftJson(r.stdout) : new Map();
}

/** Installs (or replaces) the table in the node's netns: one process, one transaction. */
export async function applyServiceNat(script: string, opts: { netns?: string } = {}): Promise<void> {
  const r = await runTool("nft", ["-f", "-"], { input: script, ...opts });
  if (r.code !== 0) throw new ToolError(["nft", "-f", "-"], r);
}

/** Whether the table exists (someone may have flushed the ruleset by hand). */
export async function serviceTablePresent(opts: { netns?: string } = {}): Promise<boolean> {
  const r = await runTool("nft", ["list", "tables", "inet"], opts);
  if (r.code !== 0) throw new ToolError(["nft", "list", "tables", "inet"], r);
  return r.stdout.split("\n").some((l) => l.trim() === `table inet ${SERVICE_NFT_TABLE}`);
}

/** Removes the table (nothing to remove is fine). */
export async function removeServiceNat(opts: { netns?: string } = {}): Promise<void> {
  const t = SERVICE_NFT_TABLE;
  const r = await runTool("nft", ["-f", "-"], {
    input: `table inet ${t}\ndelete table inet ${t}\n`,
    ...opts,
  });
  if (r.code !== 0) throw new ToolError(["nft", "-f", "-"], r);
}
