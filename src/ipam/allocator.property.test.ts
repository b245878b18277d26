// Random interleavings of everything that happens to a subnet's addresses, checked step by step against a
// plain model (a map from address to holders) that is too simple to be wrong.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { type Family, formatIp, type IpAddress } from "./address.ts";
import { type AllocationResult, SubnetAllocator } from "./allocator.ts";
import { type Cidr, cidrSize } from "./cidr.ts";
import type { Holder } from "./holder.ts";
import { parseSubnetSpec, type SubnetDefinition } from "./subnet-spec.ts";

interface Config {
  name: string;
  spec: Record<string, unknown>;
  /** Offsets (from each CIDR's network address) that operations pick from; some may lie outside. */
  hot: bigint[];
}

const HUGE_TAIL = (size: bigint) => [size - 1n, size - 2n, size / 2n];

const configs: Config[] = [
  {
    name: "IPv4 /27 (bitmap)",
    spec: { cidr: "10.0.0.0/27", gateway: "10.0.0.1", excludeIPs: ["10.0.0.5-10.0.0.7", "10.0.0.20"] },
    hot: range(0n, 34n),
  },
  {
    name: "IPv4 /8 (sparse)",
    spec: { cidr: "10.0.0.0/8", gateway: "10.0.0.1", excludeIPs: ["10.0.0.2-10.0.0.9"] },
    hot: [...range(0n, 24n), ...HUGE_TAIL(1n << 24n)],
  },
  {
    name: "IPv6 /64 (sparse)",
    spec: { cidr: "fd00::/64", gateway: "fd00::1", excludeIPs: ["fd00::3..fd00::4"] },
    hot: [...range(0n, 24n), ...HUGE_TAIL(1n << 64n)],
  },
  {
    name: "IPv6 /123 (bitmap)",
    spec: { cidr: "fd00::/123", gateway: "fd00::1e", excludeIPs: ["fd00::2-fd00::4"] },
    hot: range(0n, 34n),
  },
  {
    name: "Dual /28 + /125 (bitmaps)",
    spec: {
      cidr: "10.0.0.0/28,fd00::/125",
      gateway: "10.0.0.1,fd00::1",
      excludeIPs: ["10.0.0.4", "fd00::2"],
    },
    hot: range(0n, 17n),
  },
  {
    name: "Dual /28 + /64 (bitmap and sparse)",
    spec: { cidr: "10.0.0.0/28,fd00::/64", gateway: "10.0.0.14,fd00::1", excludeIPs: ["fd00::2-fd00::5"] },
    hot: range(0n, 17n),
  },
];

function range(from: bigint, to: bigint): bigint[] {
  const out: bigint[] = [];
  for (let i = from; i <= to; i++) out.push(i);
  return out;
}

const OWNERS = Array.from({ length: 10 }, (_, i) => `pod-${i}`);
// "pod-0" as a foreign name checks that a foreign port and our pod with the same key stay distinct.
const FOREIGN = ["vm-0", "vm-1", "pod-0"];

type Op =
  | { op: "allocate"; owner: string }
  | { op: "static"; owner: string; picks: number[] }
  | { op: "pool"; owner: string; picks: number[][] }
  | { op: "release"; owner: string; family: number; pick: number }
  | { op: "releaseOwner"; owner: string }
  | { op: "foreign"; name: string; family: number; pick: number }
  | { op: "forgetForeign"; name: string; family: number; pick: number }
  | { op: "restart" };

function opArbitrary(families: number, hot: number): fc.Arbitrary<Op> {
  const owner = fc.constantFrom(...OWNERS);
  const name = fc.constantFrom(...FOREIGN);
  const family = fc.nat(families - 1);
  const pick = fc.nat(hot - 1);
  return fc.oneof(
    { weight: 5, arbitrary: fc.record({ op: fc.constant("allocate" as const), owner }) },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant("static" as const),
        owner,
        picks: fc.array(pick, { minLength: families, maxLength: families }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant("pool" as const),
        owner,
        picks: fc.array(fc.array(pick, { minLength: 1, maxLength: 4 }), {
          minLength: families,
          maxLength: families,
        }),
      }),
    },
    { weight: 3, arbitrary: fc.record({ op: fc.constant("release" as const), owner, family, pick }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("releaseOwner" as const), owner }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("foreign" as const), name, family, pick }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("forgetForeign" as const), name, family, pick }) },
    { weight: 1, arbitrary: fc.constant({ op: "restart" as const }) },
  );
}

