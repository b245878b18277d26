// External mode, flat/VLAN switches: whether our router port may be on ZStack's switch. A chassis of ours that maps
// the switch's physical network but has no chassis MAC for it would route onto the localnet switch with the router
// port's own MAC, and send that MAC onto ZStack's physical network from its port; two such nodes make the MAC flap
// between switch ports of ZStack's network. So the port is there only while every chassis of ours that maps the
// network also has a chassis MAC for it (docs/external-mode.md, "The chassis MAC guard").
//
// The inputs are SB Chassis rows as ovn-controller publishes them: `ovn-bridge-mappings` and
// `ovn-chassis-mac-mappings` copied from its OVS into the row's `other_config` (OVN ≥ 22.x; older releases wrote
// `external_ids`, read when other_config lacks the key). Both are `network:value,network:value` text from a peer,
// parsed here; a malformed entry maps nothing and gives no MAC.

import { parseRequestedMac } from "../ipam/mac.ts";

export const BRIDGE_MAPPINGS_KEY = "ovn-bridge-mappings";
export const CHASSIS_MAC_MAPPINGS_KEY = "ovn-chassis-mac-mappings";

/** A physical network name as ovn-controller splits it off an entry: up to the first ":", not empty. */
const NETWORK_RE = /^[^\s:,]+$/;
/** An OVS bridge name as the agent or an operator writes it. */
const BRIDGE_RE = /^[A-Za-z0-9_.-]{1,15}$/;

/**
 * `network:value` entries, comma-separated, as ovn-controller reads them: each entry split at its first ":".
 * Returns network -> value for the entries whose value `parse` accepts; a network given twice with different
 * values is left out (which one ovn-controller uses is not ours to guess). Blanks around entries are ignored.
 */
function parseMappings(
  text: string | undefined,
  parse: (value: string) => string | undefined,
): { readonly valid: Map<string, string>; readonly named: Set<string> } {
  const valid = new Map<string, string>();
  const named = new Set<string>();
  const conflicting = new Set<string>();
  for (const raw of (text ?? "").split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const colon = entry.indexOf(":");
    if (colon <= 0) continue;
    const network = entry.slice(0, colon).trim();
    if (!NETWORK_RE.test(network)) continue;
    named.add(network);
    const value = parse(entry.slice(colon + 1).trim());
    if (value === undefined) {
      conflicting.add(network);
      continue;
    }
    const prev = valid.get(network);
    if (prev !== undefined && prev !== value) conflicting.add(network);
    else valid.set(network, value);
  }
  for (const n of conflicting) valid.delete(n);
  return { valid, named };
}

/**
 * The physical networks a chassis maps (`ovn-bridge-mappings`). A network named by an entry counts even when its
 * bridge is malformed: the guard errs towards "maps it", which only keeps our port away.
 */
export function parseBridgeMappings(text: string | undefined): Set<string> {
  return parseMappings(text, (v) => (BRIDGE_RE.test(v) ? v : undefined)).named;
}

/**
 * The chassis MAC per physical network (`ovn-chassis-mac-mappings`), canonical lower-case. An entry whose MAC is
 * malformed, multicast or all zeros gives no MAC for its network, nor does a network given two different MACs.
 */
export function parseChassisMacMappings(text: string | undefined): Map<string, string> {
  return parseMappings(text, (v) => {
    try {
      const mac = parseRequestedMac(v, CHASSIS_MAC_MAPPINGS_KEY);
      return mac === "00:00:00:00:00:00" ? undefined : mac;
    } catch {
      return undefined;
    }
  }).valid;
}

/** What an SB client of the guard monitors (the controller's, read only). */
export const CHASSIS_GUARD_MONITOR = {
  Chassis: { columns: ["name", "hostname", "other_config", "external_ids"] },
} as const;

/** The columns of an SB Chassis row the guard reads. */
export interface ChassisView {
  readonly name: string;
  readonly hostname: string;
  readonly other_config: Readonly<Record<string, string>>;
  readonly external_ids: Readonly<Record<string, string>>;
}

