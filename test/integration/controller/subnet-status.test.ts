// Subnet status for problems that need cluster knowledge (a missing external switch, an exhausted pool), and
// recovery once the problem is gone, with zstack-ovnkube-controller as a process against a real apiserver and NB.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import {
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

test("a Subnet naming a missing external switch is Failed with ExternalSwitchNotFound, and Ready once the switch exists", async (t) => {
  const c = await useCluster(t);
  await spawnController(t, c, { identity: "solo" });
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/ext`);
  await createSubnet(c.api, "ext", {
    cidr: "10.60.0.0/24",
    gateway: "10.60.0.1",
    externalLogicalSwitch: "zstack-l3-4711",
  });
  const failed = await until("ext Failed", async () => {
    const s = await get();
    return s.status?.phase === "Failed" ? s : undefined;
  });
  const cond = ready(failed);
  assert.equal(cond?.status, "False");
  assert.equal(cond?.reason, "ExternalSwitchNotFound");
  assert.match(cond?.message ?? "", /zstack-l3-4711/);

  // A foreign writer (ZStack) creates the switch, owned by nobody we know.
  await c.srv.transactRaw("OVN_Northbound", [
    { op: "insert", table: "Logical_Switch", row: { name: "zstack-l3-4711" } },
  ]);
  // The controller follows NB's switches: the Subnet naming this one is re-judged without any Subnet event.
  const ok = await until("ext Ready", async () => {
    const s = await get();
    return ready(s)?.status === "True" ? s : undefined;
  });
  assert.equal(ok.status?.phase, "Active");
  assert.equal(ok.status?.logicalSwitch, "zstack-l3-4711");
  assert.equal(
    ok.status?.observedGeneration,
    ok.metadata.generation,
    "the status says which spec it describes",
  );
  assert.equal(ready(ok)?.observedGeneration, ok.metadata.generation);

  // Attaching pods to ZStack's switches is External mode, not implemented yet: such a pod gets a Warning
  // Event saying so, no address, and nothing is written to the ZStack switch.
  await t.test(
    "a pod of the External subnet's namespace gets an ExternalModeNotSupported Event and no port",
    async () => {
      await createNamespace(c.api, "ext-ns");
      await c.api.request(`${SUBNET_PATH}/ext`, {
        method: "PATCH",
        body: { spec: { namespaces: ["ext-ns"] } },
      });
      await createPods(c.api, [["ext-ns", "vm-neighbour"]]);
      const ev = await until("ExternalModeNotSupported event", async () => {
        const list = await c.api.request<{ items: { reason: string; message: string }[] }>(
          "/api/v1/namespaces/ext-ns/events",
          { query: { fieldSelector: "involvedObject.name=vm-neighbour" } },
        );
        return list.items.find((e) => e.reason === "ExternalModeNotSupported");
      });
      assert.match(ev.message, /zstack-l3-4711/);
      assert.equal(podAddress(await c.api.request("/api/v1/namespaces/ext-ns/pods/vm-neighbour")), undefined);
      await c.nb.echo();
      const ls = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === "zstack-l3-4711");
      assert.equal(ls?.ports.length, 0, "nothing written to the ZStack switch");
      // The namespaces change was a new generation; the status follows it.
      const after = await until("status of the new generation", async () => {
        const sn = await get();
        return (sn.metadata.generation ?? 0) > (ok.metadata.generation ?? 0) &&
          sn.status?.observedGeneration === sn.metadata.generation
          ? sn
          : undefined;
      });
      assert.equal(ready(after)?.observedGeneration, after.metadata.generation);
    },
  );
});

test("an exhausted /29 gives the sixth pod an AddressesExhausted Event and no address, and the pod gets one when another leaves", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "small");
  await spawnController(t, c, { identity: "solo" });
  await createSubnet(c.api, "tiny", { cidr: "10.70.0.0/29", gateway: "10.70.0.1", namespaces: ["small"] });
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/tiny`);
  await until("tiny Ready", async () => (ready(await get())?.status === "True" ? true : undefined));

  const five = [1, 2, 3, 4, 5].map((i) => ["small", `p${i}`] as const);
  await createPods(c.api, five);
  const pods = await until("5 pods annotated", async () => {
    const l = await listPods(c.api);
    return l.length === 5 && l.every((p) => podAddress(p)) ? l : undefined;
  });
  const ips = pods.map((p) => podAddress(p) as string);
  assert.equal(new Set(ips).size, 5);
  for (const ip of ips)
    assert.match(ip, /^10\.70\.0\.[2-6]$/, "network, gateway and broadcast are never given");

  await createPods(c.api, [["small", "p6"]]);
  const ev = await until("AddressesExhausted Event on p6", async () => {
    const l = await c.api.request<{
      items: { reason: string; type: string; message: string; involvedObject: { name: string } }[];
    }>("/api/v1/namespaces/small/events");
    return l.items.find((e) => e.involvedObject.name === "p6" && e.reason === "AddressesExhausted");
  });
  assert.equal(ev.type, "Warning");
  const p6 = await c.api.request<{ metadata: { annotations?: Record<string, string> } }>(
    "/api/v1/namespaces/small/pods/p6",
  );
  assert.equal(podAddress(p6 as never), undefined, "no annotation on the pod left without an address");
  const exhausted = await until("tiny AddressesExhausted", async () => {
    const s = await get();
    return ready(s)?.reason === "AddressesExhausted" ? s : undefined;
  });
  assert.equal(ready(exhausted)?.status, "False");
  assert.equal(exhausted.status?.availableIPs, 0);
  assert.equal(exhausted.status?.usedIPs, 5);

  await deletePods(c.api, [["small", "p3"]]);
  // The waiting pod takes the freed address (woken by the release; how soon is a diagnostic, not asserted:
  // a wall-clock bound fails on a loaded machine).
  const started = Date.now();
  const got = await until(
    "p6 annotated",
    async () => {
      const p = await c.api.request<{ metadata: { annotations?: Record<string, string> } }>(
        "/api/v1/namespaces/small/pods/p6",
      );
      return podAddress(p as never);
    },
    90_000,
  );
  t.diagnostic(`p6 got ${got} ${Date.now() - started} ms after p3 was deleted`);
  assert.equal(
    got,
    podAddress(pods.find((p) => p.metadata.name === "p3") as never),
    "p3's address is reused",
  );
  // Full again; a pod leaving with nobody waiting makes the subnet Ready.
  await until("tiny full again", async () =>
    ready(await get())?.reason === "AddressesExhausted" ? true : undefined,
  );
  await deletePods(c.api, [["small", "p6"]]);
  await until("tiny Ready again", async () => (ready(await get())?.status === "True" ? true : undefined));
});

