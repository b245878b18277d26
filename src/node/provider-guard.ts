// What a provider mapping must never take on this node. A provider's uplink becomes a port of an OVS bridge: an
// interface that holds one of the node's addresses or routes (eth0 with the node address, the default route's
// device) would lose them to the bridge and cut the node off. A provider's bridge is patched to br-int by
// ovn-controller: br-int itself, the node's underlay bridge (one holding the node's address or a route, e.g. a
// ZStack host's br-phy with the tunnel endpoint) or a bridge that already has another uplink would put a provider
// network where it does not belong. The kernel's view comes from `ip -j` and the bridges from the local OVS
// database, both parsed here into names; the checks themselves (provider-labels.ts) are pure.

import { interfaceNameProblem } from "./interface-name.ts";
import { ipBatch, ipJson, requireSuccess } from "./ip-batch.ts";
import { INTEGRATION_BRIDGE } from "./ovs-bridge.ts";
import { PROVIDER_KEY } from "./provider-bridges.ts";
import { NODE_AGENT, OWNER_KEY, type VswitchClient } from "./vswitch-db.ts";

export interface ProviderGuard {
  /** Host interfaces holding an address or a route of the node, each with what it holds. */
  readonly hostInterfaces: ReadonlyMap<string, string>;
  /** Bridges no provider label may name, each with why. */
  readonly reservedBridges: ReadonlyMap<string, string>;
  /** Each existing bridge's uplinks (ports onto a host interface) the agent did not add. */
  readonly bridgeUplinks: ReadonlyMap<string, readonly string[]>;
  /** Set when the node's addresses could not be read: then no uplink is accepted from a label. */
  readonly unknown?: string;
}

interface AddrJson {
  ifname?: unknown;
  /** The link's alternative names (`ip link property add ... altname`): the kernel resolves them like its name. */
  altnames?: unknown;
  addr_info?: { local?: unknown; prefixlen?: unknown; scope?: unknown }[];
}

interface RouteJson {
  dst?: unknown;
  dev?: unknown;
  type?: unknown;
  nexthops?: { dev?: unknown }[];
}

/** Route types that only follow an address (the local table's) or carry nothing. */
const SKIPPED_ROUTE_TYPES = new Set([
  "local",
  "broadcast",
  "multicast",
  "anycast",
  "unreachable",
  "prohibit",
  "blackhole",
]);

const nameOf = (v: unknown): string | undefined =>
  typeof v === "string" && interfaceNameProblem(v) === undefined ? v : undefined;

/**
 * The interfaces holding an address (other than link-local) or a route of the node, from `ip -j addr show` and
 * `ip -j route show table all`; the loopback never counts, nor IPv6's per-link fe80::/64 and multicast routes.
 */
export function hostInterfacesFrom(
  addrs: readonly AddrJson[],
  routes: readonly RouteJson[],
): Map<string, string> {
  const out = new Map<string, string>();
  // Every name a link answers to: a label naming an altname would put the same interface on a bridge.
  const names = new Map<string, string[]>();
  for (const link of addrs) {
    const dev = nameOf(link.ifname);
    if (dev === undefined) continue;
    const alt = Array.isArray(link.altnames) ? link.altnames : [];
    names.set(dev, [dev, ...alt.map(nameOf).filter((n): n is string => n !== undefined)]);
  }
  const note = (dev: string | undefined, what: string) => {
    if (dev === undefined || dev === "lo") return;
    for (const n of names.get(dev) ?? [dev]) if (!out.has(n)) out.set(n, what);
  };
  for (const link of addrs) {
    const dev = nameOf(link.ifname);
    for (const a of link.addr_info ?? []) {
      if (a.scope === "link" || typeof a.local !== "string" || typeof a.prefixlen !== "number") continue;
      if (!/^[0-9a-fA-F:.]+$/.test(a.local)) continue;
      note(dev, `holds the node's address ${a.local}/${a.prefixlen}`);
    }
  }
  for (const r of routes) {
    if (typeof r.type === "string" && SKIPPED_ROUTE_TYPES.has(r.type)) continue;
    const dst = typeof r.dst === "string" ? r.dst : "";
    if (/^(fe80|ff[0-9a-f]{2}):/i.test(dst)) continue;
    const what = /^[0-9a-zA-Z:./]+$/.test(dst) ? `the node's route ${dst}` : "a route of the node";
    for (const dev of [r.dev, ...(r.nexthops ?? []).map((n) => n.dev)]) note(nameOf(dev), `carries ${what}`);
  }
  return out;
}

