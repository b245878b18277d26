import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  type Atom,
  applyDiff,
  canonicalValue,
  decodeValue,
  EMPTY_MAP,
  EMPTY_SET,
  encodeValue,
  NamedUuid,
  type Value,
  validateAtom,
  valuesEqual,
} from "./datum.ts";
import { ValueError } from "./errors.ts";
import {
  type AtomicType,
  type BaseType,
  type ColumnKind,
  type ColumnType,
  type DatabaseSchema,
  parseColumnType,
  parseSchema,
} from "./schema.ts";
import { INDEXED_MIN, setHas } from "./set-index.ts";

const ATOMIC_TYPES: readonly AtomicType[] = ["integer", "real", "boolean", "string", "uuid"];

// ---------------------------------------------------------------------------------------------------------------
// Arbitrary column types, built as schema JSON and parsed, so that they are exactly what a schema can declare.

type RawBase = { type: AtomicType } & Record<string, unknown>;

function rawEnum<A>(atoms: readonly A[]): fc.Arbitrary<unknown> {
  // The schema language allows a bare atom for a one-element enum.
  return atoms.length === 1 ? fc.constantFrom(atoms[0], ["set", atoms]) : fc.constant(["set", atoms]);
}

function orderedPair(a: number | undefined, b: number | undefined): [number | undefined, number | undefined] {
  return a !== undefined && b !== undefined && a > b ? [b, a] : [a, b];
}

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

const arbRawInteger: fc.Arbitrary<RawBase> = fc.oneof(
  fc
    .tuple(maybe(fc.integer({ min: -5000, max: 5000 })), maybe(fc.integer({ min: -5000, max: 5000 })))
    .map(([a, b]): RawBase => {
      const [lo, hi] = orderedPair(a, b);
      return {
        type: "integer",
        ...(lo !== undefined && { minInteger: lo }),
        ...(hi !== undefined && { maxInteger: hi }),
      };
    }),
  fc
    .uniqueArray(fc.integer({ min: -100, max: 100 }), { minLength: 1, maxLength: 4 })
    .chain((atoms) => rawEnum(atoms).map((e): RawBase => ({ type: "integer", enum: e }))),
);

const arbRawReal: fc.Arbitrary<RawBase> = fc.oneof(
  fc
    .tuple(
      // Bounds 0 and -0 would make fast-check's min > max (it orders -0 below 0); JSON has no -0 anyway.
      maybe(fc.double({ min: -1e6, max: 1e6, noNaN: true }).filter(isNormal).map(noNegativeZero)),
      maybe(fc.double({ min: -1e6, max: 1e6, noNaN: true }).filter(isNormal).map(noNegativeZero)),
    )
    .map(([a, b]): RawBase => {
      const [lo, hi] = orderedPair(a, b);
      return {
        type: "real",
        ...(lo !== undefined && { minReal: lo }),
        ...(hi !== undefined && { maxReal: hi }),
      };
    }),
  fc
    .uniqueArray(fc.double({ min: -10, max: 10, noNaN: true }).filter(isNormal).map(noNegativeZero), {
      minLength: 1,
      maxLength: 3,
    })
    .chain((atoms) => rawEnum(atoms).map((e): RawBase => ({ type: "real", enum: e }))),
);

const arbRawBoolean: fc.Arbitrary<RawBase> = fc.oneof(
  fc.constant<RawBase>({ type: "boolean" }),
  fc
    .constantFrom([true], [false], [false, true])
    .chain((atoms) => rawEnum(atoms).map((e) => ({ type: "boolean" as const, enum: e }))),
);

const arbRawString: fc.Arbitrary<RawBase> = fc.oneof(
  fc.tuple(maybe(fc.nat(4)), maybe(fc.nat(12))).map(([a, b]): RawBase => {
    const [lo, hi] = orderedPair(a, b);
    return {
      type: "string",
      ...(lo !== undefined && { minLength: lo }),
      ...(hi !== undefined && { maxLength: hi }),
    };
  }),
  fc
    .uniqueArray(fc.string({ unit: "binary", maxLength: 8 }), { minLength: 1, maxLength: 4 })
    .chain((atoms) => rawEnum(atoms).map((e): RawBase => ({ type: "string", enum: e }))),
);

