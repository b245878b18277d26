// Address allocation for one Subnet (one OVN logical switch). The allocator lives in memory; the OVN NB
// database is the durable record, so after a restart the controller rebuilds it from the ports on the
// switch. Expected outcomes (taken, exhausted, reserved) are returned as values, not thrown.
//
// Policy: a dynamic allocation takes the lowest free address of each family. A released address is free
// again at once, so it is the next one handed out if it is the lowest.

import { compareIp, type Family, familyName, formatIp, type IpAddress, parseIp } from "./address.ts";
import { AddressBlock, type Reservation } from "./block.ts";
import type { Capacity } from "./capacity.ts";
import { formatCidr } from "./cidr.ts";
import { describeHolder, describeHolders, type Holder, sameHolder } from "./holder.ts";
import { InvalidInputError } from "./problem.ts";
import type { SubnetDefinition } from "./subnet-spec.ts";

export type { Reservation } from "./block.ts";
export type { Holder } from "./holder.ts";

/** An address and one port that holds it, as read from (or written to) the NB database. */
export interface HeldAddress {
  readonly address: IpAddress;
  readonly holder: Holder;
}

export interface Allocation {
  readonly ok: true;
  /** One address per family of the subnet, IPv4 first. */
  readonly ips: readonly IpAddress[];
  /** The same addresses as canonical text. */
  readonly addresses: readonly string[];
  /** True when the owner already held all of them (nothing changed). */
  readonly reused: boolean;
}

export type FailureCode =
  /** The request text is not an address. */
  | "invalid"
  /** A family the subnet does not have, two addresses of one family, or a family missing in a dual request. */
  | "wrong-family"
  /** Not inside the subnet's CIDR. */
  | "outside"
  /** Network, broadcast, gateway or excluded: never handed out. */
  | "reserved"
  /** Held by another port (ours or foreign). */
  | "in-use"
  /** The owner already holds a different address of that family; release it first. */
  | "owner-holds-other"
  /** No free address left (in the subnet, or in the requested pool). */
  | "exhausted";

export interface AllocationFailure {
  readonly ok: false;
  readonly code: FailureCode;
  /** Says what is wrong and what to do, ready for a pod event. */
  readonly message: string;
  /** The address concerned, when there is one. */
  readonly address?: string;
  /** For "in-use": who holds the address. */
  readonly holders?: readonly Holder[];
  /** For "reserved": why the address is never handed out. */
  readonly reservation?: Reservation;
}

export type AllocationResult = Allocation | AllocationFailure;

export type ReleaseResult =
  | {
      readonly released: true;
      readonly address: string;
      /** Others that still claim the address (duplicates from NB); it stays in use while they do. */
      readonly stillHeldBy: readonly Holder[];
    }
  | {
      readonly released: false;
      readonly reason: "not-held" | "held-by-other" | "foreign" | "invalid" | "outside";
      readonly message: string;
      readonly holders: readonly Holder[];
    };

/** Something wrong with an address read from a port; returned by recordHolder and rebuild. */
export interface HolderProblem {
  /**
   * duplicate: another port holds the address too. reserved: one of our ports holds a reserved address
   * (the spec changed after allocation). outside / invalid: not an address of this subnet.
   */
  readonly kind: "duplicate" | "reserved" | "outside" | "invalid";
  readonly address: string;
  readonly holder: Holder;
  /** Whether the address now counts as held (true for duplicate and reserved). */
  readonly recorded: boolean;
  /** For duplicate: every holder of the address, this one included. */
  readonly holders?: readonly Holder[];
  readonly message: string;
}

/** A list of addresses, as an array or as comma-separated text like "10.0.0.5,fd00::5". */
export type AddressList = string | readonly (string | IpAddress)[];

export class SubnetAllocator {
  readonly subnet: SubnetDefinition;
  readonly #blocks: readonly AddressBlock[];
  /** Our own (non-foreign) holdings by owner. */
  readonly #byOwner = new Map<string, IpAddress[]>();

