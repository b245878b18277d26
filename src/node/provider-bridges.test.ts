import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { BridgeMappingError, bridgeMappingsValue, parseBridgeMappings } from "./provider-bridges.ts";

function problems(text: string): readonly string[] {
  try {
    parseBridgeMappings(text, "M");
  } catch (e) {
    assert.ok(e instanceof BridgeMappingError, String(e));
    return e.problems;
  }
  assert.fail(`expected ${JSON.stringify(text)} to be refused`);
}

describe("node.bridgeMappings", () => {
  test("provider:bridge and provider:bridge:uplink entries parse in order; empty text is no provider", () => {
    assert.deepEqual(parseBridgeMappings(""), []);
    assert.deepEqual(parseBridgeMappings("  "), []);
    const m = parseBridgeMappings("physnet1:br-phy, physnet2:br-p2:eth1,physnet3:br-p2");
    assert.deepEqual(m, [
      { provider: "physnet1", bridge: "br-phy" },
      { provider: "physnet2", bridge: "br-p2", uplink: "eth1" },
      { provider: "physnet3", bridge: "br-p2" },
    ]);
    assert.equal(bridgeMappingsValue(m), "physnet1:br-phy,physnet2:br-p2,physnet3:br-p2");
  });

  test("every bad entry is reported at once, each naming the entry and the fix", () => {
    assert.deepEqual(
      problems("physnet1,physnet2:br-int,p:br-x:eth1,p:br-y,q:br-z:eth1,x:a:b:c,r:br-w:br-w"),
      [
        'M entry 1 "physnet1": write provider:bridge or provider:bridge:uplink, e.g. physnet1:br-provider:eth1',
        'M entry 2 "physnet2:br-int": br-int is OVN\'s integration bridge; name the bridge of the uplink',
        'M entry 4 "p:br-y": provider p is mapped twice; keep one entry',
        'M entry 5 "q:br-z:eth1": uplink eth1 is named twice; an interface can be on one bridge only',
        'M entry 6 "x:a:b:c": write provider:bridge or provider:bridge:uplink, e.g. physnet1:br-provider:eth1',
        'M entry 7 "r:br-w:br-w": the uplink cannot be the bridge itself',
      ],
    );
    assert.match(
      problems("p:br-x:eth1,q:br-x:eth2").join(),
      /bridge br-x is given two uplinks, eth1 and eth2/,
    );
    assert.match(problems("bad name:br-x").join(), /provider "bad name" is not a provider network name/);
    assert.match(
      problems("p:a-very-long-bridge-name").join(),
      /bridge "a-very-long-bridge-name" is 23 bytes long/,
    );
  });

  test("whatever the text, a parsed mapping holds only names that survive ovn-bridge-mappings and ovs-vsctl", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (text) => {
        let parsed: ReturnType<typeof parseBridgeMappings>;
        try {
          parsed = parseBridgeMappings(text);
        } catch (e) {
          assert.ok(e instanceof BridgeMappingError);
          return;
        }
        for (const m of parsed) {
          for (const name of [m.provider, m.bridge, m.uplink ?? "x"]) {
            assert.ok(!/[:,\s"'\\]/.test(name) && name !== "" && !name.startsWith("-"), name);
          }
        }
        // The value ovn-controller reads gives back exactly the providers and bridges.
        const back = bridgeMappingsValue(parsed)
          .split(",")
          .filter((x) => x !== "")
          .map((e) => e.split(":"));
        assert.deepEqual(
          back,
          parsed.map((m) => [m.provider, m.bridge]),
        );
      }),
      { numRuns: 2000 },
    );
  });
});
