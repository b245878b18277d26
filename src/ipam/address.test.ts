import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { compareIp, formatIp, type IpAddress, parseIp, tryParseIp } from "./address.ts";
import { InvalidInputError } from "./problem.ts";

const canon = (text: string) => formatIp(parseIp(text));

test("IPv4 addresses parse to their 32-bit value and print as a dotted quad", () => {
  assert.deepEqual(parseIp("10.244.0.5"), { family: 4, value: 0x0af40005n });
  assert.equal(formatIp({ family: 4, value: 0xffffffffn }), "255.255.255.255");
  assert.equal(canon("0.0.0.0"), "0.0.0.0");
});

test("IPv6 addresses print in the RFC 5952 canonical form", () => {
  const cases: [string, string][] = [
    ["2001:0DB8:0000:0000:0000:0000:0002:0001", "2001:db8::2:1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // the first of two equal zero runs is compressed
    ["1:0:0:2:0:0:0:3", "1:0:0:2::3"], // the longest run is compressed
    ["fe80:0:1:2:3:4:5:6", "fe80:0:1:2:3:4:5:6"], // a single zero group is not compressed
    ["fe80::1:2:3:4:5:6", "fe80:0:1:2:3:4:5:6"],
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["fd00:10:244:0:0:0:0:0", "fd00:10:244::"],
    ["::ffff:10.1.2.3", "::ffff:10.1.2.3"], // IPv4-mapped keeps the dotted quad
    ["::ffff:a01:203", "::ffff:10.1.2.3"],
    ["64:ff9b::10.0.0.1", "64:ff9b::a00:1"],
  ];
  for (const [input, expected] of cases) assert.equal(canon(input), expected, input);
});

test("malformed addresses are refused with the field name and a way to fix them", () => {
  const cases: [string, RegExp][] = [
    ["", /^gw: "" is empty; write it like 10\.244\.0\.5 or fd00::5$/],
    ["010.0.0.1", /^gw: "010\.0\.0\.1" has a leading zero in octet "010"; write 10\.0\.0\.1/],
    ["10.0.0.256", /octet 256 is above 255/],
    ["10.0.0", /has 3 parts; an IPv4 address has 4 octets/],
    ["10.0.0.5/24", /has a prefix length; give the address alone, without \/24/],
    [" 10.0.0.5", /leading or trailing spaces/],
    ["1::2::3", /"::" appears more than once/],
    ["1:2:3:4:5:6:7:8:9", /it has 9 groups/],
    ["1:2:3:4:5:6:7:8::", /"::", which must stand for at least one zero group/],
    [":1::", /empty group/],
    ["fe80::1%eth0", /zone index/],
    ["[fd00::1]", /brackets/],
    ["fd00::12345", /group "12345" is not 1 to 4 hex digits/],
    ["::ffff:1.2.3", /IPv4 part "1\.2\.3" is not a dotted quad/],
    ["1.2.3.4::", /group "1\.2\.3\.4" is not 1 to 4 hex digits/],
    ["localhost", /is not an IPv4 or IPv6 address/],
  ];
  for (const [input, pattern] of cases) {
    assert.throws(
      () => parseIp(input, "gw"),
      (e: unknown) => e instanceof InvalidInputError && e.problem.field === "gw" && pattern.test(e.message),
      input,
    );
  }
  assert.equal(tryParseIp("nope"), undefined);
});

const anyIp: fc.Arbitrary<IpAddress> = fc.oneof(
  fc.bigInt({ min: 0n, max: (1n << 32n) - 1n }).map((value) => ({ family: 4 as const, value })),
  fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value) => ({ family: 6 as const, value })),
  // Addresses with runs of zero groups exercise "::" placement.
  fc
    .array(fc.constantFrom(0, 0, 0, 1, 0xffff, 0xabc), { minLength: 8, maxLength: 8 })
    .map((gs) => ({ family: 6 as const, value: gs.reduce((v, g) => (v << 16n) | BigInt(g), 0n) })),
);

test("formatting then parsing returns the same address, and the text is already canonical", () => {
  fc.assert(
    fc.property(anyIp, (ip) => {
      const text = formatIp(ip);
      assert.deepEqual(parseIp(text), ip);
      assert.equal(formatIp(parseIp(text)), text);
      assert.equal(text, text.toLowerCase());
      assert.ok(!/(^|:)0[0-9a-f]/.test(text), `no leading zeros in ${text}`);
    }),
  );
});

test("the uncompressed spelling of an IPv6 address parses to the same value as the canonical one", () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), (value) => {
      const groups: string[] = [];
      for (let s = 112n; s >= 0n; s -= 16n)
        groups.push(((value >> s) & 0xffffn).toString(16).padStart(4, "0"));
      assert.equal(parseIp(groups.join(":").toUpperCase()).value, value);
    }),
  );
});

test("IPv4 sorts before IPv6 and addresses sort numerically within a family", () => {
  const sorted = ["fd00::1", "10.0.0.2", "::1", "10.0.0.10"]
    .map((t) => parseIp(t))
    .sort(compareIp)
    .map(formatIp);
  assert.deepEqual(sorted, ["10.0.0.2", "10.0.0.10", "::1", "fd00::1"]);
});