/** The obviously-right model of one subnet. */
class Model {
  readonly holders = new Map<string, { ip: IpAddress; holders: Holder[] }>();
  constructor(
    readonly subnet: SubnetDefinition,
    readonly hot: bigint[],
  ) {}

  cidr(family: number): Cidr {
    return this.subnet.cidrs[family]!;
  }
  ip(family: number, pick: number): IpAddress {
    const c = this.cidr(family);
    return { family: c.family, value: c.network + this.hot[pick]! };
  }
  inside(ip: IpAddress): boolean {
    const c = this.subnet.cidrs.find((x) => x.family === ip.family)!;
    return ip.value >= c.network && ip.value < c.network + cidrSize(c);
  }
  reserved(ip: IpAddress): boolean {
    const c = this.subnet.cidrs.find((x) => x.family === ip.family)!;
    const last = c.network + cidrSize(c) - 1n;
    if (ip.value === c.network) return true;
    if (c.family === 4 && ip.value === last) return true;
    if (this.subnet.gateways.some((g) => g.family === ip.family && g.value === ip.value)) return true;
    return this.subnet.excluded.some(
      (e) => e.range.family === ip.family && ip.value >= e.range.first && ip.value <= e.range.last,
    );
  }
  reservedCount(family: Family): bigint {
    const c = this.subnet.cidrs.find((x) => x.family === family)!;
    const set = new Set<bigint>([c.network]);
    if (family === 4) set.add(c.network + cidrSize(c) - 1n);
    for (const g of this.subnet.gateways) if (g.family === family) set.add(g.value);
    for (const e of this.subnet.excluded) {
      if (e.range.family === family) for (let v = e.range.first; v <= e.range.last; v++) set.add(v);
    }
    return BigInt(set.size);
  }
  holdersOf(ip: IpAddress): Holder[] {
    return this.holders.get(key(ip))?.holders ?? [];
  }
  free(ip: IpAddress): boolean {
    return this.inside(ip) && !this.reserved(ip) && this.holdersOf(ip).length === 0;
  }
  lowestFree(family: number): IpAddress | undefined {
    const c = this.cidr(family);
    // Few addresses are taken, so the scan from the bottom stops quickly even in a /64.
    for (let o = 0n; o < cidrSize(c); o++) {
      const ip = { family: c.family, value: c.network + o };
      if (this.free(ip)) return ip;
    }
    return undefined;
  }
  ownedBy(owner: string, family: number): IpAddress | undefined {
    const f = this.cidr(family).family;
    for (const { ip, holders } of this.holders.values()) {
      if (ip.family === f && holders.some((h) => h.owner === owner && !h.foreign)) return ip;
    }
    return undefined;
  }
  add(ip: IpAddress, holder: Holder): void {
    const row = this.holders.get(key(ip)) ?? { ip, holders: [] };
    if (!row.holders.some((h) => h.owner === holder.owner && h.foreign === holder.foreign))
      row.holders.push(holder);
    this.holders.set(key(ip), row);
  }
  remove(ip: IpAddress, holder: Holder): boolean {
    const row = this.holders.get(key(ip));
    const i = row?.holders.findIndex((h) => h.owner === holder.owner && h.foreign === holder.foreign) ?? -1;
    if (!row || i < 0) return false;
    row.holders.splice(i, 1);
    if (row.holders.length === 0) this.holders.delete(key(ip));
    return true;
  }
  entries(): string[] {
    const out: string[] = [];
    for (const { ip, holders } of this.holders.values()) {
      for (const h of holders) out.push(`${formatIp(ip)} ${h.owner} ${h.foreign}`);
    }
    return out.sort();
  }
}

