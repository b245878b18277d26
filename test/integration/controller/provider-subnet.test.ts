// Provider network Subnets (spec.vlanID, spec.provider) against a real kube-apiserver and a real NB: the localnet
// port is written with the switch, follows the spec, goes with the fields, and a bad spec names the field.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { EventRecorder } from "../../../src/k8s/events.ts";
import {
  INSIDE_ADDRESS_SET_V4,
  LOCALNET_SOURCE_GUARD_PRIORITY,
  subnetLocalnetPortName,
  subnetRouterPortName,
  subnetSwitchName,
} from "../../../src/ovn/topology.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { runTool } from "../../rig/process.ts";
import { createSubnet, readyCondition, startInProcess, until, useCluster } from "./harness.ts";

const VLAN_SPEC = { cidr: "172.30.100.0/24", gateway: "172.30.100.1", vlanID: 100, provider: "physnet1" };

test("a Subnet with vlanID and provider gets a localnet port with its switch and no router port; the port follows the spec, goes with the fields, and a restart writes nothing", async (t) => {
  const c = await useCluster(t);
  let run = await startInProcess(c);
  t.after(() => run.stop());
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/vlan100`);
  await createSubnet(c.api, "vlan100", VLAN_SPEC);
  await until("vlan100 Ready", async () =>
    readyCondition(await get())?.status === "True" ? true : undefined,
  );
  await c.nb.echo();
  const lsps = c.nb.cache.table("Logical_Switch_Port");
  const localnet = () => lsps.findOne((r) => r.name === subnetLocalnetPortName("vlan100"));
  const ln = localnet();
  assert.ok(ln, "the localnet port exists");
  assert.equal(ln.type, "localnet");
  assert.deepEqual(ln.addresses, ["unknown"]);
  assert.deepEqual(ln.options, { network_name: "physnet1" });
  assert.equal(ln.tag, 100);
  assert.equal(ln.external_ids["zstack.io/owner"], "zstack-ovnkube-controller");
  assert.equal(ln.external_ids["zstack.io/kind"], "localnet-port");
  assert.equal(ln.external_ids["zstack.io/subnet"], "vlan100");
  const ls = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("vlan100"));
  assert.ok(ls?.ports.includes(ln._uuid), "the port is on the subnet's switch");
  assert.equal(
    c.nb.cache.table("Logical_Router_Port").findOne((r) => r.name === subnetRouterPortName("vlan100")),
    undefined,
    "no router port: the gateway is the underlay's router",
  );
  // Frames from the VLAN claiming a cluster source (a node's management IP, an overlay pod) are dropped.
  const guard = () =>
    c.nb.cache
      .table("ACL")
      .findOne(
        (r) =>
          r.external_ids["zstack.io/kind"] === "localnet-source-guard" &&
          r.external_ids["zstack.io/subnet"] === "vlan100",
      );
  const g = guard();
  assert.ok(g, "the localnet source guard exists");
  assert.equal(g.direction, "from-lport");
  assert.equal(g.action, "drop");
  assert.equal(g.priority, LOCALNET_SOURCE_GUARD_PRIORITY);
  assert.equal(
    g.match,
    `inport == "${subnetLocalnetPortName("vlan100")}" && ip4 && ip4.src == $${INSIDE_ADDRESS_SET_V4}`,
  );
  assert.equal(g.external_ids["zstack.io/owner"], "zstack-ovnkube-controller");
  assert.ok(ls?.acls.includes(g._uuid), "the guard is on the subnet's switch");
  const inside = () =>
    c.nb.cache.table("Address_Set").findOne((r) => r.name === INSIDE_ADDRESS_SET_V4)?.addresses ?? [];
  assert.ok(!inside().includes("172.30.100.0/24"), "the VLAN's addresses are outside the overlay");

  // The switch and its localnet port came in one transaction: the record inserting the switch holds the port.
  const log = await runTool("ovsdb-tool", ["-mm", "show-log", join(c.srv.dir, "OVN_Northbound.db")]);
  const records = log.split(/\nrecord /);
  const withSwitch = records.filter((r) => r.includes(`"${subnetSwitchName("vlan100")}"`));
  assert.ok(withSwitch.length >= 1, "a record names the switch");
  assert.ok(
    withSwitch[0]?.includes(`"${subnetLocalnetPortName("vlan100")}"`),
    `the switch's first record also inserts the localnet port:\n${withSwitch[0]}`,
  );
  assert.ok(
    withSwitch[0]?.includes("localnet-source-guard"),
    `the switch's first record also inserts the guard:\n${withSwitch[0]}`,
  );

  // A restart with nothing changed writes nothing.
  await run.stop();
  const before = await writeRecords(c.srv, "OVN_Northbound");
  run = await startInProcess(c);
  await run.synced;
  await delay(3000);
  assert.equal((await writeRecords(c.srv, "OVN_Northbound")) - before, 0, "a restart writes nothing");

  // Another VLAN: the same row, retagged.
  await c.api.request(`${SUBNET_PATH}/vlan100`, { method: "PATCH", body: { spec: { vlanID: 200 } } });
  await until("tag 200", async () => {
    await c.nb.echo();
    return localnet()?.tag === 200 ? true : undefined;
  });
  assert.equal(localnet()?._uuid, ln._uuid, "updated in place");
  assert.equal(guard()?._uuid, g._uuid, "the guard stays as it is");
  // Another provider network.
  await c.api.request(`${SUBNET_PATH}/vlan100`, {
    method: "PATCH",
    body: { spec: { provider: "physnet2" } },
  });
  await until("network_name physnet2", async () => {
    await c.nb.echo();
    return localnet()?.options.network_name === "physnet2" ? true : undefined;
  });
  // No VLAN: a flat (untagged) provider network.
  await c.api.request(`${SUBNET_PATH}/vlan100`, { method: "PATCH", body: { spec: { vlanID: null } } });
  await until("untagged", async () => {
    await c.nb.echo();
    return localnet()?.tag === null ? true : undefined;
  });
  assert.equal(localnet()?.options.network_name, "physnet2");
  // No provider: an overlay subnet on the cluster router again.
  await c.api.request(`${SUBNET_PATH}/vlan100`, { method: "PATCH", body: { spec: { provider: null } } });
  await until("localnet port gone, router port back", async () => {
    await c.nb.echo();
    return localnet() === undefined &&
      c.nb.cache.table("Logical_Router_Port").findOne((r) => r.name === subnetRouterPortName("vlan100"))
      ? true
      : undefined;
  });
  assert.equal(guard(), undefined, "the guard went with the localnet port");
  assert.equal(
    c.nb.cache.table("ACL").findOne((r) => r.match.includes(subnetLocalnetPortName("vlan100"))),
    undefined,
  );
  assert.ok(inside().includes("172.30.100.0/24"), "an overlay subnet's CIDR stays inside");
  assert.equal(readyCondition(await get())?.status, "True");
});

