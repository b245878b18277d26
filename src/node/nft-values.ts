// The nft scripts run as root and nft reads a newline or '}' as syntax, so every value is re-checked to be the
// typed value it claims to be (a cast from a raw string would otherwise slip through) and printed from its
// numbers. Shared by the Services and hostPort tables.

import { type IpAddress, isParsedIp } from "../ipam/address.ts";

export type NatProtocol = "tcp" | "udp" | "sctp";

/** IP protocol numbers, as the tables' maps key them. */
export const PROTO_NUMBER: Record<NatProtocol, number> = { tcp: 6, udp: 17, sctp: 132 };

/** The checks of one table's values; a failure is a TypeError naming `scope` and the value (shortened). */
export function nftValueChecks(scope: string) {
  const fail = (what: string, v: unknown): never => {
    let shown: string;
    try {
      shown = JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? `${x}n` : x)) ?? String(v);
    } catch {
      shown = typeof v;
    }
    throw new TypeError(`${scope}: ${shown.slice(0, 120)} is not ${what}`);
  };
  return {
    fail,
    ip(ip: IpAddress): IpAddress {
      if (!isParsedIp(ip)) fail("a parsed IP address", ip);
      return ip;
    },
    port(p: number, min = 1): number {
      if (typeof p !== "number" || !Number.isInteger(p) || p < min || p > 65535) fail("a port number", p);
      return p;
    },
    protocol(p: NatProtocol): number {
      if (typeof p !== "string" || !Object.hasOwn(PROTO_NUMBER, p)) fail("tcp, udp or sctp", p);
      return PROTO_NUMBER[p];
    },
  };
}