function key(ip: IpAddress): string {
  return `${ip.family}/${ip.value}`;
}

function entriesOf(a: SubnetAllocator): string[] {
  return a
    .entries()
    .map((e) => `${formatIp(e.address)} ${e.holder.owner} ${e.holder.foreign}`)
    .sort();
}

function expectResult(
  m: Model,
  result: AllocationResult,
  expected: IpAddress[] | string,
  owner: string,
): void {
  if (typeof expected === "string") {
    assert.ok(!result.ok, `expected ${expected}, got ${result.ok && result.addresses}`);
    assert.equal(result.code, expected, result.message);
    return;
  }
  assert.ok(result.ok, `expected ${expected.map(formatIp)}, got ${!result.ok && result.message}`);
  assert.deepEqual(result.addresses, expected.map(formatIp));
  const heldBefore = expected.map((ip) => m.holdersOf(ip).some((h) => h.owner === owner && !h.foreign));
  for (const ip of expected) {
    const mine = m.holdersOf(ip).some((h) => h.owner === owner && !h.foreign);
    // An address the owner already holds is returned as is, even if a foreign port claimed it since
    // (that duplicate was reported when it was recorded); anything newly handed out must be untouched.
    if (!mine) {
      assert.ok(!m.reserved(ip), `${formatIp(ip)} is reserved and must never be handed out`);
      assert.deepEqual(m.holdersOf(ip), [], `${formatIp(ip)} was handed out while held by someone else`);
    }
    m.add(ip, { owner, foreign: false });
  }
  assert.equal(
    result.reused,
    heldBefore.every(Boolean),
    "reused says whether the owner held them all already",
  );
}

