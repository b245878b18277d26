// 1,000 unscheduled pods across three Subnets, half of them deleted, then a controller restart: every pod keeps
// one port and its address, no port outlives its pod, and a restart with nothing to do writes nothing to NB
// (counted on the server, in the database file).
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { writeRecords } from "../../rig/db-log.ts";
import {
  allAnnotated,
  assertConsistent,
  type ControllerProcess,
  createNamespace,
  createPods,
  createSubnet,
  deletePods,
  listPods,
  type PodRef,
  podAddress,
  podPorts,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

const PODS = 1000;
const SUBNETS = [
  { name: "s1", cidr: "10.81.0.0/22", gateway: "10.81.0.1" },
  { name: "s2", cidr: "10.82.0.0/22", gateway: "10.82.0.1" },
  { name: "s3", cidr: "10.83.0.0/22", gateway: "10.83.0.1" },
];

/** The controller has taken in every pod and has nothing queued. */
async function quiet(ctl: ControllerProcess, minReconciles: number): Promise<void> {
  await until(
    "the controller to drain its queues",
    async () =>
      (await ctl.metricSum("zstack_ovn_reconcile_total")) >= minReconciles &&
      (await ctl.metricSum("zstack_ovn_workqueue_depth")) === 0,
    60_000,
    250,
  );
}

test("1,000 pods across 3 subnets get unique addresses and ports; after 500 deletions a restart leaves no stale port, keeps every address and writes nothing", async (t) => {
  const c = await useCluster(t);
  for (const s of SUBNETS) {
    await createNamespace(c.api, `ns-${s.name}`);
    await createSubnet(c.api, s.name, { cidr: s.cidr, gateway: s.gateway, namespaces: [`ns-${s.name}`] });
  }
  let ctl = await spawnController(t, c, { identity: "solo" });
  await ctl.waitForLog("controller running");

  const pods: PodRef[] = Array.from(
    { length: PODS },
    (_, i) => [`ns-${(SUBNETS[i % 3] as { name: string }).name}`, `p${i}`] as const,
  );
  let started = Date.now();
  await createPods(c.api, pods, 16);
  const created = Date.now() - started;
  const annotated = await allAnnotated(c.api, PODS, 120_000);
  t.diagnostic(`created ${PODS} pods in ${created} ms, all annotated after ${Date.now() - started} ms`);
  const ipOf = new Map(annotated.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, podAddress(p)]));
  assert.equal(new Set(ipOf.values()).size, PODS, "every pod has its own address");
  for (const p of annotated) {
    const sn = p.metadata.namespace.slice(3);
    const prefix = (SUBNETS.find((s) => s.name === sn) as { cidr: string }).cidr
      .split(".")
      .slice(0, 2)
      .join(".");
    assert.ok(podAddress(p)?.startsWith(`${prefix}.`), `${p.metadata.name} is on its namespace's subnet`);
  }
  assert.equal((await podPorts(c.nb)).length, PODS);
  await assertConsistent(c.api, c.nb);

  started = Date.now();
  await deletePods(c.api, pods.slice(0, PODS / 2), 16);
  await until(
    "500 ports left",
    async () => ((await podPorts(c.nb)).length === PODS / 2 ? true : undefined),
    60_000,
  );
  t.diagnostic(`500 pods deleted and their ports removed in ${Date.now() - started} ms`);
  await quiet(ctl, 0);
  await delay(1500); // subnet status refreshes are delayed by a second after address usage changes

  await ctl.stop();
  const before = await writeRecords(c.srv, "OVN_Northbound");
  started = Date.now();
  ctl = await spawnController(t, c, { identity: "solo-again" });
  await ctl.waitForLog("controller running");
  await quiet(ctl, PODS / 2);
  await delay(2000);
  t.diagnostic(`restart: running and drained ${Date.now() - started} ms after spawn`);
  assert.equal(
    (await writeRecords(c.srv, "OVN_Northbound")) - before,
    0,
    "a restart with no changes writes no NB transaction",
  );

  const left = await listPods(c.api);
  assert.equal(left.length, PODS / 2);
  for (const p of left)
    assert.equal(podAddress(p), ipOf.get(`${p.metadata.namespace}/${p.metadata.name}`), "address unchanged");
  await assertConsistent(c.api, c.nb);

  // New pods after the restart never get an address a living pod holds.
  const more: PodRef[] = Array.from({ length: 30 }, (_, i) => [`ns-s${(i % 3) + 1}`, `new-${i}`] as const);
  await createPods(c.api, more, 8);
  await allAnnotated(c.api, PODS / 2 + more.length);
  await assertConsistent(c.api, c.nb);
});
