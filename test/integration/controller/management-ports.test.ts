import assert from "node:assert/strict";
import { test } from "node:test";
import { ManagementPorts, type MgmtPort } from "../../../src/controller/management-ports.ts";
import { PodPortAllocator } from "../../../src/controller/pod-port-allocator.ts";
import { heldIps } from "../../../src/ipam/lsp-addresses.ts";
import { parseSubnetSpec } from "../../../src/ipam/subnet-spec.ts";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { CLUSTER_ROUTER, coreRows, desiredTopology, nodePodsAddressSet } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};

test("each node gets its own management address, port, address set and egress policy; a restart changes nothing; removal cleans up", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const txn = c.transaction();
  plan(c.cache as never, c.schema, txn as never, coreRows(NET));
  await txn.commit();
  await c.echo();
  const nn = new ManagementPorts(c, NET);
  const m1 = await nn.ensure("node1");
  const m2 = await nn.ensure("node2");
  assert.equal(m1.ip, "100.64.0.2/16");
  assert.equal(m1.serviceSnatIp, "100.64.0.3");
  assert.equal(m2.ip, "100.64.0.4/16");
  assert.equal(m2.serviceSnatIp, "100.64.0.5");
  assert.equal(m1.gateway, "100.64.0.1");
  await c.echo();
  const lsp1 = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "zovn-mgmt-node1");
  assert.deepEqual(
    lsp1?.addresses,
    [`${m1.mac} 100.64.0.2 100.64.0.3`],
    "OVN routes both addresses to the node",
  );
  assert.equal(lsp1?.external_ids["zstack.io/service-snat-ip"], "100.64.0.3");
  const lr = c.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
  assert.equal(lr?.policies.length, 2);

  const c2 = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c2.close());
  await c2.connect();
  const nn2 = new ManagementPorts(c2, NET);
  const before = await writeRecords(srv, "OVN_Northbound");
  assert.deepEqual(await nn2.ensure("node2"), m2, "same address after a restart");
  assert.deepEqual(await nn2.ensure("node1"), m1);
  assert.equal(await writeRecords(srv, "OVN_Northbound"), before, "no write after a restart with no changes");
  assert.equal((await nn2.ensure("node3")).ip, "100.64.0.6/16");

  assert.equal(await nn2.remove("node1"), true);
  await c2.echo();
  const lr2 = c2.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
  assert.equal(lr2?.policies.length, 2, "node2 and node3 remain");
  assert.equal(
    c2.cache.table("Logical_Switch_Port").findOne((r) => r.name === "zovn-mgmt-node1"),
    undefined,
  );
  const m4 = await nn2.ensure("node4");
  assert.equal(m4.ip, "100.64.0.2/16", "node1's address is free again");
  assert.equal(m4.serviceSnatIp, "100.64.0.3", "and its service SNAT address");
});

test("a node's address set holds its pods' addresses whenever it is written: pods that landed before the set, a Node re-registered while its pods remain, stale entries", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const txn = c.transaction();
  plan(
    c.cache as never,
    c.schema,
    txn as never,
    desiredTopology(NET, [{ name: "default", cidrs: ["10.244.0.0/24"], gateways: ["10.244.0.1"] }], []),
  );
  await txn.commit();
  await c.echo();
  const spec = parseSubnetSpec({ cidr: "10.244.0.0/24", gateway: "10.244.0.1" });
  if (!spec.ok) throw new Error(JSON.stringify(spec));
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", spec.subnet);
  const nn = new ManagementPorts(c, NET);
  const setOf = async (node: string) => {
    await c.echo();
    const set = c.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet(node, 4));
    return set ? [...set.addresses].sort() : undefined;
  };
  const podOn = async (name: string, node: string) => {
    const r = await pn.ensure({ namespace: "ns", name, uid: `u${name}`, node }, "default");
    assert.ok(r.ok, JSON.stringify(r));
    return r.ips[0] as string;
  };

  // Pods scheduled to node1 before its Node was reconciled: their writes found no set to join.
  const a = await podOn("a", "node1");
  const b = await podOn("b", "node1");
  assert.equal(await setOf("node1"), undefined);
  await nn.ensure("node1");
  assert.deepEqual(await setOf("node1"), [a, b].sort(), "the new set holds the pods already there");
  const other = await podOn("c", "node2");

  // The Node is deleted and registers again while its pods stay.
  assert.equal(await nn.remove("node1"), true);
  assert.equal(await setOf("node1"), undefined);
  await nn.ensure("node1");
  assert.deepEqual(await setOf("node1"), [a, b].sort(), "a re-registered node's set holds its pods again");

  // An address no pod of node1 holds (node2's pod, say) leaves the set at the next reconcile.
  const set = c.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet("node1", 4));
  await c.transact((x) =>
    x.mutate("Address_Set", [["_uuid", "==", set?._uuid as string]], [["addresses", "insert", [other]]]),
  );
  await nn.ensure("node1");
  assert.deepEqual(await setOf("node1"), [a, b].sort());
  const before = await writeRecords(srv, "OVN_Northbound");
  await nn.ensure("node1");
  assert.equal(await writeRecords(srv, "OVN_Northbound"), before, "nothing to write when the set is right");
});

