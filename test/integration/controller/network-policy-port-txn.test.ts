// NetworkPolicy state that must land in the pod port's own transaction, against a real kube-apiserver and NB:
// a new pod's port never exists in NB outside its isolation groups, and a released address never sits in its
// old pod's peer set while a new pod holds it. A witness client monitors NB directly and checks every update it
// gets, while a fault proxy in front of the controller holds back the policy reconcilers' own writes, so only
// what the port's transaction carries can keep the invariant.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { ID_KEY } from "../../../src/ovn/ownership.ts";
import { podPortId } from "../../../src/ovn/pod-port.ts";
import { mgmtPortName } from "../../../src/ovn/topology.ts";
import type { OvsdbClient } from "../../../src/ovsdb/client.ts";
import type { NbTables } from "../../../src/ovsdb/models/nb.generated.ts";
import {
  ISOLATED_INGRESS,
  nodeGroupName,
  peerSetName,
  policyGroupName,
} from "../../../src/policy/nb-names.ts";
import { parseNetworkPolicy, podPeersOf } from "../../../src/policy/policy-model.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import { createNamespace, startInProcess, untilOk as until, useCluster } from "./harness.ts";

const NS = "np-txn";
const NODE = "node1";

type Ops = readonly Record<string, unknown>[];
/** A write that touches no logical switch port: a policy reconciler's, never the pod port's. */
const withoutPort = (ops: Ops) => !ops.some((o) => o.table === "Logical_Switch_Port");
const mutates = (ops: Ops, table: string) => ops.some((o) => o.op === "mutate" && o.table === table);

async function setUp(t: Parameters<typeof useCluster>[0]) {
  const { api, srv, nb: witness } = await useCluster(t);
  await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: NODE } } });
  await createNamespace(api, NS);
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  const createPod = (name: string, labels: Record<string, string>) =>
    api.request(`/api/v1/namespaces/${NS}/pods`, {
      method: "POST",
      body: { metadata: { name, labels }, spec: { nodeName: NODE, containers: [{ name: "c", image: "x" }] } },
    });
  const deletePod = (name: string) =>
    api.request(`/api/v1/namespaces/${NS}/pods/${name}`, {
      method: "DELETE",
      query: { gracePeriodSeconds: 0 },
    });
  const createPolicy = (name: string, spec: Record<string, unknown>) =>
    api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`, {
      method: "POST",
      body: { metadata: { name }, spec },
    });
  const lsp = (nb: OvsdbClient<NbTables>, name: string) =>
    nb.cache.table("Logical_Switch_Port").findOne((r) => r.external_ids[ID_KEY] === podPortId(NS, name));
  const ipOf = (nb: OvsdbClient<NbTables>, name: string) => lsp(nb, name)?.addresses[0]?.split(" ")[1];
  const pg = (name: string) => witness.cache.table("Port_Group").lookupOne("name", name);
  const set = (name: string) => witness.cache.table("Address_Set").lookupOne("name", name);
  return { api, witness, proxy, createPod, deletePod, createPolicy, lsp, ipOf, pg, set };
}

test("a new pod's port is in its isolation, own-node and policy port groups in the first NB state that has it", async (t) => {
  const { witness, proxy, createPod, createPolicy, lsp, pg } = await setUp(t);
  await createPolicy("deny-all", { podSelector: {}, policyTypes: ["Ingress"] });
  const groups = [ISOLATED_INGRESS, nodeGroupName(NODE), policyGroupName(`${NS}/deny-all`)];
  // A first pod, to know the groups exist and the reconcilers run.
  await createPod("first", { app: "x" });
  await until("the first pod in every group", () => {
    const port = lsp(witness, "first");
    return port && groups.every((g) => pg(g)?.ports.includes(port._uuid)) ? true : undefined;
  });

  // From here on the reconcilers' membership writes wait: only the port's own transaction can place it.
  const release = proxy.holdTransactions((ops) => withoutPort(ops) && mutates(ops, "Port_Group"));
  let released = false;
  t.after(() => {
    if (!released) release();
  });
  let states = 0;
  const outside: string[] = [];
  const unsubscribe = witness.cache.subscribe(undefined, () => {
    const port = lsp(witness, "second");
    if (!port) return;
    states++;
    for (const g of groups)
      if (!pg(g)?.ports.includes(port._uuid)) outside.push(`update ${states}: port not in ${g}`);
  });
  t.after(unsubscribe);
  const t0 = Date.now();
  await createPod("second", { app: "y" });
  await until("the second pod's port", () => lsp(witness, "second"));
  console.log(`second pod's port in NB after ${Date.now() - t0} ms`);
  // Time for a write of the reconcilers to slip through, were one not held.
  await delay(1000);
  released = true;
  release();
  await until("the second pod in every group", () => {
    const port = lsp(witness, "second");
    return port && groups.every((g) => pg(g)?.ports.includes(port._uuid)) ? true : undefined;
  });
  await delay(500);
  assert.ok(states > 0, "the witness saw the port");
  assert.deepEqual(outside, [], "every NB state with the port has it in its groups");
});

