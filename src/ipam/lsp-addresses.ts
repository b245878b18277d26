// The `addresses` column of an OVN Logical_Switch_Port, one element at a time. The forms are those of
// ovn-nb(5): "MAC [IP...]", "unknown", "router", "dynamic", "dynamic IP [IP]" and "MAC dynamic". A port
// with "dynamic" gets its real addresses from ovn-northd in `dynamic_addresses`, in the "MAC IP..." form.

import { compareIp, formatIp, type IpAddress, parseIp } from "./address.ts";
import { parseMac } from "./mac.ts";
import { type FieldProblem, InvalidInputError } from "./problem.ts";

export type LspAddress =
  /** A fixed MAC and the IPs the port owns (possibly none). */
  | { readonly kind: "static"; readonly mac: string; readonly ips: readonly IpAddress[] }
  /** ovn-northd picks the MAC (unless given) and IPs (except those given); see `dynamic_addresses`. */
  | { readonly kind: "dynamic"; readonly mac?: string; readonly ips: readonly IpAddress[] }
  /** Addresses come from the connected router port. */
  | { readonly kind: "router" }
  /** The port accepts frames for unknown MACs; it claims no IP. */
  | { readonly kind: "unknown" };

/**
 * Parses one element of `addresses`. IPs may carry a prefix length ("10.0.0.4/24"), which OVN accepts and
 * which is dropped here.
 * @throws InvalidInputError
 */
export function parseLspAddress(entry: string, field = "addresses"): LspAddress {
  const words = entry
    .trim()
    .split(/\s+/)
    .filter((w) => w !== "");
  const quoted = JSON.stringify(entry);
  if (words.length === 0) throw new InvalidInputError(field, `${quoted} is empty`);
  const [first, ...rest] = words as [string, ...string[]];
  const ips = (ws: string[]) => ws.map((w) => parseIp(w.replace(/\/\d+$/, ""), field));
  if (first === "router" || first === "unknown") {
    if (rest.length > 0) throw new InvalidInputError(field, `${quoted}: "${first}" stands alone`);
    return { kind: first };
  }
  if (first === "dynamic") {
    const given = ips(rest);
    if (given.length > 2)
      throw new InvalidInputError(field, `${quoted}: "dynamic" takes at most two addresses`);
    return { kind: "dynamic", ips: given };
  }
  const mac = parseMac(first, field);
  if (rest[0] === "dynamic") {
    if (rest.length > 1) throw new InvalidInputError(field, `${quoted}: nothing may follow "MAC dynamic"`);
    return { kind: "dynamic", mac, ips: [] };
  }
  return { kind: "static", mac, ips: ips(rest) };
}

/** Formats a "MAC IP [IP...]" element, IPv4 first. */
export function formatLspAddress(mac: string, ips: readonly IpAddress[]): string {
  const sorted = [...ips].sort(compareIp);
  return [parseMac(mac), ...sorted.map(formatIp)].join(" ");
}

/**
 * The IPs a port holds, from its `addresses` and `dynamic_addresses` columns. For a "dynamic" element the
 * IPs named in it and those in `dynamic_addresses` both count, because either may be the one in use.
 * Unreadable elements are reported, not thrown, so one bad foreign port does not stop a rebuild.
 */
export function portIps(
  addresses: readonly string[],
  dynamicAddresses?: string,
): { ips: IpAddress[]; problems: FieldProblem[] } {
  const found = new Map<string, IpAddress>();
  const problems: FieldProblem[] = [];
  const take = (entry: string, field: string): LspAddress | undefined => {
    try {
      return parseLspAddress(entry, field);
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      problems.push(e.problem);
      return undefined;
    }
  };
  let dynamic = false;
  addresses.forEach((entry, i) => {
    const a = take(entry, `addresses[${i}]`);
    if (!a || a.kind === "router" || a.kind === "unknown") return;
    if (a.kind === "dynamic") dynamic = true;
    for (const ip of a.ips) found.set(`${ip.family}/${ip.value}`, ip);
  });
  if (dynamic && dynamicAddresses) {
    const a = take(dynamicAddresses, "dynamic_addresses");
    if (a && (a.kind === "static" || a.kind === "dynamic")) {
      for (const ip of a.ips) found.set(`${ip.family}/${ip.value}`, ip);
    }
  }
  return { ips: [...found.values()].sort(compareIp), problems };
}

const OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
/** "MAC IPv4" in the form formatLspAddress writes: lower-case MAC, IPv4 without leading zeros or prefix. */
const CANONICAL_MAC_IPV4 = new RegExp(`^[0-9a-f]{2}(?::[0-9a-f]{2}){5} ${OCTET}(?:\\.${OCTET}){3}$`);

/**
 * The IPs a logical switch port holds, as text, from its `addresses` and `dynamic_addresses` columns.
 * Unreadable elements are skipped: a port whose addresses we cannot read holds nothing we could hand out twice.
 */
export function heldIps(port: {
  readonly addresses: readonly string[];
  readonly dynamic_addresses?: string | null;
}): string[] {
  const dynamic = port.dynamic_addresses ?? undefined;
  // Keyed by the column values themselves, so a hit is always what parsing would give.
  const key =
    port.addresses.length === 1 && dynamic === undefined
      ? `1${port.addresses[0]}`
      : `2${JSON.stringify([port.addresses, dynamic ?? null])}`;
  let ips = recentlyHeld.get(key);
  if (!ips) {
    // A pod port's element, "MAC IPv4" both canonical, is its own parse: checked by a pattern rather than
    // parsed, once per port added (the property test holds it to portIps).
    const only = key.charCodeAt(0) === 0x31 ? (port.addresses[0] as string) : undefined;
    ips =
      only !== undefined && CANONICAL_MAC_IPV4.test(only)
        ? [only.slice(only.indexOf(" ") + 1)]
        : portIps(port.addresses, dynamic).ips.map(formatIp);
    if (recentlyHeld.size >= RECENTLY_HELD_MAX)
      recentlyHeld.delete(recentlyHeld.keys().next().value as string);
    recentlyHeld.set(key, ips);
  }
  return [...ips];
}

/**
 * heldIps of the most recently read address columns, oldest first. One port's value is read several times
 * close together (the allocator following the insert, the annotation stage, the node address sets), and
 * parsing it is most of the cost of each read.
 */
const recentlyHeld = new Map<string, readonly string[]>();
const RECENTLY_HELD_MAX = 4096;
