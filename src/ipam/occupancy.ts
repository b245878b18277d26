// The set of taken offsets within one CIDR (offset 0 is the network address). Small blocks use a bitmap;
// blocks too large for one (an IPv6 /64 has 2^64 addresses) use a set of sorted intervals whose size grows
// with the number of taken runs, not with the block.

import { Bitmap } from "./bitmap.ts";
import { SparseSet } from "./sparse-set.ts";

export interface OccupancySet {
  /** Number of offsets in the universe [0, size). */
  readonly size: bigint;
  /** Number of taken offsets. */
  readonly count: bigint;
  has(offset: bigint): boolean;
  /** Marks one offset taken; false if it already was. */
  add(offset: bigint): boolean;
  /** Marks every offset in [first, last] taken. */
  addRange(first: bigint, last: bigint): void;
  /** Marks one offset free; false if it already was. */
  delete(offset: bigint): boolean;
  /** The lowest free offset, or undefined when all are taken. */
  lowestFree(): bigint | undefined;
}

/** Largest universe kept as a bitmap: 2^20 offsets cost 128 KiB plus about 3% for the summary levels. */
export const BITMAP_LIMIT = 1n << 20n;

export function createOccupancySet(size: bigint): OccupancySet {
  return size <= BITMAP_LIMIT ? new Bitmap(size) : new SparseSet(size);
}
