// docs/configuration.md's chart values table is the one generated from values.schema.json and values.yaml.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { load as loadYaml } from "js-yaml";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { chartValuesTable, updatedDoc } from "../../../tools/chart-values-doc.ts";

// Seed 000 §8.1, the Helm values every install of this plugin is expected to take.
const SEED_KEYS = [
  "ovn.mode",
  "ovn.nbdbAddress",
  "ovn.sbdbAddress",
  "ovn.ssl.enabled",
  "ovn.ssl.caCert",
  "ovn.ssl.clientCert",
  "ovn.ssl.clientKey",
  "ovn.standalone.haMode",
  "ovn.standalone.image.repository",
  "ovn.standalone.image.tag",
  "ovn.standalone.nbdb.replicas",
  "ovn.standalone.nbdb.storage.enabled",
  "ovn.standalone.nbdb.storage.size",
  "ovn.standalone.sbdb.replicas",
  "ovn.standalone.sbdb.storage.enabled",
  "ovn.standalone.sbdb.storage.size",
  "ovn.standalone.northd.replicas",
  "network.clusterCIDR",
  "network.serviceCIDR",
  "network.nodeSubnetSize",
  "network.mtu",
  "gateway.mode",
  "gateway.interface",
  "tunnel.type",
  "tunnel.port",
  "dpdk.enabled",
  "dpdk.socketDir",
  "controller.replicas",
  "controller.image.repository",
  "controller.image.tag",
  "controller.resources.limits.cpu",
  "controller.resources.limits.memory",
  "node.image.repository",
  "node.image.tag",
  "node.resources.limits.cpu",
  "node.resources.limits.memory",
  "logging.level",
  "logging.format",
];

describe("values.yaml", () => {
  it("carries every key of seed §8.1, and the docs table lists each", () => {
    const values = loadYaml(
      readFileSync(join(repoRoot, "deploy", "helm", "zstack-ovn-kubernetes", "values.yaml"), "utf8"),
    );
    const doc = readFileSync(join(repoRoot, "docs", "configuration.md"), "utf8");
    for (const key of SEED_KEYS) {
      let node: unknown = values;
      for (const part of key.split(".")) node = (node as Record<string, unknown> | undefined)?.[part];
      assert.notEqual(node, undefined, `values.yaml has no ${key}`);
      const documented =
        key.startsWith("controller.resources") || key.startsWith("node.resources")
          ? key.split(".").slice(0, 2).join(".")
          : key;
      assert.ok(doc.includes(`| \`${documented}\` |`), `docs/configuration.md does not list ${documented}`);
    }
  });
});

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
