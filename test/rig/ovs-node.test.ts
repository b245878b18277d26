import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, test } from "node:test";
import { liveRigNetns, startOvsNode } from "./ovs-node.ts";
import { livePids } from "./process.ts";

describe("the OVS node rig", () => {
  test("starts OVS and OVN inside its own netns and leaves no netns, daemon or directory after stop", async () => {
    const pidsBefore = new Set(livePids());
    const node = await startOvsNode({ ovn: true });
    const started = livePids().filter((p) => !pidsBefore.has(p));
    assert.equal(started.length, 6, "ovsdb-server x3, ovs-vswitchd, ovn-northd, ovn-controller");
    assert.match(node.netns.name, /^zn-[0-9a-f]{6}$/);
    const pod = await node.addNetns("p");
    // ovs-vswitchd runs in the node's netns: the datapath's device appears there once a bridge exists.
    await node.vsctl("add-br", "br-test", "--", "set", "Bridge", "br-test", "datapath_type=netdev");
    for (let i = 0; i < 100 && !(await node.exec("ip", ["link"])).includes("br-test"); i++)
      await new Promise((r) => setTimeout(r, 20));
    assert.match(await node.exec("ip", ["link"]), /br-test/);
    assert.doesNotMatch(await node.execIn(pod.path, "ip", ["link"]), /br-test/);

    await node.stop();
    assert.equal(existsSync(node.netns.path), false);
    assert.equal(existsSync(pod.path), false);
    assert.equal(existsSync(node.dir), false);
    assert.deepEqual(
      livePids().filter((p) => started.includes(p)),
      [],
    );
    assert.deepEqual(liveRigNetns(), []);
  });
});
