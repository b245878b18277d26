// The ZStack simulator against real NB/SB/northd: its content is what the issue lists, every row carries the
// simulator's key, northd accepts it (flows in SB, the dynamic address assigned), the writer's changes show in
// the dump, and snapshots compare byte for byte. With Raft, the same on 3-member clusters, also after the NB
// leader is killed.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import type { DatabaseDump } from "./dump-format.ts";
import {
  diffDumps,
  foreignRows,
  HOSTS,
  ownedRows,
  SHARED_SWITCH_NAME,
  SIM_ROLE_KEY,
  useZStackSim,
  vmPortName,
  type ZStackSim,
} from "./zstack-sim.ts";

const mapOf = (v: unknown): Record<string, string> =>
  Object.fromEntries(Array.isArray(v) && v[0] === "map" ? (v[1] as [string, string][]) : []);
const setOf = (v: unknown): unknown[] =>
  Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v];
const uuidsOf = (v: unknown): string[] => setOf(v).map((u) => (u as [string, string])[1]);

function row(dump: DatabaseDump, sim: ZStackSim, table: string, role: string): Record<string, unknown> {
  const r = dump[table]?.[sim.uuid(role)];
  assert.ok(r, `${table} row with role ${role}`);
  return r;
}

async function checkContent(sim: ZStackSim): Promise<void> {
  const dump = await sim.dump();
  // Every row of NB was written by the simulator (northd creates none) and carries its key.
  for (const [table, rows] of Object.entries(dump))
    for (const [uuid, r] of Object.entries(rows))
      assert.ok(mapOf(r.external_ids)[SIM_ROLE_KEY], `${table} ${uuid} carries ${SIM_ROLE_KEY}`);
  assert.deepEqual(ownedRows(dump), [], "nothing of ours yet");

  const router = row(dump, sim, "Logical_Router", "router");
  const lrp = row(dump, sim, "Logical_Router_Port", "router-port-overlay");
  assert.deepEqual(setOf(lrp.networks), ["10.60.0.1/24", "fd60::1/64"]);
  assert.equal(uuidsOf(router.ports).length, 2);
  assert.equal(uuidsOf(router.nat).length, 2);

  const overlay = row(dump, sim, "Logical_Switch", "overlay-switch");
  const twin = row(dump, sim, "Logical_Switch", "twin-switch");
  assert.equal(overlay.name, SHARED_SWITCH_NAME);
  assert.equal(twin.name, SHARED_SWITCH_NAME, "the second switch has the same display name");
  assert.equal(mapOf(overlay.other_config).subnet, "10.60.0.0/24");
  assert.ok(mapOf(overlay.other_config).exclude_ips);
  assert.equal(uuidsOf(overlay.ports).length, 9);
  assert.equal(uuidsOf(overlay.load_balancer).length, 1);

  const rp = row(dump, sim, "Logical_Switch_Port", "router-type-port");
  assert.equal(rp.type, "router");
  const vm1 = row(dump, sim, "Logical_Switch_Port", "vm1");
  assert.match(vm1.name as string, /^vnic1\.0_[0-9a-f]{32}$/);
  assert.deepEqual(setOf(vm1.port_security), ["fa:a0:00:01:00:00 10.60.0.11 fd60::11 10.60.0.111"]);
  assert.equal(uuidsOf(vm1.dhcpv4_options)[0], sim.uuid("dhcp-v4"));
  const vm2 = row(dump, sim, "Logical_Switch_Port", "vm2");
  assert.equal(mapOf(vm2.options)["requested-chassis"], HOSTS.join(","), "VM 2 is migrating");

  const dyn = row(dump, sim, "Logical_Switch_Port", "edge-dynamic");
  assert.match(
    dyn.dynamic_addresses as string,
    /^[0-9a-f:]{17} 10\.60\.0\.\d+$/,
    "northd assigned an address",
  );
  const dynIp = (dyn.dynamic_addresses as string).split(" ")[1] as string;
  const last = Number(dynIp.split(".")[3]);
  assert.ok(last >= 10 && last !== 250, `the dynamic address ${dynIp} avoids exclude_ips`);
  assert.deepEqual(setOf(row(dump, sim, "Logical_Switch_Port", "edge-unknown").addresses), ["unknown"]);
  const lp = row(dump, sim, "Logical_Switch_Port", "edge-localport");
  assert.equal(lp.type, "localport");
  assert.deepEqual(setOf(lp.addresses), ["fa:a0:ff:00:00:09"]);
  const vip = row(dump, sim, "Logical_Switch_Port", "edge-virtual");
  assert.equal(mapOf(vip.options)["virtual-ip"], "10.60.0.100");
  assert.deepEqual(setOf(row(dump, sim, "Logical_Switch_Port", "edge-empty").addresses), []);
  assert.equal(row(dump, sim, "Logical_Switch_Port", "edge-disabled").enabled, false);

  const flat = row(dump, sim, "Logical_Switch", "flat-switch");
  const localnet = row(dump, sim, "Logical_Switch_Port", "localnet-port");
  assert.ok(uuidsOf(flat.ports).includes(sim.uuid("localnet-port")));
  assert.equal(localnet.type, "localnet");
  assert.equal(mapOf(localnet.options).network_name, "flat");

  const sg = row(dump, sim, "Port_Group", "security-group");
  assert.deepEqual(uuidsOf(sg.ports).sort(), [sim.uuid("vm1"), sim.uuid("vm2")].sort());
  assert.equal(uuidsOf(sg.acls).length, 3);
  assert.deepEqual(setOf(row(dump, sim, "Address_Set", "sg-address-set").addresses), [
    "10.60.0.11",
    "10.60.0.12",
  ]);
}

