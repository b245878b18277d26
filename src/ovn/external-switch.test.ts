import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cache } from "../ovsdb/cache.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { lookupExternalSwitch } from "./external-switch.ts";

const u = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

function cacheOf(switches: Record<number, string>): Cache<NbTables> {
  const cache = new Cache(nbModel.schema);
  const rows: Record<string, unknown> = {};
  for (const [n, name] of Object.entries(switches)) rows[u(Number(n))] = { initial: { name } };
  cache.apply({ Logical_Switch: rows }, 2);
  return cache as unknown as Cache<NbTables>;
}

describe("lookupExternalSwitch", () => {
  test("a UUID finds its switch, in either case", () => {
    const cache = cacheOf({ 1: "zstack-net" });
    for (const ref of [u(1), u(1).toUpperCase()]) {
      const r = lookupExternalSwitch(cache, ref);
      assert.equal(r.kind, "found");
      assert.equal(r.kind === "found" && r.facts.uuid, u(1));
    }
  });

  test("a UUID whose switch is gone is missing, even when another switch is named with that text", () => {
    // Switch 2 is named with the text of switch 1's UUID; switch 1 was deleted.
    const cache = cacheOf({ 2: u(1) });
    assert.deepEqual(lookupExternalSwitch(cache, u(1)), { kind: "missing" });
    assert.deepEqual(lookupExternalSwitch(cache, u(1).toUpperCase()), { kind: "missing" });
  });

  test("a name finds the one switch of that name; two of that name are ambiguous", () => {
    const cache = cacheOf({ 1: "zstack-net", 2: "twin", 3: "twin" });
    const one = lookupExternalSwitch(cache, "zstack-net");
    assert.equal(one.kind === "found" && one.facts.uuid, u(1));
    assert.deepEqual(lookupExternalSwitch(cache, "twin"), { kind: "ambiguous", uuids: [u(2), u(3)] });
    assert.deepEqual(lookupExternalSwitch(cache, "none"), { kind: "missing" });
  });
});
