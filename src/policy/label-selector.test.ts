import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { canonicalSelector, parseLabelSelector, selectorMatches } from "./label-selector.ts";

const sel = (raw: unknown) => parseLabelSelector(raw, "spec.podSelector");

describe("label selectors", () => {
  it("an absent or empty selector selects every pod, labelled or not", () => {
    for (const s of [undefined, null, {}, { matchLabels: {} }, { matchExpressions: [] }]) {
      assert.ok(selectorMatches(sel(s), {}));
      assert.ok(selectorMatches(sel(s), { app: "x" }));
    }
  });

  it("matchLabels requires every label with its value", () => {
    const s = sel({ matchLabels: { app: "web", tier: "fe" } });
    assert.ok(selectorMatches(s, { app: "web", tier: "fe", other: "1" }));
    assert.ok(!selectorMatches(s, { app: "web" }));
    assert.ok(!selectorMatches(s, { app: "web", tier: "be" }));
  });

  it("matchExpressions: In, NotIn (also true when the label is absent), Exists, DoesNotExist", () => {
    const inS = sel({ matchExpressions: [{ key: "env", operator: "In", values: ["a", "b"] }] });
    assert.ok(selectorMatches(inS, { env: "b" }));
    assert.ok(!selectorMatches(inS, { env: "c" }));
    assert.ok(!selectorMatches(inS, {}));
    const notIn = sel({ matchExpressions: [{ key: "env", operator: "NotIn", values: ["a"] }] });
    assert.ok(selectorMatches(notIn, {}));
    assert.ok(selectorMatches(notIn, { env: "b" }));
    assert.ok(!selectorMatches(notIn, { env: "a" }));
    const ex = sel({ matchExpressions: [{ key: "env", operator: "Exists" }] });
    assert.ok(selectorMatches(ex, { env: "" }));
    assert.ok(!selectorMatches(ex, {}));
    const dne = sel({ matchExpressions: [{ key: "env", operator: "DoesNotExist" }] });
    assert.ok(selectorMatches(dne, {}));
    assert.ok(!selectorMatches(dne, { env: "x" }));
  });

  it("matchLabels and matchExpressions combine with AND", () => {
    const s = sel({
      matchLabels: { app: "web" },
      matchExpressions: [{ key: "env", operator: "NotIn", values: ["prod"] }],
    });
    assert.ok(selectorMatches(s, { app: "web", env: "dev" }));
    assert.ok(!selectorMatches(s, { app: "web", env: "prod" }));
    assert.ok(!selectorMatches(s, { env: "dev" }));
  });

  it("the canonical text ignores order and duplicates, and equals matchLabels with the same In term", () => {
    const a = sel({ matchLabels: { b: "2", a: "1" } });
    const b = sel({
      matchExpressions: [{ key: "a", operator: "In", values: ["1"] }],
      matchLabels: { b: "2" },
    });
    const c = sel({
      matchExpressions: [
        { key: "b", operator: "In", values: ["2", "2"] },
        { key: "a", operator: "In", values: ["1"] },
      ],
    });
    assert.equal(canonicalSelector(a), canonicalSelector(b));
    assert.equal(canonicalSelector(a), canonicalSelector(c));
    assert.notEqual(canonicalSelector(a), canonicalSelector(sel({ matchLabels: { a: "1" } })));
  });

  it("bad selectors are refused naming the field", () => {
    const cases: [unknown, RegExp][] = [
      [
        { matchExpressions: [{ key: "a", operator: "Is", values: ["x"] }] },
        /spec\.podSelector\.matchExpressions\[0\]\.operator/,
      ],
      [
        { matchExpressions: [{ key: "a", operator: "In", values: [] }] },
        /matchExpressions\[0\]\.values: must not be empty/,
      ],
      [
        { matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] },
        /matchExpressions\[0\]\.values: must be empty/,
      ],
      [{ matchLabels: { "bad key!": "x" } }, /matchLabels\["bad key!"\]/],
      [{ matchLabels: { a: "bad value!" } }, /matchLabels\["a"\]/],
      [{ matchLabels: [] }, /spec\.podSelector\.matchLabels: must be a map/],
      ["x", /spec\.podSelector: must be an object/],
    ];
    for (const [raw, re] of cases) assert.throws(() => sel(raw), re);
  });

  it("matching agrees with a direct reading of each requirement (property)", () => {
    const key = fc.constantFrom("a", "b", "c");
    const value = fc.constantFrom("x", "y", "z");
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            key,
            operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist"),
            values: fc.uniqueArray(value, { minLength: 1 }),
          }),
          { maxLength: 4 },
        ),
        fc.dictionary(key, value),
        (exprs, labels) => {
          const raw = exprs.map((e) =>
            e.operator === "Exists" || e.operator === "DoesNotExist"
              ? { key: e.key, operator: e.operator }
              : e,
          );
          const expected = raw.every((e) => {
            const has = e.key in labels;
            if (e.operator === "In")
              return has && (e as { values: string[] }).values.includes(labels[e.key] as string);
            if (e.operator === "NotIn")
              return !has || !(e as { values: string[] }).values.includes(labels[e.key] as string);
            return e.operator === "Exists" ? has : !has;
          });
          assert.equal(selectorMatches(sel({ matchExpressions: raw }), labels), expected);
        },
      ),
    );
  });
});