const arbRawUuid: fc.Arbitrary<RawBase> = fc.oneof(
  fc.constant<RawBase>({ type: "uuid" }),
  fc.constantFrom<RawBase>(
    { type: "uuid", refTable: "Other" },
    { type: "uuid", refTable: "Other", refType: "weak" },
  ),
);

const RAW_BASES: Record<AtomicType, fc.Arbitrary<RawBase>> = {
  integer: arbRawInteger,
  real: arbRawReal,
  boolean: arbRawBoolean,
  string: arbRawString,
  uuid: arbRawUuid,
};

/** Sometimes the compact spelling ("integer") that the schema language allows for an unconstrained base type. */
function spelled(b: RawBase): fc.Arbitrary<unknown> {
  return Object.keys(b).length === 1 ? fc.constantFrom<unknown>(b, b.type) : fc.constant(b);
}

const arbMaxSet = fc.oneof(fc.integer({ min: 2, max: 6 }), fc.constant("unlimited"));

function arbColumnType(
  kind: ColumnKind,
  keyType: AtomicType,
  valueType: AtomicType = "string",
): fc.Arbitrary<ColumnType> {
  const key = RAW_BASES[keyType].chain(spelled);
  let raw: fc.Arbitrary<unknown>;
  switch (kind) {
    case "scalar":
      raw = RAW_BASES[keyType].chain((b) =>
        fc.constantFrom<unknown>(
          ...(Object.keys(b).length === 1 ? [b.type] : []),
          { key: b },
          { key: b, min: 1, max: 1 },
        ),
      );
      break;
    case "optional":
      raw = key.map((k) => ({ key: k, min: 0, max: 1 }));
      break;
    case "set":
      raw = fc.record({ key, min: fc.constantFrom(0, 1), max: arbMaxSet });
      break;
    case "map":
      raw = fc.record({
        key,
        value: RAW_BASES[valueType].chain(spelled),
        min: fc.constantFrom(0, 1),
        max: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constant("unlimited")),
      });
      break;
  }
  return raw.map((r) => {
    const ct = parseColumnType(r, "T.c");
    assert.equal(ct.kind, kind, JSON.stringify(r));
    return ct;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Arbitrary values that fit a column type.

function noNegativeZero(x: number): number {
  // JSON has no negative zero, so -0 cannot survive the wire; the server would see 0 as well.
  return Object.is(x, -0) ? 0 : x;
}

function arbAtom(bt: BaseType): fc.Arbitrary<Atom> {
  if (bt.enum) return fc.constantFrom(...(bt.enum as Atom[]));
  switch (bt.type) {
    case "integer":
      return fc.integer({
        min: bt.minInteger ?? Number.MIN_SAFE_INTEGER,
        max: bt.maxInteger ?? Number.MAX_SAFE_INTEGER,
      });
    case "real": {
      const min = bt.minReal ?? -1e300;
      const max = bt.maxReal ?? 1e300;
      const intMin = Math.ceil(Math.max(min, -1e9));
      const intMax = Math.floor(Math.min(max, 1e9));
      // Subnormals are not valid OVSDB reals; map them to the nearest bound that is (or 0).
      const doubles = fc
        .double({ min, max, noNaN: true, noDefaultInfinity: true })
        .map((x) => (isNormal(x) ? x : min <= 0 && max >= 0 ? 0 : x > 0 ? max : min));
      // Whole numbers too: JSON writes 3.0 as 3, which must still decode as a real.
      return (intMin <= intMax ? fc.oneof(doubles, fc.integer({ min: intMin, max: intMax })) : doubles)
        .map(noNegativeZero)
        .filter((x) => x >= min && x <= max);
    }
    case "boolean":
      return fc.boolean();
    case "string":
      // Lengths count code points, like ovsdb-server; unit "binary" gives one code point per unit, astral ones too.
      return fc.string({
        unit: "binary",
        minLength: bt.minLength ?? 0,
        maxLength: Math.min(bt.maxLength ?? 16, 16),
      });
    case "uuid":
      return fc.uuid();
  }
}

/** The JavaScript object key of a map key atom. */
function keyString(a: Atom): string {
  return String(a);
}

function arbMapKey(bt: BaseType): fc.Arbitrary<Atom> {
  const plain = arbAtom(bt);
  // "__proto__" is a legal OVSDB string and must stay an ordinary key, not a prototype.
  const fits = bt.type === "string" && !bt.enum && (bt.minLength ?? 0) <= 9 && (bt.maxLength ?? 9) >= 9;
  return fits
    ? fc.oneof({ arbitrary: plain, weight: 6 }, { arbitrary: fc.constant("__proto__"), weight: 1 })
    : plain;
}

function arbValue(ct: ColumnType): fc.Arbitrary<Value> {
  switch (ct.kind) {
    case "scalar":
      return arbAtom(ct.key);
    case "optional":
      return fc.option(arbAtom(ct.key), { nil: null });
    case "set":
      return fc.uniqueArray(arbAtom(ct.key), { minLength: ct.min, maxLength: Math.min(ct.max, 8) });
    case "map": {
      const valueType = ct.value!;
      return fc
        .uniqueArray(fc.tuple(arbMapKey(ct.key), arbAtom(valueType)), {
          minLength: ct.min,
          maxLength: Math.min(ct.max, 8),
          selector: ([k]) => keyString(k),
        })
        .map((pairs) => Object.fromEntries(pairs.map(([k, v]) => [keyString(k), v])));
    }
  }
}

function arbColumnAndValues(
  kind: ColumnKind,
  keyType: AtomicType,
  valueType?: AtomicType,
): fc.Arbitrary<[ColumnType, Value, Value]> {
  return arbColumnType(kind, keyType, valueType).chain((ct) =>
    fc.tuple(fc.constant(ct), arbValue(ct), arbValue(ct)),
  );
}

/** Every kind over every atomic type, and every key/value pairing for maps. */
function everyColumnShape(): [string, ColumnKind, AtomicType, AtomicType | undefined][] {
  const shapes: [string, ColumnKind, AtomicType, AtomicType | undefined][] = [];
  for (const kind of ["scalar", "optional", "set"] as const) {
    for (const t of ATOMIC_TYPES) shapes.push([`${kind} ${t}`, kind, t, undefined]);
  }
  for (const k of ATOMIC_TYPES) {
    for (const v of ATOMIC_TYPES) shapes.push([`map ${k} -> ${v}`, "map", k, v]);
  }
  return shapes;
}

/** What goes over the socket: JSON text, so anything JSON cannot carry is lost here as it would be for real. */
function overTheWire(w: unknown): unknown {
  return JSON.parse(JSON.stringify(w));
}

// ---------------------------------------------------------------------------------------------------------------

describe("encodeValue and decodeValue", () => {
  for (const [name, kind, keyType, valueType] of everyColumnShape()) {
    test(`encoding then decoding a ${name} column value gives back the same value`, () => {
      fc.assert(
        fc.property(arbColumnAndValues(kind, keyType, valueType), ([ct, v]) => {
          const back = decodeValue(overTheWire(encodeValue(v, ct, { table: "T", column: "c" })), ct);
          assert.deepEqual(canonicalValue(back, ct), canonicalValue(v, ct));
        }),
        { numRuns: 150 },
      );
    });
  }

  test("uses the RFC 7047 wire notation for atoms, sets and maps", () => {
    const uuid = "2b8e4a0c-6f0e-4f57-9a0a-6a3e1d2c3b4a";
    const strings = parseColumnType({ key: "string", min: 0, max: "unlimited" }, "T.c");
    assert.deepEqual(encodeValue(["a"], strings), "a");
    assert.deepEqual(encodeValue(["a", "b"], strings), ["set", ["a", "b"]]);
    assert.deepEqual(encodeValue([], strings), ["set", []]);
    const ref = parseColumnType({ key: "uuid", min: 0, max: 1 }, "T.c");
    assert.deepEqual(encodeValue(uuid, ref), ["uuid", uuid]);
    assert.deepEqual(encodeValue(new NamedUuid("row1"), ref), ["named-uuid", "row1"]);
    assert.deepEqual(encodeValue(null, ref), ["set", []]);
    const flowTables = parseColumnType(
      { key: { type: "integer", minInteger: 0, maxInteger: 254 }, value: "uuid", min: 0, max: "unlimited" },
      "T.c",
    );
    assert.deepEqual(encodeValue({ "3": uuid }, flowTables), ["map", [[3, ["uuid", uuid]]]]);
    assert.deepEqual(decodeValue(["map", [[3, ["uuid", uuid]]]], flowTables), { "3": uuid });
  });

  test("empty sets and maps decode to the shared frozen empties", () => {
    assert.equal(
      decodeValue(["set", []], parseColumnType({ key: "string", min: 0, max: 5 }, "T.c")),
      EMPTY_SET,
    );
    assert.equal(
      decodeValue(
        ["map", []],
        parseColumnType({ key: "string", value: "string", min: 0, max: "unlimited" }, "T.c"),
      ),
      EMPTY_MAP,
    );
    assert.equal(decodeValue(["set", []], parseColumnType({ key: "string", min: 0, max: 1 }, "T.c")), null);
  });
});

describe("validation errors name the column and the reason", () => {
  const nb: DatabaseSchema = parseSchema(JSON.parse(readFileSync("/usr/share/ovn/ovn-nb.ovsschema", "utf8")));
  const vswitch: DatabaseSchema = parseSchema(
    JSON.parse(readFileSync("/usr/share/openvswitch/vswitch.ovsschema", "utf8")),
  );

  function encodeInto(s: DatabaseSchema, table: string, column: string, v: unknown): unknown {
    const c = s.tables.get(table)?.columns.get(column);
    assert.ok(c);
    return encodeValue(v, c.type, { table, column });
  }

  function rejects(fn: () => unknown, table: string, column: string, reason: RegExp): void {
    assert.throws(fn, (e: unknown) => {
      assert.ok(e instanceof ValueError, `a ValueError, got ${e}`);
      assert.equal(e.table, table);
      assert.equal(e.column, column);
      assert.ok(e.message.startsWith(`${table}.${column}: `), e.message);
      assert.match(e.message, reason);
      return true;
    });
  }

  test("a value of the wrong type", () => {
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "name", 5),
      "Logical_Switch_Port",
      "name",
      /expected a string/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "tag", "7"),
      "Logical_Switch_Port",
      "tag",
      /expected an integer/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "tag", 1.5),
      "Logical_Switch_Port",
      "tag",
      /expected an integer/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch", "ports", ["not-a-uuid"]),
      "Logical_Switch",
      "ports",
      /expected a UUID or a NamedUuid/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "type", ["a"]),
      "Logical_Switch_Port",
      "type",
      /single value/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "external_ids", { k: 1 }),
      "Logical_Switch_Port",
      "external_ids",
      /expected a string/,
    );
  });

  test("an integer out of range", () => {
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "tag", 4096),
      "Logical_Switch_Port",
      "tag",
      /4096 is above the maximum 4095/,
    );
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "tag", 0),
      "Logical_Switch_Port",
      "tag",
      /0 is below the minimum 1/,
    );
    rejects(() => encodeInto(nb, "QoS", "bandwidth", { rate: 0 }), "QoS", "bandwidth", /below the minimum 1/);
    assert.deepEqual(encodeInto(nb, "Logical_Switch_Port", "tag", 4095), 4095);
  });

  test("any integer outside the declared range is rejected", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1000, max: 1000 }),
        fc.nat(1000),
        fc.oneof(
          fc.integer({ min: 1, max: 1e9 }).map((d) => -d),
          fc.integer({ min: 1, max: 1e9 }),
        ),
        (lo, span, offset) => {
          const ct = parseColumnType(
            { key: { type: "integer", minInteger: lo, maxInteger: lo + span } },
            "T.c",
          );
          const v = offset < 0 ? lo + offset : lo + span + offset;
          rejects(
            () => encodeValue(v, ct, { table: "T", column: "c" }),
            "T",
            "c",
            /is (below the minimum|above the maximum)/,
          );
        },
      ),
    );
  });

  test("a value outside the enumeration", () => {
    rejects(
      () => encodeInto(nb, "ACL", "action", "permit"),
      "ACL",
      "action",
      /"permit" is not one of "allow", /,
    );
    rejects(
      () => encodeInto(nb, "QoS", "bandwidth", { speed: 5 }),
      "QoS",
      "bandwidth",
      /"speed" is not one of "rate", "burst"/,
    );
  });

  test("a string longer than allowed, counted in characters as ovsdb-server does", () => {
    rejects(
      () => encodeInto(nb, "ACL", "name", "x".repeat(64)),
      "ACL",
      "name",
      /is longer than 63 characters/,
    );
    rejects(
      () => encodeInto(nb, "ACL", "name", "é".repeat(64)),
      "ACL",
      "name",
      /is longer than 63 characters/,
    );
    // 63 characters but 126 bytes in UTF-8: ovsdb-server 3.1 accepts it.
    assert.equal(encodeInto(nb, "ACL", "name", "é".repeat(63)), "é".repeat(63));
  });

  test("string lengths are counted in code points: a surrogate pair is one, a lone surrogate is one", () => {
    const bt = (n: number) => ({ type: "string" as const, maxLength: n });
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" })), (s) => {
        const n = [...s].length;
        validateAtom(s, bt(n));
        assert.throws(() => validateAtom(s, { type: "string", minLength: n + 1 }), ValueError);
        if (n > 0) assert.throws(() => validateAtom(s, bt(n - 1)), ValueError);
      }),
    );
    // A lone high surrogate at the end, a lone low one first, and a pair.
    validateAtom("a\ud800", bt(2));
    validateAtom("\udc00a", bt(2));
    assert.throws(() => validateAtom("\ud83d\ude00x", bt(1)), ValueError);
    validateAtom("\ud83d\ude00x", bt(2));
  });

  test("too many or too few set elements", () => {
    rejects(
      () => encodeInto(vswitch, "Flow_Table", "prefixes", ["a", "b", "c", "d"]),
      "Flow_Table",
      "prefixes",
      /holds 0 to 3 elements, got 4/,
    );
    rejects(() => encodeInto(nb, "Meter", "bands", []), "Meter", "bands", /elements, got 0/);
    rejects(
      () => encodeInto(nb, "Logical_Switch_Port", "tag", [1, 2]),
      "Logical_Switch_Port",
      "tag",
      /got 2/,
    );
    // Partial values (mutate, includes) skip the cardinality check.
    assert.deepEqual(
      encodeValue(["a", "b", "c", "d"], vswitch.tables.get("Flow_Table")!.columns.get("prefixes")!.type, {
        cardinality: false,
      }),
      ["set", ["a", "b", "c", "d"]],
    );
  });
});