async function checkNorthd(sim: ZStackSim): Promise<void> {
  // northd turned it into datapaths: the three switches and the router.
  const sb = new OvsdbClient({ remotes: sim.sbRemotes, database: "OVN_Southbound", monitor: {} });
  try {
    await sb.connect({ retry: true });
    const [sel] = (await sb.transactRaw([
      { op: "select", table: "Datapath_Binding", where: [], columns: ["external_ids"] },
    ])) as { rows: { external_ids: unknown }[] }[];
    const names = (sel?.rows ?? []).map((r) => mapOf(r.external_ids).name).sort();
    const router = (await sim.dump()).Logical_Router?.[sim.uuid("router")]?.name as string;
    assert.deepEqual(names, [SHARED_SWITCH_NAME, SHARED_SWITCH_NAME, "l2-flat-network", router].sort());
  } finally {
    await sb.close();
  }
}

async function checkWriter(sim: ZStackSim, t: { diagnostic(s: string): void }): Promise<void> {
  const before = await sim.snapshot();
  assert.deepEqual(diffDumps(before, await sim.snapshot()), [], "nothing changed, nothing differs");

  const vm = await sim.writer.addVmPort({ ip4: "10.60.0.40", extraIp: "10.60.0.41", chassis: HOSTS });
  assert.match(vm.name, /^vnic100\.0_[0-9a-f]{32}$/);
  assert.equal(vm.name, vmPortName(100, 0));
  let dump = await sim.dump();
  assert.ok(uuidsOf(dump.Logical_Switch?.[sim.uuid("overlay-switch")]?.ports).includes(vm.uuid));
  const flatVm = await sim.writer.addVmPort({ network: "flat", ip4: "192.168.100.40" });
  assert.equal(flatVm.switchUuid, sim.uuid("flat-switch"));

  await sim.writer.rewriteSwitch(sim.uuid("overlay-switch"), 1);
  dump = await sim.dump();
  const overlay = dump.Logical_Switch?.[sim.uuid("overlay-switch")];
  assert.equal(mapOf(overlay?.external_ids)["zstack.sim/revision"], "1");
  assert.equal(uuidsOf(overlay?.ports).length, 10, "a rewrite keeps every port");

  const diff = diffDumps(before, await sim.snapshot());
  t.diagnostic(`differences after the writer: ${diff.length}`);
  assert.ok(diff.includes(`Logical_Switch_Port ${vm.uuid}: added`));
  assert.ok(diff.some((d) => d.startsWith(`Logical_Switch ${sim.uuid("overlay-switch")} external_ids:`)));
  assert.ok(diff.some((d) => d.startsWith(`Logical_Switch ${sim.uuid("overlay-switch")} ports:`)));

  await sim.writer.removeVmPort(vm);
  await sim.writer.removeVmPort(flatVm);
  await sim.writer.rewriteSwitch(sim.uuid("overlay-switch"), 2);
  dump = await sim.dump();
  assert.equal(dump.Logical_Switch_Port?.[vm.uuid], undefined, "the stopped VM's port is gone from NB");
  const after = diffDumps(before, await sim.snapshot());
  assert.deepEqual(
    after.map((d) => d.split(":")[0]),
    [`Logical_Switch ${sim.uuid("overlay-switch")} external_ids`],
    "only the revision remains different",
  );
  assert.deepEqual(foreignRows(dump), dump, "nothing of ours");
}

describe("the ZStack simulator", () => {
  test("standalone: ZStack's NB content, accepted by northd, with a writer and byte-exact snapshots", async (t) => {
    const started = Date.now();
    const sim = await useZStackSim(t, { tcp: true });
    t.diagnostic(`started in ${Date.now() - started} ms`);
    assert.ok(sim.nbServer && sim.nbTcpRemotes?.[0]?.startsWith("tcp:127.0.0.1:"));
    await checkContent(sim);
    await checkNorthd(sim);
    await checkWriter(sim, t);
  });

  test("Raft: 3-member NB and SB clusters; the writer follows a new NB leader", async (t) => {
    const started = Date.now();
    const sim = await useZStackSim(t, { raft: true });
    t.diagnostic(`started in ${Date.now() - started} ms`);
    const cluster = sim.nbCluster;
    assert.ok(cluster);
    assert.equal(sim.nbRemotes.length, 3);
    assert.equal(sim.sbRemotes.length, 3);
    await checkContent(sim);
    await checkNorthd(sim);
    const before = await sim.snapshot();
    const leader = await cluster.leader();
    leader.server.kill();
    await leader.server.waitForExit();
    const vm = await sim.writer.addVmPort({ ip4: "10.60.0.42" });
    const dump = await sim.dump();
    assert.ok(uuidsOf(dump.Logical_Switch?.[sim.uuid("overlay-switch")]?.ports).includes(vm.uuid));
    await leader.server.restart();
    await cluster.waitForQuorum(60_000);
    await sim.writer.removeVmPort(vm);
    assert.deepEqual(diffDumps(before, await sim.snapshot()), [], "the VM came and went; nothing else moved");
  });
});
