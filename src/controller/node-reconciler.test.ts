import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { withdrawnFirst } from "./node-reconciler.ts";

const ann = (nodeReplyIps?: string[]) =>
  JSON.stringify({
    name: "k8s-node1",
    ip: "100.64.0.2/16",
    mac: "0a:58:64:40:00:02",
    gateway: "100.64.0.1",
    serviceSnatIp: "100.64.0.3",
    ...(nodeReplyIps ? { nodeReplyIps } : {}),
  });

describe("management port annotation: a withdrawn reply address leaves it first", () => {
  test("an address the reply policy no longer holds is dropped from the annotation, every other field kept", () => {
    const got = withdrawnFirst(ann(["192.168.200.11", "192.168.200.12"]), [
      "192.168.200.12",
      "192.168.200.13",
    ]);
    assert.equal(got, ann(["192.168.200.12"]));
    // The last one withdrawn: the field goes, as the controller writes a node without reply addresses.
    assert.equal(withdrawnFirst(ann(["192.168.200.11"]), []), ann());
  });

  test("nothing withdrawn, an address only added, no list, no annotation or a foreign value: no interim write", () => {
    assert.equal(withdrawnFirst(ann(["192.168.200.11"]), ["192.168.200.11"]), undefined);
    assert.equal(withdrawnFirst(ann(["192.168.200.11"]), ["192.168.200.11", "192.168.200.12"]), undefined);
    assert.equal(withdrawnFirst(ann(), ["192.168.200.11"]), undefined);
    for (const v of [undefined, "", "{", "[]", "7", "null", '{"nodeReplyIps":"192.168.200.11"}'])
      assert.equal(withdrawnFirst(v, []), undefined, String(v));
  });

  test("property: the interim list is the old one without the withdrawn addresses, never gains one, and a second pass writes nothing", () => {
    const addr = fc.constantFrom("192.168.200.11", "192.168.200.12", "192.168.200.13", "10.0.0.1", "x", "");
    fc.assert(
      fc.property(
        fc.uniqueArray(addr, { maxLength: 6 }),
        fc.uniqueArray(addr, { maxLength: 6 }),
        (old, accepted) => {
          const got = withdrawnFirst(ann(old), accepted);
          const kept = old.filter((a) => accepted.includes(a));
          if (kept.length === old.length) {
            assert.equal(got, undefined);
            return;
          }
          assert.ok(got !== undefined);
          const v = JSON.parse(got) as { nodeReplyIps?: string[]; name: string };
          assert.deepEqual(v.nodeReplyIps ?? [], kept);
          assert.equal(v.name, "k8s-node1");
          assert.equal(withdrawnFirst(got, accepted), undefined);
        },
      ),
    );
  });
});
