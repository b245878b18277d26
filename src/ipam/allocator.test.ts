import assert from "node:assert/strict";
import { test } from "node:test";
import { formatIp, parseIp } from "./address.ts";
import { type AllocationResult, SubnetAllocator } from "./allocator.ts";
import { displayCount } from "./capacity.ts";
import { parseSubnetSpec, type SubnetDefinition } from "./subnet-spec.ts";

function subnet(spec: Record<string, unknown>): SubnetDefinition {
  const r = parseSubnetSpec(spec);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.subnet;
}

function addresses(r: AllocationResult): readonly string[] {
  if (!r.ok) throw new Error(`${r.code}: ${r.message}`);
  return r.addresses;
}

const v4 = () => subnet({ cidr: "10.0.0.0/24", gateway: "10.0.0.1", excludeIPs: ["10.0.0.2-10.0.0.10"] });
const dual = () =>
  subnet({ cidr: "10.0.0.0/29,fd00::/125", gateway: "10.0.0.1,fd00::1", excludeIPs: ["fd00::2..fd00::3"] });

test("allocates the lowest free address after the network address, the gateway and excluded ranges", () => {
  const a = SubnetAllocator.create(v4());
  assert.deepEqual(addresses(a.allocate("pod-a")), ["10.0.0.11"]);
  assert.deepEqual(addresses(a.allocate("pod-b")), ["10.0.0.12"]);
});

test("never hands out the broadcast address and reports exhaustion with the usable count", () => {
  const a = SubnetAllocator.create(subnet({ cidr: "10.0.0.0/29", gateway: "10.0.0.1" }));
  const got = [1, 2, 3, 4, 5].map((i) => addresses(a.allocate(`pod-${i}`))[0]);
  assert.deepEqual(got, ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]);
  const r = a.allocate("pod-6");
  assert.equal(r.ok, false);
  assert.ok(!r.ok);
  assert.equal(r.code, "exhausted");
  assert.equal(
    r.message,
    "no free IPv4 address left in 10.0.0.0/29 (5 usable, all in use); enlarge the subnet or free addresses",
  );
});

test("allocating again for the same owner returns what it already holds", () => {
  const a = SubnetAllocator.create(v4());
  const first = a.allocate("pod-a");
  const again = a.allocate("pod-a");
  assert.ok(first.ok && again.ok);
  assert.equal(first.reused, false);
  assert.equal(again.reused, true);
  assert.deepEqual(again.addresses, first.addresses);
  assert.equal(a.capacity().used, 1n);
});

test("a released address is free at once and is the next one handed out when it is the lowest", () => {
  const a = SubnetAllocator.create(v4());
  for (const p of ["a", "b", "c"]) a.allocate(p);
  const r = a.release("10.0.0.12", "b");
  assert.deepEqual(r, { released: true, address: "10.0.0.12", stillHeldBy: [] });
  assert.deepEqual(addresses(a.allocate("d")), ["10.0.0.12"]);
  assert.deepEqual(addresses(a.allocate("e")), ["10.0.0.14"]);
});

test("releasing an address held by another owner or by nobody changes nothing and says why", () => {
  const a = SubnetAllocator.create(v4());
  a.allocate("pod-a");
  assert.deepEqual(a.release("10.0.0.11", "pod-b"), {
    released: false,
    reason: "held-by-other",
    message: '10.0.0.11 is held by "pod-a", not by "pod-b"; left as is',
    holders: [{ owner: "pod-a", foreign: false }],
  });
  const free = a.release("10.0.0.99", "pod-a");
  assert.ok(!free.released && free.reason === "not-held");
  const outside = a.release("10.9.0.1", "pod-a");
  assert.ok(!outside.released && outside.reason === "outside");
  const invalid = a.release("10.0.0.x", "pod-a");
  assert.ok(!invalid.released && invalid.reason === "invalid");
  assert.deepEqual(a.holdersOf("10.0.0.11"), [{ owner: "pod-a", foreign: false }]);
});

