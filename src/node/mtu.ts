// The pod MTU: the MTU of the interface carrying the tunnel endpoint minus the encapsulation overhead, unless
// configured explicitly. A pod MTU above what the tunnel carries would drop large packets silently.

import { ipBatch, requireSuccess } from "./ip-batch.ts";

export type EncapType = "vxlan" | "geneve";

/**
 * Bytes of outer headers per encapsulation, IPv4 underlay: VXLAN is 50 (14 Ethernet + 20 IP + 8 UDP + 8 VXLAN);
 * Geneve's header grows with options, and OVN puts some there, so 100 leaves room.
 */
export const ENCAP_OVERHEAD: Readonly<Record<EncapType, number>> = { vxlan: 50, geneve: 100 };

/** IPv4's minimum; a smaller pod MTU means the override or the underlay is wrong. */
export const MIN_MTU = 576;

export interface MtuInput {
  /** MTU of the interface holding the encap IP. */
  encapMtu: number;
  encapType: EncapType;
  /** Configured MTU; wins when set. */
  override?: number;
}

export function podMtu(input: MtuInput): number {
  const mtu = input.override ?? input.encapMtu - ENCAP_OVERHEAD[input.encapType];
  if (!Number.isInteger(mtu) || mtu < MIN_MTU || mtu > 65_535) {
    const why =
      input.override !== undefined ? "configured" : `${input.encapMtu} - ${input.encapType} overhead`;
    throw new RangeError(`pod MTU ${mtu} (${why}) is outside ${MIN_MTU}..65535`);
  }
  return mtu;
}

interface IpAddrShow {
  ifname: string;
  mtu: number;
  addr_info?: { local?: string }[];
}

/** The interface that holds `ip` in the given netns (the agent's own by default), and its MTU. */
export async function interfaceWithAddress(
  ip: string,
  opts: { netns?: string } = {},
): Promise<{ ifname: string; mtu: number }> {
  const r = await ipBatch([["addr", "show"]], { globalArgs: ["-j"], ...opts });
  requireSuccess("reading addresses", r);
  const links = JSON.parse(r.stdout.trim() || "[]") as IpAddrShow[];
  const link = links.find((l) => (l.addr_info ?? []).some((a) => a.local === ip));
  if (!link) throw new Error(`no interface holds the encap IP ${ip}`);
  return { ifname: link.ifname, mtu: link.mtu };
}