describe("NamedUuid", () => {
  test("accepts identifiers", () => {
    for (const name of ["row1", "_x", "A", "ls_port_0"]) assert.equal(new NamedUuid(name).name, name);
    assert.equal(JSON.stringify(new NamedUuid("row1")), '["named-uuid","row1"]');
  });

  test("rejects names that are not identifiers, including UUIDs", () => {
    for (const name of ["", "a-b", "2b8e4a0c-6f0e-4f57-9a0a-6a3e1d2c3b4a", "1abc", "a b", "é"]) {
      assert.throws(() => new NamedUuid(name), ValueError, name);
    }
  });

  test("rejects any name containing a character outside [A-Za-z0-9_]", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 5 }),
        fc.string({ unit: "binary", minLength: 1, maxLength: 1 }).filter((c) => !/[A-Za-z0-9_]/.test(c)),
        fc.string({ maxLength: 5 }),
        (a, bad, b) => {
          assert.throws(() => new NamedUuid(`x${a}${bad}${b}`), ValueError);
        },
      ),
    );
  });
});

// ---------------------------------------------------------------------------------------------------------------
// A reference update2 "modify" diff, written from the ovsdb-server(7) rules independently of datum.ts.

function wireAtom(a: Atom, bt: BaseType): unknown {
  return bt.type === "uuid" ? ["uuid", a] : a;
}

