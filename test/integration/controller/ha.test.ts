// Two zstack-ovnkube-controller replicas with leader election against one apiserver and one NB: only the Lease
// holder reconciles; when it is SIGKILLed in the middle of pod creation the other takes over once the Lease
// expires, and nothing is duplicated. Writes are attributed on the server: each replica's NB client comments its
// transactions with its identity, which the database file keeps with every record (ovsdb-tool show-log).
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { type ControllerOptions, OvnController } from "../../../src/controller/controller.ts";
import { ControllerSupervisor } from "../../../src/controller/supervisor.ts";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { microTime } from "../../../src/k8s/leader-election.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { subnetSwitchName } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { writeRecordComments, writeRecordsByComment } from "../../rig/db-log.ts";
import {
  allAnnotated,
  assertConsistent,
  type Cluster,
  type ControllerProcess,
  createNamespace,
  createPods,
  listPods,
  type PodRef,
  type PodView,
  podAddress,
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

test("with two replicas only the leader reconciles, and after the leader is SIGKILLed the other takes over once the Lease expires and duplicates nothing", async (t) => {
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
  const probe = async (p: ControllerProcess, path: string) =>
    (await fetch(`http://127.0.0.1:${p.port}${path}`)).status;
  assert.deepEqual(
    {
      leader: [
        await probe(leader, "/healthz"),
        await probe(leader, "/readyz"),
        await probe(leader, "/leaderz"),
      ],
      follower: [
        await probe(follower, "/healthz"),
        await probe(follower, "/readyz"),
        await probe(follower, "/leaderz"),
      ],
    },
    { leader: [200, 200, 200], follower: [200, 200, 500] },
    "both live and ready (the follower stands by); only the leader answers /leaderz",
  );
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
  // A generous guard only: how fast the takeover is belongs in a benchmark, not in this test.
  await follower.waitForLog("controller running", 4 * LEASE_MS + 60_000);
  const takeoverMs = Date.now() - killedAt;
  t.diagnostic(`takeover ${takeoverMs} ms after SIGKILL (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`);
  assert.equal(await holder(), follower.identity);
  const acquired = Date.parse((await lease()).spec?.acquireTime ?? "");
  const afterExpiry = acquired - (lastRenew + LEASE_MS);
  t.diagnostic(
    `last renewal ${lastRenew - killedAt} ms from the kill; the Lease was acquired ${acquired - killedAt} ms after ` +
      `the kill, ${afterExpiry} ms after it expired`,
  );
  // The follower measures the Lease from when it saw the last renewal (client-go semantics, no trust in
  // another host's clock), which is after the renewal: it cannot take the Lease before it expired.
  assert.ok(afterExpiry >= -50, `acquired ${-afterExpiry} ms before the dead leader's Lease expired`);
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

// In-process leadership: the controller as the CLI runs it (ControllerSupervisor, a fresh OvnController per
// term) against the real apiserver and NB, with short elector timings.

const LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/zstack-ovnkube-controller";

function newController(c: Cluster, nb: OvsdbClient<NbTables>, extra: Partial<ControllerOptions> = {}) {
  return new OvnController({
    api: c.api,
    nb,
    clusterCIDR: "10.244.0.0/16",
    serviceCIDRs: ["10.96.0.0/16"],
    joinCIDR: "100.64.0.0/16",
    tunnel: "vxlan",
    log: silentLogger,
    ...extra,
  });
}

async function controllerNb(t: { after(fn: () => unknown): void }, c: Cluster, identity: string) {
  const nb = new OvsdbClient<NbTables>({
    remotes: c.srv.unix,
    model: nbModel,
    comment: `zstack-ovnkube-controller ${identity}`,
  });
  await nb.connect();
  t.after(() => nb.close());
  return nb;
}

test("a leader whose Lease is taken away stops writing to NB at once, and leads again cleanly once the Lease is back", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "a");
  const identity = "in-process";
  const writer = `zstack-ovnkube-controller ${identity}`;
  const nb = await controllerNb(t, c, identity);
  // Markers written on the controller's own NB connection, so the server orders them with its writes: one
  // the moment the term ends, one as the next term starts. Between them no record may carry our writer.
  const markers: Promise<unknown>[] = [];
  const mark = (comment: string) =>
    markers.push(
      nb.transact((txn) => {
        txn.comment(comment);
        txn.insert("Logical_Switch", { name: comment.replaceAll(" ", "-") });
      }),
    );
  const marks: string[] = [];
  const supervisor = new ControllerSupervisor({
    newController: () => newController(c, nb),
    election: {
      client: c.api,
      namespace: "kube-system",
      name: "zstack-ovnkube-controller",
      identity,
      leaseDurationMs: 3000,
      renewDeadlineMs: 2000,
      retryPeriodMs: 250,
    },
    log: silentLogger,
    hooks: {
      onTermStarted: (n) => {
        marks.push(`started ${n}`);
        if (n === 2) mark("test term 2 starts");
      },
      onSynced: (n) => marks.push(`synced ${n}`),
      onTermEnding: (n) => {
        marks.push(`ending ${n}`);
        if (n === 1) mark("test term 1 ends");
      },
      onTermEnded: (n, err) => marks.push(err ? `failed ${n}` : `ended ${n}`),
    },
  });
  supervisor.start();
  t.after(() => supervisor.stop());
  await until("term 1 synced", () => marks.includes("synced 1"));
  assert.ok(supervisor.leading(), "leading and synced");

  const first: PodRef[] = Array.from({ length: 10 }, (_, i) => ["a", `first-${i}`] as const);
  await createPods(c.api, first, 4);
  await allAnnotated(c.api, first.length);

  // Pods keep coming, one after another, from before the Lease is taken away until after the term ended,
  // and a few more while standing by.
  const during: PodRef[] = [];
  const creating = (async () => {
    let standby = 0;
    while (standby < 5 && during.length < 500) {
      if (marks.includes("ended 1")) standby++;
      const pod = ["a", `during-${during.length}`] as const;
      during.push(pod);
      await createPods(c.api, [pod]);
    }
  })();
  await until("some pods of the second batch written", async () =>
    (await listPods(c.api)).some((p) => p.metadata.name.startsWith("during-") && podAddress(p)),
  );
  const lease = await c.api.request<Lease & { metadata: object }>(LEASE_PATH);
  await c.api.request(LEASE_PATH, {
    method: "PUT",
    body: { ...lease, spec: { ...lease.spec, holderIdentity: "intruder", renewTime: microTime(new Date()) } },
  });
  await until("term 1 ended", () => marks.includes("ended 1"));
  assert.equal(supervisor.leading(), false);
  await creating;

  // The intruder never renews: its Lease runs out and we lead again, with a fresh controller.
  await until("term 2 synced", () => marks.includes("synced 2"), 60_000);
  assert.deepEqual(marks, ["started 1", "synced 1", "ending 1", "ended 1", "started 2", "synced 2"]);
  await Promise.all(markers);
  await allAnnotated(c.api, first.length + during.length, 60_000);
  const log = await writeRecordComments(c.srv, "OVN_Northbound");
  const ended = log.indexOf("test term 1 ends");
  const restarted = log.indexOf("test term 2 starts");
  t.diagnostic(
    `records by ${writer}: ${log.slice(0, ended).filter((x) => x === writer).length} in term 1, ` +
      `${log.slice(restarted).filter((x) => x === writer).length} in term 2`,
  );
  assert.ok(0 < ended && ended < restarted, "both markers are in the log, in order");
  assert.ok(log.slice(0, ended).includes(writer), "term 1 wrote");
  assert.deepEqual(
    log.slice(ended + 1, restarted).filter((x) => x === writer),
    [],
    "no write of ours between the end of term 1 and the start of term 2, though pods kept coming",
  );
  assert.ok(log.slice(restarted).includes(writer), "term 2 wrote the pods created while standing by");
  await delay(500);
  await assertConsistent(c.api, c.nb);
});

test("a controller run again on the same NB client reacts to an NB change once: the previous run's subscriptions are gone", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "a");
  const nb = await controllerNb(t, c, "twice");
  const events = new EventRecorder({ client: c.api, component: "zstack-ovnkube-controller", host: "twice" });
  // Term 1 runs until its pod has an address, then ends; term 2 (a fresh controller on the same NB client)
  // runs until its own pod has one, which shows its handlers are in place.
  for (let term = 1; term <= 2; term++) {
    const stop = new AbortController();
    const running = newController(c, nb, { events }).run(stop.signal);
    await createPods(c.api, [["a", `term-${term}`]]);
    await allAnnotated(c.api, term);
    if (term === 1) {
      stop.abort();
      await running;
    } else {
      t.after(async () => {
        stop.abort();
        await running;
      });
    }
  }
  const pod = (await listPods(c.api)).find((p) => p.metadata.name === "term-1");
  const ip = podAddress(pod as PodView) as string;
  // Someone else's port claims the pod's address: the (one) running controller records one AddressConflict.
  await c.nb.echo();
  const ls = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  assert.ok(ls, "the default Subnet's switch");
  await c.nb.transact((txn) => {
    const dup = txn.insert("Logical_Switch_Port", { name: "vm-dup", addresses: [`fa:16:3e:00:00:02 ${ip}`] });
    txn.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", [dup]]]);
  });
  const conflict = () =>
    c.api
      .request<{ items: { reason: string; count?: number; involvedObject: { name: string } }[] }>(
        "/api/v1/namespaces/default/events",
      )
      .then((l) =>
        l.items.find((e) => e.reason === "AddressConflict" && e.involvedObject.name === "default"),
      );
  await until("an AddressConflict Event", conflict);
  // Every subscriber ran in the same cache update; closing the recorder writes all it was told.
  await events.close();
  assert.equal((await conflict())?.count, 1, "one handler reported the conflict, not one per run");
  assert.equal(events.stats.created, 0, "each run posts through its own recorder, fenced on its term");
});

