// Address ranges that are not global unicast. A Subnet there would capture traffic the host itself depends on
// (loopback, link-local and cloud metadata, multicast, "this network"), so neither the controller nor the node
// agent accepts one, however it is marked.

import { type Cidr, overlaps, parseCidr } from "./cidr.ts";

const NAMED: readonly (readonly [string, string])[] = [
  ["0.0.0.0/8", "IPv4 'this network' range"],
  ["127.0.0.0/8", "IPv4 loopback range"],
  ["169.254.0.0/16", "IPv4 link-local range (cloud metadata lives here)"],
  ["224.0.0.0/4", "IPv4 multicast range"],
  ["240.0.0.0/4", "IPv4 reserved and broadcast range"],
  ["::/128", "IPv6 unspecified address"],
  ["::1/128", "IPv6 loopback address"],
  ["fe80::/10", "IPv6 link-local range"],
  ["ff00::/8", "IPv6 multicast range"],
];

const ENTRIES: readonly { readonly range: Cidr; readonly name: string }[] = NAMED.map(([text, name]) => ({
  range: parseCidr(text),
  name,
}));

export const SPECIAL_RANGES: readonly Cidr[] = ENTRIES.map((e) => e.range);

/** The first special range that shares an address with `c`, with its name for an error message. */
export function specialRangeOverlapping(c: Cidr): { range: Cidr; name: string } | undefined {
  const hit = ENTRIES.find((e) => overlaps(c, e.range));
  return hit ? { range: hit.range, name: hit.name } : undefined;
}
