import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type ChassisCheck, chassisNameProblem, checkChassis, type SelfChassis } from "./external-chassis.ts";

const SELF: SelfChassis = {
  name: "k8s-node1",
  hostname: "node1",
  encapType: "vxlan",
  encapSetting: "tunnel.type",
};

type Row = { _uuid: string; name: string; hostname: string; encaps: string[] };
type EncapRow = { _uuid: string; type: "geneve" | "vxlan" | "stt"; ip: string; chassis_name: string };

function sb(chassis: { name: string; hostname: string; types: EncapRow["type"][] }[]): {
  rows: Row[];
  encaps: Map<string, EncapRow>;
} {
  const encaps = new Map<string, EncapRow>();
  const rows = chassis.map((c, i) => {
    const ids = c.types.map((type, j) => {
      const e = { _uuid: `e${i}-${j}`, type, ip: `192.168.200.${i + 1}`, chassis_name: c.name };
      encaps.set(e._uuid, e);
      return e._uuid;
    });
    return { _uuid: `c${i}`, name: c.name, hostname: c.hostname, encaps: ids };
  });
  return { rows, encaps };
}

const run = (chassis: Parameters<typeof sb>[0], self = SELF): ChassisCheck => {
  const { rows, encaps } = sb(chassis);
  return checkChassis(self, rows, encaps);
};

describe("the chassis name in External mode", () => {
  test("prefix + node name is accepted; empty, malformed, too long, IP-like and UUID-like names are refused", () => {
    assert.equal(chassisNameProblem("k8s-", "node1", "node.chassisPrefix"), undefined);
    assert.match(chassisNameProblem("", "node1", "P") ?? "", /^P is empty/);
    assert.match(chassisNameProblem("-x", "node1", "P") ?? "", /P="-x"/);
    assert.match(chassisNameProblem("k8s/", "node1", "P") ?? "", /P="k8s\/"/);
    assert.match(chassisNameProblem("k8s-", "n".repeat(61), "P") ?? "", /at most 64/);
    assert.match(chassisNameProblem("10.", "0.0.1", "P") ?? "", /looks like a ZStack host's/);
    assert.match(chassisNameProblem("0123456789", "abcdef0123456789abcdef", "P") ?? "", /ZStack UUID/);
  });
});

describe("the SB check of our chassis against ZStack's", () => {
  test("no chassis of our name: clear; ours (our hostname) after a restart: clear", () => {
    assert.deepEqual(run([{ name: "zstack-host-1", hostname: "192.168.200.11", types: ["vxlan"] }]), {});
    assert.deepEqual(
      run([
        { name: "zstack-host-1", hostname: "192.168.200.11", types: ["vxlan"] },
        { name: "k8s-node1", hostname: "node1", types: ["vxlan"] },
      ]),
      {},
    );
  });

  test("a chassis of our name with another hostname is a conflict naming both", () => {
    const c = run([{ name: "k8s-node1", hostname: "192.168.200.11", types: ["vxlan"] }]);
    assert.match(
      c.conflict ?? "",
      /chassis named k8s-node1 .*hostname is "192\.168\.200\.11".*this node \(node1\)/,
    );
    assert.match(c.conflict ?? "", /node\.chassisPrefix/);
    assert.equal(c.encapMismatch, undefined, "the conflicting row is not another chassis");
  });

  test("another chassis whose name or hostname is the node name (pod ports request it) is a conflict", () => {
    for (const other of [
      { name: "zstack-host-9", hostname: SELF.hostname },
      { name: SELF.hostname, hostname: "192.168.200.9" },
    ]) {
      const c = run([{ ...other, types: ["vxlan"] }]);
      assert.match(c.conflict ?? "", /answers to this node's name "node1"/);
      assert.match(c.conflict ?? "", /requested-chassis/);
    }
    // Ours (name and hostname) and a host with an unrelated hostname are no conflict.
    assert.deepEqual(
      run([
        { name: SELF.name, hostname: SELF.hostname, types: ["vxlan"] },
        { name: "zstack-host-1", hostname: "192.168.200.11", types: ["vxlan"] },
      ]),
      {},
    );
  });

  test("an OVS whose system-id names another chassis in SB (a ZStack host's own OVS) is a conflict; a stale id is not", () => {
    const { rows, encaps } = sb([{ name: "zstack-host-1", hostname: "192.168.200.11", types: ["vxlan"] }]);
    const c = checkChassis(SELF, rows, encaps, "zstack-host-1");
    assert.match(
      c.conflict ?? "",
      /already serves chassis zstack-host-1 \(hostname 192\.168\.200\.11\).*not rename/,
    );
    // A packaging's random system-id that no chassis in SB carries, or our own name, is no conflict.
    assert.deepEqual(checkChassis(SELF, rows, encaps, "6f1d2c7e-0000-4000-8000-000000000000"), {});
    assert.deepEqual(checkChassis(SELF, rows, encaps, SELF.name), {});
  });

  test("other chassis without our encapsulation: a mismatch naming both types and the setting", () => {
    const c = run([
      { name: "zstack-host-1", hostname: "192.168.200.11", types: ["geneve"] },
      { name: "zstack-host-2", hostname: "192.168.200.12", types: ["geneve"] },
      { name: "k8s-node1", hostname: "node1", types: ["vxlan"] },
    ]);
    assert.equal(c.conflict, undefined);
    assert.match(c.encapMismatch ?? "", /2 of 2 other chassis .*no vxlan .*tunnel\.type=vxlan/);
    assert.match(c.encapMismatch ?? "", /zstack-host-1 \(hostname 192\.168\.200\.11\) uses geneve/);
    assert.match(c.encapMismatch ?? "", /set tunnel\.type=geneve$/);
    // A chassis offering both types is compatible.
    assert.deepEqual(run([{ name: "h", hostname: "h", types: ["geneve", "vxlan"] }]), {});
  });

  test("property: a mismatch is reported exactly when some other chassis lacks our type", () => {
    const types = fc.subarray(["geneve", "vxlan", "stt"] as const, { minLength: 1 });
    fc.assert(
      fc.property(
        fc.array(fc.record({ n: fc.integer({ min: 0, max: 5 }), types }), { maxLength: 8 }),
        fc.constantFrom("vxlan" as const, "geneve" as const),
        (list, encapType) => {
          const chassis = list.map((c, i) => ({
            name: `h${i}-${c.n}`,
            hostname: `10.0.0.${i}`,
            types: [...c.types],
          }));
          const c = run(chassis, { ...SELF, encapType });
          const lacking = chassis.filter((x) => !x.types.includes(encapType)).length;
          assert.equal(c.encapMismatch !== undefined, lacking > 0);
          if (c.encapMismatch) assert.ok(c.encapMismatch.startsWith(`${lacking} of ${chassis.length} `));
          assert.equal(c.conflict, undefined);
        },
      ),
    );
  });
});
