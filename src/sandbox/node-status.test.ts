import assert from "node:assert/strict";
import { test } from "node:test";
import { microTime, nodeStatusPatch } from "./node-status.ts";

test("lease times have the six fraction digits metav1.MicroTime requires", () => {
  assert.equal(microTime(new Date("2030-01-01T00:00:00.123Z")), "2030-01-01T00:00:00.123000Z");
});

test("a node reports Ready since the simulator started and its underlay address as InternalIP", () => {
  const patch = nodeStatusPatch(
    {
      name: "node1",
      ip: "192.168.200.11",
      kubeletVersion: "v1.37.1",
      bootId: "b",
      machineId: "m",
      kernelVersion: "6",
      osImage: "Debian",
      architecture: "amd64",
      cpus: 2,
      memoryKi: 1024,
      readySince: new Date("2030-01-01T00:00:00Z"),
    },
    new Date("2030-01-01T00:05:00Z"),
  ) as {
    status: {
      conditions: Array<{
        type: string;
        status: string;
        lastHeartbeatTime: string;
        lastTransitionTime: string;
      }>;
      addresses: Array<{ type: string; address: string }>;
    };
  };
  const ready = patch.status.conditions.find((c) => c.type === "Ready");
  assert.equal(ready?.status, "True");
  assert.equal(ready?.lastTransitionTime, "2030-01-01T00:00:00Z");
  assert.equal(ready?.lastHeartbeatTime, "2030-01-01T00:05:00Z");
  assert.deepEqual(patch.status.addresses[0], { type: "InternalIP", address: "192.168.200.11" });
});
