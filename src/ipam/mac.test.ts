import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { parseIp } from "./address.ts";
import { macForAddresses, macFromIPv4, parseMac, parseRequestedMac, randomLocalMac } from "./mac.ts";

test("the MAC of an IPv4 port is 0a:58 followed by the address bytes", () => {
  assert.equal(macFromIPv4(parseIp("10.244.1.5")), "0a:58:0a:f4:01:05");
  assert.equal(macForAddresses([parseIp("fd00::5"), parseIp("10.244.0.5")]), "0a:58:0a:f4:00:05");
});

test("an IPv6-only port gets a locally administered unicast MAC from the injected random source", () => {
  const fixed = () => Uint8Array.of(0xff, 0x11, 0x22, 0x33, 0x44, 0x55);
  assert.equal(randomLocalMac(fixed), "fe:11:22:33:44:55");
  assert.equal(macForAddresses([parseIp("fd00::5")], fixed), "fe:11:22:33:44:55");
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 6, maxLength: 6 }), (bytes) => {
      const mac = randomLocalMac(() => bytes);
      const first = Number.parseInt(mac.slice(0, 2), 16);
      assert.equal(first & 0b10, 0b10, "locally administered");
      assert.equal(first & 0b1, 0, "unicast");
      assert.ok(!mac.startsWith("0a:58:"), "never in the prefix of IPv4-derived MACs");
      assert.equal(parseRequestedMac(mac), mac);
    }),
  );
});

test("the default random source gives distinct valid MACs", () => {
  const macs = new Set(Array.from({ length: 100 }, () => randomLocalMac()));
  assert.equal(macs.size, 100);
});

test("MAC text is accepted in common spellings and returned in canonical form", () => {
  assert.equal(parseMac("0A:58:0A:F4:01:05"), "0a:58:0a:f4:01:05");
  assert.equal(parseMac("0a-58-0a-f4-01-05"), "0a:58:0a:f4:01:05");
  assert.equal(parseMac("a:58:a:f4:1:5"), "0a:58:0a:f4:01:05");
});

test("a requested MAC must be a unicast, non-zero MAC, and errors name the field", () => {
  assert.throws(() => parseRequestedMac("01:00:5e:00:00:01", "ovn.kubernetes.io/mac_address"), {
    message:
      'ovn.kubernetes.io/mac_address: "01:00:5e:00:00:01" is a multicast address (the first octet is odd); a port needs a unicast MAC, e.g. 0a:58:...',
  });
  assert.throws(() => parseRequestedMac("00:00:00:00:00:00"), /is all zeros/);
  for (const bad of [
    "0a:58:0a:f4:01",
    "0a:58:0a:f4:01:05:06",
    "0a:58-0a:f4:01:05",
    "0g:58:0a:f4:01:05",
    "0a58.0af4.0105",
  ]) {
    assert.throws(() => parseMac(bad), /is not a MAC address; write six hex octets separated by ':'/, bad);
  }
});
