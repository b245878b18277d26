import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { PROVIDER_NAME_RE } from "../ipam/subnet-spec.ts";
import { chassisMac, chassisMacMappings } from "./chassis-mac.ts";

const MAC_RE = /^([0-9a-f]{2}):([0-9a-f]{2}(:[0-9a-f]{2}){4})$/;

describe("chassis MAC", () => {
  test("is a locally administered unicast MAC outside our 0a:58 prefix and ZStack's fa: VM prefix", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 64 }), (name) => {
        const m = MAC_RE.exec(chassisMac(name));
        assert.ok(m, chassisMac(name));
        const first = Number.parseInt(m[1] as string, 16);
        assert.equal(first & 0b10, 0b10, "locally administered");
        assert.equal(first & 0b1, 0, "unicast");
        assert.notEqual(first, 0x0a);
        assert.notEqual(first, 0xfa);
      }),
    );
  });

  test("is stable for a chassis name and differs between the names of a cluster's nodes", () => {
    assert.equal(chassisMac("k8s-node1"), chassisMac("k8s-node1"));
    const macs = new Set<string>();
    for (let i = 0; i < 5000; i++) macs.add(chassisMac(`k8s-node${i}`));
    assert.equal(macs.size, 5000);
  });

  test("mappings name every provider of ovn-bridge-mappings once, in order, with the chassis MAC", () => {
    const mac = chassisMac("k8s-n1");
    assert.equal(chassisMacMappings("flat:br-flat,vlan2:br-v", "k8s-n1"), `flat:${mac},vlan2:${mac}`);
    assert.equal(chassisMacMappings("", "k8s-n1"), "");
  });

  test("a provider that is not a valid name never reaches the mappings text", () => {
    const mac = chassisMac("k8s-n1");
    assert.equal(
      chassisMacMappings("flat:br-flat,bad=x:br-x, :br-y,a,b:br-b,-dash:br-d", "k8s-n1"),
      `flat:${mac},b:${mac}`,
    );
  });

  test("mappings text always parses back into provider:MAC pairs", () => {
    const provider = fc.stringMatching(PROVIDER_NAME_RE);
    fc.assert(
      fc.property(fc.array(provider, { maxLength: 6 }), fc.string(), (providers, chassis) => {
        const text = chassisMacMappings(providers.map((p) => `${p}:br-${p}`).join(","), chassis);
        const pairs = text === "" ? [] : text.split(",").map((e) => e.split(":"));
        assert.deepEqual(
          pairs.map((p) => p[0]),
          [...new Set(providers)],
        );
        for (const p of pairs) assert.match(p.slice(1).join(":"), MAC_RE);
      }),
    );
  });
});