/** The interfaces holding the node's addresses and routes, read from the kernel (in `netns`, or the agent's). */
export async function readHostInterfaces(opts: { netns?: string } = {}): Promise<Map<string, string>> {
  const addrs = await ipBatch([["addr", "show"]], { globalArgs: ["-j"], ...opts });
  requireSuccess("reading addresses", addrs);
  const routes: RouteJson[] = [];
  for (const family of ["-4", "-6"]) {
    const r = await ipBatch([["route", "show", "table", "all"]], { globalArgs: ["-j", family], ...opts });
    requireSuccess("reading routes", r);
    routes.push(...ipJson<RouteJson>(r.stdout));
  }
  return hostInterfacesFrom(ipJson<AddrJson>(addrs.stdout), routes);
}

/** Interface types that are not a host interface: OVS's own ports and tunnels. */
const NOT_UPLINK_TYPES = new Set([
  "internal",
  "patch",
  "geneve",
  "vxlan",
  "gre",
  "stt",
  "erspan",
  "ip6gre",
  "ip6erspan",
  "bareudp",
  "gtpu",
  "srv6",
  "lisp",
]);

/**
 * The guard from the kernel's interfaces and the local OVS database: br-int, every bridge holding a node address
 * or route (its own interface, or a port onto an interface that does) unless the agent created it for a provider,
 * and each bridge's uplinks not the agent's.
 */
export function providerGuardFrom(
  client: VswitchClient,
  hostInterfaces: ReadonlyMap<string, string>,
): ProviderGuard {
  const reserved = new Map<string, string>([[INTEGRATION_BRIDGE, "is OVN's integration bridge"]]);
  const uplinks = new Map<string, string[]>();
  const ports = client.cache.table("Port");
  const interfaces = client.cache.table("Interface");
  for (const b of client.cache.table("Bridge").values()) {
    // A bridge this agent created for a provider network stays a provider bridge when someone gives it an
    // address (host access to that network): refusing it would make the agent delete a working bridge.
    const bids = b.external_ids as Readonly<Record<string, string>>;
    const agentBridge = bids[OWNER_KEY] === NODE_AGENT && bids[PROVIDER_KEY] !== undefined;
    const held = hostInterfaces.get(b.name);
    if (held !== undefined && !agentBridge)
      reserved.set(b.name, `is the node's underlay bridge (it ${held})`);
    for (const p of b.ports) {
      const port = ports.get(p);
      if (!port || port.name === b.name) continue;
      const ids = port.external_ids as Readonly<Record<string, string>>;
      const agents = ids[OWNER_KEY] === NODE_AGENT && ids[PROVIDER_KEY] !== undefined;
      for (const i of port.interfaces) {
        const iface = interfaces.get(i);
        if (!iface || NOT_UPLINK_TYPES.has(String(iface.type))) continue;
        const via = hostInterfaces.get(iface.name);
        if (via !== undefined && !agentBridge && !reserved.has(b.name))
          reserved.set(b.name, `is the node's underlay bridge (its port ${iface.name} ${via})`);
        if (!agents) uplinks.set(b.name, [...(uplinks.get(b.name) ?? []), port.name]);
      }
    }
  }
  return { hostInterfaces, reservedBridges: reserved, bridgeUplinks: uplinks };
}

/** A guard for when the node's addresses cannot be read: every uplink label is refused with `why`. */
export function unknownProviderGuard(why: string): ProviderGuard {
  return {
    hostInterfaces: new Map(),
    reservedBridges: new Map([[INTEGRATION_BRIDGE, "is OVN's integration bridge"]]),
    bridgeUplinks: new Map(),
    unknown: why,
  };
}
