import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type AnyRow, Cache, type RowEvent } from "./cache.ts";
import { applyDiff, EMPTY_MAP, EMPTY_SET, type Value } from "./datum.ts";
import { IN_PLACE_MIN, setSize } from "./live-set.ts";
import { parseSchema } from "./schema.ts";
import { setHas } from "./set-index.ts";

const schema = parseSchema({
  name: "T",
  version: "1.0.0",
  tables: {
    Switch: {
      columns: {
        name: { type: "string" },
        ports: { type: { key: "uuid", min: 0, max: "unlimited" } },
        acls: { type: { key: "uuid", min: 0, max: "unlimited" } },
        tags: { type: { key: "integer", min: 0, max: "unlimited" } },
        ids: { type: { key: "string", value: "string", min: 0, max: "unlimited" } },
      },
    },
  },
});

const u = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const S = u(999999);
// How ovsdb-server writes a set: one element bare, others (and none) as ["set", [...]].
const wireSet = (atoms: readonly unknown[]) => (atoms.length === 1 ? atoms[0] : ["set", atoms]);
const wireUuids = (ns: number[]) => wireSet(ns.map((n) => ["uuid", u(n)]));

function cacheWith(wire: Record<string, unknown>): Cache {
  const cache = new Cache(schema);
  cache.apply({ Switch: { [S]: { initial: { name: "s", ...wire } } } }, 2);
  return cache;
}
const row = (c: Cache) => c.table("Switch").get(S) as AnyRow;
const modify = (c: Cache, diff: Record<string, unknown>) => c.apply({ Switch: { [S]: { modify: diff } } }, 2);
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const sorted = (v: Value | undefined) => [...(v as readonly string[])].sort();

