// The controller against a real apiserver and a real NB when NB replies get lost (a fault proxy between the
// controller's OvsdbClient and ovsdb-server commits the transaction and resets the connection before the reply
// arrives), and when a Node is deleted and registers again while its pods stay.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { nodePodsAddressSet } from "../../../src/ovn/topology.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import {
  allAnnotated,
  assertConsistent,
  createNamespace,
  createPods,
  deletePods,
  type PodRef,
  podAddress,
  podPorts,
  startInProcess,
  until,
  useCluster,
} from "./harness.ts";

/** A transaction that inserts or deletes a Logical_Switch_Port and mentions a pod port (not topology). */
const touchesPodPort = (op: string) => (ops: readonly Record<string, unknown>[]) =>
  ops.some((o) => o.op === op && o.table === "Logical_Switch_Port") &&
  (op === "delete" || JSON.stringify(ops).includes('"pod-port"'));

test("replies lost after a pod port insert and after a port delete: one port per pod, no address twice, none leaked", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "lost");
  const proxy = await startOvsdbFaultProxy(c.srv.unix);
  t.after(() => proxy.close());
  const ctl = await startInProcess(c, { nbRemote: proxy.remote });
  t.after(() => ctl.stop());
  const usedIPs = async () => (await c.api.request<Subnet>(`${SUBNET_PATH}/default`)).status?.usedIPs;

  // The first pod port insert commits and its reply is lost; the others follow.
  const lostInsert = proxy.loseNextReply(touchesPodPort("insert"));
  const first: PodRef[] = Array.from({ length: 6 }, (_, i) => ["lost", `p${i}`] as const);
  await createPods(c.api, first, 1);
  await lostInsert;
  await allAnnotated(c.api, 6);
  await assertConsistent(c.api, c.nb);
  await until("usedIPs 6", async () => ((await usedIPs()) === 6 ? true : undefined));

  // A port delete commits and its reply is lost; new pods come after it.
  const lostDelete = proxy.loseNextReply(touchesPodPort("delete"));
  await deletePods(c.api, first.slice(0, 3));
  await lostDelete;
  await until("3 pod ports left", async () => ((await podPorts(c.nb)).length === 3 ? true : undefined));
  await createPods(
    c.api,
    Array.from({ length: 3 }, (_, i) => ["lost", `q${i}`] as const),
    1,
  );
  const pods = await allAnnotated(c.api, 6);
  await assertConsistent(c.api, c.nb);
  // Nothing leaked: the allocator counts exactly the six ports (the Subnet status shows its count).
  await until("usedIPs 6 again", async () => ((await usedIPs()) === 6 ? true : undefined));
  const addresses = pods.map(podAddress);
  assert.equal(new Set(addresses).size, 6, `six distinct addresses: ${addresses.join(", ")}`);
});

test("a Node deleted and registered again while its pods stay gets their addresses back in its address set", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "stay");
  await c.api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: "node1" } } });
  const ctl = await startInProcess(c);
  t.after(() => ctl.stop());
  const pods: PodRef[] = [
    ["stay", "a"],
    ["stay", "b"],
  ];
  await createPods(c.api, pods);
  for (const [ns, name] of pods) {
    await c.api.request(`/api/v1/namespaces/${ns}/pods/${name}/binding`, {
      method: "POST",
      body: { metadata: { name }, target: { apiVersion: "v1", kind: "Node", name: "node1" } },
    });
  }
  const annotated = await allAnnotated(c.api, 2);
  const want = annotated.map((p) => podAddress(p) as string).sort();
  const setOf = async () => {
    await c.nb.echo();
    const set = c.nb.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet("node1", 4));
    return set ? [...set.addresses].sort() : undefined;
  };
  await until("node1's set holds both pods", async () =>
    JSON.stringify(await setOf()) === JSON.stringify(want) ? true : undefined,
  );

  await c.api.request("/api/v1/nodes/node1", { method: "DELETE" });
  await until("node1's set is gone", async () => ((await setOf()) === undefined ? true : undefined));
  await c.api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: "node1" } } });
  await until("the new set of node1 holds both pods again", async () =>
    JSON.stringify(await setOf()) === JSON.stringify(want) ? true : undefined,
  );
});