/** A key of ovn-controller's chassis config: `other_config`, else (older OVN) `external_ids`. */
function chassisSetting(c: ChassisView, key: string): string | undefined {
  return c.other_config[key] ?? c.external_ids[key];
}

/**
 * The Kubernetes node a chassis is ours for, or undefined for anyone else's (ZStack's hypervisors). Our agent
 * registers its chassis with hostname = the node name and name = node.chassisPrefix + the node name (the bare
 * node name in Standalone mode), and refuses a node name that is a ZStack chassis' name or hostname
 * (node/external-chassis.ts): both must hold.
 */
export function chassisNode(c: ChassisView, nodeNames: ReadonlySet<string>): string | undefined {
  return c.hostname !== "" && nodeNames.has(c.hostname) && c.name.endsWith(c.hostname)
    ? c.hostname
    : undefined;
}

/**
 * For each physical network in `networks`, the nodes (sorted, each once) whose chassis maps it but has no chassis
 * MAC for it; networks with none are left out. Chassis not ours never count; a chassis of ours that maps none of
 * the networks does not either. A node with several chassis rows (a stale one left behind by a `chassisPrefix`
 * change or an ovn-controller that died without unregistering, next to its live one) is missing a MAC for a network
 * only if one of its rows maps it and none of them has a MAC for it: a stale row cannot hold our router port off a
 * switch while the node's live chassis has its MAC.
 */
export function nodesMissingChassisMac(
  chassis: Iterable<ChassisView>,
  nodeNames: ReadonlySet<string>,
  networks: Iterable<string>,
): Map<string, string[]> {
  const wanted = new Set(networks);
  const mapsByNode = new Map<string, Set<string>>();
  const macsByNode = new Map<string, Set<string>>();
  for (const c of chassis) {
    const node = chassisNode(c, nodeNames);
    if (node === undefined) continue;
    const maps = mapsByNode.get(node) ?? new Set<string>();
    for (const network of parseBridgeMappings(chassisSetting(c, BRIDGE_MAPPINGS_KEY))) maps.add(network);
    mapsByNode.set(node, maps);
    const macs = macsByNode.get(node) ?? new Set<string>();
    for (const network of parseChassisMacMappings(chassisSetting(c, CHASSIS_MAC_MAPPINGS_KEY)).keys())
      macs.add(network);
    macsByNode.set(node, macs);
  }
  const out = new Map<string, Set<string>>();
  for (const [node, maps] of mapsByNode) {
    const macs = macsByNode.get(node);
    for (const network of maps) {
      if (!wanted.has(network) || macs?.has(network)) continue;
      const set = out.get(network) ?? new Set<string>();
      set.add(node);
      out.set(network, set);
    }
  }
  return new Map(
    [...out]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([n, s]) => [n, [...s].sort()] as [string, string[]]),
  );
}

/** How many nodes a message names before "and N more". */
const NAMED = 10;

/**
 * The Subnet's condition message for a guard that holds our router port off the switch: which nodes, which
 * network, what to do.
 */
export function chassisMacMissingMessage(
  switchName: string,
  missing: ReadonlyMap<string, readonly string[]>,
): string {
  const parts = [...missing].map(([network, nodes]) => {
    const shown = nodes.slice(0, NAMED).join(", ");
    const more = nodes.length > NAMED ? ` and ${nodes.length - NAMED} more` : "";
    return `node${nodes.length === 1 ? "" : "s"} ${shown}${more} map${nodes.length === 1 ? "s" : ""} physical network ${network} without a chassis MAC for it (ovn-chassis-mac-mappings)`;
  });
  return `no cluster router port on ${switchName}: ${parts.join("; ")}, so routed frames would leave them onto ZStack's network with the router port's MAC; roll out the zstack-ovnkube-node DaemonSet to those nodes and let its agent own ovn-bridge-mappings (it writes the chassis MACs); the port comes back once every such node has one`;
}
