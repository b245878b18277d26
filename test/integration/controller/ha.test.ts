// Two zstack-ovnkube-controller replicas with leader election against one apiserver and one NB: only the Lease
// holder reconciles; when it is SIGKILLed in the middle of pod creation the other takes over once the Lease
// expires, and nothing is duplicated. Writes are attributed on the server: each replica's NB client comments its
// transactions with its identity, which the database file keeps with every record (ovsdb-tool show-log).
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { writeRecordsByComment } from "../../rig/db-log.ts";
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
  spec?: { holderIdentity?: string; renewTime?: string; acquireTime?: string };
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
  assert.equal(await leader.metricSum("zstack_ovn_leader"), 1, "the leader's gauge");
  assert.equal(await follower.metricSum("zstack_ovn_leader"), 0, "the follower's gauge");
  await assertConsistent(c.api, c.nb);
  const by = await writeRecordsByComment(c.srv, "OVN_Northbound");
  const leaderWrites = by.get(`zstack-ovnkube-controller ${leader.identity}`) ?? 0;
  t.diagnostic(`NB records by writer before the kill: ${JSON.stringify(Object.fromEntries(by))}`);
  assert.ok(leaderWrites >= first.length, `the leader wrote ${leaderWrites} records`);
  assert.equal(
    by.get(`zstack-ovnkube-controller ${follower.identity}`) ?? 0,
    0,
    "the follower wrote nothing to NB",
  );
  assert.deepEqual(
    [...by.keys()],
    [`zstack-ovnkube-controller ${leader.identity}`],
    "no write of anyone else",
  );

  // Kill the leader while pods keep coming.
  const second: PodRef[] = Array.from({ length: 60 }, (_, i) => ["a", `late-${i}`] as const);
  const creating = createPods(c.api, second, 2);
  await delay(1500);
  const killedAt = Date.now();
  await leader.kill();
  const lease = () =>
    c.api.request<Lease>(
      "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/zstack-ovnkube-controller",
    );
  // The dead leader's last renewal, as the apiserver stored it: the Lease expires LEASE_MS after it.
  const lastRenew = Date.parse((await lease()).spec?.renewTime ?? "");
  await follower.waitForLog("controller running", LEASE_MS + 3 * RETRY_MS + 30_000);
  const takeoverMs = Date.now() - killedAt;
  t.diagnostic(`takeover ${takeoverMs} ms after SIGKILL (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`);
  // Expiry is measured from the follower's last sight of a renewal, up to one retry period after the last
  // renewal; starting up (informer sync) takes a moment more.
  assert.ok(takeoverMs <= LEASE_MS + 2 * RETRY_MS + 3000, `takeover took ${takeoverMs} ms`);
  assert.equal(await holder(), follower.identity);
  const acquired = Date.parse((await lease()).spec?.acquireTime ?? "");
  const afterExpiry = acquired - (lastRenew + LEASE_MS);
  t.diagnostic(
    `last renewal ${lastRenew - killedAt} ms from the kill; the Lease was acquired ${acquired - killedAt} ms after ` +
      `the kill, ${afterExpiry} ms after it expired`,
  );
  // The follower measures the Lease from when it saw the last renewal (client-go semantics, no trust in
  // another host's clock), which is at most one jittered retry period late, and tries again right then.
  assert.ok(
    afterExpiry >= -50 && afterExpiry <= 1.2 * RETRY_MS + 500,
    `acquired ${afterExpiry} ms after expiry`,
  );
  await creating;

  await allAnnotated(c.api, first.length + second.length, 60_000);
  await delay(1500); // let the new leader's last writes land before comparing NB with the annotations
  await assertConsistent(c.api, c.nb);

  // Pods created after the takeover are the new leader's work, and the records on the server say so.
  const killedLeaderWrites = (await writeRecordsByComment(c.srv, "OVN_Northbound")).get(
    `zstack-ovnkube-controller ${leader.identity}`,
  );
  const third: PodRef[] = Array.from({ length: 10 }, (_, i) => ["a", `after-${i}`] as const);
  await createPods(c.api, third, 4);
  await allAnnotated(c.api, first.length + second.length + third.length, 60_000);
  const after = await writeRecordsByComment(c.srv, "OVN_Northbound");
  t.diagnostic(`NB records by writer at the end: ${JSON.stringify(Object.fromEntries(after))}`);
  assert.equal(after.get(`zstack-ovnkube-controller ${leader.identity}`), killedLeaderWrites);
  assert.ok(
    (after.get(`zstack-ovnkube-controller ${follower.identity}`) ?? 0) >= third.length,
    "the new leader wrote the new pods' ports",
  );
  await delay(500);
  await assertConsistent(c.api, c.nb);
});