test("vlanID without provider, and a provider name OVN cannot map, make the Subnet Failed naming spec.provider and the fix; fixed, it gets its localnet port", async (t) => {
  const c = await useCluster(t);
  const events = new EventRecorder({ client: c.api, component: "zstack-ovnkube-controller", host: "t" });
  const run = await startInProcess(c, { events });
  t.after(() => run.stop());
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/bad`);
  const failedWith = (pattern: RegExp) =>
    until(`bad Failed with ${pattern}`, async () => {
      const s = await get();
      const cond = readyCondition(s);
      return s.status?.phase === "Failed" && pattern.test(cond?.message ?? "") ? s : undefined;
    });
  await createSubnet(c.api, "bad", { cidr: "172.30.7.0/24", gateway: "172.30.7.1", vlanID: 7 });
  const noProvider = await failedWith(/spec\.provider: is required with spec\.vlanID/);
  assert.equal(readyCondition(noProvider)?.reason, "InvalidSpec");
  assert.match(noProvider.status?.message ?? "", /name the provider network that carries the VLAN/);
  const ev = await until("InvalidSpec Event", async () => {
    const l = await c.api.request<{ items: { reason: string; message: string; type: string }[] }>(
      "/api/v1/namespaces/default/events",
      { query: { fieldSelector: "involvedObject.name=bad" } },
    );
    return l.items.find((e) => e.reason === "InvalidSpec");
  });
  assert.equal(ev.type, "Warning");
  assert.match(ev.message, /spec\.provider/);

  await c.api.request(`${SUBNET_PATH}/bad`, { method: "PATCH", body: { spec: { provider: "phys:net1" } } });
  await failedWith(/spec\.provider: "phys:net1" is not a provider network name.*no ":" or ","/);
  await c.nb.echo();
  assert.equal(
    c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === subnetLocalnetPortName("bad")),
    undefined,
    "no localnet port for a refused spec",
  );

  await c.api.request(`${SUBNET_PATH}/bad`, { method: "PATCH", body: { spec: { provider: "physnet1" } } });
  await until("bad Ready", async () => (readyCondition(await get())?.status === "True" ? true : undefined));
  await until("localnet port", async () => {
    await c.nb.echo();
    const ln = c.nb.cache
      .table("Logical_Switch_Port")
      .findOne((r) => r.name === subnetLocalnetPortName("bad"));
    return ln?.tag === 7 && ln.options.network_name === "physnet1" ? true : undefined;
  });
});

test("a provider network Subnet inside clusterCIDR is Failed naming spec.cidr and the fix, and gets no switch or localnet port", async (t) => {
  const c = await useCluster(t);
  const run = await startInProcess(c);
  t.after(() => run.stop());
  const get = () => c.api.request<Subnet>(`${SUBNET_PATH}/inside`);
  await createSubnet(c.api, "inside", {
    cidr: "10.244.200.0/24",
    gateway: "10.244.200.1",
    vlanID: 100,
    provider: "physnet1",
  });
  const failed = await until("inside Failed", async () => {
    const s = await get();
    return s.status?.phase === "Failed" ? s : undefined;
  });
  assert.equal(readyCondition(failed)?.reason, "Overlap");
  assert.match(
    readyCondition(failed)?.message ?? "",
    /spec\.cidr 10\.244\.200\.0\/24 overlaps the cluster CIDR 10\.244\.0\.0\/16.*must lie outside clusterCIDR, the service CIDR and the join CIDR/,
  );
  await c.nb.echo();
  assert.equal(
    c.nb.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("inside")),
    undefined,
    "no switch for a refused spec",
  );
  assert.equal(
    c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === subnetLocalnetPortName("inside")),
    undefined,
  );
});
