// What the node's own traffic rides on: the default gateways and the networks of the uplink (the interface
// holding the tunnel endpoint). A pod route that covered one of them would send the node's traffic to the
// management port, so the node agent keeps Subnet routes clear of them. Read from the kernel with `ip -j`.

import { familyBits, type IpAddress, ipEquals, tryParseIp } from "../ipam/address.ts";
import type { Cidr } from "../ipam/cidr.ts";
import { ipBatch, ipJson, requireSuccess } from "./ip-batch.ts";

export interface HostAnchors {
  /** Next hops of the default routes, both families. */
  readonly gateways: readonly IpAddress[];
  /** The networks of the addresses on the uplink. */
  readonly uplinkCidrs: readonly Cidr[];
}

interface RouteJson {
  gateway?: unknown;
  via?: { host?: unknown };
  nexthops?: { gateway?: unknown }[];
}

interface AddrJson {
  addr_info?: { local?: unknown; prefixlen?: unknown }[];
}

const parsed = (v: unknown): IpAddress[] => {
  const ip = typeof v === "string" ? tryParseIp(v) : undefined;
  return ip ? [ip] : [];
};

/** The next hops of `ip -j route show default` output (single and multipath routes, IPv4 or IPv6). */
export function defaultGateways(routes: readonly RouteJson[]): IpAddress[] {
  const out: IpAddress[] = [];
  for (const r of routes)
    for (const ip of [
      ...parsed(r.gateway),
      ...parsed(r.via?.host),
      ...(r.nexthops ?? []).flatMap((h) => parsed(h.gateway)),
    ])
      if (!out.some((o) => ipEquals(o, ip))) out.push(ip);
  return out;
}

/** The networks of the interface in `ip -j addr show` output that holds `uplinkIp`. */
export function uplinkCidrs(links: readonly AddrJson[], uplinkIp: IpAddress): Cidr[] {
  const addrs = (l: AddrJson) => l.addr_info ?? [];
  const uplink = links.find((l) =>
    addrs(l).some((a) => parsed(a.local).some((ip) => ipEquals(ip, uplinkIp))),
  );
  const out: Cidr[] = [];
  for (const a of uplink ? addrs(uplink) : []) {
    const [ip] = parsed(a.local);
    if (!ip || typeof a.prefixlen !== "number" || !Number.isInteger(a.prefixlen)) continue;
    const bits = familyBits(ip.family);
    if (a.prefixlen < 0 || a.prefixlen > bits) continue;
    const host = BigInt(bits - a.prefixlen);
    out.push({ family: ip.family, network: (ip.value >> host) << host, prefix: a.prefixlen });
  }
  return out;
}

/** The default gateways and the uplink's networks, in the given netns (the agent's own by default). */
export async function readHostAnchors(
  uplinkIp: IpAddress,
  opts: { netns?: string } = {},
): Promise<HostAnchors> {
  const v4 = await ipBatch([["route", "show", "default"]], { globalArgs: ["-j", "-4"], ...opts });
  requireSuccess("reading the IPv4 default routes", v4);
  const v6 = await ipBatch([["route", "show", "default"]], { globalArgs: ["-j", "-6"], ...opts });
  requireSuccess("reading the IPv6 default routes", v6);
  const addrs = await ipBatch([["addr", "show"]], { globalArgs: ["-j"], ...opts });
  requireSuccess("reading addresses", addrs);
  return {
    gateways: defaultGateways([...ipJson<RouteJson>(v4.stdout), ...ipJson<RouteJson>(v6.stdout)]),
    uplinkCidrs: uplinkCidrs(ipJson<AddrJson>(addrs.stdout), uplinkIp),
  };
}
