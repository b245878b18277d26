// Subnets and the pods that use them, with zstack-ovnkube-controller as a process against a real apiserver and
// NB: deleting a Subnet in use is held by its finalizer and reported (status and a SubnetInUse Warning Event)
// while its pods keep their ports; a pod may choose only a Subnet that lists its namespace; a pod-networks
// annotation the controller did not write is removed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { SUBNET_FINALIZER } from "../../../src/controller/controller.ts";
import { isNotFound } from "../../../src/k8s/api-client.ts";
import { findOwned } from "../../../src/ovn/nb-diff.ts";
import { POD_NETWORKS_ANNOTATION } from "../../../src/ovn/pod-port.ts";
import {
  type Cluster,
  createNamespace,
  createPods,
  createSubnet,
  deletePods,
  listPods,
  podAddress,
  readyCondition as ready,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

async function eventFor(c: Cluster, ns: string, pod: string, reason: string): Promise<string> {
  return until(`${reason} event on ${ns}/${pod}`, async () => {
    const l = await c.api.request<{ items: { reason: string; message: string }[] }>(
      `/api/v1/namespaces/${ns}/events`,
      { query: { fieldSelector: `involvedObject.name=${pod}` } },
    );
    return l.items.find((e) => e.reason === reason)?.message;
  });
}

async function podOf(c: Cluster, ns: string, name: string) {
  return (await listPods(c.api)).find((p) => p.metadata.namespace === ns && p.metadata.name === name);
}

test("deleting a Subnet in use is held by its finalizer and reported, its pods keep their ports, and it goes with its last pod", async (t) => {
  const c = await useCluster(t);
  await spawnController(t, c, { identity: "solo" });
  await createNamespace(c.api, "team");
  await createSubnet(c.api, "team-net", { cidr: "10.61.0.0/24", gateway: "10.61.0.1", namespaces: ["team"] });
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/team-net`);
  await until("team-net Ready with its finalizer", async () => {
    const s = await get();
    return ready(s)?.status === "True" && s.metadata.finalizers?.includes(SUBNET_FINALIZER);
  });
  await createPods(c.api, [
    ["team", "a"],
    ["team", "b"],
  ]);
  await until("both pods annotated", async () => {
    const pods = (await listPods(c.api)).filter((p) => p.metadata.namespace === "team");
    return pods.length === 2 && pods.every((p) => podAddress(p)?.startsWith("10.61.0."));
  });
  const switchPorts = () => {
    const ls = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/team-net");
    return ls ? (ls.ports as readonly string[]).length : undefined;
  };
  const portsBefore = switchPorts();

  await c.api.request(`${SUBNET_PATH}/team-net`, { method: "DELETE" });
  const held = await until("team-net Terminating", async () => {
    const s = await get();
    return ready(s)?.reason === "Terminating" ? s : undefined;
  });
  assert.ok(held.metadata.deletionTimestamp, "the Subnet is being deleted");
  assert.equal(held.status?.phase, "Active", "its pods keep working");
  const msg = ready(held)?.message ?? "";
  assert.match(msg, /2 ports still use it: pod team\/a, pod team\/b/);
  assert.match(msg, /removed once they are gone/);
  assert.equal(switchPorts(), portsBefore, "the switch keeps every port");
  // The deletion is reported on the Subnet too (a cluster-scoped object: its Events are in "default").
  const inUse = await until("a SubnetInUse Event on team-net", async () => {
    const l = await c.api.request<{
      items: { reason: string; type: string; message: string; involvedObject: { kind?: string } }[];
    }>("/api/v1/namespaces/default/events", { query: { fieldSelector: "involvedObject.name=team-net" } });
    return l.items.find((e) => e.reason === "SubnetInUse");
  });
  assert.equal(inUse.type, "Warning");
  assert.equal(inUse.involvedObject.kind, "Subnet");
  assert.match(inUse.message, /deletion waits for 2 ports on the subnet: pod team\/a, pod team\/b/);

  // No new pod lands on a Subnet that is going away.
  await createPods(c.api, [["team", "late"]]);
  assert.match(await eventFor(c, "team", "late", "SubnetNotReady"), /team-net is being deleted/);
  assert.equal(podAddress((await podOf(c, "team", "late"))!), undefined);

  await deletePods(c.api, [["team", "a"]]);
  await until("the status names only b", async () => {
    const m = ready(await get())?.message ?? "";
    return /1 port still uses it: pod team\/b;/.test(m);
  });
  await deletePods(c.api, [["team", "b"]]);
  await until("team-net gone", async () => {
    try {
      await get();
      return false;
    } catch (e) {
      return isNotFound(e);
    }
  });
  await until("its switch gone from NB", () => switchPorts() === undefined);
  const inside = c.nb.cache.table("Address_Set").lookupOne("name", "zovn_inside_v4");
  assert.ok(inside, "the inside set exists");
  assert.ok(
    !(inside.addresses as readonly string[]).includes("10.61.0.0/24"),
    "the inside set no longer lists the Subnet",
  );
});

test("a pod may not choose a Subnet that does not list its namespace, until the Subnet does", async (t) => {
  const c = await useCluster(t);
  await spawnController(t, c, { identity: "solo" });
  await createNamespace(c.api, "team");
  await createNamespace(c.api, "other");
  await createSubnet(c.api, "team-net", { cidr: "10.62.0.0/24", gateway: "10.62.0.1", namespaces: ["team"] });
  await until(
    "team-net Ready",
    async () => ready(await c.api.request<Subnet>(`${SUBNET_PATH}/team-net`))?.status === "True",
  );
  await c.api.request("/api/v1/namespaces/other/pods", {
    method: "POST",
    body: {
      metadata: { name: "intruder", annotations: { "network.zstack.io/subnet": "team-net" } },
      spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
    },
  });
  const msg = await eventFor(c, "other", "intruder", "SubnetNotAllowed");
  assert.match(msg, /does not list namespace other in spec.namespaces/);
  assert.match(msg, /add the namespace to that Subnet, or remove the annotation/);
  assert.equal(podAddress((await podOf(c, "other", "intruder"))!), undefined);

  await c.api.request(`${SUBNET_PATH}/team-net`, {
    method: "PATCH",
    body: { spec: { namespaces: ["team", "other"] } },
  });
  await until("the pod gets an address from team-net", async () =>
    podAddress((await podOf(c, "other", "intruder"))!)?.startsWith("10.62.0."),
  );
});

test("a pod-networks annotation the controller did not write is removed, with an Event", async (t) => {
  const c = await useCluster(t);
  await spawnController(t, c, { identity: "solo" });
  await createNamespace(c.api, "evil");
  const forged = JSON.stringify({
    default: {
      ip_addresses: ["10.244.0.9/16"],
      mac_address: "0a:58:0a:f4:00:09",
      gateway_ips: ["10.244.0.1"],
      routes: [{ dest: "10.0.0.0/8 via 10.244.0.1\nnetns add pwn", nextHop: "10.244.0.1" }],
      logical_switch: "zovn-subnet-default",
    },
  });
  // Naming a Subnet that does not exist, so the controller never gives the pod a port (the original exploit).
  await c.api.request("/api/v1/namespaces/evil/pods", {
    method: "POST",
    body: {
      metadata: {
        name: "forger",
        annotations: { [POD_NETWORKS_ANNOTATION]: forged, "network.zstack.io/subnet": "no-such-subnet" },
      },
      spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
    },
  });
  assert.match(await eventFor(c, "evil", "forger", "ForeignPodNetworks"), /did not write/);
  await until("the forged annotation removed", async () => {
    const p = await podOf(c, "evil", "forger");
    return p !== undefined && p.metadata.annotations?.[POD_NETWORKS_ANNOTATION] === undefined;
  });
});