test("a static request gets exactly that address, and repeating it for the same owner changes nothing", () => {
  const a = SubnetAllocator.create(v4());
  const r = a.allocateStatic("10.0.0.50", "pod-a");
  assert.ok(r.ok && !r.reused);
  assert.deepEqual(r.addresses, ["10.0.0.50"]);
  const again = a.allocateStatic(["10.0.0.50"], "pod-a");
  assert.ok(again.ok && again.reused);
  // The dynamic path now skips it.
  for (let i = 11; i < 50; i++) a.allocate(`filler-${i}`);
  assert.deepEqual(addresses(a.allocate("next")), ["10.0.0.51"]);
});

test("a static request for a reserved address is refused with the reason", () => {
  const a = SubnetAllocator.create(v4());
  const cases: [string, string, string][] = [
    ["10.0.0.0", "network", "10.0.0.0 is the network address of 10.0.0.0/24"],
    ["10.0.0.255", "broadcast", "10.0.0.255 is the broadcast address of 10.0.0.0/24"],
    ["10.0.0.1", "gateway", "10.0.0.1 is the gateway of 10.0.0.0/24"],
    ["10.0.0.7", "excluded", '10.0.0.7 is excluded by spec.excludeIPs[0] ("10.0.0.2-10.0.0.10")'],
  ];
  for (const [ip, kind, why] of cases) {
    const r = a.allocateStatic(ip, "pod-a");
    assert.ok(!r.ok);
    assert.equal(r.code, "reserved");
    assert.equal(r.reservation?.kind, kind);
    assert.equal(r.message, `${why} and is never handed out; request another address`);
  }
  assert.equal(a.capacity().used, 0n);
});

test("a static request for a taken address reports who holds it", () => {
  const a = SubnetAllocator.create(v4());
  a.allocateStatic("10.0.0.50", "pod-a");
  a.recordHolder("10.0.0.60", { owner: "zstack-vm-1", foreign: true });
  const taken = a.allocateStatic("10.0.0.50", "pod-b");
  assert.ok(!taken.ok);
  assert.equal(taken.code, "in-use");
  assert.deepEqual(taken.holders, [{ owner: "pod-a", foreign: false }]);
  assert.equal(taken.message, '10.0.0.50 is in use by "pod-a"; request another address');
  const foreign = a.allocateStatic("10.0.0.60", "pod-b");
  assert.ok(!foreign.ok);
  assert.equal(foreign.message, '10.0.0.60 is in use by foreign port "zstack-vm-1"; request another address');
});

test("a static request outside the subnet, of the wrong family, malformed, or beside another held address is refused", () => {
  const a = SubnetAllocator.create(v4());
  const code = (r: AllocationResult) => (r.ok ? "ok" : r.code);
  assert.equal(code(a.allocateStatic("10.0.1.5", "p")), "outside");
  assert.equal(code(a.allocateStatic("fd00::5", "p")), "wrong-family");
  assert.equal(code(a.allocateStatic("10.0.0.5,10.0.0.6", "p")), "wrong-family");
  const bad = a.allocateStatic("10.0.0.500", "p");
  assert.ok(!bad.ok && bad.code === "invalid");
  assert.equal(bad.message, '"10.0.0.500" is not an IPv4 address: octet 500 is above 255');
  a.allocateStatic("10.0.0.20", "p");
  const other = a.allocateStatic("10.0.0.21", "p");
  assert.ok(!other.ok && other.code === "owner-holds-other");
  assert.equal(other.message, '"p" already holds 10.0.0.20; release it before requesting 10.0.0.21');
});

