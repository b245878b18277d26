// Address counts for the Subnet status. They are bigints because an IPv6 /64 holds 2^64 addresses;
// displayCount clamps them for JSON numbers.

import type { Family } from "./address.ts";

export interface FamilyCapacity {
  readonly family: Family;
  /** The CIDR these figures are for, canonical text. */
  readonly cidr: string;
  /** Addresses that can ever be handed out: the block minus network, broadcast, gateway and excluded. */
  readonly total: bigint;
  /** Addresses among `total` held by any port, ours or foreign. */
  readonly used: bigint;
  /** total - used. */
  readonly available: bigint;
}

export interface Capacity {
  /** One entry per CIDR, IPv4 first. */
  readonly families: readonly FamilyCapacity[];
  /** Largest `used` over the families; for a single-stack subnet, that family's figure. */
  readonly used: bigint;
  /** Dynamic allocations that can still succeed: the smallest `available` over the families. */
  readonly available: bigint;
}

/** A count as a JSON-safe number, clamped to Number.MAX_SAFE_INTEGER. */
export function displayCount(n: bigint): number {
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}