// ovsdb-server refuses subnormal reals, and encodeValue with it (tested below).
function isNormal(x: number): boolean {
  return x === 0 || Math.abs(x) >= 2.2250738585072014e-308;
}

test("a subnormal real is refused with a ValueError, as ovsdb-server's parser refuses it", () => {
  const ct = parseColumnType("real", "T.r");
  assert.throws(() => encodeValue(5e-324, ct, { table: "T", column: "r" }), /T\.r: .*subnormal/);
  assert.equal(encodeValue(2.2250738585072014e-308, ct), 2.2250738585072014e-308);
});

function keyAtom(k: string, bt: BaseType): Atom {
  if (bt.type === "integer" || bt.type === "real") return Number(k);
  if (bt.type === "boolean") return k === "true";
  return k;
}

function referenceDiff(oldV: Value, newV: Value, ct: ColumnType): unknown {
  // Observed on ovsdb-server 3.1: a column holding at most one element (max 1) is sent as its new value.
  if (ct.max === 1) return encodeValue(newV, ct);
  switch (ct.kind) {
    case "scalar":
      // A scalar column's diff is its new value.
      return wireAtom(newV as Atom, ct.key);
    case "optional":
    case "set": {
      // A set's diff is the symmetric difference.
      const toArray = (v: Value): Atom[] => (v === null ? [] : Array.isArray(v) ? v : [v as Atom]);
      const o = toArray(oldV);
      const n = toArray(newV);
      const sym = [...o.filter((x) => !n.includes(x)), ...n.filter((x) => !o.includes(x))].map((x) =>
        wireAtom(x, ct.key),
      );
      return sym.length === 1 ? sym[0] : ["set", sym];
    }
    case "map": {
      // Pairs removed (with their old value), plus pairs added or changed (with their new value).
      const o = oldV as Readonly<Record<string, Atom>>;
      const n = newV as Readonly<Record<string, Atom>>;
      const pairs: [string, Atom][] = [];
      for (const k of Object.keys(o)) if (!Object.hasOwn(n, k)) pairs.push([k, o[k]!]);
      for (const k of Object.keys(n)) if (!Object.hasOwn(o, k) || o[k] !== n[k]) pairs.push([k, n[k]!]);
      return ["map", pairs.map(([k, v]) => [wireAtom(keyAtom(k, ct.key), ct.key), wireAtom(v, ct.value!)])];
    }
  }
}

