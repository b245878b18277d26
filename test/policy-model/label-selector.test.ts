import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { selects } from "./label-selector.ts";

describe("label selector (model)", () => {
  it("an empty selector selects everything, labelled or not", () => {
    assert.equal(selects({}, {}), true);
    assert.equal(selects({}, { a: "1" }), true);
  });
  it("matchLabels needs every pair", () => {
    assert.equal(selects({ matchLabels: { a: "1", b: "2" } }, { a: "1", b: "2", c: "3" }), true);
    assert.equal(selects({ matchLabels: { a: "1", b: "2" } }, { a: "1" }), false);
    assert.equal(selects({ matchLabels: { a: "1" } }, { a: "2" }), false);
  });
  it("In, NotIn, Exists and DoesNotExist as the API reference defines them; NotIn holds for a missing key", () => {
    const labels = { env: "prod", tier: "web" };
    assert.equal(
      selects({ matchExpressions: [{ key: "env", operator: "In", values: ["prod", "dev"] }] }, labels),
      true,
    );
    assert.equal(
      selects({ matchExpressions: [{ key: "env", operator: "In", values: ["dev"] }] }, labels),
      false,
    );
    assert.equal(
      selects({ matchExpressions: [{ key: "x", operator: "In", values: ["dev"] }] }, labels),
      false,
    );
    assert.equal(
      selects({ matchExpressions: [{ key: "env", operator: "NotIn", values: ["prod"] }] }, labels),
      false,
    );
    assert.equal(
      selects({ matchExpressions: [{ key: "env", operator: "NotIn", values: ["dev"] }] }, labels),
      true,
    );
    assert.equal(
      selects({ matchExpressions: [{ key: "x", operator: "NotIn", values: ["dev"] }] }, labels),
      true,
    );
    assert.equal(selects({ matchExpressions: [{ key: "tier", operator: "Exists" }] }, labels), true);
    assert.equal(selects({ matchExpressions: [{ key: "x", operator: "Exists" }] }, labels), false);
    assert.equal(selects({ matchExpressions: [{ key: "x", operator: "DoesNotExist" }] }, labels), true);
    assert.equal(selects({ matchExpressions: [{ key: "env", operator: "DoesNotExist" }] }, labels), false);
  });
  it("matchLabels and matchExpressions are ANDed", () => {
    const sel = {
      matchLabels: { env: "prod" },
      matchExpressions: [{ key: "tier", operator: "In" as const, values: ["db"] }],
    };
    assert.equal(selects(sel, { env: "prod", tier: "db" }), true);
    assert.equal(selects(sel, { env: "prod", tier: "web" }), false);
  });
  it("refuses requirements the API would refuse (In without values, Exists with values)", () => {
    assert.throws(
      () => selects({ matchExpressions: [{ key: "a", operator: "In", values: [] }] }, {}),
      /non-empty/,
    );
    assert.throws(
      () => selects({ matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] }, {}),
      /empty/,
    );
  });
});