test("a pool request takes the first free address in list order, skipping taken and reserved entries", () => {
  const a = SubnetAllocator.create(v4());
  a.allocateStatic("10.0.0.30", "other");
  const r = a.allocateFromPool("10.0.0.5, 10.0.0.30, 10.0.0.40, 10.0.0.31", "pod-a");
  assert.deepEqual(addresses(r), ["10.0.0.40"]);
  const again = a.allocateFromPool(["10.0.0.31", "10.0.0.40"], "pod-a");
  assert.ok(again.ok && again.reused);
  assert.deepEqual(again.addresses, ["10.0.0.40"]);
});

test("an exhausted pool lists why each entry was skipped, and a pool entry outside the subnet is an error", () => {
  const a = SubnetAllocator.create(v4());
  a.allocateStatic("10.0.0.30", "other");
  const r = a.allocateFromPool(["10.0.0.1", "10.0.0.30"], "pod-a");
  assert.ok(!r.ok);
  assert.equal(r.code, "exhausted");
  assert.equal(
    r.message,
    'no free IPv4 address in the pool: 10.0.0.1 is the gateway of 10.0.0.0/24; 10.0.0.30 is in use by "other"',
  );
  const outside = a.allocateFromPool(["10.0.0.40", "10.0.9.1"], "pod-a");
  assert.ok(!outside.ok && outside.code === "outside");
  assert.equal(a.capacity().used, 1n);
});

test("a dual-stack allocation takes one address of each family, or none when a family is exhausted", () => {
  const a = SubnetAllocator.create(dual());
  // fd00::/125 has 8 addresses: ::0 network, ::1 gateway, ::2-::3 excluded, so four are usable.
  for (let i = 0; i < 4; i++) {
    assert.deepEqual(addresses(a.allocate(`pod-${i}`)), [`10.0.0.${i + 2}`, `fd00::${i + 4}`]);
  }
  const r = a.allocate("pod-4");
  assert.ok(!r.ok && r.code === "exhausted");
  assert.match(r.message, /no free IPv6 address left in fd00::\/125/);
  const cap = a.capacity();
  assert.deepEqual(
    cap.families.map((f) => [f.cidr, f.total, f.used, f.available]),
    [
      ["10.0.0.0/29", 5n, 4n, 1n],
      ["fd00::/125", 4n, 4n, 0n],
    ],
  );
  assert.equal(cap.available, 0n);
  assert.equal(a.holdersOf("10.0.0.6").length, 0, "the IPv4 address was not taken by the failed allocation");
});

test("a dual-stack static request needs one address per family and is all or nothing", () => {
  const a = SubnetAllocator.create(dual());
  const single = a.allocateStatic("10.0.0.3", "pod-a");
  assert.ok(!single.ok && single.code === "wrong-family");
  assert.equal(
    single.message,
    '"10.0.0.3" has no IPv6 address; a dual-stack subnet needs one IPv4 and one IPv6 address, e.g. "10.0.0.2,fd00::4"',
  );
  const half = a.allocateStatic("10.0.0.3,fd00::1", "pod-a");
  assert.ok(!half.ok && half.code === "reserved");
  assert.equal(a.holdersOf("10.0.0.3").length, 0);
  assert.deepEqual(addresses(a.allocateStatic(["fd00::7", "10.0.0.3"], "pod-a")), ["10.0.0.3", "fd00::7"]);
  assert.deepEqual(a.releaseOwner("pod-a").map(formatIp), ["10.0.0.3", "fd00::7"]);
  assert.equal(a.capacity().used, 0n);
});

test("a dual-stack pool picks the first free address of each family", () => {
  const a = SubnetAllocator.create(dual());
  a.allocateStatic("10.0.0.2,fd00::4", "x");
  assert.deepEqual(addresses(a.allocateFromPool("fd00::4,10.0.0.2,fd00::6,10.0.0.5", "p")), [
    "10.0.0.5",
    "fd00::6",
  ]);
  const noV6 = a.allocateFromPool("10.0.0.4", "q");
  assert.ok(!noV6.ok && noV6.code === "wrong-family");
});

