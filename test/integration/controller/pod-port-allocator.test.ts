import assert from "node:assert/strict";
import { test } from "node:test";
import { PodPortAllocator } from "../../../src/controller/pod-port-allocator.ts";
import { parseSubnetSpec } from "../../../src/ipam/subnet-spec.ts";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { parsePodNetworksAnnotation } from "../../../src/ovn/pod-port.ts";
import {
  desiredTopology,
  nodePodsAddressSet,
  subnetRows,
  subnetSwitchName,
  topologyScope,
} from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { TimeoutError } from "../../../src/ovsdb/errors.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { type OvsdbServer, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const NB = "OVN_Northbound";
const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};
const SPEC = {
  cidr: "10.244.0.0/24",
  gateway: "10.244.0.1",
  excludeIPs: ["10.244.0.2-10.244.0.9"],
  protocol: "IPv4",
};

function subnetDef() {
  const r = parseSubnetSpec(SPEC);
  if (!r.ok) throw new Error(JSON.stringify(r));
  return r.subnet;
}

async function setup(t: { after(fn: () => unknown): void }, srv: OvsdbServer) {
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const txn = c.transaction();
  const s = plan(
    c.cache as never,
    c.schema,
    txn as never,
    desiredTopology(
      NET,
      [{ name: "default", cidrs: ["10.244.0.0/24"], gateways: ["10.244.0.1"] }],
      [{ name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: "0a:58:64:40:00:02" }],
    ),
    topologyScope,
  );
  if (!s.empty) await txn.commit();
  await c.echo();
  const pn = new PodPortAllocator(c);
  const problems = pn.loadSubnet("default", subnetDef());
  return { c, pn, problems };
}

test("pods get unique addresses, one NB transaction each, and a restart rebuilds the allocator from NB and writes nothing", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const { c, pn } = await setup(t, srv);
  const before = await writeRecords(srv, NB);
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const r = await pn.ensure({ namespace: "ns", name: `p${i}`, uid: `u${i}`, node: "node1" }, "default");
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.ips.length, 1);
    assert.ok(!seen.has(r.ips[0] as string), `duplicate ${r.ips[0]}`);
    seen.add(r.ips[0] as string);
    const ann = parsePodNetworksAnnotation(r.annotation);
    assert.equal(ann?.logical_switch, subnetSwitchName("default"));
    assert.deepEqual(ann?.gateway_ips, ["10.244.0.1"]);
  }
  assert.ok(
    !seen.has("10.244.0.1") && !seen.has("10.244.0.5"),
    "gateway and excluded addresses are never handed out",
  );
  assert.equal((await writeRecords(srv, NB)) - before, 40, "one write transaction per pod");
  await c.echo();
  const set = c.cache.table("Address_Set").lookupOne("name", nodePodsAddressSet("node1", 4));
  assert.equal(set?.addresses.length, 40);

  // Restart: a new client and a new allocator rebuilt from NB; re-ensuring every pod writes nothing.
  const c2 = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c2.close());
  await c2.connect();
  const pn2 = new PodPortAllocator(c2);
  assert.deepEqual(pn2.loadSubnet("default", subnetDef()), []);
  const mid = await writeRecords(srv, NB);
  for (let i = 0; i < 40; i++) {
    const r = await pn2.ensure({ namespace: "ns", name: `p${i}`, uid: `u${i}`, node: "node1" }, "default");
    assert.ok(r.ok && !r.wrote, JSON.stringify(r));
  }
  assert.equal((await writeRecords(srv, NB)) - mid, 0, "zero NB writes after a restart with no changes");
  const fresh = await pn2.ensure({ namespace: "ns", name: "new", uid: "un" }, "default");
  assert.ok(
    fresh.ok && !seen.has(fresh.ips[0] as string),
    "a new pod never gets an address held before the restart",
  );
});

