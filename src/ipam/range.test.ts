import assert from "node:assert/strict";
import { test } from "node:test";
import { parseIp } from "./address.ts";
import { formatRange, mergeRanges, parseRange, rangeContains, rangeSize } from "./range.ts";

test("a range is written as one address, a-b, or a..b, both ends included", () => {
  assert.equal(formatRange(parseRange("10.0.0.5")), "10.0.0.5");
  assert.equal(formatRange(parseRange("10.0.0.5-10.0.0.9")), "10.0.0.5-10.0.0.9");
  assert.equal(formatRange(parseRange("10.0.0.5..10.0.0.9")), "10.0.0.5-10.0.0.9");
  assert.equal(formatRange(parseRange("fd00::2..fd00::00ff")), "fd00::2-fd00::ff");
  assert.equal(formatRange(parseRange("fd00::2 - fd00::ff")), "fd00::2-fd00::ff");
  assert.equal(rangeSize(parseRange("10.0.0.5-10.0.0.9")), 5n);
  assert.ok(rangeContains(parseRange("10.0.0.5-10.0.0.9"), parseIp("10.0.0.9")));
  assert.ok(!rangeContains(parseRange("10.0.0.5-10.0.0.9"), parseIp("10.0.0.10")));
});

test("a reversed range is refused and the message says to write the lower address first", () => {
  assert.throws(
    () => parseRange("10.0.0.9-10.0.0.3", "spec.excludeIPs[2]"),
    (e: Error) =>
      e.message ===
      'spec.excludeIPs[2]: "10.0.0.9-10.0.0.3" is a reversed range; write the lower address first',
  );
});

test("a range mixing families or with two separators is refused", () => {
  assert.throws(() => parseRange("10.0.0.1-fd00::1", "r"), /r: "10\.0\.0\.1-fd00::1" mixes IPv4 and IPv6/);
  assert.throws(() => parseRange("10.0.0.1-10.0.0.2-10.0.0.3"), /more than one "-"/);
  assert.throws(() => parseRange("10.0.0.1-"), /is empty/);
});

test("merging joins overlapping and touching ranges and keeps families apart", () => {
  const merged = mergeRanges(
    ["10.0.0.20-10.0.0.30", "fd00::1", "10.0.0.1-10.0.0.5", "10.0.0.6", "10.0.0.25-10.0.0.40", "fd00::3"].map(
      (t) => parseRange(t),
    ),
  );
  assert.deepEqual(merged.map(formatRange), [
    "10.0.0.1-10.0.0.6",
    "10.0.0.20-10.0.0.40",
    "fd00::1",
    "fd00::3",
  ]);
});
