// PodPortAllocator against a real NB when writes go wrong: replies lost after the commit (a fault proxy resets the
// connection between the server's reply and the client), ports changed behind the controller's back, a full
// resync, two writers racing for one pod, duplicate rows, requested MACs that someone already uses, and a
// switch filled by concurrent workers. The allocator must always hold what NB holds: no address on two pods,
// none leaked.
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { PodPortAllocator, VXLAN_PORTS_PER_SWITCH } from "../../../src/controller/pod-port-allocator.ts";
import { parseSubnetSpec } from "../../../src/ipam/subnet-spec.ts";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { POD_KEY } from "../../../src/ovn/ownership.ts";
import { podPortRow } from "../../../src/ovn/pod-port.ts";
import { desiredTopology, subnetRows, subnetSwitchName, topologyScope } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import { SCHEMAS, useOvsdbServer, useRaftCluster } from "../../rig/ovsdb-server.ts";

const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};
const MGMT_MAC = "0a:58:64:40:00:02";

function def(cidr: string, gateway: string) {
  const r = parseSubnetSpec({ cidr, gateway });
  if (!r.ok) throw new Error(JSON.stringify(r));
  return r.subnet;
}
const DEFAULT = () => def("10.244.0.0/24", "10.244.0.1");

type Nb = OvsdbClient<NbTables>;
type T = { after(fn: () => unknown): void };

