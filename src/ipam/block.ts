// The addresses of one CIDR: which are reserved (network, broadcast, gateway, excluded), who holds which,
// and which are free. Reserved and held offsets share one occupancy set, so the lowest free offset found
// there is always an address that may be handed out.

import { type Family, formatIp, type IpAddress } from "./address.ts";
import type { FamilyCapacity } from "./capacity.ts";
import { broadcastAddress, type Cidr, cidrSize, formatCidr, networkAddress } from "./cidr.ts";
import { type Holder, sameHolder } from "./holder.ts";
import { createOccupancySet, type OccupancySet } from "./occupancy.ts";
import { type IpRange, mergeRanges } from "./range.ts";
import type { ExcludedRange } from "./subnet-spec.ts";

/** Why an address is never handed out. */
export type Reservation =
  | { readonly kind: "network" | "broadcast" | "gateway" }
  | { readonly kind: "excluded"; readonly entry: ExcludedRange };

export class AddressBlock {
  readonly cidr: Cidr;
  readonly family: Family;
  readonly #size: bigint;
  readonly #occupancy: OccupancySet;
  readonly #reservedCount: bigint;
  readonly #network: bigint | undefined;
  readonly #broadcast: bigint | undefined;
  readonly #gateway: bigint | undefined;
  readonly #excluded: readonly ExcludedRange[];
  /** Merged and sorted, for a binary search. */
  readonly #excludedMerged: readonly IpRange[];
  readonly #holders = new Map<bigint, Holder[]>();

  constructor(cidr: Cidr, gateway: IpAddress | undefined, excluded: readonly ExcludedRange[]) {
    this.cidr = cidr;
    this.family = cidr.family;
    this.#size = cidrSize(cidr);
    this.#occupancy = createOccupancySet(this.#size);
    this.#network = networkAddress(cidr)?.value;
    this.#broadcast = broadcastAddress(cidr)?.value;
    this.#gateway = gateway && this.contains(gateway) ? gateway.value : undefined;
    this.#excluded = excluded.filter((e) => e.range.family === cidr.family);
    this.#excludedMerged = mergeRanges(
      this.#excluded.map((e) => this.#clip(e.range)).filter((r) => r !== undefined),
    );
    for (const v of [this.#network, this.#broadcast, this.#gateway]) {
      if (v !== undefined) this.#occupancy.add(v - cidr.network);
    }
    for (const r of this.#excludedMerged) {
      this.#occupancy.addRange(r.first - cidr.network, r.last - cidr.network);
    }
    this.#reservedCount = this.#occupancy.count;
  }

  contains(ip: IpAddress): boolean {
    return (
      ip.family === this.family && ip.value >= this.cidr.network && ip.value - this.cidr.network < this.#size
    );
  }

  reservation(value: bigint): Reservation | undefined {
    if (value === this.#network) return { kind: "network" };
    if (value === this.#broadcast) return { kind: "broadcast" };
    if (value === this.#gateway) return { kind: "gateway" };
    if (!this.#inExcluded(value)) return undefined;
    const entry = this.#excluded.find((e) => value >= e.range.first && value <= e.range.last)!;
    return { kind: "excluded", entry };
  }

  describeReservation(value: bigint, r: Reservation): string {
    const ip = formatIp({ family: this.family, value });
    const cidr = formatCidr(this.cidr);
    switch (r.kind) {
      case "network":
        return `${ip} is the network address of ${cidr}`;
      case "broadcast":
        return `${ip} is the broadcast address of ${cidr}`;
      case "gateway":
        return `${ip} is the gateway of ${cidr}`;
      case "excluded":
        return `${ip} is excluded by ${r.entry.field} (${JSON.stringify(r.entry.text)})`;
    }
  }

  holders(value: bigint): readonly Holder[] {
    return this.#holders.get(value) ?? [];
  }

  /** Free means inside the block, not reserved and held by nobody. */
  isFree(value: bigint): boolean {
    const offset = value - this.cidr.network;
    return offset >= 0n && offset < this.#size && !this.#occupancy.has(offset);
  }

  lowestFree(): bigint | undefined {
    const offset = this.#occupancy.lowestFree();
    return offset === undefined ? undefined : this.cidr.network + offset;
  }

  /** Adds a holder of an address in the block; a holder already present is not added twice. */
  hold(value: bigint, holder: Holder): void {
    const list = this.#holders.get(value);
    if (list) {
      if (!list.some((h) => sameHolder(h, holder))) list.push(holder);
      return;
    }
    this.#holders.set(value, [holder]);
    this.#occupancy.add(value - this.cidr.network);
  }

  /** Removes one holder; the address becomes free when nobody holds it and it is not reserved. */
  unhold(value: bigint, holder: Holder): boolean {
    const list = this.#holders.get(value);
    const i = list?.findIndex((h) => sameHolder(h, holder)) ?? -1;
    if (!list || i < 0) return false;
    list.splice(i, 1);
    if (list.length === 0) {
      this.#holders.delete(value);
      if (this.reservation(value) === undefined) this.#occupancy.delete(value - this.cidr.network);
    }
    return true;
  }

  *held(): Generator<[bigint, readonly Holder[]]> {
    yield* this.#holders.entries();
  }

  capacity(): FamilyCapacity {
    const total = this.#size - this.#reservedCount;
    const used = this.#occupancy.count - this.#reservedCount;
    return { family: this.family, cidr: formatCidr(this.cidr), total, used, available: total - used };
  }

  #clip(r: IpRange): IpRange | undefined {
    const end = this.cidr.network + this.#size - 1n;
    if (r.last < this.cidr.network || r.first > end) return undefined;
    // Ranges come from a validated spec and lie inside the block; clipping only guards hand-built definitions.
    let { first, last } = r;
    if (first < this.cidr.network) first = this.cidr.network;
    if (last > end) last = end;
    return { family: r.family, first, last };
  }

  #inExcluded(value: bigint): boolean {
    const rs = this.#excludedMerged;
    let lo = 0;
    let hi = rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = rs[mid]!;
      if (value < r.first) hi = mid - 1;
      else if (value > r.last) lo = mid + 1;
      else return true;
    }
    return false;
  }
}
