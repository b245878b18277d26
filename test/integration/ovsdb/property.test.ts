// Random transaction sequences applied to a real ovsdb-server; after each sequence the monitor cache must equal
// `ovsdb-client dump`. The schema exercises every atomic type, optional/set/map columns, bounds, enums and references.
import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { byUuid, type Transaction } from "../../../src/ovsdb/transaction.ts";
import { useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { diffCacheAndDump } from "./compare.ts";

const PROP_SCHEMA = {
  name: "Prop",
  version: "1.0.0",
  tables: {
    Root: {
      isRoot: true,
      columns: {
        i: { type: { key: { type: "integer", minInteger: -1000, maxInteger: 1000 } } },
        r: { type: "real" },
        b: { type: "boolean" },
        s: { type: "string" },
        e: { type: { key: { type: "string", enum: ["set", ["red", "green", "blue"]] } } },
        oi: { type: { key: "integer", min: 0, max: 1 } },
        os: { type: { key: "string", min: 0, max: 1 } },
        ss: { type: { key: "string", min: 0, max: "unlimited" } },
        si: { type: { key: "integer", min: 0, max: 5 } },
        m: { type: { key: "string", value: "string", min: 0, max: "unlimited" } },
        mi: { type: { key: "integer", value: "boolean", min: 0, max: "unlimited" } },
        peer: { type: { key: { type: "uuid", refTable: "Root", refType: "weak" }, min: 0, max: 1 } },
        kids: { type: { key: { type: "uuid", refTable: "Kid" }, min: 0, max: "unlimited" } },
      },
    },
    Kid: {
      columns: {
        n: { type: "integer" },
        tags: { type: { key: "string", value: "integer", min: 0, max: "unlimited" } },
      },
    },
  },
};

type Op =
  | { k: "insert"; i: number; s: string; ss: string[]; m: Record<string, string>; kids: number }
  | { k: "update"; pick: number; i: number; e: string; oi: number | null; b: boolean; r: number }
  | { k: "setIns"; pick: number; vals: string[] }
  | { k: "setDel"; pick: number; n: number }
  | { k: "mapIns"; pick: number; m: Record<string, string> }
  | { k: "mapDelKeys"; pick: number; n: number }
  | { k: "mapIntIns"; pick: number; key: number; v: boolean }
  | { k: "peer"; pick: number; other: number }
  | { k: "kidMut"; pick: number; tag: string; v: number }
  | { k: "delete"; pick: number };

const small = fc.string({ maxLength: 6 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    k: fc.constant("insert" as const),
    i: fc.integer({ min: -1000, max: 1000 }),
    s: fc.string({ maxLength: 12 }),
    ss: fc.array(small, { maxLength: 4 }),
    m: fc.dictionary(small, small, { maxKeys: 4 }),
    kids: fc.nat(2),
  }),
  fc.record({
    k: fc.constant("update" as const),
    pick: fc.nat(),
    i: fc.integer({ min: -1000, max: 1000 }),
    e: fc.constantFrom("red", "green", "blue"),
    oi: fc.option(fc.integer(), { nil: null }),
    b: fc.boolean(),
    r: fc
      .double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 })
      .filter((x) => x === 0 || Math.abs(x) > 1e-300),
  }),
  fc.record({
    k: fc.constant("setIns" as const),
    pick: fc.nat(),
    vals: fc.array(small, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ k: fc.constant("setDel" as const), pick: fc.nat(), n: fc.nat(3) }),
  fc.record({
    k: fc.constant("mapIns" as const),
    pick: fc.nat(),
    m: fc.dictionary(small, small, { minKeys: 1, maxKeys: 3 }),
  }),
  fc.record({ k: fc.constant("mapDelKeys" as const), pick: fc.nat(), n: fc.nat(3) }),
  fc.record({
    k: fc.constant("mapIntIns" as const),
    pick: fc.nat(),
    key: fc.integer({ min: -5, max: 5 }),
    v: fc.boolean(),
  }),
  fc.record({ k: fc.constant("peer" as const), pick: fc.nat(), other: fc.nat() }),
  fc.record({ k: fc.constant("kidMut" as const), pick: fc.nat(), tag: small, v: fc.integer() }),
  fc.record({ k: fc.constant("delete" as const), pick: fc.nat() }),
);

