import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { bridgeMappingsValue, parseBridgeMappings } from "./provider-bridges.ts";
import {
  PROVIDER_BRIDGE_LABEL,
  PROVIDER_UPLINK_LABEL,
  providerMappingsFromLabels,
} from "./provider-labels.ts";

const B = PROVIDER_BRIDGE_LABEL;
const U = PROVIDER_UPLINK_LABEL;
const configured = parseBridgeMappings("physnet1:br-admin,flat:br-flat");
const text = (labels: Record<string, string> | undefined) =>
  bridgeMappingsValue(providerMappingsFromLabels("w1", labels, configured).mappings);

describe("provider mappings from Node labels", () => {
  test("without provider labels node.bridgeMappings applies as it is; other labels are ignored", () => {
    const r = providerMappingsFromLabels(
      "w1",
      { "kubernetes.io/hostname": "w1", "provider.example.com/x": "y" },
      configured,
    );
    assert.deepEqual(r, { mappings: configured, fromLabels: false, problems: [] });
    assert.equal(text(undefined), "physnet1:br-admin,flat:br-flat");
  });

  test("a label replaces the configured entry of its provider in place and adds new providers, with an uplink label", () => {
    const r = providerMappingsFromLabels(
      "w1",
      { [`${B}physnet1`]: "br-p1", [`${U}physnet1`]: "eth1", [`${B}vlan200`]: "br-v" },
      configured,
    );
    assert.deepEqual(r.problems, []);
    assert.equal(r.fromLabels, true);
    assert.deepEqual(r.mappings, [
      { provider: "physnet1", bridge: "br-p1", uplink: "eth1" },
      { provider: "flat", bridge: "br-flat" },
      { provider: "vlan200", bridge: "br-v" },
    ]);
  });

  test("a bad label is left out with a problem naming the label and the fix; the others apply", () => {
    const r = providerMappingsFromLabels(
      "w1",
      {
        [`${B}physnet2`]: "br-int",
        [`${B}physnet3`]: "a-bridge-name-too-long",
        [`${U}physnet4`]: "eth4",
        [`${B}bad name`]: "br-x",
        [`${B}ok`]: "br-ok",
      },
      configured,
    );
    assert.equal(text(undefined), "physnet1:br-admin,flat:br-flat");
    assert.equal(bridgeMappingsValue(r.mappings), "physnet1:br-admin,flat:br-flat,ok:br-ok");
    assert.equal(r.problems.length, 4, r.problems.join("\n"));
    const find = (k: string) => r.problems.find((p) => p.includes(k)) ?? "";
    assert.match(
      find(`${B}physnet2=`),
      /br-int is OVN's integration bridge; set it as in kubectl label node w1 provider\.network\.zstack\.io\/physnet2=br-provider --overwrite/,
    );
    assert.match(find(`${B}physnet3=`), /bridge name is 22 bytes long; Linux allows at most 15/);
    assert.match(
      find(`${U}physnet4=`),
      /no label provider\.network\.zstack\.io\/physnet4 names its bridge; add it/,
    );
    assert.match(find(`${B}bad name=`), /"bad name" is not a provider network name/);
  });

  test("labels that break node.bridgeMappings' rules together are left out altogether, naming the rule", () => {
    const r = providerMappingsFromLabels(
      "w1",
      { [`${B}a`]: "br-a", [`${U}a`]: "eth1", [`${B}b`]: "br-b", [`${U}b`]: "eth1" },
      configured,
    );
    assert.deepEqual(r.mappings, configured);
    assert.equal(r.fromLabels, false);
    assert.match(
      r.problems[0] ?? "",
      /left out, node\.bridgeMappings alone applies: .*uplink eth1 is named twice/,
    );
  });

  test("property: any labels give mappings that pass node.bridgeMappings' parser, and every provider label is applied or named in a problem", () => {
    const name = fc.stringMatching(/^[A-Za-z0-9_.:@ -]{0,18}$/);
    const key = fc.tuple(fc.constantFrom(B, U, "x/"), name).map(([p, n]) => `${p}${n}`);
    fc.assert(
      fc.property(fc.dictionary(key, name, { maxKeys: 8 }), (labels) => {
        const r = providerMappingsFromLabels("w1", labels, configured);
        const full = r.mappings.map((m) => `${m.provider}:${m.bridge}${m.uplink ? `:${m.uplink}` : ""}`);
        assert.deepEqual(parseBridgeMappings(full.join(",")), r.mappings, "valid as node.bridgeMappings");
        for (const k of Object.keys(labels)) {
          if (!k.startsWith(B)) continue;
          const provider = k.slice(B.length);
          const applied = r.mappings.some((m) => m.provider === provider && m.bridge === labels[k]);
          assert.ok(applied || r.problems.length > 0, `label ${k} neither applied nor reported`);
        }
      }),
      { numRuns: 300 },
    );
  });
});
