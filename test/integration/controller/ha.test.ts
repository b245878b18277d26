// Two zstack-ovnkube-controller replicas with leader election against one apiserver and one NB: only the Lease
// holder reconciles; when it is SIGKILLed in the middle of pod creation the other takes over once the Lease
// expires, and nothing is duplicated.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import {
  allAnnotated,
  assertConsistent,
  type ControllerProcess,
  createNamespace,
  createPods,
  type PodRef,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

/** The CLI does not set the elector's timings, so these are LeaderElector's defaults. */
const LEASE_MS = 15_000;
const RETRY_MS = 2_000;

interface Lease {
  spec?: { holderIdentity?: string };
}

test("with two replicas only the leader reconciles, and after the leader is SIGKILLed the other takes over within the lease and duplicates nothing", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "a");
  const replicas = new Map<string, ControllerProcess>();
  for (const id of ["replica-1", "replica-2"])
    replicas.set(id, await spawnController(t, c, { identity: id, leaderElect: true }));
  const holder = () =>
    c.api
      .request<Lease>("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/zstack-ovnkube-controller")
      .then((l) => l.spec?.holderIdentity || undefined)
      .catch(() => undefined);
  const leaderId = await until("a Lease holder", holder);
  const leader = replicas.get(leaderId) as ControllerProcess;
  const follower = [...replicas.values()].find((r) => r !== leader) as ControllerProcess;
  await leader.waitForLog("controller running");

  const first: PodRef[] = Array.from({ length: 30 }, (_, i) => ["a", `early-${i}`] as const);
  await createPods(c.api, first, 8);
  await allAnnotated(c.api, first.length);
  assert.ok((await leader.metricSum("zstack_ovn_reconcile_total")) > 0, "the leader reconciles");
  assert.equal(
    await follower.metricSum("zstack_ovn_reconcile_total"),
    0,
    "the follower reconciles nothing, so it writes nothing",
  );
  assert.ok(!follower.logs().some((l) => l.msg === "controller running"), "the follower never started");
  await assertConsistent(c.api, c.nb);

  // Kill the leader while pods keep coming.
  const second: PodRef[] = Array.from({ length: 60 }, (_, i) => ["a", `late-${i}`] as const);
  const creating = createPods(c.api, second, 2);
  await delay(1500);
  const killedAt = Date.now();
  await leader.kill();
  await follower.waitForLog("controller running", LEASE_MS + 3 * RETRY_MS + 30_000);
  const takeoverMs = Date.now() - killedAt;
  t.diagnostic(`takeover ${takeoverMs} ms after SIGKILL (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`);
  // Expiry is measured from the follower's last sight of a renewal, up to one retry period before the kill,
  // and it notices expiry on its next retry; starting up (informer sync) takes a moment more.
  assert.ok(takeoverMs <= LEASE_MS + 2 * RETRY_MS + 3000, `takeover took ${takeoverMs} ms`);
  assert.equal(await holder(), follower.identity);
  await creating;

  await allAnnotated(c.api, first.length + second.length, 60_000);
  await delay(1500); // let the new leader's last writes land before comparing NB with the annotations
  await assertConsistent(c.api, c.nb);
});
