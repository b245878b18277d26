// docs/configuration.md's controller and node agent settings tables are the ones generated from the programs'
// settings tables, and every variable the chart's templates set is one of those the programs read.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { NODE_SETTINGS } from "../../../src/agent/config.ts";
import { CONTROLLER_SETTINGS } from "../../../src/config/controller-config.ts";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { settingsTable, updatedSettingsDoc } from "../../../tools/settings-doc.ts";

const doc = () => readFileSync(join(repoRoot, "docs", "configuration.md"), "utf8");

describe("docs/configuration.md settings tables", () => {
  it("are up to date with the controller's and the node agent's settings (make docs-chart)", () => {
    const d = doc();
    assert.ok(updatedSettingsDoc(d) === d, "a settings table is stale: run make docs-chart");
  });

  it("list every setting of both programs with its key, variable and flag", () => {
    const d = doc();
    for (const s of [...CONTROLLER_SETTINGS, ...NODE_SETTINGS])
      assert.ok(
        d.includes(`| \`${s.key}\` | \`${s.env}\` | \`--${s.flag}\` |`),
        `${s.env} is not documented`,
      );
  });

  it("render one row per setting with its allowed values and default", () => {
    const table = settingsTable([
      {
        key: "a.b",
        env: "ZSTACK_B",
        flag: "b",
        kind: { type: "enum", values: ["x", "y"] },
        default: "x",
        doc: "B.",
      },
      {
        key: "a.n",
        env: "ZSTACK_N",
        flag: "n",
        kind: { type: "int", min: 1, max: 3 },
        default: undefined,
        doc: "N|",
      },
    ]);
    assert.deepEqual(table.split("\n").slice(2), [
      "| `a.b` | `ZSTACK_B` | `--b` | `x`, `y` | `x` | B. |",
      "| `a.n` | `ZSTACK_N` | `--n` | 1–3 | see description | N\\| |",
    ]);
  });
});

describe("the chart's environment variables", () => {
  it("are each read by the controller or the node agent, so none is documented nowhere", () => {
    const known = new Set([...CONTROLLER_SETTINGS, ...NODE_SETTINGS].map((s) => s.env));
    const templates = join(repoRoot, "deploy", "helm", "zstack-ovn-kubernetes", "templates");
    const unknown: string[] = [];
    for (const f of readdirSync(templates)) {
      const text = readFileSync(join(templates, f), "utf8");
      for (const [, name = ""] of text.matchAll(/name: (ZSTACK_[A-Z0-9_]+)/g))
        if (!known.has(name)) unknown.push(`${f}: ${name}`);
    }
    assert.deepEqual(unknown, []);
  });
});
