// External mode: finding the foreign (ZStack) logical switch a Subnet names, by name or by OVN UUID, and reading
// what its rows say about its addressing (other_config:subnet, the networks of the router ports attached to it,
// the DHCP options its ports use), so the Subnet's cidr and gateway can be checked against them. Reads the NB
// cache only; never writes.

import { attachedRouterPort } from "../ipam/foreign-holdings.ts";
import type { Cache } from "../ovsdb/cache.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";
import { isOurs } from "./ownership.ts";

/** OVN's UUID text (36 characters with dashes), as `ovn-nbctl` prints it. */
const OVN_UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `text` is an OVN UUID as NB prints it (lower case). */
export function isOvnUuid(text: string): boolean {
  return OVN_UUID_RE.test(text) && text === text.toLowerCase();
}

const NAME_INDEX = "zstack.io/switch-name";

/** What the switch's own rows say about its addresses; every value is the text NB holds, unparsed. */
export interface ExternalSwitchFacts {
  readonly uuid: string;
  readonly name: string;
  /** The switch is one of ours (a Subnet's, the join switch): never a foreign switch to put pods on. */
  readonly ours: boolean;
  /** other_config:subnet (IPv4 only in OVN), when set. */
  readonly otherConfigSubnet?: string;
  /** Router ports attached through the switch's `router`-type ports. */
  readonly routerPorts: readonly {
    readonly uuid: string;
    readonly name: string;
    readonly networks: readonly string[];
  }[];
  /** DHCP_Options the switch's ports use. */
  readonly dhcpOptions: readonly { readonly uuid: string; readonly cidr: string; readonly router?: string }[];
}

export type ExternalSwitchLookup =
  | { readonly kind: "found"; readonly facts: ExternalSwitchFacts }
  | { readonly kind: "missing" }
  | { readonly kind: "ambiguous"; readonly uuids: readonly string[] };

/**
 * The switch `ref` names: a 36-character OVN UUID names that row and only that row (once it is deleted, a switch
 * that happens to be named with the same text is not taken in its place); anything else is a name, which must be
 * unique (two switches may share one; then neither is taken).
 */
export function lookupExternalSwitch(cache: Cache<NbTables>, ref: string): ExternalSwitchLookup {
  const switches = cache.table("Logical_Switch");
  if (OVN_UUID_RE.test(ref)) {
    const row = switches.get(ref.toLowerCase());
    return row ? { kind: "found", facts: readFacts(cache, row._uuid) } : { kind: "missing" };
  }
  // Names are not unique in NB (no schema index): an index of our own, so a judge costs a lookup, not a scan.
  if (!switches.hasIndex(NAME_INDEX)) switches.addIndex(NAME_INDEX, "name");
  const named = switches.lookup(NAME_INDEX, ref);
  if (named.length > 1) return { kind: "ambiguous", uuids: named.map((r) => r._uuid).sort() };
  const one = named[0];
  return one ? { kind: "found", facts: readFacts(cache, one._uuid) } : { kind: "missing" };
}

function readFacts(cache: Cache<NbTables>, uuid: string): ExternalSwitchFacts {
  const ls = cache.table("Logical_Switch").get(uuid);
  if (!ls) throw new Error(`switch ${uuid} vanished from the cache`);
  const lsps = cache.table("Logical_Switch_Port");
  const lrps = cache.table("Logical_Router_Port");
  const dhcp = cache.table("DHCP_Options");
  const routerPorts: ExternalSwitchFacts["routerPorts"][number][] = [];
  const dhcpUuids = new Set<string>();
  for (const pu of ls.ports) {
    const p = lsps.get(pu);
    if (!p) continue;
    const lrpName = attachedRouterPort(p);
    // Our own router port on the switch (external-router-port.ts) is not what the Subnet is checked against.
    if (lrpName !== undefined)
      for (const lrp of lrps.lookup("name", lrpName))
        if (!isOurs(lrp)) routerPorts.push({ uuid: lrp._uuid, name: lrp.name, networks: lrp.networks });
    if (p.dhcpv4_options) dhcpUuids.add(p.dhcpv4_options);
    if (p.dhcpv6_options) dhcpUuids.add(p.dhcpv6_options);
  }
  const dhcpOptions: ExternalSwitchFacts["dhcpOptions"][number][] = [];
  for (const du of [...dhcpUuids].sort()) {
    const d = dhcp.get(du);
    if (d)
      dhcpOptions.push({
        uuid: d._uuid,
        cidr: d.cidr,
        ...(d.options.router !== undefined ? { router: d.options.router } : {}),
      });
  }
  const subnet = ls.other_config.subnet;
  return {
    uuid,
    name: ls.name,
    ours: isOurs(ls),
    ...(subnet !== undefined ? { otherConfigSubnet: subnet } : {}),
    routerPorts: routerPorts.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    dhcpOptions,
  };
}
