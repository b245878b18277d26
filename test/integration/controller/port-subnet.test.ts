// A pod with a port stays on the port's subnet: after a restart where that Subnet is Failed and the pod's
// namespace now maps to another Subnet, the pod waits for its own (with an Event) and its port stays on one switch.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { subnetSwitchName } from "../../../src/ovn/topology.ts";
import {
  createNamespace,
  createPods,
  createSubnet,
  listPods,
  podAddress,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

test("a pod whose port's Subnet is Failed after a restart waits for it and is never moved to its namespace's new Subnet", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "stick");
  await createSubnet(c.api, "a", { cidr: "10.81.0.0/24", gateway: "10.81.0.1", namespaces: ["stick"] });
  const first = await spawnController(t, c, { identity: "before" });
  const addressOf = (name: string) =>
    until(`${name} annotated`, async () => {
      const p = (await listPods(c.api)).find((x) => x.metadata.name === name);
      return p ? podAddress(p) : undefined;
    });
  await createPods(c.api, [["stick", "p"]]);
  const before = await addressOf("p");
  assert.match(before, /^10\.81\.0\./);
  await first.stop();

  // While the controller is down: a Node with an address inside a makes a Failed at the next start, and the
  // namespace moves to a new Subnet b.
  await c.api.request("/api/v1/nodes", {
    method: "POST",
    body: {
      metadata: { name: "in-a" },
      status: { addresses: [{ type: "InternalIP", address: "10.81.0.200" }] },
    },
  });
  await c.api.request(`${SUBNET_PATH}/a`, { method: "PATCH", body: { spec: { namespaces: [] } } });
  await createSubnet(c.api, "b", { cidr: "10.82.0.0/24", gateway: "10.82.0.1", namespaces: ["stick"] });
  await spawnController(t, c, { identity: "after" });
  await until("a Failed", async () =>
    (await c.api.request<Subnet>(`${SUBNET_PATH}/a`)).status?.phase === "Failed" ? true : undefined,
  );
  // A new pod of the namespace lands on b: the controller is serving, and has been through p's key.
  await createPods(c.api, [["stick", "q"]]);
  assert.match(await addressOf("q"), /^10\.82\.0\./);

  const switchesOfP = async () => {
    await c.nb.echo();
    const port = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "stick_p");
    return c.nb.cache
      .table("Logical_Switch")
      .find((ls) => (ls.ports as string[]).includes(port?._uuid as string))
      .map((ls) => ls.name);
  };
  const waited = await until("p waits for a (Event), or its port moved", async () => {
    if ((await switchesOfP()).length > 1) return "moved";
    const l = await c.api.request<{
      items: { reason: string; message: string; involvedObject: { name: string } }[];
    }>("/api/v1/namespaces/stick/events");
    return l.items.find((e) => e.involvedObject.name === "p" && e.reason === "SubnetNotReady")?.message;
  });
  assert.match(waited, /Subnet a is Failed/);
  assert.deepEqual(await switchesOfP(), [subnetSwitchName("a")], "p's port is on its own switch only");
  const port = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "stick_p");
  assert.equal(port?.external_ids["zstack.io/subnet"], "a");
  assert.equal(await addressOf("p"), before, "p keeps its address and annotation");
});