describe("applyDiff", () => {
  for (const [name, kind, keyType, valueType] of everyColumnShape()) {
    test(`applying the update2 diff between two ${name} values to the old one gives the new one`, () => {
      fc.assert(
        fc.property(arbColumnAndValues(kind, keyType, valueType), ([ct, oldV, newV]) => {
          // The cache holds what decodeValue made of the server's earlier update.
          const cached = decodeValue(overTheWire(encodeValue(oldV, ct)), ct);
          const updated = applyDiff(cached, overTheWire(referenceDiff(oldV, newV, ct)), ct);
          assert.deepEqual(canonicalValue(updated, ct), canonicalValue(newV, ct));
        }),
        { numRuns: 150 },
      );
    });
  }

  test("a map diff removes a pair whose value matches, replaces a changed one and adds a new one", () => {
    const ct = parseColumnType({ key: "string", value: "string", min: 0, max: "unlimited" }, "T.c");
    const updated = applyDiff(
      { keep: "1", gone: "2", changed: "3" },
      [
        "map",
        [
          ["gone", "2"],
          ["changed", "4"],
          ["added", "5"],
        ],
      ],
      ct,
    );
    assert.deepEqual(canonicalValue(updated, ct), [
      ["added", "5"],
      ["changed", "4"],
      ["keep", "1"],
    ]);
  });

  test("a chain of set diffs around the indexed size keeps values, and membership answers, right", () => {
    const ct = parseColumnType({ key: "integer", min: 0, max: "unlimited" }, "T.c");
    // Each step toggles a few elements (a diff may list one twice: no change), on sets up to 3× INDEXED_MIN.
    const step = fc.array(fc.integer({ min: 0, max: 3 * INDEXED_MIN }), {
      minLength: 1,
      maxLength: 6,
      size: "max",
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 200, size: "max" }), (steps) => {
        // Start just above the indexed size, so the chain crosses it both ways.
        const start = Array.from({ length: INDEXED_MIN + 4 }, (_, i) => i);
        const model = new Set<number>(start);
        let cur: Value = applyDiff(EMPTY_SET, ["set", start], ct);
        const history: [readonly number[], number[]][] = [];
        for (const toggles of steps) {
          const before = cur as readonly number[];
          const snapshot = [...before];
          cur = applyDiff(cur, toggles.length === 1 ? toggles[0] : ["set", toggles], ct);
          const counts = new Map<number, number>();
          for (const x of toggles) counts.set(x, (counts.get(x) ?? 0) + 1);
          for (const [x, n] of counts) if (n % 2 === 1 && !model.delete(x)) model.add(x);
          assert.deepEqual([...before], snapshot, "the old value is never mutated");
          const arr = cur as readonly number[];
          assert.deepEqual(
            [...arr].sort((a, b) => a - b),
            [...model].sort((a, b) => a - b),
          );
          for (const x of [...counts.keys(), -1, 3 * INDEXED_MIN + 1])
            assert.equal(setHas(arr, x), model.has(x), `membership of ${x}`);
          history.push([arr, [...model]]);
        }
        // Superseded values still answer for themselves.
        assert.ok(
          history.some(([arr]) => arr.length >= INDEXED_MIN),
          "the chain reached the indexed size",
        );
        for (const [arr, members] of history.slice(-5))
          for (const x of [...members.slice(0, 3), -1]) assert.equal(setHas(arr, x), members.includes(x));
      }),
      { numRuns: 60 },
    );
  });

  test("a set diff that removes the last element leaves the shared empty set", () => {
    const ct = parseColumnType({ key: "integer", min: 0, max: "unlimited" }, "T.c");
    assert.equal(applyDiff([7], 7, ct), EMPTY_SET);
  });

  test("a map key named __proto__ is an ordinary key, not a prototype", () => {
    const ct = parseColumnType({ key: "string", value: "string", min: 0, max: "unlimited" }, "T.c");
    const decoded = decodeValue(["map", [["__proto__", "x"]]], ct) as Record<string, Atom>;
    assert.deepEqual(Object.keys(decoded), ["__proto__"]);
    const updated = applyDiff(decoded, ["map", [["__proto__", "y"]]], ct) as Record<string, Atom>;
    assert.deepEqual(Object.entries(updated), [["__proto__", "y"]]);
    assert.equal(applyDiff(updated, ["map", [["__proto__", "y"]]], ct), EMPTY_MAP);
  });
});

