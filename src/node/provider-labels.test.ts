import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { bridgeMappingsValue, parseBridgeMappings } from "./provider-bridges.ts";
import { hostInterfacesFrom, type ProviderGuard, unknownProviderGuard } from "./provider-guard.ts";
import {
  configuredMappingProblems,
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

describe("provider labels against the node's interfaces and bridges", () => {
  const guard: ProviderGuard = {
    hostInterfaces: hostInterfacesFrom(
      [
        { ifname: "lo", addr_info: [{ local: "127.0.0.1", prefixlen: 8, scope: "host" }] },
        {
          ifname: "eth0",
          addr_info: [
            { local: "192.168.200.11", prefixlen: 24, scope: "global" },
            { local: "fe80::1", prefixlen: 64, scope: "link" },
          ],
        },
        { ifname: "eth1", addr_info: [{ local: "fe80::2", prefixlen: 64, scope: "link" }] },
        { ifname: "ens3", altnames: ["enp0s3"], addr_info: [] },
        { ifname: "br-phy", addr_info: [{ local: "10.0.0.11", prefixlen: 24, scope: "global" }] },
      ],
      [
        { dst: "default", dev: "eth0" },
        { dst: "fe80::/64", dev: "eth1" },
        { dst: "ff00::/8", dev: "eth1", type: "multicast" },
        { dst: "10.9.0.0/16", nexthops: [{ dev: "eth3" }] },
        { dst: "10.8.0.0/16", dev: "ens3" },
      ],
    ),
    reservedBridges: new Map([
      ["br-int", "is OVN's integration bridge"],
      ["br-phy", "is the node's underlay bridge (it holds the node's address 10.0.0.11/24)"],
    ]),
    bridgeUplinks: new Map([["br-admin", ["eth2"]]]),
  };
  const withGuard = (labels: Record<string, string>) =>
    providerMappingsFromLabels("w1", labels, configured, guard);

  test("the interfaces holding an address or a route, never the loopback nor a link-local address or route", () => {
    assert.deepEqual([...guard.hostInterfaces.keys()].sort(), ["br-phy", "enp0s3", "ens3", "eth0", "eth3"]);
    assert.equal(
      guard.hostInterfaces.get("enp0s3"),
      "carries the node's route 10.8.0.0/16",
      "an altname too",
    );
    assert.equal(guard.hostInterfaces.get("eth0"), "holds the node's address 192.168.200.11/24");
    assert.equal(guard.hostInterfaces.get("eth3"), "carries the node's route 10.9.0.0/16");
  });

  test("an uplink holding the node's address or route is refused with its bridge label; the configured entry stays", () => {
    for (const nic of ["eth0", "eth3", "enp0s3"]) {
      const r = withGuard({ [`${B}physnet1`]: "br-p1", [`${U}physnet1`]: nic });
      assert.deepEqual(r.mappings, configured);
      assert.equal(r.fromLabels, false);
      assert.equal(r.problems.length, 1);
      assert.match(
        r.problems[0] as string,
        new RegExp(
          `^Node label ${U.replace(/\./g, "\\.")}physnet1="${nic}": ${nic} .*cut the node off.*node\\.bridgeMappings' entry applies$`,
        ),
      );
    }
    const ok = withGuard({ [`${B}physnet1`]: "br-p1", [`${U}physnet1`]: "eth1" });
    assert.deepEqual(ok.problems, []);
    assert.equal(bridgeMappingsValue(ok.mappings), "physnet1:br-p1,flat:br-flat");
  });

  test("the underlay bridge is refused; a bridge with its own uplink is used as it is, never given a second", () => {
    const under = withGuard({ [`${B}vlan9`]: "br-phy" });
    assert.deepEqual(under.mappings, configured);
    assert.match(under.problems[0] as string, /br-phy is the node's underlay bridge/);
    const asIs = withGuard({ [`${B}vlan9`]: "br-admin" });
    assert.deepEqual(asIs.problems, []);
    assert.equal(bridgeMappingsValue(asIs.mappings), "physnet1:br-admin,flat:br-flat,vlan9:br-admin");
    const second = withGuard({ [`${B}vlan9`]: "br-admin", [`${U}vlan9`]: "eth1" });
    assert.deepEqual(second.mappings, configured);
    assert.match(
      second.problems[0] as string,
      /bridge br-admin already has the uplink eth2; a second one would loop/,
    );
    assert.deepEqual(withGuard({ [`${B}vlan9`]: "br-admin", [`${U}vlan9`]: "eth2" }).problems, []);
  });

  test("the node's addresses unknown: no uplink is taken from a label", () => {
    const r = providerMappingsFromLabels(
      "w1",
      { [`${B}vlan9`]: "br-v9", [`${U}vlan9`]: "eth1" },
      configured,
      unknownProviderGuard("ip: permission denied"),
    );
    assert.deepEqual(r.mappings, configured);
    assert.match(r.problems[0] as string, /cannot be read \(ip: permission denied\)/);
  });

  test("node.bridgeMappings: an uplink holding the node's address is an error naming the setting", () => {
    assert.deepEqual(
      configuredMappingProblems(parseBridgeMappings("physnet1:br-p:eth1"), guard.hostInterfaces),
      [],
    );
    const [p] = configuredMappingProblems(parseBridgeMappings("physnet1:br-p:eth0"), guard.hostInterfaces);
    assert.match(
      p as string,
      /^node\.bridgeMappings entry physnet1:br-p:eth0: uplink eth0 holds the node's address/,
    );
  });
});