test("a foreign port's address counts as used, is skipped by allocation and is never released", () => {
  const a = SubnetAllocator.create(v4());
  const vm = { owner: "zstack-vm-1", foreign: true };
  assert.equal(a.recordHolder("10.0.0.11", vm), undefined);
  assert.deepEqual(addresses(a.allocate("pod-a")), ["10.0.0.12"]);
  assert.equal(a.capacity().used, 2n);
  const r = a.release("10.0.0.11", "zstack-vm-1");
  assert.ok(!r.released);
  assert.equal(r.reason, "foreign");
  assert.equal(
    r.message,
    '10.0.0.11 is held by foreign port "zstack-vm-1", not by "zstack-vm-1"; left as is (foreign ports are never released)',
  );
  assert.deepEqual(a.holdersOf("10.0.0.11"), [vm]);
  // When the foreign port disappears from NB, its address becomes free.
  assert.ok(a.forgetForeign("10.0.0.11", "zstack-vm-1"));
  assert.deepEqual(addresses(a.allocate("pod-b")), ["10.0.0.11"]);
});

test("foreign ports inside the excluded range are normal and do not change the counts", () => {
  const a = SubnetAllocator.create(v4());
  const before = a.capacity();
  assert.equal(a.recordHolder("10.0.0.5", { owner: "vm", foreign: true }), undefined);
  assert.deepEqual(a.capacity(), before);
  assert.ok(a.forgetForeign("10.0.0.5", "vm"));
  assert.deepEqual(
    a.allocateStatic("10.0.0.5", "p").ok,
    false,
    "excluded stays reserved after the port leaves",
  );
});

test("rebuild restores holders from NB and reports duplicates instead of merging them", () => {
  const { allocator: a, problems } = SubnetAllocator.rebuild(v4(), [
    { address: "10.0.0.11", holder: { owner: "pod-a", foreign: false } },
    { address: parseIp("10.0.0.12"), holder: { owner: "pod-b", foreign: false } },
    { address: "10.0.0.12", holder: { owner: "vm-7", foreign: true } },
    { address: "10.0.0.1", holder: { owner: "pod-c", foreign: false } },
    { address: "10.0.0.5", holder: { owner: "vm-8", foreign: true } },
    { address: "192.168.1.5", holder: { owner: "vm-9", foreign: true } },
    { address: "10.0.0.x", holder: { owner: "vm-10", foreign: true } },
    { address: "10.0.0.11", holder: { owner: "pod-a", foreign: false } },
  ]);
  assert.deepEqual(
    problems.map((p) => [p.kind, p.address, p.recorded, p.message]),
    [
      [
        "duplicate",
        "10.0.0.12",
        true,
        '10.0.0.12 is claimed by "pod-b" and foreign port "vm-7"; only one port may hold it',
      ],
      ["reserved", "10.0.0.1", true, '"pod-c" holds 10.0.0.1, but it is the gateway of 10.0.0.0/24'],
      [
        "outside",
        "192.168.1.5",
        false,
        'foreign port "vm-9" holds 192.168.1.5, which is outside 10.0.0.0/24; ignored',
      ],
      [
        "invalid",
        "10.0.0.x",
        false,
        'foreign port "vm-10": "10.0.0.x" is not an IPv4 address: octet "x" is not a number from 0 to 255',
      ],
    ],
  );
  assert.deepEqual(addresses(a.allocate("pod-d")), ["10.0.0.13"]);
  assert.deepEqual(addresses(a.allocate("pod-a")), ["10.0.0.11"]);
  // Releasing our claim on the duplicated address leaves it held by the foreign port.
  const r = a.release("10.0.0.12", "pod-b");
  assert.ok(r.released);
  assert.deepEqual(r.stillHeldBy, [{ owner: "vm-7", foreign: true }]);
  assert.deepEqual(addresses(a.allocate("pod-e")), ["10.0.0.14"]);
  // Our port on the gateway address can release it, and the gateway stays reserved.
  assert.ok(a.release("10.0.0.1", "pod-c").released);
  assert.equal(a.allocateStatic("10.0.0.1", "pod-f").ok, false);
});