test("Subnets overlapping the service CIDR or a node address are Failed naming it, and the node one is Ready once the node is gone and the Subnet is touched", async (t) => {
  const c = await useCluster(t);
  await c.api.request("/api/v1/nodes", {
    method: "POST",
    body: {
      metadata: { name: "worker-9" },
      status: { addresses: [{ type: "InternalIP", address: "10.91.0.9" }] },
    },
  });
  await spawnController(t, c, { identity: "solo" });
  await createSubnet(c.api, "svc", { cidr: "10.96.128.0/24", gateway: "10.96.128.1" });
  await createSubnet(c.api, "nodes", { cidr: "10.91.0.0/24", gateway: "10.91.0.1" });
  const failed = (name: string) =>
    until(`${name} Failed`, async () => {
      const s = await c.api.request<Subnet>(`${SUBNET_PATH}/${name}`);
      return s.status?.phase === "Failed" ? s : undefined;
    });
  const svc = await failed("svc");
  assert.equal(ready(svc)?.reason, "Overlap");
  assert.match(ready(svc)?.message ?? "", /service CIDR 10\.96\.0\.0\/16/);
  const nodes = await failed("nodes");
  assert.equal(ready(nodes)?.reason, "Overlap");
  assert.match(ready(nodes)?.message ?? "", /10\.91\.0\.9.*node worker-9/);

  assert.equal((await c.api.request<Subnet>(`${SUBNET_PATH}/svc`)).status?.phase, "Failed");

  // A pod of a Failed Subnet's namespace waits with an Event saying why, and gets its address once the
  // Subnet is Ready (woken by the Subnet loading, not by polling).
  await createNamespace(c.api, "wait-ns");
  await c.api.request(`${SUBNET_PATH}/nodes`, {
    method: "PATCH",
    body: { spec: { namespaces: ["wait-ns"] } },
  });
  await createPods(c.api, [["wait-ns", "waiter"]]);
  const waitEvent = await until("SubnetNotReady Event on waiter", async () => {
    const l = await c.api.request<{ items: { reason: string; message: string; type: string }[] }>(
      "/api/v1/namespaces/wait-ns/events",
    );
    return l.items.find((e) => e.reason === "SubnetNotReady");
  });
  assert.equal(waitEvent.type, "Warning");
  assert.match(waitEvent.message, /Subnet nodes is Failed: .*node worker-9/);

  await c.api.request("/api/v1/nodes/worker-9", { method: "DELETE" });
  await t.test("the Subnet becomes Ready once the node is gone, with no Subnet event", async () => {
    const ok = await until(
      "nodes Ready",
      async () => {
        const s = await c.api.request<Subnet>(`${SUBNET_PATH}/nodes`);
        return ready(s)?.status === "True" ? s : undefined;
      },
      20_000,
    );
    assert.equal(ok.status?.phase, "Active");
    const waiter = await until("waiter annotated", async () => {
      const p = (await listPods(c.api)).find((x) => x.metadata.name === "waiter");
      return p ? podAddress(p) : undefined;
    });
    assert.match(waiter, /^10\.91\.0\.\d+$/);
  });
  // An operator's touch of the Subnet re-judges it at once.
  await c.api.request(`${SUBNET_PATH}/nodes`, {
    method: "PATCH",
    body: { metadata: { labels: { touched: "yes" } } },
  });
  const ok = await until("nodes Ready after a touch", async () => {
    const s = await c.api.request<Subnet>(`${SUBNET_PATH}/nodes`);
    return ready(s)?.status === "True" ? s : undefined;
  });
  assert.equal(ok.status?.phase, "Active");
});