  private constructor(subnet: SubnetDefinition) {
    this.subnet = subnet;
    this.#blocks = subnet.cidrs.map(
      (cidr) =>
        new AddressBlock(
          cidr,
          subnet.gateways.find((g) => g.family === cidr.family),
          subnet.excluded,
        ),
    );
  }

  /** An empty allocator for a validated subnet (see parseSubnetSpec). */
  static create(subnet: SubnetDefinition): SubnetAllocator {
    return new SubnetAllocator(subnet);
  }

  /**
   * An allocator holding what the ports on the switch hold, e.g. after a restart. Every entry is recorded
   * with recordHolder; the problems found (duplicates, reserved or outside addresses) are returned for the
   * caller to report, never merged away.
   */
  static rebuild(
    subnet: SubnetDefinition,
    entries: Iterable<{ readonly address: IpAddress | string; readonly holder: Holder }>,
  ): { allocator: SubnetAllocator; problems: HolderProblem[] } {
    const allocator = new SubnetAllocator(subnet);
    const problems: HolderProblem[] = [];
    for (const e of entries) {
      const p = allocator.recordHolder(e.address, e.holder);
      if (p) problems.push(p);
    }
    return { allocator, problems };
  }

  get families(): Family[] {
    return this.#blocks.map((b) => b.family);
  }

  /**
   * Gives the owner one address per family: the ones it already holds, plus the lowest free address of
   * each family it lacks. All or nothing.
   */
  allocate(owner: string): AllocationResult {
    const picks: IpAddress[] = [];
    let reused = true;
    for (const block of this.#blocks) {
      const mine = this.#ownedIn(owner, block);
      if (mine) {
        picks.push(mine);
        continue;
      }
      const value = block.lowestFree();
      if (value === undefined) {
        const c = block.capacity();
        return this.#fail(
          "exhausted",
          `no free ${familyName(block.family)} address left in ${formatCidr(block.cidr)} (${c.total} usable, all in use); enlarge the subnet or free addresses`,
        );
      }
      picks.push({ family: block.family, value });
      reused = false;
    }
    return this.#commit(owner, picks, reused);
  }

  /**
   * Gives the owner exactly these addresses, one per family of the subnet (a pair for Dual). Succeeds
   * without change when the owner already holds them. All or nothing.
   */
  allocateStatic(request: AddressList, owner: string): AllocationResult {
    const parsed = this.#parseList(request);
    if (!Array.isArray(parsed)) return parsed as AllocationFailure;
    const ips = parsed as IpAddress[];
    const text = ips.map(formatIp).join(",");
    const picks: IpAddress[] = [];
    for (const block of this.#blocks) {
      const mine = ips.filter((ip) => ip.family === block.family);
      if (mine.length !== 1) {
        return this.#fail(
          "wrong-family",
          mine.length === 0
            ? `${JSON.stringify(text)} has no ${familyName(block.family)} address; ${this.#familyHint()}`
            : `${JSON.stringify(text)} has ${mine.length} ${familyName(block.family)} addresses; ${this.#familyHint()}`,
        );
      }
      const ip = mine[0]!;
      const refusal = this.#refuse(block, ip, owner);
      if (refusal) return refusal;
      picks.push(ip);
    }
    const reused = picks.every((ip) => this.#holds(ip, owner));
    return this.#commit(owner, picks, reused);
  }

  /**
   * Gives the owner, for each family, the first address of `pool` (in list order) that is free. If the
   * owner already holds an address from the pool it keeps it. Pool entries outside the subnet are an error;
   * taken or reserved entries are skipped. All or nothing.
   */
  allocateFromPool(pool: AddressList, owner: string): AllocationResult {
    const parsed = this.#parseList(pool);
    if (!Array.isArray(parsed)) return parsed as AllocationFailure;
    const ips = parsed as IpAddress[];
    const picks: IpAddress[] = [];
    let reused = true;
    for (const block of this.#blocks) {
      const candidates = ips.filter((ip) => ip.family === block.family);
      if (candidates.length === 0) {
        return this.#fail(
          "wrong-family",
          `the pool has no ${familyName(block.family)} address; ${this.#familyHint()}`,
        );
      }
      const outside = candidates.find((ip) => !block.contains(ip));
      if (outside) {
        return this.#fail(
          "outside",
          `pool entry ${formatIp(outside)} is outside ${formatCidr(block.cidr)}; remove it from the pool`,
          formatIp(outside),
        );
      }
      const mine = this.#ownedIn(owner, block);
      if (mine) {
        if (!candidates.some((ip) => ip.value === mine.value)) {
          return this.#fail(
            "owner-holds-other",
            `${JSON.stringify(owner)} already holds ${formatIp(mine)}, which is not in the pool; release it first`,
            formatIp(mine),
          );
        }
        picks.push(mine);
        continue;
      }
      const free = candidates.find((ip) => block.isFree(ip.value));
      if (!free) {
        const why = candidates.slice(0, 5).map((ip) => {
          const r = block.reservation(ip.value);
          if (r) return block.describeReservation(ip.value, r);
          return `${formatIp(ip)} is in use by ${describeHolders(block.holders(ip.value))}`;
        });
        const more = candidates.length > 5 ? `; and ${candidates.length - 5} more` : "";
        return this.#fail(
          "exhausted",
          `no free ${familyName(block.family)} address in the pool: ${why.join("; ")}${more}`,
        );
      }
      picks.push(free);
      reused = false;
    }
    return this.#commit(owner, picks, reused);
  }

  /**
   * Releases an address the owner holds. Addresses held by others, and foreign ports' addresses, are left
   * alone and the result says who holds them.
   */
  release(address: IpAddress | string, owner: string): ReleaseResult {
    let ip: IpAddress;
    try {
      ip = typeof address === "string" ? parseIp(address) : address;
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      return { released: false, reason: "invalid", message: e.problem.message, holders: [] };
    }
    const text = formatIp(ip);
    const block = this.#blockFor(ip);
    if (!block) {
      const message = `${text} is not in this subnet (${this.#cidrText()}); nothing to release`;
      return { released: false, reason: "outside", message, holders: [] };
    }
    const holders = [...block.holders(ip.value)];
    const me: Holder = { owner, foreign: false };
    if (block.unhold(ip.value, me)) {
      this.#unindex(owner, ip);
      return { released: true, address: text, stillHeldBy: block.holders(ip.value) };
    }
    if (holders.length === 0) {
      return {
        released: false,
        reason: "not-held",
        message: `${text} is not held by anyone; nothing to release`,
        holders,
      };
    }
    const foreign = holders.some((h) => h.foreign);
    return {
      released: false,
      reason: foreign ? "foreign" : "held-by-other",
      message: `${text} is held by ${describeHolders(holders)}, not by ${JSON.stringify(owner)}; left as is${foreign ? " (foreign ports are never released)" : ""}`,
      holders,
    };
  }

  /** Releases every address the owner holds (e.g. on pod deletion) and returns them. */
  releaseOwner(owner: string): IpAddress[] {
    const mine = this.addressesOf(owner);
    for (const ip of mine) this.release(ip, owner);
    return mine;
  }

  /**
   * Records that a port on the switch holds an address: a foreign port that appeared, or one of ours read
   * from NB. The address counts as used whoever holds it. Recording the same holder twice changes nothing.
   */
  recordHolder(address: IpAddress | string, holder: Holder): HolderProblem | undefined {
    let ip: IpAddress;
    try {
      ip = typeof address === "string" ? parseIp(address) : address;
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      const text = String(address);
      return {
        kind: "invalid",
        address: text,
        holder,
        recorded: false,
        message: `${describeHolder(holder)}: ${e.problem.message}`,
      };
    }
    const text = formatIp(ip);
    const block = this.#blockFor(ip);
    if (!block) {
      return {
        kind: "outside",
        address: text,
        holder,
        recorded: false,
        message: `${describeHolder(holder)} holds ${text}, which is outside ${this.#cidrText()}; ignored`,
      };
    }
    const before = block.holders(ip.value);
    if (before.some((h) => sameHolder(h, holder))) return undefined;
    const others = [...before];
    block.hold(ip.value, holder);
    if (!holder.foreign) this.#index(holder.owner, ip);
    const all = block.holders(ip.value);
    if (others.length > 0) {
      return {
        kind: "duplicate",
        address: text,
        holder,
        recorded: true,
        holders: [...all],
        message: `${text} is claimed by ${describeHolders(all)}; only one port may hold it`,
      };
    }
    const r = block.reservation(ip.value);
    if (r && !holder.foreign) {
      return {
        kind: "reserved",
        address: text,
        holder,
        recorded: true,
        message: `${describeHolder(holder)} holds ${text}, but ${block.describeReservation(ip.value, r).replace(`${text} is `, "it is ")}`,
      };
    }
    return undefined;
  }

  /** Forgets a foreign port's address once the port is gone from NB. */
  forgetForeign(address: IpAddress | string, owner: string): boolean {
    const ip = typeof address === "string" ? parseIp(address) : address;
    return this.#blockFor(ip)?.unhold(ip.value, { owner, foreign: true }) ?? false;
  }

  /** Every port that holds the address (empty when free or outside the subnet). */
  holdersOf(address: IpAddress | string): readonly Holder[] {
    const ip = typeof address === "string" ? parseIp(address) : address;
    return [...(this.#blockFor(ip)?.holders(ip.value) ?? [])];
  }

  /** Our own addresses held by the owner, IPv4 first. */
  addressesOf(owner: string): IpAddress[] {
    return [...(this.#byOwner.get(owner) ?? [])].sort(compareIp);
  }

  /** Every (address, holder) pair, ordered by address; what rebuild takes back. */
  entries(): HeldAddress[] {
    const out: HeldAddress[] = [];
    for (const block of this.#blocks) {
      const rows = [...block.held()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      for (const [value, holders] of rows) {
        for (const holder of holders) out.push({ address: { family: block.family, value }, holder });
      }
    }
    return out;
  }

  capacity(): Capacity {
    const families = this.#blocks.map((b) => b.capacity());
    let used = 0n;
    let available: bigint | undefined;
    for (const f of families) {
      if (f.used > used) used = f.used;
      if (available === undefined || f.available < available) available = f.available;
    }
    return { families, used, available: available ?? 0n };
  }

  #blockFor(ip: IpAddress): AddressBlock | undefined {
    return this.#blocks.find((b) => b.contains(ip));
  }

  #holds(ip: IpAddress, owner: string): boolean {
    return (this.#blockFor(ip)?.holders(ip.value) ?? []).some((h) =>
      sameHolder(h, { owner, foreign: false }),
    );
  }

  #ownedIn(owner: string, block: AddressBlock): IpAddress | undefined {
    return this.#byOwner.get(owner)?.find((ip) => block.contains(ip));
  }

  /** Why this owner may not take this address, or undefined if it may. */
  #refuse(block: AddressBlock, ip: IpAddress, owner: string): AllocationFailure | undefined {
    const text = formatIp(ip);
    if (!block.contains(ip)) {
      return this.#fail(
        "outside",
        `${text} is outside ${formatCidr(block.cidr)}; request an address inside it`,
        text,
      );
    }
    if (this.#holds(ip, owner)) return undefined;
    const r = block.reservation(ip.value);
    if (r) {
      return {
        ...this.#fail(
          "reserved",
          `${block.describeReservation(ip.value, r)} and is never handed out; request another address`,
          text,
        ),
        reservation: r,
      };
    }
    const holders = block.holders(ip.value);
    if (holders.length > 0) {
      return {
        ...this.#fail(
          "in-use",
          `${text} is in use by ${describeHolders(holders)}; request another address`,
          text,
        ),
        holders: [...holders],
      };
    }
    const mine = this.#ownedIn(owner, block);
    if (mine) {
      return this.#fail(
        "owner-holds-other",
        `${JSON.stringify(owner)} already holds ${formatIp(mine)}; release it before requesting ${text}`,
        formatIp(mine),
      );
    }
    return undefined;
  }

  #parseList(list: AddressList): IpAddress[] | AllocationFailure {
    const items = typeof list === "string" ? list.split(",").map((s) => s.trim()) : list;
    const out: IpAddress[] = [];
    for (const item of items) {
      if (typeof item !== "string") {
        out.push(item);
        continue;
      }
      try {
        out.push(parseIp(item));
      } catch (e) {
        if (!(e instanceof InvalidInputError)) throw e;
        return this.#fail("invalid", e.problem.message, item);
      }
    }
    for (const ip of out) {
      if (!this.#blocks.some((b) => b.family === ip.family)) {
        return this.#fail(
          "wrong-family",
          `${formatIp(ip)} is ${familyName(ip.family)}, but the subnet has no ${familyName(ip.family)} CIDR (${this.#cidrText()})`,
          formatIp(ip),
        );
      }
    }
    return out;
  }

  #commit(owner: string, picks: readonly IpAddress[], reused: boolean): Allocation {
    const me: Holder = { owner, foreign: false };
    for (const ip of picks) {
      const block = this.#blockFor(ip)!;
      if (block.holders(ip.value).some((h) => sameHolder(h, me))) continue;
      block.hold(ip.value, me);
      this.#index(owner, ip);
    }
    const ips = [...picks].sort(compareIp);
    return { ok: true, ips, addresses: ips.map(formatIp), reused };
  }

  #index(owner: string, ip: IpAddress): void {
    const list = this.#byOwner.get(owner);
    if (list) list.push(ip);
    else this.#byOwner.set(owner, [ip]);
  }

  #unindex(owner: string, ip: IpAddress): void {
    const list = this.#byOwner.get(owner);
    if (!list) return;
    const i = list.findIndex((x) => x.family === ip.family && x.value === ip.value);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.#byOwner.delete(owner);
  }

  #fail(code: FailureCode, message: string, address?: string): AllocationFailure {
    return address === undefined ? { ok: false, code, message } : { ok: false, code, message, address };
  }

  #familyHint(): string {
    // The example uses addresses that are free right now, so it can be copied as is.
    const example = this.#blocks
      .map((b) => formatIp({ family: b.family, value: b.lowestFree() ?? b.cidr.network + 1n }))
      .join(",");
    if (this.#blocks.length === 2) {
      return `a dual-stack subnet needs one IPv4 and one IPv6 address, e.g. "${example}"`;
    }
    return `this subnet needs one ${familyName(this.#blocks[0]!.family)} address, e.g. "${example}"`;
  }

  #cidrText(): string {
    return this.#blocks.map((b) => formatCidr(b.cidr)).join(",");
  }
}