test("a freed address leaves its old pod's peer set in the port's delete, before a new pod can hold it", async (t) => {
  const { witness, proxy, createPod, deletePod, createPolicy, lsp, ipOf, set } = await setUp(t);
  const spec = {
    podSelector: { matchLabels: { app: "server" } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: "a" } } }] }],
  };
  await createPolicy("from-a", spec);
  const [peer] = [
    ...podPeersOf(parseNetworkPolicy({ metadata: { namespace: NS, name: "from-a" }, spec })).keys(),
  ];
  const peerSet = peerSetName(peer as string, 4);
  await createPod("server", { app: "server" });
  await createPod("a", { app: "a" });
  const ipA = await until("pod a in the peer set", () => {
    const ip = ipOf(witness, "a");
    return ip && set(peerSet)?.addresses.includes(ip) ? ip : undefined;
  });

  // From here on the peer reconciler's writes wait: only the port's delete can take the address out.
  const release = proxy.holdTransactions((ops) => withoutPort(ops) && mutates(ops, "Address_Set"));
  let released = false;
  t.after(() => {
    if (!released) release();
  });
  let states = 0;
  const inherited: string[] = [];
  const unsubscribe = witness.cache.subscribe(undefined, () => {
    const ipB = ipOf(witness, "b");
    if (!ipB) return;
    states++;
    if (set(peerSet)?.addresses.includes(ipB)) inherited.push(`update ${states}: ${ipB} in the peer set`);
  });
  t.after(unsubscribe);
  await deletePod("a");
  await until("pod a's port gone", () => (lsp(witness, "a") ? undefined : true));
  await createPod("b", { app: "b" });
  const ipB = await until("pod b's port", () => ipOf(witness, "b"));
  assert.equal(ipB, ipA, "b got a's address (the lowest free)");
  await delay(1000);
  released = true;
  release();
  await delay(1000);
  assert.ok(states > 0, "the witness saw b's port");
  assert.deepEqual(inherited, [], "b's address is never in a's peer set while b's port exists");
  assert.deepEqual(set(peerSet)?.addresses, []);
});

test("the first pod on a new node: its own-node group, with the allow from the node's management address, lands with its port", async (t) => {
  const { api, witness, proxy, createPolicy, lsp, pg } = await setUp(t);
  await createPolicy("deny-all", { podSelector: {}, policyTypes: ["Ingress"] });
  const createPodOn = (name: string, node: string) =>
    api.request(`/api/v1/namespaces/${NS}/pods`, {
      method: "POST",
      body: { metadata: { name }, spec: { nodeName: node, containers: [{ name: "c", image: "x" }] } },
    });
  await createPodOn("first", NODE);
  await until("the first pod isolated", () => {
    const port = lsp(witness, "first");
    return port && pg(ISOLATED_INGRESS)?.ports.includes(port._uuid) ? true : undefined;
  });

  // From here on the isolation reconciler's writes wait (the group of a new node included): only the port's
  // own transaction can give the new node's pod its own-node allow.
  const release = proxy.holdTransactions(
    (ops) => withoutPort(ops) && ops.some((o) => o.table === "Port_Group" || o.table === "ACL"),
  );
  let released = false;
  t.after(() => {
    if (!released) release();
  });
  const NEW = "node2";
  await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: NEW } } });
  const mgmtIp = await until("node2's management port", () => {
    const p = witness.cache.table("Logical_Switch_Port").lookupOne("name", mgmtPortName(NEW));
    return p?.addresses[0]?.split(" ")[1];
  });
  const group = nodeGroupName(NEW);
  const allowed = () => {
    const g = pg(group);
    return (g?.acls ?? []).some((a) => {
      const acl = witness.cache.table("ACL").get(a);
      return acl?.action === "allow-related" && acl.match.includes(mgmtIp);
    });
  };
  let states = 0;
  const denied: string[] = [];
  const unsubscribe = witness.cache.subscribe(undefined, () => {
    const port = lsp(witness, "new");
    if (!port || !pg(ISOLATED_INGRESS)?.ports.includes(port._uuid)) return;
    states++;
    if (!pg(group)?.ports.includes(port._uuid)) denied.push(`update ${states}: isolated, not in ${group}`);
    else if (!allowed()) denied.push(`update ${states}: ${group} has no allow from ${mgmtIp}`);
  });
  t.after(unsubscribe);
  // The controller's view has node2's management port before the pod comes.
  await delay(500);
  await createPodOn("new", NEW);
  await until("the new pod's port", () => lsp(witness, "new"));
  await delay(1000);
  released = true;
  release();
  await until("the new pod in node2's own-node group with its allow", () => {
    const port = lsp(witness, "new");
    return port && pg(group)?.ports.includes(port._uuid) && allowed() ? true : undefined;
  });
  await delay(500);
  assert.ok(states > 0, "the witness saw the port isolated");
  assert.deepEqual(denied, [], "no NB state isolates the pod without its node's allow");
});

