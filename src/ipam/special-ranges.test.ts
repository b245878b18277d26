import assert from "node:assert/strict";
import { test } from "node:test";
import { formatCidr, parseCidr } from "./cidr.ts";
import { SPECIAL_RANGES, specialRangeOverlapping } from "./special-ranges.ts";

test("the special ranges are the non-global-unicast blocks of both families", () => {
  assert.deepEqual(SPECIAL_RANGES.map(formatCidr), [
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "fe80::/10",
    "ff00::/8",
  ]);
});

test("a block inside, around or equal to a special range is reported with that range and its name", () => {
  const cases: [string, string, RegExp][] = [
    ["169.254.169.0/24", "169.254.0.0/16", /link-local/],
    ["224.0.0.0/8", "224.0.0.0/4", /multicast/],
    ["127.0.0.0/8", "127.0.0.0/8", /loopback/],
    ["0.0.0.0/8", "0.0.0.0/8", /this network/],
    ["255.255.255.255/32", "240.0.0.0/4", /broadcast/],
    ["fe80::/64", "fe80::/10", /link-local/],
    ["ff02::/16", "ff00::/8", /multicast/],
    ["::1/128", "::1/128", /loopback/],
    ["::/128", "::/128", /unspecified/],
    ["::/64", "::/128", /unspecified/],
    ["0.0.0.0/1", "0.0.0.0/8", /this network/],
  ];
  for (const [cidr, range, name] of cases) {
    const hit = specialRangeOverlapping(parseCidr(cidr));
    assert.ok(hit, cidr);
    assert.equal(formatCidr(hit.range), range, cidr);
    assert.match(hit.name, name, cidr);
  }
});

test("global unicast blocks, private ones included, overlap no special range", () => {
  for (const cidr of [
    "10.244.0.0/16",
    "192.168.1.0/29",
    "172.16.0.0/12",
    "169.255.0.0/16",
    "fd00::/64",
    "2001:db8::/32",
  ])
    assert.equal(specialRangeOverlapping(parseCidr(cidr)), undefined, cidr);
});
