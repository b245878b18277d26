// docs/configuration.md's chart values table is the one generated from values.schema.json and values.yaml.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { chartValuesTable, updatedDoc } from "../../../tools/chart-values-doc.ts";

describe("docs/configuration.md chart values", () => {
  it("is up to date with the schema and the defaults (make docs-chart)", () => {
    const doc = readFileSync(join(repoRoot, "docs", "configuration.md"), "utf8");
    assert.ok(updatedDoc(doc) === doc, "the chart values table is stale: run make docs-chart");
  });

  it("has one row per leaf value, with its default and the schema's allowed values", () => {
    const table = chartValuesTable(
      {
        $defs: { cidrs: { type: "string", description: "shared" } },
        properties: {
          a: { type: "object", properties: { b: { enum: ["x", "y"], description: "B." } } },
          c: { $ref: "#/$defs/cidrs", description: "own" },
          n: { type: "integer", minimum: 1, maximum: 3 },
        },
      },
      { a: { b: "x" }, c: "10.0.0.0/8", n: 2 },
    );
    assert.deepEqual(table.split("\n").slice(2), [
      "| `a.b` | `x` | `x`, `y` | B. |",
      "| `c` | `10.0.0.0/8` | CIDR, or IPv4,IPv6 pair | own |",
      "| `n` | `2` | 1–3 |  |",
    ]);
  });
});