test("a string's length is counted in code points: a surrogate pair is one, a lone surrogate is one", () => {
  const ct = (min: number, max: number) =>
    parseColumnType({ key: { type: "string", minLength: min, maxLength: max } }, "T.c");
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 8 }), (s) => {
      const n = [...s].length;
      assert.equal(encodeValue(s, ct(n, n)), s);
      if (n > 0) assert.throws(() => encodeValue(s, ct(0, n - 1)), ValueError);
      assert.throws(() => encodeValue(s, ct(n + 1, n + 2)), ValueError);
    }),
  );
  assert.equal(encodeValue("a\u{1F600}\uD800", ct(3, 3)), "a\u{1F600}\uD800");
  assert.throws(() => encodeValue("\uDC00\uD800", ct(0, 1)), ValueError);
});

describe("valuesEqual", () => {
  const reference = (a: Value, b: Value, ct: ColumnType) =>
    JSON.stringify(canonicalValue(a, ct)) === JSON.stringify(canonicalValue(b, ct));
  const atom: fc.Arbitrary<Atom> = fc.oneof(
    fc.constantFrom<Atom>("a", "b", "", "1", "01", "__proto__"),
    fc.constantFrom<Atom>(0, 1, 1.5, -2, true, false),
    fc.constantFrom("x", "y").map((n) => new NamedUuid(n)),
  );
  const key = fc.constantFrom("a", "b", "1", "01", "1.0", "true", "__proto__");
  const map = fc.array(fc.tuple(key, atom), { maxLength: 4 }).map((pairs) => {
    const m: Record<string, Atom> = {};
    for (const [k, v] of pairs)
      Object.defineProperty(m, k, { value: v, enumerable: true, writable: true, configurable: true });
    return m as Value;
  });
  const base = (type: AtomicType): BaseType => ({ type });
  const types = fc.constantFrom<AtomicType>("string", "uuid", "integer", "real", "boolean");

  test("agrees with comparing canonical forms, for every kind of column and value", () => {
    fc.assert(
      fc.property(types, types, map, map, (kt, vt, a, b) => {
        const ct: ColumnType = { key: base(kt), value: base(vt), min: 0, max: Infinity, kind: "map" };
        assert.equal(valuesEqual(a, b, ct), reference(a, b, ct));
        assert.equal(valuesEqual(a, { ...(a as object) } as Value, ct), reference(a, a, ct));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(types, fc.array(atom, { maxLength: 4 }), fc.array(atom, { maxLength: 4 }), (kt, a, b) => {
        const ct: ColumnType = { key: base(kt), min: 0, max: Infinity, kind: "set" };
        assert.equal(valuesEqual(a, b, ct), reference(a, b, ct));
        assert.equal(valuesEqual(a, [...a].reverse(), ct), reference(a, [...a].reverse(), ct));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(types, fc.option(atom), fc.option(atom), fc.boolean(), (kt, a, b, optional) => {
        const kind = optional ? "optional" : "scalar";
        const ct: ColumnType = { key: base(kt), min: optional ? 0 : 1, max: 1, kind };
        assert.equal(valuesEqual(a, b, ct), reference(a, b, ct));
      }),
      { numRuns: 2000 },
    );
  });
});
