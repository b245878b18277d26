import assert from "node:assert/strict";
import { test } from "node:test";
import { parseIp } from "./address.ts";
import {
  broadcastAddress,
  cidrContains,
  cidrContainsCidr,
  cidrSize,
  formatCidr,
  networkAddress,
  networkOf,
  overlaps,
  parseCidr,
} from "./cidr.ts";

test("CIDRs parse to network and prefix and print canonically", () => {
  assert.deepEqual(parseCidr("10.244.0.0/16"), { family: 4, network: 0x0af40000n, prefix: 16 });
  assert.equal(formatCidr(parseCidr("FD00:10:244:0::/64")), "fd00:10:244::/64");
  assert.equal(cidrSize(parseCidr("fd00::/64")), 1n << 64n);
  assert.equal(cidrSize(parseCidr("0.0.0.0/0")), 1n << 32n);
});

test("a CIDR with host bits set is refused with the network address to write instead", () => {
  assert.throws(
    () => parseCidr("10.244.0.1/16", "spec.cidr"),
    /^InvalidInputError: spec\.cidr: "10\.244\.0\.1\/16" has host bits set; write the network address, 10\.244\.0\.0\/16/,
  );
  assert.throws(() => parseCidr("fd00::5/64"), /write the network address, fd00::\/64/);
});

test("a CIDR without a prefix or with an impossible prefix says what a prefix looks like", () => {
  assert.throws(
    () => parseCidr("10.244.0.0", "c"),
    /c: "10\.244\.0\.0" has no prefix length; write it like 10\.244\.0\.0\/24/,
  );
  assert.throws(() => parseCidr("10.0.0.0/33"), /prefix length "33"; an IPv4 prefix is 0 to 32/);
  assert.throws(() => parseCidr("fd00::/129"), /an IPv6 prefix is 0 to 128/);
  assert.throws(() => parseCidr("10.0.0.0/016"), /prefix length "016"/);
  assert.throws(() => parseCidr("10.0.0.0/"), /prefix length ""/);
});

test("containment covers exactly the block and never crosses families", () => {
  const c = parseCidr("10.244.0.0/16");
  assert.ok(cidrContains(c, parseIp("10.244.0.0")));
  assert.ok(cidrContains(c, parseIp("10.244.255.255")));
  assert.ok(!cidrContains(c, parseIp("10.245.0.0")));
  assert.ok(!cidrContains(c, parseIp("10.243.255.255")));
  assert.ok(!cidrContains(parseCidr("::/0"), parseIp("10.0.0.1")));
  assert.ok(cidrContainsCidr(c, parseCidr("10.244.3.0/24")));
  assert.ok(!cidrContainsCidr(parseCidr("10.244.3.0/24"), c));
});

test("overlaps is true when either block contains the other and false for disjoint or mixed families", () => {
  assert.ok(overlaps("10.244.0.0/16", "10.244.7.0/24"));
  assert.ok(overlaps("10.244.7.0/24", "10.244.0.0/16"));
  assert.ok(overlaps("10.0.0.0/8", "10.0.0.0/8"));
  assert.ok(!overlaps("10.244.0.0/16", "10.245.0.0/16"));
  assert.ok(!overlaps("10.96.0.0/12", "10.112.0.0/12"));
  assert.ok(overlaps("fd00::/48", "fd00:0:0:1::/64"));
  assert.ok(!overlaps("0.0.0.0/0", "::/0"));
});

test("network and broadcast addresses exist except in point-to-point blocks", () => {
  const c = parseCidr("192.168.100.0/24");
  assert.equal(networkAddress(c)?.value, parseIp("192.168.100.0").value);
  assert.equal(broadcastAddress(c)?.value, parseIp("192.168.100.255").value);
  assert.equal(networkAddress(parseCidr("10.0.0.0/31")), undefined);
  assert.equal(broadcastAddress(parseCidr("10.0.0.0/31")), undefined);
  assert.equal(broadcastAddress(parseCidr("fd00::/64")), undefined);
  assert.equal(networkAddress(parseCidr("fd00::/64"))?.value, parseIp("fd00::").value);
  assert.equal(networkAddress(parseCidr("fd00::/127")), undefined);
});

test("the network of an interface address is its address with the host bits cleared", () => {
  assert.equal(formatCidr(networkOf("100.64.0.2/16")), "100.64.0.0/16");
  assert.equal(formatCidr(networkOf("fd00::5/64")), "fd00::/64");
  assert.equal(formatCidr(networkOf("10.0.0.0/8")), "10.0.0.0/8");
  assert.throws(() => networkOf("100.64.0.2/33"), /prefix/);
  assert.throws(() => networkOf("100.64.0.2/16 || 1"), /16 \|\| 1/);
});