function run(config: Config, ops: Op[]): void {
  const parsed = parseSubnetSpec(config.spec);
  assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.problems));
  const subnet = parsed.subnet;
  const families = subnet.cidrs.length;
  const m = new Model(subnet, config.hot);
  let a = SubnetAllocator.create(subnet);

  for (const o of ops) {
    switch (o.op) {
      case "allocate": {
        const picks: IpAddress[] = [];
        let failed = false;
        for (let f = 0; f < families; f++) {
          const ip = m.ownedBy(o.owner, f) ?? m.lowestFree(f);
          if (!ip) failed = true;
          else picks.push(ip);
        }
        expectResult(m, a.allocate(o.owner), failed ? "exhausted" : picks, o.owner);
        break;
      }
      case "static": {
        const ips = o.picks.map((p, f) => m.ip(f, p));
        let expected: IpAddress[] | string = ips;
        for (const [f, ip] of ips.entries()) {
          const mine = m.ownedBy(o.owner, f);
          const why = !m.inside(ip)
            ? "outside"
            : mine?.value === ip.value
              ? undefined
              : m.reserved(ip)
                ? "reserved"
                : m.holdersOf(ip).length > 0
                  ? "in-use"
                  : mine
                    ? "owner-holds-other"
                    : undefined;
          if (why) {
            expected = why;
            break;
          }
        }
        expectResult(m, a.allocateStatic(ips, o.owner), expected, o.owner);
        break;
      }
      case "pool": {
        const pool = o.picks.flatMap((ps, f) => ps.map((p) => m.ip(f, p)));
        let expected: IpAddress[] | string = [];
        for (let f = 0; f < families; f++) {
          const candidates = pool.filter((ip) => ip.family === m.cidr(f).family);
          const mine = m.ownedBy(o.owner, f);
          const why = candidates.some((ip) => !m.inside(ip))
            ? "outside"
            : mine && !candidates.some((ip) => ip.value === mine.value)
              ? "owner-holds-other"
              : undefined;
          const pick = mine ?? candidates.find((ip) => m.free(ip));
          if (why || !pick) {
            expected = why ?? "exhausted";
            break;
          }
          expected.push(pick);
        }
        expectResult(m, a.allocateFromPool(pool, o.owner), expected, o.owner);
        break;
      }
      case "release": {
        const ip = m.ip(o.family, o.pick);
        const before = m.holdersOf(ip).length;
        const r = a.release(ip, o.owner);
        const expected = m.remove(ip, { owner: o.owner, foreign: false });
        assert.equal(r.released, expected);
        if (!r.released) assert.equal(m.holdersOf(ip).length, before, "a refused release changes nothing");
        if (r.released && m.holdersOf(ip).length === 0) {
          assert.ok(m.free(ip), "a released address is free again");
        }
        break;
      }
      case "releaseOwner": {
        const released = a.releaseOwner(o.owner).map(formatIp);
        const expected: string[] = [];
        for (let f = 0; f < families; f++) {
          const ip = m.ownedBy(o.owner, f);
          if (ip) {
            expected.push(formatIp(ip));
            m.remove(ip, { owner: o.owner, foreign: false });
          }
        }
        assert.deepEqual(released, expected);
        break;
      }
      case "foreign": {
        const ip = m.ip(o.family, o.pick);
        const holder = { owner: o.name, foreign: true };
        const others = m.holdersOf(ip).filter((h) => h.owner !== o.name || !h.foreign);
        const already = m.holdersOf(ip).length !== others.length;
        const p = a.recordHolder(ip, holder);
        if (!m.inside(ip)) assert.equal(p?.kind, "outside");
        else if (!already && others.length > 0)
          assert.equal(p?.kind, "duplicate", "a second claim is reported");
        else assert.equal(p, undefined);
        if (m.inside(ip)) m.add(ip, holder);
        break;
      }
      case "forgetForeign": {
        const ip = m.ip(o.family, o.pick);
        const holder = { owner: o.name, foreign: true };
        assert.equal(a.forgetForeign(ip, o.name), m.inside(ip) && m.remove(ip, holder));
        break;
      }
      case "restart": {
        const rebuilt = SubnetAllocator.rebuild(subnet, a.entries());
        let extra = 0;
        for (const { holders } of m.holders.values()) extra += holders.length - 1;
        assert.equal(rebuilt.problems.filter((p) => p.kind === "duplicate").length, extra);
        assert.equal(rebuilt.problems.length, extra, "only duplicates are reported");
        a = rebuilt.allocator;
        break;
      }
    }
    checkInvariants(m, a);
  }
}

function checkInvariants(m: Model, a: SubnetAllocator): void {
  assert.deepEqual(entriesOf(a), m.entries());
  for (const { ip, holders } of m.holders.values()) {
    assert.ok(holders.filter((h) => !h.foreign).length <= 1, `${formatIp(ip)} is held twice by our pods`);
  }
  const cap = a.capacity();
  for (const [f, fc_] of cap.families.entries()) {
    const c = m.cidr(f);
    const total = cidrSize(c) - m.reservedCount(c.family);
    let used = 0n;
    for (const { ip } of m.holders.values()) if (ip.family === c.family && !m.reserved(ip)) used++;
    assert.equal(fc_.total, total);
    assert.equal(fc_.used, used);
    assert.equal(fc_.available, total - used);
  }
  for (const owner of OWNERS) {
    const expected = m.subnet.cidrs.map((_, f) => m.ownedBy(owner, f)).filter((ip) => ip !== undefined);
    assert.deepEqual(a.addressesOf(owner).map(formatIp), expected.map(formatIp));
  }
}

for (const config of configs) {
  test(`random allocate, release, restart, static, pool and foreign sequences keep every invariant: ${config.name}`, () => {
    const families = config.spec.cidr === undefined ? 1 : String(config.spec.cidr).split(",").length;
    fc.assert(
      fc.property(
        fc.array(opArbitrary(families, config.hot.length), { maxLength: 120, size: "max" }),
        (ops) => run(config, ops),
      ),
      { numRuns: 150 },
    );
  });
}
