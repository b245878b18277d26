import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { formatIp, parseIp } from "./address.ts";
import { formatLspAddress, heldIps, parseLspAddress, portIps } from "./lsp-addresses.ts";

test("a 'MAC IP [IP...]' element yields its MAC and IPs", () => {
  const a = parseLspAddress("0a:58:0a:f4:00:05 10.244.0.5 fd00::5");
  assert.equal(a.kind, "static");
  assert.ok(a.kind === "static");
  assert.equal(a.mac, "0a:58:0a:f4:00:05");
  assert.deepEqual(a.ips.map(formatIp), ["10.244.0.5", "fd00::5"]);
  const noIp = parseLspAddress("80:fa:5b:06:72:b7");
  assert.deepEqual(noIp, { kind: "static", mac: "80:fa:5b:06:72:b7", ips: [] });
});

test("IPs with a prefix length, as OVN accepts them, keep only the address", () => {
  const a = parseLspAddress("0a:58:0a:f4:00:05 10.244.0.5/24");
  assert.ok(a.kind === "static");
  assert.deepEqual(a.ips.map(formatIp), ["10.244.0.5"]);
});

test("the keyword forms router, unknown and dynamic are recognised", () => {
  assert.deepEqual(parseLspAddress("router"), { kind: "router" });
  assert.deepEqual(parseLspAddress("unknown"), { kind: "unknown" });
  assert.deepEqual(parseLspAddress("dynamic"), { kind: "dynamic", ips: [] });
  const withIps = parseLspAddress("dynamic 192.168.0.1 2001::1");
  assert.ok(withIps.kind === "dynamic");
  assert.deepEqual(withIps.ips.map(formatIp), ["192.168.0.1", "2001::1"]);
  assert.deepEqual(parseLspAddress("80:fa:5b:06:72:b7 dynamic"), {
    kind: "dynamic",
    mac: "80:fa:5b:06:72:b7",
    ips: [],
  });
});

test("malformed elements are refused with the column named", () => {
  assert.throws(
    () => parseLspAddress("router 10.0.0.1"),
    /addresses: "router 10\.0\.0\.1": "router" stands alone/,
  );
  assert.throws(() => parseLspAddress("0a:58:0a:f4:00:05 10.0.0.300"), /octet 300 is above 255/);
  assert.throws(() => parseLspAddress("10.0.0.5"), /is not a MAC address/);
  assert.throws(() => parseLspAddress("  "), /is empty/);
});

test("portIps collects the IPs of all elements, uses dynamic_addresses for dynamic ports and reports bad ones", () => {
  const r = portIps(
    ["0a:58:0a:f4:00:05 10.244.0.5", "router", "garbage", "dynamic"],
    "0a:00:00:00:00:01 10.244.0.9",
  );
  assert.deepEqual(r.ips.map(formatIp), ["10.244.0.5", "10.244.0.9"]);
  assert.equal(r.problems.length, 1);
  assert.equal(r.problems[0]!.field, "addresses[2]");
  assert.deepEqual(portIps(["unknown"], "0a:00:00:00:00:01 10.244.0.9").ips, []);
});

test("formatting a port address puts the MAC first and IPv4 before IPv6", () => {
  assert.equal(
    formatLspAddress("0A:58:0A:F4:00:05", [parseIp("fd00::5"), parseIp("10.244.0.5")]),
    "0a:58:0a:f4:00:05 10.244.0.5 fd00::5",
  );
});

test("heldIps gives a port's addresses as text, including what northd assigned a dynamic port, and skips bad ones", () => {
  assert.deepEqual(heldIps({ addresses: ["0a:58:0a:f4:00:05 10.244.0.5 fd00::5"] }), [
    "10.244.0.5",
    "fd00::5",
  ]);
  assert.deepEqual(
    heldIps({ addresses: ["dynamic", "not an address"], dynamic_addresses: "0a:00:00:00:00:07 10.80.0.7" }),
    ["10.80.0.7"],
  );
  assert.deepEqual(heldIps({ addresses: ["router"], dynamic_addresses: null }), []);
});

test("heldIps read again, in any order and after its result was changed, gives what parsing gives", () => {
  const element = fc.oneof(
    fc.constantFrom("router", "unknown", "dynamic", "not an address", "0a:58:0a:f4:00:05 10.244.0.5"),
    fc
      .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), fc.boolean())
      .map(
        ([a, b, v6]) =>
          `0a:58:0a:f4:${a.toString(16)}:${b.toString(16)} 10.244.${a}.${b}${v6 ? ` fd00::${a}` : ""}`,
      ),
  );
  const port = fc.record({
    addresses: fc.array(element, { maxLength: 3 }),
    dynamic_addresses: fc.option(fc.constantFrom("0a:00:00:00:00:07 10.80.0.7", "garbage"), {
      nil: undefined,
    }),
  });
  fc.assert(
    fc.property(fc.array(port, { minLength: 1, maxLength: 20 }), (ports) => {
      for (const p of [...ports, ...ports.reverse()]) {
        const got = heldIps(p);
        assert.deepEqual(got, portIps(p.addresses, p.dynamic_addresses).ips.map(formatIp));
        got.push("10.0.0.1");
      }
    }),
  );
});

test("heldIps of one 'MAC IPv4' element, canonical or nearly so, is what portIps reads from it", () => {
  const hex = fc.constantFrom(..."0123456789abcdefABCDEF".split(""));
  const hexes = (min: number, max: number) => fc.string({ unit: hex, minLength: min, maxLength: max });
  const mac = fc.oneof(
    fc
      .array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 })
      .map((b) => b.map((x) => x.toString(16).padStart(2, "0")).join(":")),
    fc.array(hexes(2, 2), { minLength: 6, maxLength: 6 }).map((p) => p.join(":")),
    fc
      .tuple(fc.array(hexes(1, 3), { minLength: 5, maxLength: 7 }), fc.constantFrom(":", "-"))
      .map(([p, s]) => p.join(s)),
  );
  const octet = fc.oneof(
    { arbitrary: fc.integer({ min: 0, max: 255 }).map(String), weight: 6 },
    fc.integer({ min: 0, max: 255 }).map(String),
    fc.integer({ min: 0, max: 999 }).map(String),
    fc.integer({ min: 0, max: 99 }).map((n) => `0${n}`),
    fc.constantFrom("", "x", "-1", "1e2"),
  );
  const ip = fc.oneof(
    { arbitrary: fc.array(octet, { minLength: 4, maxLength: 4 }).map((o) => o.join(".")), weight: 4 },
    fc.array(octet, { minLength: 3, maxLength: 5 }).map((o) => o.join(".")),
    fc.array(octet, { minLength: 4, maxLength: 4 }).map((o) => `${o.join(".")}/24`),
  );
  const sep = fc.constantFrom(" ", " ", " ", "  ", "\t", " 10.0.0.1 ");
  const element = fc
    .tuple(mac, sep, ip, fc.constantFrom("", "", "", " ", " dynamic"))
    .map(([m, s, i, t]) => `${m}${s}${i}${t}`);
  fc.assert(
    fc.property(element, (e) => {
      assert.deepEqual(heldIps({ addresses: [e] }), portIps([e]).ips.map(formatIp), e);
    }),
    { numRuns: 3000 },
  );
});
