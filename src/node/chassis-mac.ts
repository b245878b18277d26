// The chassis MAC of each provider network the node maps (ovn-controller's `ovn-chassis-mac-mappings`,
// "provider:MAC,..."). A router port of the cluster router on a switch with a localnet port is distributed: every
// chassis routes for it, so frames it routes onto the physical network would carry the one router MAC from every
// node, and the physical switches would see that MAC move between their ports. With a chassis MAC per provider
// network, ovn-controller rewrites the source MAC of routed frames leaving through that network's localnet port to
// the chassis MAC (and the receiving chassis rewrites it back), so each node shows the physical network a MAC of
// its own. The MAC is derived from the chassis name: stable across restarts, different per node.

import { createHash } from "node:crypto";
import { PROVIDER_NAME_RE } from "../ipam/subnet-spec.ts";

/**
 * First byte of every chassis MAC: locally administered (bit 1), unicast (bit 0 clear), and neither 0a (the
 * 0a:58 prefix of our pods' and router ports' MACs) nor fa (ZStack's VM NICs) nor 02 (container runtimes' 02:42).
 */
export const CHASSIS_MAC_FIRST_OCTET = 0x0e;

/** The chassis MAC of `chassis` (its system-id): 0e, then five bytes of the name's SHA-256. */
export function chassisMac(chassis: string): string {
  const h = createHash("sha256").update(chassis, "utf8").digest();
  const bytes = [CHASSIS_MAC_FIRST_OCTET, ...h.subarray(0, 5)];
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/**
 * ovn-chassis-mac-mappings for the providers of an ovn-bridge-mappings value ("provider:bridge,...", as
 * bridgeMappingsValue writes it from checked mappings): "provider:MAC,..." in the same order, "" for none. A
 * provider that is not a valid name (the mappings are checked before, so only a bug could bring one) is left out
 * rather than written into a text ovn-controller parses.
 */
export function chassisMacMappings(bridgeMappings: string, chassis: string): string {
  const mac = chassisMac(chassis);
  const providers = bridgeMappings
    .split(",")
    .map((e) => (e.indexOf(":") > 0 ? e.slice(0, e.indexOf(":")).trim() : ""))
    .filter((p) => PROVIDER_NAME_RE.test(p));
  return [...new Set(providers)].map((p) => `${p}:${mac}`).join(",");
}