/** Records every moment NB held one join address on two ports, as seen by a client that follows NB. */
function watchJoinAddresses(nb: OvsdbClient<NbTables>): { seen: string[]; stop: () => void } {
  const seen: string[] = [];
  const check = () => {
    const byAddress = new Map<string, string>();
    for (const r of nb.cache.table("Logical_Switch_Port").values()) {
      if (r.external_ids["zstack.io/kind"] !== "mgmt-port") continue;
      for (const ip of heldIps(r)) {
        const other = byAddress.get(ip);
        if (other !== undefined) seen.push(`${ip} on ${other} and ${r.name}`);
        byAddress.set(ip, r.name);
      }
    }
  };
  const stop = nb.cache.subscribe("Logical_Switch_Port", check);
  return { seen, stop };
}

/** Every join port's addresses, by port name. */
async function joinPorts(nb: OvsdbClient<NbTables>): Promise<Map<string, string[]>> {
  await nb.echo();
  const out = new Map<string, string[]>();
  for (const r of nb.cache.table("Logical_Switch_Port").values())
    if (r.external_ids["zstack.io/kind"] === "mgmt-port") out.set(r.name, heldIps(r));
  return out;
}

function assertDisjoint(ports: Map<string, string[]>): void {
  const all = [...ports.values()].flat();
  assert.equal(new Set(all).size, all.length, `no join address on two ports: ${JSON.stringify([...ports])}`);
}

async function joinRig(t: { after(fn: () => unknown): void }) {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const admin = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => admin.close());
  await admin.connect();
  const txn = admin.transaction();
  plan(admin.cache as never, admin.schema, txn as never, coreRows(NET));
  await txn.commit();
  await admin.echo();
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const c = new OvsdbClient<NbTables>({ remotes: proxy.remote, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const nn = new ManagementPorts(c, NET);
  t.after(nn.follow());
  const watch = watchJoinAddresses(admin);
  t.after(watch.stop);
  return { srv, admin, proxy, c, nn, seen: watch.seen };
}

/** After convergence, a new controller ensuring every node finds its port as it is: no write. */
async function assertRestartWritesNothing(
  srv: Awaited<ReturnType<typeof useOvsdbServer>>,
  t: { after(fn: () => unknown): void },
  nodes: Record<string, MgmtPort>,
): Promise<void> {
  const c2 = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c2.close());
  await c2.connect();
  const nn2 = new ManagementPorts(c2, NET);
  t.after(nn2.follow());
  const before = await writeRecords(srv, "OVN_Northbound");
  for (const [node, m] of Object.entries(nodes)) assert.deepEqual(await nn2.ensure(node), m, node);
  assert.equal(await writeRecords(srv, "OVN_Northbound"), before, "no write after a restart with no changes");
}

test("a controller whose view of NB lags another writer's node port never gives that port's join addresses to a new node; it converges", async (t) => {
  const { srv, admin, proxy, nn, seen } = await joinRig(t);
  const m1 = await nn.ensure("node1");
  // Another writer (the previous leader, say) adds node2 while this controller's view of NB stands still.
  const release = proxy.holdFromServer();
  const other = new ManagementPorts(admin, NET);
  const m2 = await other.ensure("node2");
  assert.equal(m2.ip, "100.64.0.4/16");
  // node3's insert goes out on the stale view, where node2's addresses are free.
  const pending = nn.ensure("node3").then(
    (m) => m,
    (e: unknown) => e as Error,
  );
  await new Promise((r) => setTimeout(r, 300));
  release();
  const m3 = await pending;
  assert.ok(!(m3 instanceof Error), String(m3));
  assert.deepEqual(seen, [], "NB never held one join address on two ports");
  const ports = await joinPorts(admin);
  assertDisjoint(ports);
  assert.deepEqual(ports.get("zovn-mgmt-node3"), [m3.ip.split("/")[0], m3.serviceSnatIp]);
  assert.deepEqual(ports.get("zovn-mgmt-node2"), ["100.64.0.4", "100.64.0.5"]);
  // The lagging controller now holds node2's addresses too: the next node gets fresh ones at once.
  const m4 = await nn.ensure("node4");
  assertDisjoint(await joinPorts(admin));
  assert.deepEqual(seen, []);
  await assertRestartWritesNothing(srv, t, { node1: m1, node2: m2, node3: m3, node4: m4 });
});

test("a node port insert held back while the view is reloaded keeps its addresses; a lost reply's insert is found, not repeated; no join address is given twice", async (t) => {
  const { srv, admin, proxy, c, nn, seen } = await joinRig(t);
  const m1 = await nn.ensure("node1");
  // node2's write is slow to reach NB; meanwhile the view is reloaded (rebuilding the allocator without it).
  const resume = proxy.holdTransactions((ops) => JSON.stringify(ops).includes("zovn-mgmt-node2"));
  const p2 = nn.ensure("node2");
  await new Promise((r) => setTimeout(r, 200));
  nn.rebuild();
  const m3 = await nn.ensure("node3");
  resume();
  const m2 = await p2;
  assert.deepEqual(seen, []);
  assertDisjoint(await joinPorts(admin));

  // node4's insert lands but its reply is lost (the connection is reset): the retry finds its port.
  const lost = proxy.loseNextReply((ops) => JSON.stringify(ops).includes("zovn-mgmt-node4"));
  await assert.rejects(nn.ensure("node4"));
  await lost;
  await c.whenReady(30_000);
  const m5 = await nn.ensure("node5");
  const m4 = await nn.ensure("node4");
  const ports = await joinPorts(admin);
  assert.equal(ports.size, 5, `one port per node: ${JSON.stringify([...ports])}`);
  assertDisjoint(ports);
  assert.deepEqual(seen, []);
  await assertRestartWritesNothing(srv, t, { node1: m1, node2: m2, node3: m3, node4: m4, node5: m5 });
});