test("a controller started with a dual-stack cluster CIDR creates its default Subnet and finishes its sync", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "a");
  const nb = await controllerNb(t, c, "dual");
  const stop = new AbortController();
  let synced = false;
  let failure: unknown;
  const running = newController(c, nb, { clusterCIDR: "10.244.0.0/16,fd00:10:244::/48" })
    .run(stop.signal, () => {
      synced = true;
    })
    .catch((e: unknown) => {
      failure = e;
    });
  t.after(async () => {
    stop.abort();
    await running;
  });
  await until("synced, or failed", () => synced || failure !== undefined, 60_000);
  assert.equal(failure, undefined, `the controller failed: ${String(failure)}`);
  const subnet = await c.api.request<Subnet>(`${SUBNET_PATH}/default`);
  assert.deepEqual(
    { cidr: subnet.spec.cidr, gateway: subnet.spec.gateway, protocol: subnet.spec.protocol },
    { cidr: "10.244.0.0/16,fd00:10:244::/48", gateway: "10.244.0.1,fd00:10:244::1", protocol: "Dual" },
  );
  await createPods(c.api, [["a", "p"]]);
  const [pod] = await allAnnotated(c.api, 1);
  assert.ok(
    podAddress(pod as PodView)?.startsWith("10.244."),
    "the pod got an address from the default Subnet",
  );
});

test("a run ended while it is still starting settles cleanly, and a new controller on the same NB client starts", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "a");
  const nb = await controllerNb(t, c, "cut-short");
  const stop = new AbortController();
  // End the run as soon as its first NB write (the core topology) is visible, while it is still starting.
  const coreWritten = c.nb.waitForRow("Logical_Router", () => true, { timeoutMs: 60_000 });
  let ended = false;
  const running = newController(c, nb)
    .run(stop.signal)
    .finally(() => {
      ended = true;
    });
  await coreWritten;
  stop.abort();
  await until("the cut-short run settled", () => ended, 60_000);
  await running;
  // Nothing of it is left behind: a second run on the same client does the whole job.
  const again = new AbortController();
  let synced = false;
  const second = newController(c, nb).run(again.signal, () => {
    synced = true;
  });
  t.after(async () => {
    again.abort();
    await second;
  });
  await until("the second run synced", () => synced, 60_000);
  await createPods(c.api, [["a", "p"]]);
  await allAnnotated(c.api, 1);
});
