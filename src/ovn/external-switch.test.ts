import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cache } from "../ovsdb/cache.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { isOvnUuid, lookupExternalSwitch } from "./external-switch.ts";

const u = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

/** A cache holding switches: uuid (or its number for u()) -> name. */
function cacheOf(switches: Record<string, string>): Cache<NbTables> {
  const cache = new Cache(nbModel.schema);
  const rows: Record<string, unknown> = {};
  for (const [k, name] of Object.entries(switches))
    rows[/^\d+$/.test(k) ? u(Number(k)) : k] = { initial: { name } };
  cache.apply({ Logical_Switch: rows }, 2);
  return cache as unknown as Cache<NbTables>;
}

describe("lookupExternalSwitch", () => {
  test("a UUID finds its switch, in either case", () => {
    const id = "6b1f0000-0000-4000-8000-00000000abcd";
    const cache = cacheOf({ [id]: "zstack-net" });
    for (const ref of [id, id.toUpperCase()]) {
      const r = lookupExternalSwitch(cache, ref);
      assert.equal(r.kind, "found");
      assert.equal(r.kind === "found" && r.facts.uuid, id);
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

test("isOvnUuid takes NB's lower-case UUID text only", () => {
  const hex = "6b1f0000-0000-4000-8000-00000000abcd";
  assert.equal(isOvnUuid(hex), true);
  for (const t of [hex.toUpperCase(), `${u(1)} `, "6b1f0000000040008000000000000001", "", "ZStack 网络 1"])
    assert.equal(isOvnUuid(t), false, t);
});
