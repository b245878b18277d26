import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Bitmap } from "./bitmap.ts";
import { BITMAP_LIMIT, createOccupancySet, type OccupancySet } from "./occupancy.ts";
import { SparseSet } from "./sparse-set.ts";

type Op =
  | { op: "add"; at: number }
  | { op: "delete"; at: number }
  | { op: "range"; at: number; len: number }
  | { op: "lowest" };

const ops = (size: number) =>
  fc.array(
    fc.oneof(
      fc.record({ op: fc.constant("add" as const), at: fc.nat(size - 1) }),
      fc.record({ op: fc.constant("delete" as const), at: fc.nat(size - 1) }),
      fc.record({ op: fc.constant("range" as const), at: fc.nat(size - 1), len: fc.nat(40) }),
      fc.constant({ op: "lowest" as const }),
    ),
    { maxLength: 300, size: "max" },
  );

/** Runs the ops against the set and a plain Set of numbers, which is obviously right. */
function agreesWithModel(make: (size: bigint) => OccupancySet, size: number, list: Op[]): void {
  const set = make(BigInt(size));
  const model = new Set<number>();
  const lowest = () => {
    for (let i = 0; i < size; i++) if (!model.has(i)) return BigInt(i);
    return undefined;
  };
  for (const o of list) {
    if (o.op === "add") {
      assert.equal(set.add(BigInt(o.at)), !model.has(o.at));
      model.add(o.at);
    }
    if (o.op === "delete") assert.equal(set.delete(BigInt(o.at)), model.delete(o.at));
    if (o.op === "range") {
      const last = Math.min(size - 1, o.at + o.len);
      set.addRange(BigInt(o.at), BigInt(last));
      for (let i = o.at; i <= last; i++) model.add(i);
    }
    assert.equal(set.lowestFree(), lowest());
    assert.equal(set.count, BigInt(model.size));
  }
  for (let i = 0; i < size; i++) assert.equal(set.has(BigInt(i)), model.has(i), `offset ${i}`);
}

for (const size of [1, 31, 32, 33, 100, 1024, 1500]) {
  test(`the bitmap agrees with a plain set on random operations (size ${size})`, () => {
    fc.assert(
      fc.property(ops(size), (list) => agreesWithModel((n) => new Bitmap(n), size, list)),
      { numRuns: 60 },
    );
  });
  test(`the sparse set agrees with a plain set on random operations (size ${size})`, () => {
    fc.assert(
      fc.property(ops(size), (list) => agreesWithModel((n) => new SparseSet(n), size, list)),
      {
        numRuns: 60,
      },
    );
  });
}

test("a full bitmap has no lowest free offset and frees up again after a delete", () => {
  const b = new Bitmap(70n);
  b.addRange(0n, 69n);
  assert.equal(b.lowestFree(), undefined);
  assert.equal(b.count, 70n);
  b.delete(65n);
  assert.equal(b.lowestFree(), 65n);
  b.delete(3n);
  assert.equal(b.lowestFree(), 3n);
});

test("the sparse set keeps touching intervals joined so a run of allocations stays one interval", () => {
  const s = new SparseSet(1n << 64n);
  for (let i = 0n; i < 1000n; i++) s.add(s.lowestFree()!);
  assert.deepEqual([...s.intervals()], [[0n, 999n]]);
  s.delete(500n);
  assert.deepEqual(
    [...s.intervals()],
    [
      [0n, 499n],
      [501n, 999n],
    ],
  );
  assert.equal(s.lowestFree(), 500n);
  s.add(500n);
  assert.deepEqual([...s.intervals()], [[0n, 999n]]);
  s.addRange((1n << 64n) - 10n, (1n << 64n) - 1n);
  assert.equal(s.count, 1010n);
  assert.ok(s.has((1n << 64n) - 1n));
});

test("the sparse set handles many scattered holes without degrading", () => {
  const s = new SparseSet(1n << 64n);
  s.addRange(0n, 19_999n);
  for (let i = 1n; i < 20_000n; i += 2n) s.delete(i);
  assert.equal(s.count, 10_000n);
  for (let i = 1n; i < 20_000n; i += 2n) assert.equal(s.add(s.lowestFree()!), true);
  assert.deepEqual([...s.intervals()], [[0n, 19_999n]]);
});

test("blocks up to the bitmap limit get a bitmap and larger ones the sparse set", () => {
  assert.ok(createOccupancySet(1n << 16n) instanceof Bitmap);
  assert.ok(createOccupancySet(BITMAP_LIMIT) instanceof Bitmap);
  assert.ok(createOccupancySet(BITMAP_LIMIT + 1n) instanceof SparseSet);
  assert.ok(createOccupancySet(1n << 64n) instanceof SparseSet);
});