test("a pod's port moved to another node leaves its old node's own-node group in the write that moves it", async (t) => {
  const { api, witness, proxy, createPolicy, lsp, pg } = await setUp(t);
  await createPolicy("deny-all", { podSelector: {}, policyTypes: ["Ingress"] });
  const OTHER = "node2";
  await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: OTHER } } });
  const createPodOn = (node: string) =>
    api.request(`/api/v1/namespaces/${NS}/pods`, {
      method: "POST",
      body: {
        metadata: { name: "mover" },
        spec: { nodeName: node, containers: [{ name: "c", image: "x" }] },
      },
    });
  await createPodOn(NODE);
  await until("the pod in node1's own-node group", () => {
    const port = lsp(witness, "mover");
    return port && pg(nodeGroupName(NODE))?.ports.includes(port._uuid) ? true : undefined;
  });
  let states = 0;
  const stale: string[] = [];
  const unsubscribe = witness.cache.subscribe(undefined, () => {
    const port = lsp(witness, "mover");
    if (!port || port.options["requested-chassis"] !== OTHER) return;
    states++;
    if (pg(nodeGroupName(NODE))?.ports.includes(port._uuid))
      stale.push(`update ${states}: on ${OTHER}, still in ${nodeGroupName(NODE)}`);
  });
  t.after(unsubscribe);
  // The pod's delete is held and then lost with its connection, while the pod comes back under the same name
  // on node2: the retried reconcile finds its port on node1 and moves it. The isolation reconciler's writes
  // wait meanwhile, so only the port's own write can take it out of node1's group.
  const isolation = proxy.holdTransactions((ops) => withoutPort(ops) && mutates(ops, "Port_Group"));
  let deletes = 0;
  const lost = proxy.holdTransactions((ops) => {
    const hit = ops.some((o) => o.op === "delete" && o.table === "Logical_Switch_Port");
    if (hit) deletes++;
    return hit;
  });
  let released = false;
  t.after(() => {
    if (!released) {
      lost();
      isolation();
    }
  });
  await api.request(`/api/v1/namespaces/${NS}/pods/mover`, {
    method: "DELETE",
    query: { gracePeriodSeconds: 0 },
  });
  await until("the port's delete held", () => (deletes > 0 ? true : undefined));
  await createPodOn(OTHER);
  await delay(1000);
  proxy.cut();
  lost();
  await until("the port on node2", () =>
    lsp(witness, "mover")?.options["requested-chassis"] === OTHER ? true : undefined,
  );
  await delay(1000);
  released = true;
  isolation();
  await until("the pod in node2's own-node group", () => {
    const port = lsp(witness, "mover");
    return port && pg(nodeGroupName(OTHER))?.ports.includes(port._uuid) ? true : undefined;
  });
  assert.ok(states > 0, "the witness saw the port on node2");
  assert.deepEqual(stale, [], "no NB state has the moved port in its old node's group");
});