test("a foreign port's address is never handed out, a stale delete is ignored, and a static conflict names the holder", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const { c } = await setup(t, srv);
  const ls = c.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  await c.transact((txn) => {
    const vm = txn.insert("Logical_Switch_Port", {
      name: "zstack-vm",
      addresses: ["fa:16:3e:00:00:0a 10.244.0.10"],
    });
    txn.mutate("Logical_Switch", [["_uuid", "==", ls?._uuid as string]], [["ports", "insert", [vm]]]);
  });
  await c.echo();
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", subnetDef());
  const a = await pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(a.ok);
  assert.equal(a.ips[0], "10.244.0.11", "10.244.0.10 belongs to the VM");

  const clash = await pn.ensure(
    { namespace: "ns", name: "b", uid: "ub", annotations: { "network.zstack.io/ip_address": "10.244.0.10" } },
    "default",
  );
  assert.equal(clash.ok, false);
  assert.match(clash.ok ? "" : clash.message, /zstack-vm/);

  // A late delete for an older incarnation of pod "a" must not remove the current port.
  assert.equal(await pn.remove("ns", "a", "old-uid"), false);
  assert.ok(c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "ns_a"));
  assert.equal(await pn.remove("ns", "a", "ua"), "default");
  await c.echo();
  assert.equal(
    c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "ns_a"),
    undefined,
  );
  assert.ok(
    c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "zstack-vm"),
    "the foreign port stays",
  );
  const again = await pn.ensure({ namespace: "ns", name: "c", uid: "uc" }, "default");
  assert.ok(again.ok);
  assert.equal(again.ips[0], "10.244.0.11", "the released address is free again");
});

test("a pod keeps the subnet its port is on when another subnet would now claim it: one switch, same address", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const { c, pn } = await setup(t, srv);
  // A second subnet, created after the pod got its port, that would now be chosen for it.
  const txn = c.transaction();
  plan(
    c.cache as never,
    c.schema,
    txn as never,
    subnetRows({ name: "later", cidrs: ["10.250.0.0/24"], gateways: ["10.250.0.1"] }),
  );
  await txn.commit();
  await c.echo();
  const later = parseSubnetSpec({ cidr: "10.250.0.0/24", gateway: "10.250.0.1" });
  if (!later.ok) throw new Error(JSON.stringify(later));
  pn.loadSubnet("later", later.subnet);

  const pod = { namespace: "ns", name: "a", uid: "ua" };
  const first = await pn.ensure(pod, "default");
  assert.ok(first.ok);
  await c.echo();
  const again = await pn.ensure(pod, "later");
  assert.ok(again.ok);
  assert.deepEqual(again.ips, first.ips, "the address stays");
  assert.equal(again.wrote, false, "nothing to write");
  await c.echo();
  const port = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "ns_a");
  const holders = c.cache
    .table("Logical_Switch")
    .find((r) => (r.ports as string[]).includes(port?._uuid as string));
  assert.deepEqual(
    holders.map((r) => r.name),
    [subnetSwitchName("default")],
  );
});

test("while NB is unreachable, ensure and remove give up at their deadline or when the term ends, so the key is retried with backoff", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const { c } = await setup(t, srv);
  const term = new AbortController();
  const view = c.fenced(term.signal);
  const bounded = new PodPortAllocator(view, { tunnel: "vxlan", readyWaitMs: 300 });
  const unbounded = new PodPortAllocator(view, { tunnel: "vxlan", readyWaitMs: 3_600_000 });
  t.after(() => {
    bounded.close();
    unbounded.close();
  });
  for (const pn of [bounded, unbounded]) pn.loadSubnet("default", subnetDef());
  srv.kill("SIGKILL");
  await srv.waitForExit();
  const noticed = Date.now() + 30_000;
  while (c.state === "ready") {
    assert.ok(Date.now() < noticed, "the client noticed that NB is gone");
    await new Promise((r) => setTimeout(r, 20));
  }

  const pod = { namespace: "ns", name: "waiting", uid: "u1", node: "node1" };
  await assert.rejects(bounded.ensure(pod, "default"), TimeoutError);
  await assert.rejects(bounded.remove("ns", "waiting"), TimeoutError);
  const ensuring = unbounded.ensure(pod, "default");
  const removing = unbounded.remove("ns", "other");
  const ended = new Error("leadership lost");
  term.abort(ended);
  await assert.rejects(ensuring, (e) => e === ended);
  await assert.rejects(removing, (e) => e === ended);
});