test("random transaction sequences leave the monitor cache equal to the server's dump", async (t) => {
  const dir = await mkdtemp("/tmp/zo-prop-");
  const schemaPath = join(dir, "prop.ovsschema");
  await writeFile(schemaPath, JSON.stringify(PROP_SCHEMA));
  const srv = await useOvsdbServer(t, { schemas: [schemaPath] });
  const c = new OvsdbClient({ remotes: srv.unix, database: "Prop" });
  t.after(() => c.close());
  await c.connect();
  // An independent second client sees the same result through its own monitor.
  const c2 = new OvsdbClient({ remotes: srv.unix, database: "Prop" });
  t.after(() => c2.close());
  await c2.connect();

  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(opArb, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 12 }),
      async (txns) => {
        await c.transact((txn) => {
          txn.delete("Root", []);
        });
        for (const ops of txns) {
          const roots = [...c.cache.table("Root").values()] as unknown as Record<string, unknown>[];
          const pick = (n: number) => roots[n % Math.max(1, roots.length)];
          const build = (txn: Transaction) => {
            for (const op of ops) applyOp(txn, op, pick);
          };
          try {
            await c.transact(build);
          } catch (e) {
            // Bounded sets may overflow on insert; the server refuses and nothing changes.
            if (!/constraint violation/.test((e as Error).message)) throw e;
          }
        }
        await c.echo(); // all updates sent before the echo reply have been applied
        const dump = await srv.dump("Prop");
        assert.deepEqual(diffCacheAndDump(c.cache, c.schema, dump), []);
        await c2.echo();
        assert.deepEqual(diffCacheAndDump(c2.cache, c2.schema, dump), []);
      },
    ),
    { numRuns: 40 },
  );
});

function applyOp(txn: Transaction, op: Op, pick: (n: number) => Record<string, unknown> | undefined): void {
  if (op.k === "insert") {
    const kids = Array.from({ length: op.kids }, (_, j) => txn.insert("Kid", { n: j, tags: { t: j } }));
    txn.insert("Root", { i: op.i, s: op.s, ss: op.ss, m: op.m, kids, e: "green" });
    return;
  }
  const row = pick(op.pick);
  if (!row) return;
  const where = byUuid(row._uuid as string);
  switch (op.k) {
    case "update":
      txn.update("Root", where, { i: op.i, e: op.e, oi: op.oi, b: op.b, r: op.r });
      break;
    case "setIns":
      txn.mutate("Root", where, [["ss", "insert", op.vals]]);
      break;
    case "setDel":
      txn.mutate("Root", where, [["ss", "delete", (row.ss as string[]).slice(0, op.n)]]);
      break;
    case "mapIns":
      txn.mutate("Root", where, [["m", "insert", op.m]]);
      break;
    case "mapDelKeys":
      txn.mutate("Root", where, [["m", "delete", Object.keys(row.m as object).slice(0, op.n)]]);
      break;
    case "mapIntIns":
      txn.mutate("Root", where, [["mi", "insert", { [op.key]: op.v }]]);
      txn.mutate("Root", where, [["si", "insert", [op.key]]]);
      break;
    case "peer": {
      const other = pick(op.other);
      if (other) txn.update("Root", where, { peer: other._uuid as string });
      break;
    }
    case "kidMut": {
      const kid = (row.kids as string[])[0];
      if (kid)
        txn.mutate("Kid", byUuid(kid), [
          ["tags", "insert", { [op.tag]: op.v }],
          ["n", "+=", 1],
        ]);
      break;
    }
    case "delete":
      txn.delete("Root", where);
      break;
  }
}
