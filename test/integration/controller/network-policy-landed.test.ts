// A policy isolates a pod only once its own rows are in NB, against a real kube-apiserver and NB: the isolation
// groups (the default deny) never hold a pod a policy selects while that policy's group and allow ACLs are
// missing, whether the policy's write is slow (held at a fault proxy) or failed (its start-up bulk write cut off
// with the connection). A witness client monitors NB directly and checks every update it gets.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { LAND_DEADLINE_MS } from "../../../src/controller/policy-index.ts";
import { ID_KEY } from "../../../src/ovn/ownership.ts";
import { podPortId } from "../../../src/ovn/pod-port.ts";
import type { OvsdbClient } from "../../../src/ovsdb/client.ts";
import type { NbTables } from "../../../src/ovsdb/models/nb.generated.ts";
import { ISOLATED_INGRESS, nodeGroupName, policyGroupName } from "../../../src/policy/nb-names.ts";
import { type OvsdbFaultProxy, startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import { createNamespace, startInProcess, untilOk as until, useCluster } from "./harness.ts";

const NS = "np-landed";
const NODE = "node1";
const POLICY = "allow-from-client";
const SPEC = {
  podSelector: { matchLabels: { app: "server" } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: "client" } } }] }],
};

type Ops = readonly Record<string, unknown>[];
/** The policy's own write: the transaction that inserts its group. */
const insertsPolicyGroup = (ops: Ops) =>
  ops.some(
    (o) =>
      o.op === "insert" &&
      o.table === "Port_Group" &&
      (o.row as { name?: unknown } | undefined)?.name === policyGroupName(`${NS}/${POLICY}`),
  );

/** Holds the policy's own write at the proxy until release() (also at the test's end). */
function holdPolicyWrite(t: { after(fn: () => unknown): void }, proxy: OvsdbFaultProxy) {
  let held = 0;
  let released = false;
  const release = proxy.holdTransactions((ops) => {
    const hit = insertsPolicyGroup(ops);
    if (hit) held++;
    return hit;
  });
  t.after(() => {
    if (!released) release();
  });
  return {
    held: () => held,
    release: () => {
      released = true;
      release();
    },
  };
}

async function setUp(t: Parameters<typeof useCluster>[0]) {
  const cluster = await useCluster(t);
  const { api, nb: witness } = cluster;
  await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: NODE } } });
  await createNamespace(api, NS);
  const createPod = (name: string, labels: Record<string, string>) =>
    api.request(`/api/v1/namespaces/${NS}/pods`, {
      method: "POST",
      body: { metadata: { name, labels }, spec: { nodeName: NODE, containers: [{ name: "c", image: "x" }] } },
    });
  const createPolicy = () =>
    api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`, {
      method: "POST",
      body: { metadata: { name: POLICY }, spec: SPEC },
    });
  const lsp = (nb: OvsdbClient<NbTables>, name: string) =>
    nb.cache.table("Logical_Switch_Port").findOne((r) => r.external_ids[ID_KEY] === podPortId(NS, name));
  const createPods = async () => {
    await createPod("server", { app: "server" });
    await createPod("client", { app: "client" });
    await until("both pods' ports", () =>
      lsp(witness, "server") && lsp(witness, "client") ? true : undefined,
    );
  };
  const pg = (name: string) => witness.cache.table("Port_Group").lookupOne("name", name);
  /** The server pod isolated, and its policy's group (with the allow ACL) in NB. */
  const state = () => {
    const port = lsp(witness, "server");
    const group = pg(policyGroupName(`${NS}/${POLICY}`));
    const allows = (group?.acls ?? []).filter((a) => witness.cache.table("ACL").get(a)?.action !== "drop");
    return {
      port,
      isolated:
        port !== undefined &&
        [ISOLATED_INGRESS, nodeGroupName(NODE)].some((g) => pg(g)?.ports.includes(port._uuid) === true),
      allowed: group !== undefined && allows.length > 0,
    };
  };
  /** Records every NB state the witness sees that isolates the server without its policy's allow. */
  const watchInvariant = () => {
    let states = 0;
    const bad: string[] = [];
    const unsubscribe = witness.cache.subscribe(undefined, () => {
      const s = state();
      if (!s.isolated) return;
      states++;
      if (!s.allowed) bad.push(`update ${states}: the server is isolated, its policy's allow is not in NB`);
    });
    t.after(unsubscribe);
    return { bad, states: () => states };
  };
  return { ...cluster, witness, createPods, createPolicy, state, watchInvariant };
}

test("a new policy whose write is slow isolates nobody until its allow ACLs are in NB", async (t) => {
  const { api, srv, createPods, createPolicy, state, watchInvariant } = await setUp(t);
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await createPods();

  const hold = holdPolicyWrite(t, proxy);
  const invariant = watchInvariant();
  await createPolicy();
  await until("the policy's write held at the proxy", () => (hold.held() > 0 ? true : undefined));
  // Time for the isolation reconciler to write the groups, were it to go ahead of the policy.
  await delay(1500);
  assert.equal(state().isolated, false, "the server is not isolated while its policy's write is held");
  hold.release();
  await until("the server isolated, with its policy's allow", () => {
    const s = state();
    return s.isolated && s.allowed ? true : undefined;
  });
  assert.ok(invariant.states() > 0, "the witness saw the server isolated");
  assert.deepEqual(invariant.bad, [], "no NB state isolates the server without its policy's allow");
});

test("a start-up bulk write of policies that fails: the isolation groups wait for the policies, not for the bulk write's end", async (t) => {
  const { api, srv, createPods, createPolicy, state, watchInvariant } = await setUp(t);
  // A first run places the pods; the policy comes while no controller runs.
  const first = await startInProcess({ api, srv });
  await createPods();
  await first.stop();
  await createPolicy();

  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const hold = holdPolicyWrite(t, proxy);
  const invariant = watchInvariant();
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await until("the start-up bulk write of the policy held at the proxy", () =>
    hold.held() > 0 ? true : undefined,
  );
  // The bulk write fails: its connection is cut before it reaches the server, so it never commits (a held
  // request released after its connection is gone is dropped).
  proxy.cut();
  hold.release();
  await run.synced;
  await until("the server isolated, with its policy's allow", () => {
    const s = state();
    return s.isolated && s.allowed ? true : undefined;
  });
  await delay(500);
  assert.ok(invariant.states() > 0, "the witness saw the server isolated");
  assert.deepEqual(invariant.bad, [], "no NB state isolates the server without its policy's allow");
});

test("a policy whose rows never land isolates its pods anyway once its deadline passes (fail closed)", async (t) => {
  const { api, srv, createPods, createPolicy, state } = await setUp(t);
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await createPods();
  const hold = holdPolicyWrite(t, proxy);
  const t0 = Date.now();
  await createPolicy();
  await until("the policy's write held at the proxy", () => (hold.held() > 0 ? true : undefined));
  assert.equal(state().isolated, false, "not isolated while the policy may still land");
  // Its write never lands: past LAND_DEADLINE_MS the pod is isolated without the allow.
  await until(
    "the server isolated although its policy never landed",
    () => (state().isolated ? true : undefined),
    LAND_DEADLINE_MS + 60_000,
  );
  assert.equal(state().allowed, false, "the policy's allow is still not in NB");
  t.diagnostic(
    `isolated ${Date.now() - t0} ms after the policy was created (deadline ${LAND_DEADLINE_MS} ms)`,
  );
});
