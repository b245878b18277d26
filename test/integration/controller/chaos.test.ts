// Faults while pods come and go: the apiserver restarted under the controller's watches, and the controller
// SIGKILLed at random points of pod churn. Afterwards NB and the pod annotations must agree: one port per pod,
// the annotated address on it, no port of a gone pod, no address twice.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { isAlreadyExists, isNotFound } from "../../../src/k8s/api-client.ts";
import { mulberry32 } from "../../rig/prng.ts";
import {
  allAnnotated,
  assertConsistent,
  type Cluster,
  type ControllerProcess,
  createNamespace,
  inconsistencies,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

const POD_SPEC = { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] };

/** Creates the pod, retrying while the apiserver is away; a create that landed before a cut counts. */
async function createPersistently(c: Cluster, ns: string, name: string): Promise<void> {
  for (;;) {
    try {
      await c.api.request(`/api/v1/namespaces/${ns}/pods`, {
        method: "POST",
        body: { metadata: { name }, spec: POD_SPEC },
      });
      return;
    } catch (e) {
      if (isAlreadyExists(e)) return;
      await delay(200);
    }
  }
}

async function quiet(ctl: ControllerProcess): Promise<void> {
  await until(
    "the controller to drain its queues",
    async () => (await ctl.metricSum("zstack_ovn_workqueue_depth").catch(() => 1)) === 0,
    60_000,
    250,
  );
}

test("pods created while the apiserver restarts all get their addresses once the informers relist", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "w");
  const ctl = await spawnController(t, c, { identity: "solo" });
  await ctl.waitForLog("controller running");
  const names = Array.from({ length: 80 }, (_, i) => `w-${i}`);
  let next = 0;
  const creating = Promise.all(
    Array.from({ length: 2 }, async () => {
      while (next < names.length) {
        await createPersistently(c, "w", names[next++] as string);
        await delay(50);
      }
    }),
  );
  await until("20 pods created", () => (next >= 20 ? true : undefined));
  const cutAt = Date.now();
  await c.kube.restartApiserver();
  t.diagnostic(`apiserver restarted in ${Date.now() - cutAt} ms, ${next} pods submitted by then`);
  await creating;
  const started = Date.now();
  await allAnnotated(c.api, names.length, 90_000);
  t.diagnostic(`all ${names.length} pods annotated ${Date.now() - started} ms after the last create`);
  await quiet(ctl);
  await assertConsistent(c.api, c.nb);
  assert.ok(
    ctl
      .logs()
      .some(
        (l) => String(l.informer).endsWith("/pods") && l.msg === "list/watch failed; relisting after backoff",
      ),
    "the pod watch was really cut and relisted",
  );
});

test("SIGKILLing the controller at random points of pod churn leaves NB and annotations consistent (3 runs)", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "churn");
  const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
  t.diagnostic(`seed ${seed} (CHAOS_SEED=${seed} replays it)`);
  const rand = mulberry32(seed);
  const exists = new Set<string>();
  const pool = Array.from({ length: 60 }, (_, i) => `c-${i}`);
  const busy = new Set<string>();
  const step = async () => {
    const name = pool[Math.floor(rand() * pool.length)] as string;
    if (busy.has(name)) return;
    busy.add(name);
    try {
      if (exists.has(name)) {
        try {
          await c.api.request(`/api/v1/namespaces/churn/pods/${name}`, {
            method: "DELETE",
            query: { gracePeriodSeconds: 0 },
          });
        } catch (e) {
          if (!isNotFound(e)) throw e;
        }
        exists.delete(name);
      } else {
        await createPersistently(c, "churn", name);
        exists.add(name);
      }
    } finally {
      busy.delete(name);
    }
  };
  const churn = (ms: number) => {
    const end = Date.now() + ms;
    return Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < end) await step();
      }),
    );
  };

  let ctl = await spawnController(t, c, { identity: "run-0" });
  await ctl.waitForLog("controller running");
  for (let run = 1; run <= 3; run++) {
    const killAfter = 500 + Math.floor(rand() * 4000);
    const churning = churn(killAfter + 3000);
    await delay(killAfter);
    await ctl.kill();
    // Whatever the controller was doing when it died, no address is ever on two ports, not even for a moment.
    const dup = (await inconsistencies(c.api, c.nb)).filter((m) => m.includes(" is held by both "));
    assert.deepEqual(dup, [], `run ${run}: duplicated addresses right after the kill`);
    await delay(Math.floor(rand() * 2000));
    ctl = await spawnController(t, c, { identity: `run-${run}` });
    await churning;
    await ctl.waitForLog("controller running");
    await allAnnotated(c.api, exists.size, 60_000);
    await quiet(ctl);
    // Deletions the restarted controller saw only at startup are settled by now; give stragglers a moment.
    const bad = await until(
      "NB and annotations to agree",
      async () => {
        const b = await inconsistencies(c.api, c.nb);
        return b.length === 0 ? b : undefined;
      },
      15_000,
      500,
    ).catch(() => inconsistencies(c.api, c.nb));
    t.diagnostic(`run ${run}: killed after ${killAfter} ms, ${exists.size} pods live`);
    assert.deepEqual(bad.slice(0, 20), [], `run ${run}: ${bad.length} inconsistencies`);
  }
  await assertConsistent(c.api, c.nb);
});