describe("Cache: update2 set and map diffs", () => {
  for (const size of [0, 1, 2, IN_PLACE_MIN - 1, IN_PLACE_MIN, IN_PLACE_MIN + 1, 3 * IN_PLACE_MIN]) {
    test(`a set of ${size}: a diff inserts, deletes, and does both at once; every old row keeps its value`, () => {
      const c = cacheWith({ ports: wireUuids(range(0, size)) });
      const r0 = row(c);
      const v0 = [...(r0.ports as string[])];
      assert.deepEqual(sorted(r0.ports), range(0, size).map(u).sort());

      modify(c, { ports: wireUuids([size]) }); // insert one (a bare atom on the wire)
      const r1 = row(c);
      assert.deepEqual(
        sorted(r1.ports),
        range(0, size + 1)
          .map(u)
          .sort(),
      );

      const del = size > 0 ? [0] : [size];
      modify(c, { ports: wireUuids(del) }); // delete one
      const r2 = row(c);
      const want2 = size > 0 ? range(1, size) : [];
      assert.deepEqual(sorted(r2.ports), want2.map(u).sort());
      if (want2.length === 0) assert.equal(r2.ports, EMPTY_SET);

      modify(c, { ports: wireUuids([size + 1, ...(size > 1 ? [1] : [])]) }); // insert one, delete one
      const r3 = row(c);
      const want3 = [...want2.filter((x) => size <= 1 || x !== 1), size + 1];
      assert.deepEqual(sorted(r3.ports), want3.map(u).sort());

      // Read newest first, then the oldest: each superseded row still holds what it held.
      assert.deepEqual(sorted(r2.ports), want2.map(u).sort());
      assert.deepEqual(
        sorted(r1.ports),
        range(0, size + 1)
          .map(u)
          .sort(),
      );
      assert.deepEqual([...(r0.ports as string[])], v0);
      assert.equal(r0.name, "s");
      assert.deepEqual(Object.keys(r3), Object.keys(r0));
    });
  }

  test("a large set grows in place: the current row's array is the live one, the old row gets a rebuilt copy", () => {
    const c = cacheWith({ ports: wireUuids(range(0, IN_PLACE_MIN)) });
    const r0 = row(c);
    const live = r0.ports as string[];
    modify(c, { ports: wireUuids([IN_PLACE_MIN]) });
    const r1 = row(c);
    assert.equal(r1.ports, live, "no copy");
    assert.equal(live.length, IN_PLACE_MIN + 1);
    assert.equal(setSize(r0, "ports"), IN_PLACE_MIN, "counted without a rebuild");
    assert.notEqual(r0.ports, live);
    assert.equal((r0.ports as string[]).length, IN_PLACE_MIN);
    assert.equal(setSize(r0, "ports"), IN_PLACE_MIN);
    assert.equal(setSize(r1, "ports"), IN_PLACE_MIN + 1);
  });

  test("two large sets of one row: changing one, then the other, leaves the oldest row's values as they were", () => {
    // A big policy's Port_Group (ports and acls); the cluster router (ports and policies).
    const c = cacheWith({ ports: wireUuids(range(0, 100)), acls: wireUuids(range(1000, 100)) });
    const r0 = row(c);
    modify(c, { ports: ["set", [["uuid", u(100)]]] });
    const r1 = row(c);
    modify(c, { acls: ["set", [["uuid", u(1100)]]] });
    const r2 = row(c);
    assert.equal(setSize(r0, "acls"), 100);
    assert.equal(setSize(r0, "ports"), 100);
    assert.equal((r0.acls as string[]).length, 100);
    assert.deepEqual(sorted(r0.acls), range(1000, 100).map(u).sort());
    assert.deepEqual(sorted(r0.ports), range(0, 100).map(u).sort());
    assert.deepEqual(sorted(r1.acls), range(1000, 100).map(u).sort());
    assert.deepEqual(sorted(r1.ports), range(0, 101).map(u).sort());
    assert.deepEqual(sorted(r2.acls), range(1000, 101).map(u).sort());
    assert.deepEqual(sorted(r2.ports), range(0, 101).map(u).sort());
  });

  test("a diff to a large set that cancels out (an element listed twice) still leaves the old row its value", () => {
    const c = cacheWith({ ports: wireUuids(range(0, 100)) });
    const r0 = row(c);
    modify(c, { ports: wireUuids([5, 5]) });
    const r1 = row(c);
    modify(c, { ports: wireUuids([100]) });
    assert.equal(setSize(r0, "ports"), 100);
    assert.deepEqual(sorted(r0.ports), range(0, 100).map(u).sort());
    assert.deepEqual(sorted(r1.ports), range(0, 100).map(u).sort());
    assert.deepEqual(sorted(row(c).ports), range(0, 101).map(u).sort());
  });

  test("removing every element of a large set leaves the shared empty set, and the old row keeps them all", () => {
    const n = IN_PLACE_MIN + 3;
    const c = cacheWith({ ports: wireUuids(range(0, n)) });
    const r0 = row(c);
    modify(c, { ports: wireUuids(range(0, n)) });
    assert.equal(row(c).ports, EMPTY_SET);
    assert.deepEqual(sorted(r0.ports), range(0, n).map(u).sort());
  });

  test("a listener sees the old and the new value of a large set, and may keep the old row", () => {
    const c = cacheWith({ tags: ["set", range(0, 100)] });
    const seen: RowEvent[] = [];
    c.subscribe("Switch", (evs) => seen.push(...evs));
    modify(c, { tags: ["set", [5, 100]] });
    modify(c, { tags: 101 });
    assert.equal(seen.length, 2);
    const [e1, e2] = seen as [RowEvent & { kind: "update" }, RowEvent & { kind: "update" }];
    assert.equal(e1.kind, "update");
    assert.deepEqual(e1.old.tags, range(0, 100));
    assert.deepEqual(e1.row.tags, [...range(0, 5), ...range(6, 94), 100]);
    assert.deepEqual(e2.row.tags, [...range(0, 5), ...range(6, 94), 100, 101]);
    assert.equal(e2.old, e1.row);
  });

  test("a map diff adds a key, removes a key whose value matches, replaces a changed one", () => {
    const c = cacheWith({
      ids: [
        "map",
        [
          ["keep", "1"],
          ["gone", "2"],
          ["changed", "3"],
        ],
      ],
    });
    const r0 = row(c);
    modify(c, {
      ids: [
        "map",
        [
          ["gone", "2"],
          ["changed", "4"],
          ["added", "5"],
        ],
      ],
    });
    assert.deepEqual({ ...(row(c).ids as object) }, { keep: "1", changed: "4", added: "5" });
    assert.deepEqual({ ...(r0.ids as object) }, { keep: "1", gone: "2", changed: "3" });
    modify(c, {
      ids: [
        "map",
        [
          ["keep", "1"],
          ["changed", "4"],
          ["added", "5"],
        ],
      ],
    });
    assert.equal(row(c).ids, EMPTY_MAP);
  });

  test("empty and one-element sets as the wire writes them: an empty initial value, a bare atom, a one-element diff", () => {
    const c = cacheWith({ ports: ["set", []], tags: 7 });
    assert.equal(row(c).ports, EMPTY_SET);
    assert.deepEqual(row(c).tags, [7]);
    modify(c, { ports: ["uuid", u(1)], tags: 7 });
    assert.deepEqual(row(c).ports, [u(1)]);
    assert.equal(row(c).tags, EMPTY_SET);
    modify(c, {
      ports: [
        "set",
        [
          ["uuid", u(1)],
          ["uuid", u(1)],
        ],
      ],
    }); // listed twice: toggled twice, no change
    assert.deepEqual(row(c).ports, [u(1)]);
  });

  test("an index on a large set column follows in-place changes", () => {
    const c = cacheWith({ ports: wireUuids(range(0, 2 * IN_PLACE_MIN)) });
    c.table("Switch").addIndex("byPort", "ports");
    modify(c, { ports: wireUuids([3, 1000]) });
    const t = c.table("Switch");
    assert.equal(t.lookup("byPort", u(3)).length, 0);
    assert.equal(t.lookupOne("byPort", u(1000))?._uuid, S);
    assert.equal(t.lookupOne("byPort", u(4))?._uuid, S);
  });

  test("applying random set diffs equals recomputing the set from scratch, for the current row and every old one", () => {
    const toggle = fc.array(fc.integer({ min: 0, max: 4 * IN_PLACE_MIN }), { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 * IN_PLACE_MIN }),
        fc.array(fc.oneof(toggle, fc.constant([-1])), { minLength: 1, maxLength: 80 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (start, steps, readOrder) => {
          const initial = range(0, start);
          const c = cacheWith({ tags: wireSet(initial) });
          const model = new Set<number>(initial);
          // The copying diff (datum.applyDiff) is the reference for the order of elements too.
          let copied: Value = applyDiff(
            EMPTY_SET,
            wireSet(initial),
            schema.tables.get("Switch")!.columns.get("tags")!.type,
          );
          const kept: { row: AnyRow; members: number[]; order: readonly number[]; size: number }[] = [];
          for (const raw of steps) {
            // -1 stands for "remove everything": a large diff.
            const toggles = raw[0] === -1 ? [...model] : raw;
            const counts = new Map<number, number>();
            for (const x of toggles) counts.set(x, (counts.get(x) ?? 0) + 1);
            for (const [x, n] of counts) if (n % 2 === 1 && !model.delete(x)) model.add(x);
            const before = row(c);
            kept.push({
              row: before,
              members: [...(copied as number[])].sort((a, b) => a - b),
              order: [...(copied as number[])],
              size: (copied as number[]).length,
            });
            modify(c, { tags: wireSet(toggles) });
            copied = applyDiff(
              copied,
              wireSet(toggles),
              schema.tables.get("Switch")!.columns.get("tags")!.type,
            );
            const now = row(c).tags as readonly number[];
            assert.deepEqual(
              [...now],
              [...(copied as number[])],
              "same elements in the same order as a copy",
            );
            assert.deepEqual(
              [...now].sort((a, b) => a - b),
              [...model].sort((a, b) => a - b),
            );
            for (const x of [...counts.keys(), -2]) assert.equal(setHas(now, x), model.has(x));
          }
          // Old rows, read in a random order: sizes first (no rebuild), then values.
          for (const k of kept) assert.equal(setSize(k.row, "tags"), k.size);
          const order = readOrder.map((i) => i % kept.length);
          for (const i of [...order, ...kept.keys()]) {
            const k = kept[i]!;
            assert.deepEqual([...(k.row.tags as number[])], k.order);
            assert.equal(setSize(k.row, "tags"), k.size);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
  test("random diffs over several large sets of one row equal recomputation, for every column of every kept row", () => {
    const cols = ["tags", "ports", "acls"] as const;
    type Col = (typeof cols)[number];
    const types = new Map(cols.map((n) => [n, schema.tables.get("Switch")!.columns.get(n)!.type]));
    // tags holds integers, ports and acls uuids; a number n stands for u(n) in those.
    const atom = (col: Col, n: number) => (col === "tags" ? n : ["uuid", u(n)]);
    const plain = (col: Col, n: number) => (col === "tags" ? n : u(n));
    const toggle = fc.array(fc.integer({ min: 0, max: 4 * IN_PLACE_MIN }), { minLength: 1, maxLength: 5 });
    // One step changes some of the columns (at least one) in one diff; -1 stands for "remove everything", and
    // a list given twice is a diff that cancels out.
    const change = fc.oneof(
      toggle,
      toggle.map((xs) => [...xs, ...xs]),
      fc.constant([-1]),
    );
    const step = fc
      .record({ tags: fc.option(change), ports: fc.option(change), acls: fc.option(change) })
      .filter((s) => cols.some((col) => s[col] !== null));
    fc.assert(
      fc.property(
        fc.record({
          tags: fc.integer({ min: 0, max: 3 * IN_PLACE_MIN }),
          ports: fc.integer({ min: 0, max: 3 * IN_PLACE_MIN }),
          acls: fc.integer({ min: 0, max: 3 * IN_PLACE_MIN }),
        }),
        fc.array(step, { minLength: 1, maxLength: 60 }),
        fc.array(fc.tuple(fc.nat(), fc.nat(cols.length - 1)), { maxLength: 40 }),
        (start, steps, readOrder) => {
          const models = new Map<Col, Set<number>>();
          let copied = new Map<Col, Value>();
          const wire: Record<string, unknown> = {};
          for (const col of cols) {
            const initial = range(0, start[col]);
            models.set(col, new Set(initial));
            wire[col] = wireSet(initial.map((n) => atom(col, n)));
            copied.set(col, applyDiff(EMPTY_SET, wire[col], types.get(col)!));
          }
          const c = cacheWith(wire);
          // Every version of the row, with what a copy of each column held then.
          const kept: { row: AnyRow; values: Map<Col, readonly unknown[]> }[] = [];
          const keep = () =>
            kept.push({
              row: row(c),
              values: new Map(cols.map((col) => [col, [...(copied.get(col) as unknown[])]])),
            });
          keep();
          for (const s of steps) {
            const diff: Record<string, unknown> = {};
            const next = new Map(copied);
            for (const col of cols) {
              const raw = s[col];
              if (raw === null) continue;
              const model = models.get(col)!;
              const toggles: number[] = raw[0] === -1 ? [...model] : [...raw];
              const counts = new Map<number, number>();
              for (const x of toggles) counts.set(x, (counts.get(x) ?? 0) + 1);
              for (const [x, n] of counts) if (n % 2 === 1 && !model.delete(x)) model.add(x);
              diff[col] = wireSet(toggles.map((n) => atom(col, n)));
              next.set(col, applyDiff(copied.get(col)!, diff[col], types.get(col)!));
            }
            modify(c, diff);
            copied = next;
            keep();
            const now = row(c);
            for (const col of cols) {
              assert.deepEqual([...(now[col] as unknown[])], [...(copied.get(col) as unknown[])], col);
              assert.deepEqual(
                [...(now[col] as unknown[])].sort(),
                [...models.get(col)!].map((n) => plain(col, n)).sort(),
              );
            }
          }
          // Every kept row, every column: sizes first (no rebuild), then values in a random order, then all.
          for (const k of kept)
            for (const col of cols) assert.equal(setSize(k.row, col), k.values.get(col)!.length);
          const order: [number, Col][] = readOrder.map(([i, j]) => [i % kept.length, cols[j]!]);
          for (const [i, col] of [
            ...order,
            ...kept.flatMap((_, i) => cols.map((col) => [i, col] as const)),
          ]) {
            const k = kept[i]!;
            assert.deepEqual(
              [...(k.row[col] as unknown[])],
              k.values.get(col),
              `row ${i} of ${kept.length}, ${col}`,
            );
            assert.equal(setSize(k.row, col), k.values.get(col)!.length);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("Cache: the order tables are applied in", () => {
  // A chain of references: Top -> Mid -> Leaf, and Loose referring to nothing.
  const refSchema = parseSchema({
    name: "R",
    version: "1.0.0",
    tables: {
      Top: { columns: { mid: { type: { key: { type: "uuid", refTable: "Mid" }, min: 0, max: 1 } } } },
      Mid: { columns: { leaf: { type: { key: { type: "uuid", refTable: "Leaf" }, min: 0, max: 1 } } } },
      Leaf: { columns: { name: { type: "string" } } },
      Loose: { columns: { name: { type: "string" } } },
    },
  });
  const rank: Record<string, number> = { Leaf: 0, Mid: 1, Top: 2 };

  test("whatever order an update names its tables in, a referenced table is applied before the tables referring to it", () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray(["Top", "Mid", "Leaf", "Loose"], { minLength: 1 }),
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 4 }),
        (tables, counts) => {
          const cache = new Cache(refSchema);
          const updates: Record<string, Record<string, unknown>> = {};
          let n = 0;
          tables.forEach((t, i) => {
            const rows: Record<string, unknown> = {};
            for (let k = 0; k < (counts[i] as number); k++) rows[u(++n)] = { insert: {} };
            updates[t] = rows;
          });
          const events = cache.apply(updates, 2);
          assert.equal(events.length, n);
          // Each table's rows come together, and the chain's tables in reference order.
          const seen: string[] = [];
          for (const e of events) if (seen.at(-1) !== e.table) seen.push(e.table);
          assert.deepEqual([...seen].sort(), [...tables].sort());
          const chain = seen.filter((t) => t in rank);
          assert.deepEqual(
            chain,
            [...chain].sort((a, b) => (rank[a] as number) - (rank[b] as number)),
          );
        },
      ),
      { numRuns: 200 },
    );
  });
});