test("entries round-trip through rebuild to an allocator in the same state", () => {
  const a = SubnetAllocator.create(dual());
  a.allocate("p1");
  a.allocate("p2");
  a.recordHolder("10.0.0.6", { owner: "vm", foreign: true });
  a.release("10.0.0.2", "p1");
  const { allocator: b, problems } = SubnetAllocator.rebuild(dual(), a.entries());
  assert.deepEqual(problems, []);
  assert.deepEqual(b.entries(), a.entries());
  assert.deepEqual(b.capacity(), a.capacity());
  assert.deepEqual(b.allocate("p3"), a.allocate("p3"));
});

test("capacity counts usable addresses as the block minus network, broadcast, gateway and excluded", () => {
  const a = SubnetAllocator.create(v4());
  assert.deepEqual(a.capacity(), {
    families: [{ family: 4, cidr: "10.0.0.0/24", total: 244n, used: 0n, available: 244n }],
    used: 0n,
    available: 244n,
  });
  const big = SubnetAllocator.create(subnet({ cidr: "fd00::/64", gateway: "fd00::1" }));
  const c = big.capacity();
  assert.equal(c.available, (1n << 64n) - 2n);
  assert.equal(displayCount(c.available), Number.MAX_SAFE_INTEGER);
  assert.equal(displayCount(244n), 244);
});

test("5,000 allocations in a /64 are distinct, ascending, skip the reserved addresses and can be reused", () => {
  const a = SubnetAllocator.create(
    subnet({
      cidr: "fd00:10:244::/64",
      gateway: "fd00:10:244::1",
      excludeIPs: ["fd00:10:244::100-fd00:10:244::1ff"],
    }),
  );
  const seen = new Set<bigint>();
  let previous = -1n;
  for (let i = 0; i < 5000; i++) {
    const r = a.allocate(`pod-${i}`);
    assert.ok(r.ok);
    const v = r.ips[0]!.value;
    assert.ok(v > previous, "ascending");
    assert.ok(!seen.has(v));
    seen.add(v);
    previous = v;
  }
  const base = parseIp("fd00:10:244::").value;
  assert.ok(!seen.has(base) && !seen.has(base + 1n), "network and gateway skipped");
  for (let o = 0x100n; o <= 0x1ffn; o++) assert.ok(!seen.has(base + o), "excluded range skipped");
  // 5000 addresses from ::2, jumping over the 256 excluded ones.
  assert.equal(formatIp({ family: 6, value: previous }), `fd00:10:244::${(5000 + 1 + 256).toString(16)}`);
  assert.equal(a.capacity().families[0]!.used, 5000n);
  for (let i = 0; i < 5000; i += 2) assert.ok(a.release(a.addressesOf(`pod-${i}`)[0]!, `pod-${i}`).released);
  for (let i = 0; i < 5000; i += 2) assert.ok(a.allocate(`again-${i}`).ok);
  assert.equal(a.capacity().families[0]!.used, 5000n);
  assert.equal(a.entries().length, 5000);
});

test("5,000 allocations in a /16 are distinct and in order", () => {
  const a = SubnetAllocator.create(subnet({ cidr: "10.244.0.0/16", gateway: "10.244.0.1" }));
  const seen = new Set<string>();
  for (let i = 0; i < 5000; i++) seen.add(addresses(a.allocate(`pod-${i}`))[0]!);
  assert.equal(seen.size, 5000);
  assert.ok(seen.has("10.244.0.2") && seen.has("10.244.19.137") && !seen.has("10.244.19.138"));
  assert.equal(a.capacity().available, 65534n - 1n - 5000n);
});
