import assert from "node:assert/strict";
import { test } from "node:test";
import { apiTime, type PodView, podStatusPatch } from "./pod-status.ts";

const t0 = new Date("2030-01-01T00:00:00.123Z");
const t1 = new Date("2030-01-01T00:01:00Z");
const scheduled = {
  type: "PodScheduled",
  status: "True",
  lastTransitionTime: new Date("2029-12-31T23:59:59Z"),
};

interface Patch {
  status: {
    phase: string;
    podIP: string | null;
    conditions: Array<{ type: string; status: string; message?: string; lastTransitionTime?: string }>;
    containerStatuses: Array<{ ready: boolean; state: { waiting?: { reason: string; message?: string } } }>;
  };
}

function creatingView(error: string): PodView {
  return {
    phase: "Pending",
    sandboxReady: false,
    sandboxMessage: error,
    podIPs: [],
    hostIP: "192.168.200.11",
    startTime: "2030-01-01T00:00:00Z",
    containers: [
      {
        name: "c",
        image: "img",
        restartCount: 0,
        ready: false,
        state: { kind: "waiting", reason: "ContainerCreating", message: error },
      },
    ],
  };
}

test("a pod whose sandbox failed shows ContainerCreating with the CNI error, and keeps PodScheduled", () => {
  const p = podStatusPatch(creatingView("no network configuration found"), [scheduled], t0) as Patch;
  assert.equal(p.status.phase, "Pending");
  assert.equal(p.status.podIP, null);
  const waiting = p.status.containerStatuses[0]?.state.waiting;
  assert.deepEqual(waiting, { reason: "ContainerCreating", message: "no network configuration found" });
  const byType = new Map(p.status.conditions.map((c) => [c.type, c]));
  assert.equal(byType.get("PodScheduled")?.lastTransitionTime, "2029-12-31T23:59:59Z");
  assert.equal(byType.get("PodReadyToStartContainers")?.status, "False");
  assert.equal(byType.get("PodReadyToStartContainers")?.message, "no network configuration found");
  assert.equal(byType.get("Ready")?.status, "False");
});

test("a running pod is Ready with its IPs, and an unchanged condition keeps its transition time", () => {
  const view: PodView = {
    phase: "Running",
    sandboxReady: true,
    podIPs: ["10.244.1.5"],
    hostIP: "192.168.200.11",
    startTime: "2030-01-01T00:00:00Z",
    containers: [
      {
        name: "c",
        image: "img",
        restartCount: 0,
        ready: true,
        state: { kind: "running", startedAt: "2030-01-01T00:00:01Z" },
      },
    ],
  };
  const first = podStatusPatch(view, [scheduled], t0) as Patch;
  assert.equal(first.status.podIP, "10.244.1.5");
  assert.ok(
    first.status.conditions.filter((c) => c.type !== "PodScheduled").every((c) => c.status === "True"),
  );
  const again = podStatusPatch(view, first.status.conditions, t1);
  assert.deepEqual(again, first, "same inputs after the server echoed the status give the same patch");
});

test("API times are second precision whether they arrive as Date or string", () => {
  assert.equal(apiTime(t0), "2030-01-01T00:00:00Z");
  assert.equal(apiTime("2030-01-01T00:00:00.999Z"), "2030-01-01T00:00:00Z");
  assert.equal(apiTime(undefined), undefined);
});