/** A real NB with the topology (subnet "default", node1), an admin client, and the controller's client behind a fault proxy. */
async function rig(t: T) {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const admin = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => admin.close());
  await admin.connect();
  const txn = admin.transaction();
  plan(
    admin.cache as never,
    admin.schema,
    txn as never,
    desiredTopology(
      NET,
      [{ name: "default", cidrs: ["10.244.0.0/24"], gateways: ["10.244.0.1"] }],
      [{ name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: MGMT_MAC }],
    ),
    topologyScope,
  );
  await txn.commit();
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const c = new OvsdbClient<NbTables>({ remotes: proxy.remote, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  return { srv, admin, proxy, c };
}

/** Pod ports in NB: name → [owner, ips]. */
async function nbPodPorts(nb: Nb): Promise<Map<string, { owner: string; ips: string[] }>> {
  await nb.echo();
  const out = new Map<string, { owner: string; ips: string[] }>();
  for (const r of nb.cache.table("Logical_Switch_Port").values()) {
    if (r.external_ids["zstack.io/kind"] !== "pod-port") continue;
    out.set(r.name, {
      owner: r.external_ids[POD_KEY] as string,
      ips: r.addresses.flatMap((a) => a.split(" ").slice(1)),
    });
  }
  return out;
}

/** Every address the allocator gives to a pod is on that pod's port in NB, and the other way round. */
async function assertAllocatorFollowsNb(pn: PodPortAllocator, admin: Nb, subnet = "default") {
  const inNb = [...(await nbPodPorts(admin)).values()]
    .flatMap((p) => p.ips.map((ip) => `${ip} ${p.owner}`))
    .sort();
  const held = (pn.allocatorOf(subnet)?.entries() ?? [])
    .filter((e) => !e.holder.foreign)
    .map((e) => {
      const v = Number(e.address.value);
      return `${[v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join(".")} ${e.holder.owner}`;
    })
    .sort();
  assert.deepEqual(held, inNb, "the allocator holds exactly what the pod ports in NB hold");
  const all = inNb.map((x) => x.split(" ")[0]);
  assert.equal(new Set(all).size, all.length, `no address on two ports: ${all.join(", ")}`);
}

/** Writes a pod's port on subnet "default" into NB as another writer would (an earlier leader, a lost reply). */
async function writePodPort(
  admin: Nb,
  pod: { namespace: string; name: string; uid: string },
  ip: string,
  mac: string,
): Promise<void> {
  const addressing = {
    subnet: "default",
    logicalSwitch: subnetSwitchName("default"),
    mac,
    ipsWithPrefix: [`${ip}/24`],
    gateways: ["10.244.0.1"],
  };
  const txn = admin.transaction();
  plan(admin.cache as never, admin.schema, txn as never, [
    podPortRow(pod, addressing, { table: "Logical_Switch", id: "subnet/default", column: "ports" }),
  ]);
  await txn.commit();
}

const insertsPort = (ops: readonly Record<string, unknown>[]) =>
  ops.some((o) => o.op === "insert" && o.table === "Logical_Switch_Port");
const deletesPort = (ops: readonly Record<string, unknown>[]) =>
  ops.some((o) => o.op === "delete" && o.table === "Logical_Switch_Port");

test("a port insert that commits but loses its reply: the retry keeps that address for the pod and no other pod gets it", async (t) => {
  const { admin, proxy, c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const lost = proxy.loseNextReply(insertsPort);
  const reconnected = once(c, "ready", { signal: AbortSignal.timeout(60_000) });
  await assert.rejects(pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default"));
  await lost;
  await reconnected;
  const landed = (await nbPodPorts(admin)).get("ns_a");
  assert.ok(landed, "the insert committed although its reply never arrived");
  const addr = landed.ips[0] as string;

  const again = await pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(again.ok, JSON.stringify(again));
  assert.deepEqual(again.ips, [addr], "the pod keeps the address its port holds");
  const b = await pn.ensure({ namespace: "ns", name: "b", uid: "ub" }, "default");
  assert.ok(b.ok, JSON.stringify(b));
  assert.notEqual(b.ips[0], addr, "another pod never gets the address of the port that landed");
  assert.equal((await nbPodPorts(admin)).size, 2, "one port per pod");
  await assertAllocatorFollowsNb(pn, admin);
});

test("a port delete that commits but loses its reply: the retry frees the address instead of holding it forever", async (t) => {
  const { admin, proxy, c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const a = await pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(a.ok);
  const addr = a.ips[0] as string;
  const lost = proxy.loseNextReply(deletesPort);
  const reconnected = once(c, "ready", { signal: AbortSignal.timeout(60_000) });
  await assert.rejects(pn.remove("ns", "a", "ua"));
  await lost;
  await reconnected;
  assert.equal((await nbPodPorts(admin)).get("ns_a"), undefined, "the delete committed");

  // The retry finds no port: whatever the pod still held goes (the reload of the cache may have freed it already).
  await pn.remove("ns", "a", "ua");
  assert.deepEqual(pn.allocatorOf("default")?.holdersOf(addr), [], `${addr} is free again`);
  const next = await pn.ensure({ namespace: "ns", name: "c", uid: "uc" }, "default");
  assert.ok(next.ok);
  assert.equal(next.ips[0], addr, "the lowest free address is the one the deleted port held");
  await assertAllocatorFollowsNb(pn, admin);
});

test("pod ports deleted or added behind the controller's back, live or while it was disconnected, free or hold their addresses", async (t) => {
  const { admin, proxy, c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const ips: Record<string, string> = {};
  for (const name of ["a", "b"]) {
    const r = await pn.ensure({ namespace: "ns", name, uid: `u${name}` }, "default");
    assert.ok(r.ok);
    ips[name] = r.ips[0] as string;
  }
  const deletePort = async (name: string) => {
    await admin.echo();
    const p = admin.cache.table("Logical_Switch_Port").findOne((r) => r.name === name);
    const ls = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
    await admin.transact((txn) => {
      txn.mutate("Logical_Switch", [["_uuid", "==", ls?._uuid as string]], [["ports", "delete", [p?._uuid]]]);
      txn.delete("Logical_Switch_Port", [["_uuid", "==", p?._uuid as string]]);
    });
  };
  const freed = (ip: string) => (pn.allocatorOf("default")?.holdersOf(ip).length === 0 ? true : undefined);

  // Live: an operator deletes pod a's port.
  await deletePort("ns_a");
  await c.echo();
  assert.ok(freed(ips.a as string), "a port deleted live frees its address");

  // While disconnected: b's port goes and a port written for pod z (a lost reply of an earlier leader) appears.
  proxy.refuse();
  proxy.cut();
  await deletePort("ns_b");
  await writePodPort(admin, { namespace: "ns", name: "z", uid: "uz" }, "10.244.0.50", "0a:58:0a:f4:00:32");
  const reconnected = once(c, "ready", { signal: AbortSignal.timeout(60_000) });
  proxy.accept();
  await reconnected;
  assert.ok(freed(ips.b as string), "a port deleted while disconnected frees its address after the resync");
  assert.deepEqual(pn.allocatorOf("default")?.holdersOf("10.244.0.50"), [{ owner: "ns/z", foreign: false }]);
  await assertAllocatorFollowsNb(pn, admin);
});

test("a pod whose port is on a subnet that is not serving waits for it: the port never moves to another switch", async (t) => {
  const { admin, c } = await rig(t);
  const txn = admin.transaction();
  plan(
    admin.cache as never,
    admin.schema,
    txn as never,
    subnetRows({ name: "b", cidrs: ["10.250.0.0/24"], gateways: ["10.250.0.1"] }),
  );
  await txn.commit();
  await c.echo();
  const before = new PodPortAllocator(c);
  before.loadSubnet("default", DEFAULT());
  const a = await before.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(a.ok);

  // A restart where subnet default cannot be loaded (Failed), and the pod's namespace now maps to b.
  const after = new PodPortAllocator(c);
  after.loadSubnet("b", def("10.250.0.0/24", "10.250.0.1"));
  const r = await after.ensure({ namespace: "ns", name: "a", uid: "ua" }, "b");
  assert.equal(r.ok, false);
  assert.equal(r.ok ? "" : r.reason, "SubnetNotReady");
  assert.match(r.ok ? "" : r.message, /on subnet default/);
  await admin.echo();
  const port = admin.cache.table("Logical_Switch_Port").findOne((p) => p.name === "ns_a");
  const switches = admin.cache
    .table("Logical_Switch")
    .find((ls) => (ls.ports as string[]).includes(port?._uuid as string))
    .map((ls) => ls.name);
  assert.deepEqual(switches, [subnetSwitchName("default")], "the port is on one switch, its own");
  assert.equal(port?.external_ids["zstack.io/subnet"], "default");
  assert.deepEqual(
    port?.addresses.flatMap((x) => x.split(" ").slice(1)),
    a.ok ? a.ips : [],
  );
});

test("a requested MAC that the router port, a pod, a foreign port or a management port uses is refused naming the holder", async (t) => {
  const { admin, c } = await rig(t);
  const ls = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  await admin.transact((txn) => {
    const vm = txn.insert("Logical_Switch_Port", {
      name: "zstack-vm",
      addresses: ["fa:16:3e:00:00:0a 10.244.0.10"],
    });
    txn.mutate("Logical_Switch", [["_uuid", "==", ls?._uuid as string]], [["ports", "insert", [vm]]]);
  });
  await c.echo();
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const other = await pn.ensure({ namespace: "ns", name: "other", uid: "uo" }, "default");
  assert.ok(other.ok);
  const otherMac = c.cache
    .table("Logical_Switch_Port")
    .findOne((r) => r.name === "ns_other")
    ?.addresses[0]?.split(" ")[0];
  const rtos = c.cache
    .table("Logical_Router_Port")
    .findOne((r) => r.external_ids["zstack.io/id"] === "subnet/default/rtos");
  assert.ok(rtos && otherMac);

  const cases: [mac: string, holder: RegExp][] = [
    [rtos.mac.toUpperCase(), new RegExp(`router port ${rtos.name}`)],
    [otherMac, /pod ns\/other/],
    ["FA-16-3E-00-00-0A", /port zstack-vm/],
    [MGMT_MAC, /management port zovn-mgmt-node1/],
  ];
  for (const [i, [mac, holder]] of cases.entries()) {
    const r = await pn.ensure(
      {
        namespace: "ns",
        name: `m${i}`,
        uid: `um${i}`,
        annotations: { "network.zstack.io/mac_address": mac },
      },
      "default",
    );
    assert.equal(r.ok, false, `${mac} is refused`);
    assert.equal(r.ok ? "" : r.reason, "MACConflict");
    assert.match(r.ok ? "" : r.message, holder);
  }
  const free = await pn.ensure(
    {
      namespace: "ns",
      name: "own",
      uid: "uown",
      annotations: { "network.zstack.io/mac_address": "0a:00:00:00:00:07" },
    },
    "default",
  );
  assert.ok(free.ok, "an unused MAC is accepted");
  assert.equal((await nbPodPorts(admin)).size, 2, "no port for a refused pod");
  await assertAllocatorFollowsNb(pn, admin);
});

test("two writers racing to create one pod's port leave one row: NB refuses the second insert and it resolves from NB", async (t) => {
  const { admin, srv } = await rig(t);
  const clients = await Promise.all(
    [1, 2].map(async () => {
      const x = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
      t.after(() => x.close());
      await x.connect();
      return x;
    }),
  );
  const pns = clients.map((x) => {
    const pn = new PodPortAllocator(x);
    pn.loadSubnet("default", DEFAULT());
    return pn;
  });
  const rs = await Promise.all(
    pns.map((pn) => pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default")),
  );
  for (const r of rs) assert.ok(r.ok, JSON.stringify(r));
  const ports = await nbPodPorts(admin);
  assert.equal(ports.size, 1, "one row for the pod");
  assert.deepEqual(
    rs.map((r) => (r.ok ? r.ips : [])),
    [ports.get("ns_a")?.ips, ports.get("ns_a")?.ips],
    "both writers report the address NB holds",
  );
  for (const pn of pns) await assertAllocatorFollowsNb(pn, admin);
});

test("a port for the pod that landed unseen with another address: NB's name index refuses the second insert and the pod keeps the landed port", async (t) => {
  const { admin, c, proxy } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  // The controller's view lags: the port another writer (a zombie leader, a write whose reply was lost) inserts
  // for pod ns/a is not in it, so the allocator picks another free address, which no guard refuses.
  const release = proxy.holdFromServer();
  await writePodPort(admin, { namespace: "ns", name: "a", uid: "ua" }, "10.244.0.50", "0a:58:0a:f4:00:32");
  const pending = pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  await delay(300);
  release();
  const r = await pending;
  assert.ok(r.ok, JSON.stringify(r));
  assert.deepEqual(r.ips, ["10.244.0.50"], "the pod keeps the port that landed");
  const ports = await nbPodPorts(admin);
  assert.equal(ports.size, 1, "one row for the pod");
  await assertAllocatorFollowsNb(pn, admin);
});

test("a port of the pod's name that is not ours is refused with PortNameTaken naming it, and no address stays held", async (t) => {
  const { admin, c } = await rig(t);
  // Somebody else's port (ZStack's, an operator's) under the name the pod's port would take, on their own switch.
  await admin.transact((txn) => {
    const ref = txn.insert("Logical_Switch_Port", {
      name: "ns_x",
      addresses: ["0a:00:00:00:00:01 192.0.2.10"],
    });
    txn.insert("Logical_Switch", { name: "theirs", ports: [ref] });
  });
  await c.echo();
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const r = await pn.ensure({ namespace: "ns", name: "x", uid: "ux" }, "default");
  assert.ok(!r.ok, JSON.stringify(r));
  assert.equal(r.reason, "PortNameTaken");
  assert.match(r.message, /logical switch port named ns_x that this controller does not own/);
  await assertAllocatorFollowsNb(pn, admin);
  // The other pods are not held up by it.
  const y = await pn.ensure({ namespace: "ns", name: "y", uid: "uy" }, "default");
  assert.ok(y.ok, JSON.stringify(y));
  await assertAllocatorFollowsNb(pn, admin);
});

/** Every address that two pod ports held at once, as `nb`'s cache saw it after each update. */
function watchSharedAddresses(nb: Nb): { seen: string[]; stop: () => void } {
  const seen: string[] = [];
  const stop = nb.cache.subscribe("Logical_Switch_Port", () => {
    const holder = new Map<string, string>();
    for (const r of nb.cache.table("Logical_Switch_Port").values()) {
      for (const ip of r.addresses.flatMap((a) => a.split(" ").slice(1))) {
        const other = holder.get(ip);
        if (other !== undefined) seen.push(`${ip} on ${other} and ${r.name}`);
        else holder.set(ip, r.name);
      }
    }
  });
  return { seen, stop };
}

test("NB refuses a port insert whose address another port already holds, however stale the allocator's view: the pod gets another address", async (t) => {
  const { admin, proxy, c, srv } = await rig(t);
  const shared = watchSharedAddresses(admin);
  t.after(() => shared.stop());
  // Another writer that NB has already heard from (a port whose insert landed after this controller's view was
  // read: a lost reply, a new Raft leader still applying its predecessor's commits).
  const other = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => other.close());
  await other.connect();
  const pnOther = new PodPortAllocator(other);
  pnOther.loadSubnet("default", DEFAULT());
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());

  // This controller's view of NB stops while pod a's port lands.
  const release = proxy.holdFromServer();
  const a = await pnOther.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(a.ok, JSON.stringify(a));
  const addr = a.ips[0] as string;

  // Pod b is given the same address (its allocator has it free) and its insert goes out with it.
  const b = pn.ensure({ namespace: "ns", name: "b", uid: "ub" }, "default");
  const alloc = pn.allocatorOf("default");
  for (let i = 0; !alloc?.holdersOf(addr).some((h) => h.owner === "ns/b"); i++) {
    assert.ok(i < 10_000, `pod b was never given ${addr}`);
    await new Promise((r) => setImmediate(r));
  }
  release();
  const rb = await b;
  assert.ok(rb.ok, JSON.stringify(rb));
  assert.notEqual(rb.ips[0], addr, "pod b ends with another address than the one NB refused");
  assert.deepEqual(shared.seen, [], "NB never held one address on two ports");
  const ports = await nbPodPorts(admin);
  assert.deepEqual(ports.get("ns_a")?.ips, [addr]);
  assert.deepEqual(ports.get("ns_b")?.ips, rb.ips);
  await c.echo();
  await assertAllocatorFollowsNb(pn, admin);
});

test("Raft: a pod port insert still committing when the controller reloads its view keeps its address: no other pod gets it", async (t) => {
  const cluster = await useRaftCluster(t, { schema: SCHEMAS.nb });
  const leader = await cluster.leader();
  const admin = new OvsdbClient<NbTables>({ remotes: leader.server.unix, model: nbModel });
  t.after(() => admin.close());
  await admin.connect();
  const topo = admin.transaction();
  plan(
    admin.cache as never,
    admin.schema,
    topo as never,
    desiredTopology(
      NET,
      [{ name: "default", cidrs: ["10.244.0.0/24"], gateways: ["10.244.0.1"] }],
      [{ name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: MGMT_MAC }],
    ),
    topologyScope,
  );
  await topo.commit();
  const shared = watchSharedAddresses(admin);
  t.after(() => shared.stop());
  const proxy = await startOvsdbFaultProxy(leader.server.unix);
  t.after(() => proxy.close());
  const c = new OvsdbClient<NbTables>({ remotes: proxy.remote, model: nbModel, backoff: { initialMs: 20 } });
  t.after(() => c.close());
  await c.connect();
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());

  // The leader stops talking Raft: pod a's insert goes into its log and cannot commit yet.
  const logEnd = async () =>
    Number(/Log: \[\d+, (\d+)\]/.exec(await leader.server.appctl("cluster/status", "OVN_Northbound"))?.[1]);
  const before = await logEnd();
  assert.ok(Number.isInteger(before), "cluster/status shows the leader's log");
  await leader.server.appctl("cluster/failure-test", "stop-raft-rpc");
  let cleared = false;
  const clear = async () => {
    if (cleared) return;
    cleared = true;
    await leader.server.appctl("cluster/failure-test", "clear");
  };
  t.after(clear);
  const a = pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default").catch((e: unknown) => e);
  for (let i = 0; (await logEnd()) === before; i++) {
    assert.ok(i < 1000, "pod a's insert never reached the leader's log");
    await delay(10);
  }
  // Its reply is lost, and the controller reloads its whole view (a reconnect that cannot resume).
  const reconnected = c.reconnect({ fullResync: true });
  assert.ok((await a) instanceof Error, "pod a's insert has no reply");
  // A client that does not wait for the leader's log is ready by now, with a view without pod a's port.
  await Promise.race([reconnected, delay(300)]);
  const b = pn.ensure({ namespace: "ns", name: "b", uid: "ub" }, "default");
  await clear();
  await reconnected;
  const rb = await b;
  assert.ok(rb.ok, JSON.stringify(rb));

  const ports = await nbPodPorts(admin);
  const addrA = ports.get("ns_a")?.ips[0];
  assert.ok(addrA, "pod a's insert committed after all");
  assert.notEqual(rb.ips[0], addrA, "pod b does not get the address pod a's port holds");
  assert.deepEqual(shared.seen, [], "NB never held one address on two ports");
  const again = await pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default");
  assert.ok(again.ok, JSON.stringify(again));
  assert.deepEqual(again.ips, [addrA], "the retry keeps the address pod a's port holds");
  await c.echo();
  await assertAllocatorFollowsNb(pn, admin);
});

test("two owned rows for one pod (a write applied twice) are repaired to one, and the other row's address is freed", async (t) => {
  const { admin, c } = await rig(t);
  const addressing = (ip: string) => ({
    subnet: "default",
    logicalSwitch: subnetSwitchName("default"),
    mac: `0a:58:0a:f4:00:${Number(ip.split(".")[3]).toString(16).padStart(2, "0")}`,
    ipsWithPrefix: [`${ip}/24`],
    gateways: ["10.244.0.1"],
  });
  // plan() would find the first row and update it; two inserts in separate transactions make the duplicate
  // (under another name, as NB's name index allows no second ns_d).
  for (const [name, ip] of [
    ["ns_d", "10.244.0.20"],
    ["ns_d-again", "10.244.0.21"],
  ] as const) {
    await admin.echo();
    const ls = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
    const row = podPortRow({ namespace: "ns", name: "d", uid: "ud" }, addressing(ip), {
      table: "Logical_Switch",
      id: "subnet/default",
      column: "ports",
    }).row;
    await admin.transact((txn) => {
      const ref = txn.insert("Logical_Switch_Port", { ...row, name } as never);
      txn.mutate("Logical_Switch", [["_uuid", "==", ls?._uuid as string]], [["ports", "insert", [ref]]]);
    });
  }
  await c.echo();
  const isD = (r: { external_ids: Readonly<Record<string, string>> }) => r.external_ids[POD_KEY] === "ns/d";
  assert.equal(c.cache.table("Logical_Switch_Port").find(isD).length, 2);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const r = await pn.ensure({ namespace: "ns", name: "d", uid: "ud" }, "default");
  assert.ok(r.ok, JSON.stringify(r));
  await admin.echo();
  const left = admin.cache.table("Logical_Switch_Port").find(isD);
  assert.equal(left.length, 1, "one row is left");
  assert.deepEqual(
    left[0]?.addresses.flatMap((x) => x.split(" ").slice(1)),
    r.ok ? r.ips : [],
  );
  await assertAllocatorFollowsNb(pn, admin);
});

test("workers filling a VXLAN switch concurrently never take it past 2,048 ports", async (t) => {
  const { admin, c } = await rig(t);
  await admin.echo();
  const ls = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  assert.ok(ls);
  const room = 1;
  const missing = VXLAN_PORTS_PER_SWITCH - ls.ports.length - room;
  await admin.transact((txn) => {
    const refs = Array.from({ length: missing }, (_, i) =>
      txn.insert("Logical_Switch_Port", { name: `filler-${i}` }),
    );
    txn.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", refs]]);
  });
  await c.echo();
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const rs = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      pn.ensure({ namespace: "ns", name: `w${i}`, uid: `uw${i}` }, "default"),
    ),
  );
  assert.equal(rs.filter((r) => r.ok).length, room, "only as many pods as there was room for");
  for (const r of rs) if (!r.ok) assert.equal(r.reason, "PortCapacityExceeded");
  await admin.echo();
  const after = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  assert.equal(after?.ports.length, VXLAN_PORTS_PER_SWITCH);
  await assertAllocatorFollowsNb(pn, admin);
});

test("a pod whose address-derived MAC another pod requested gets a random local MAC instead: no MAC twice on the switch", async (t) => {
  const { admin, c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  // r takes 10.244.0.2 and asks for the MAC that 10.244.0.3 derives to.
  const r = await pn.ensure(
    {
      namespace: "ns",
      name: "r",
      uid: "ur",
      annotations: { "network.zstack.io/mac_address": "0a:58:0a:f4:00:03" },
    },
    "default",
  );
  assert.ok(r.ok);
  assert.deepEqual(r.ips, ["10.244.0.2"]);
  const s = await pn.ensure({ namespace: "ns", name: "s", uid: "us" }, "default");
  assert.ok(s.ok);
  assert.deepEqual(s.ips, ["10.244.0.3"]);
  await admin.echo();
  const macs = admin.cache
    .table("Logical_Switch_Port")
    .find((p) => p.external_ids["zstack.io/kind"] === "pod-port")
    .map((p) => p.addresses[0]?.split(" ")[0]);
  assert.equal(new Set(macs).size, 2, `distinct MACs: ${macs.join(", ")}`);
  const sMac = admin.cache
    .table("Logical_Switch_Port")
    .findOne((p) => p.name === "ns_s")
    ?.addresses[0]?.split(" ")[0];
  assert.notEqual(sMac, "0a:58:0a:f4:00:03");
  assert.match(sMac ?? "", /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
});

test("a port insert racing the deletion of its switch lands nothing and leaves no address held", async (t) => {
  const { admin, proxy, c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  await c.echo();
  // The controller's view lags: the switch goes in NB while the controller's cache still shows it.
  const release = proxy.holdFromServer();
  const ls = admin.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  assert.ok(ls, "the subnet's switch exists");
  await admin
    .transaction()
    .delete("Logical_Switch", [["_uuid", "==", ls._uuid]])
    .commit();
  const outcome = pn.ensure({ namespace: "ns", name: "a", uid: "ua" }, "default").then(
    (r) => r,
    (e: unknown) => e as Error,
  );
  // Let the insert go out on the stale view before the server's news comes in.
  await new Promise((r) => setTimeout(r, 300));
  release();
  const r = await outcome;
  assert.ok(
    r instanceof Error || !r.ok,
    `the insert must not report a port on a switch that is gone: ${JSON.stringify(r)}`,
  );
  assert.equal((await nbPodPorts(admin)).get("ns_a"), undefined, "no port landed");
  const held = (pn.allocatorOf("default")?.entries() ?? []).filter((e) => e.holder.owner === "ns/a");
  assert.deepEqual(held, [], "the address is not kept for a port that does not exist");
});

test("two pods asking for one MAC at the same moment: one gets it, the other a MACConflict", async (t) => {
  const { c } = await rig(t);
  const pn = new PodPortAllocator(c);
  pn.loadSubnet("default", DEFAULT());
  const ask = (name: string) =>
    pn.ensure(
      {
        namespace: "ns",
        name,
        uid: `u-${name}`,
        annotations: { "network.zstack.io/mac_address": "0a:00:00:00:00:42" },
      },
      "default",
    );
  const results = await Promise.all([ask("a"), ask("b")]);
  assert.deepEqual(
    results.map((r) => (r.ok ? "ok" : r.reason)).sort(),
    ["MACConflict", "ok"],
    JSON.stringify(results),
  );
  const refused = results.find((r) => !r.ok);
  assert.match(refused && !refused.ok ? refused.message : "", /being created/);
});
