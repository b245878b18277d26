import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatPortList, mergeReservedPorts, NODE_REPLY_PORTS, parsePortList } from "./reserved-ports.ts";

/** The set of ports a list reserves, for lists small enough to enumerate. */
function portsOf(text: string): Set<number> {
  const out = new Set<number>();
  for (const r of parsePortList(text)) for (let p = r.min; p <= r.max; p++) out.add(p);
  return out;
}

describe("host reserved ports", () => {
  test("parses the kernel's list into sorted, merged ranges", () => {
    assert.deepEqual(parsePortList(""), []);
    assert.deepEqual(parsePortList("\n"), []);
    assert.deepEqual(parsePortList("9150,8080,9148-9149\n"), [
      { min: 8080, max: 8080 },
      { min: 9148, max: 9150 },
    ]);
    assert.equal(formatPortList(parsePortList("9150,8080,9148-9149")), "8080,9148-9150");
  });

  test("anything but a list of ports and ranges is refused, so it is never written back", () => {
    for (const bad of ["x", "80,", "1-2-3", "70000", "90-80", "80 81", "-5", "8080;reboot", "0x50"])
      assert.throws(() => parsePortList(bad), TypeError, bad);
  });

  test("adds 61440-65535 to an empty list and keeps every entry an operator set", () => {
    assert.equal(NODE_REPLY_PORTS.min, 61_440);
    assert.equal(NODE_REPLY_PORTS.max, 65_535);
    assert.equal(mergeReservedPorts(""), "61440-65535");
    assert.equal(mergeReservedPorts("8080,9148-9150\n"), "8080,9148-9150,61440-65535");
    assert.equal(mergeReservedPorts("30000-32767,62000"), "30000-32767,61440-65535");
    assert.equal(mergeReservedPorts("61000-61500"), "61000-65535");
  });

  test("writes nothing when the range is already reserved", () => {
    assert.equal(mergeReservedPorts("61440-65535"), undefined);
    assert.equal(mergeReservedPorts("8080,50000-65535\n"), undefined);
    // The kernel prints merged ranges, but a list that covers the range in adjacent pieces is covered too.
    assert.equal(mergeReservedPorts("61440-62000,62001-65535"), undefined);
  });

  test("property: the merge reserves exactly the old ports plus the wanted range, and a second merge writes nothing", () => {
    const range = fc
      .tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 40 }))
      .map(([a, len]) => ({ min: 1000 + a, max: 1000 + a + len }));
    const item = range.map((r) => (r.min === r.max ? String(r.min) : `${r.min}-${r.max}`));
    fc.assert(
      fc.property(fc.array(item, { maxLength: 8 }), range, (items, want) => {
        const existing = items.join(",");
        const next = mergeReservedPorts(existing, want);
        const before = portsOf(existing);
        const wanted = [...Array(want.max - want.min + 1).keys()].map((i) => want.min + i);
        if (wanted.every((p) => before.has(p))) {
          assert.equal(next, undefined);
          return;
        }
        assert.ok(next !== undefined);
        const after = portsOf(next);
        assert.deepEqual([...after].sort(), [...new Set([...before, ...wanted])].sort());
        // Canonical: what the kernel would print back, and already complete.
        assert.equal(formatPortList(parsePortList(next)), next);
        assert.equal(mergeReservedPorts(next, want), undefined);
      }),
    );
  });
});
