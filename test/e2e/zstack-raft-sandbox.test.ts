// `zovn sandbox up --zstack --raft` end to end (issue 14, "Acceptance (e2e in the sandbox)": "The NB leader of
// ZStack's 3-member cluster is killed while pods are being created: the pods still come up, and nothing is
// duplicated"). ZStack's NB and SB are 3-member Raft clusters on its controller host; the controller, the node
// agents and ZStack's hypervisors are given every member. Pods are created through the apiserver on ZStack's
// overlay switch (the controller, the node simulator, the CNI and the node agent as the sandbox runs them) while
// the NB leader is killed by the PID the sandbox recorded for it. Every pod comes up with a working port (TCP with
// ZStack's VMs both ways), NB holds exactly one port per pod, no address twice and none of ZStack's, and ZStack's
// rows differ only by the documented mutations. A second `up` restarts the killed member, which rejoins; a third
// changes nothing; `down` leaves nothing.
// Sandbox name zsbzr (docs/sandbox.md); run it under its lock: flock /work/locks/zsbzr.lock node --import tsx
// --test test/e2e/zstack-raft-sandbox.test.ts

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { CONTROLLER, KIND_KEY, OWNER_KEY, POD_KEY } from "../../src/ovn/ownership.ts";
import { CommandError, run } from "../../src/sandbox/command.ts";
import { dial } from "../../src/sandbox/demo.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { centralMembers } from "../../src/sandbox/ovn-central.ts";
import { isAlive } from "../../src/sandbox/process-table.ts";
import { NB_PORT, SB_PORT, ZSTACK_NETWORKS } from "../../src/sandbox/topology.ts";
import { VM_TCP_PORT } from "../../src/sandbox/zstack/world.ts";
import type { DatabaseDump } from "../rig/dump-format.ts";
import { type ClusterStatus, parseClusterStatus } from "../rig/raft.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";
import { assertNothingLeft, dumpNb, zstackRows } from "../rig/zstack-sandbox.ts";
import { diffDumps, foreignRows, onlyDocumentedMutations, ownedRows } from "../rig/zstack-sim.ts";

const NAME = "zsbzr";
const sb = sandboxHandle(NAME);
const UP = ["up", "--zstack", "--raft", "--nodes", "2"];
const UP_TIMEOUT_MS = 40 * 60_000; // the first run may build Kubernetes into the binary cache
const OVERLAY = ZSTACK_NETWORKS.find((n) => n.network === "overlay") as (typeof ZSTACK_NETWORKS)[0];
const POD_TCP_PORT = 8080;
const PODS = Array.from({ length: 16 }, (_, i) => ({ name: `raft-${i}`, node: `node${(i % 2) + 1}` }));
/** Pods created before the kill; the rest are created one after another while the leader dies. */
const BEFORE_KILL = 6;
/** The kill comes when this many of the rest have been created. */
const KILL_AFTER = 2;

type Db = "nb" | "sb";

function dbName(db: Db): string {
  return db === "nb" ? "OVN_Northbound" : "OVN_Southbound";
}

async function memberStatus(db: Db, index: number): Promise<ClusterStatus> {
  const m = centralMembers(sb.layout, sb.ctx().topo, db)[index - 1];
  assert.ok(m);
  return parseClusterStatus(
    await run("ovs-appctl", ["-t", m.ctl, "cluster/status", dbName(db)], { timeoutMs: 10_000 }),
  );
}

/** The member index whose cluster/status says it leads, polled until there is one. */
function leaderOf(db: Db, among: readonly number[] = [1, 2, 3]): Promise<{ index: number; term: number }> {
  return eventually(`a ${db} leader among members ${among.join(", ")}`, 120_000, async () => {
    for (const index of among) {
      const s = await memberStatus(db, index).catch(() => undefined);
      if (s?.role === "leader") return { index, term: s.term };
    }
    return undefined;
  });
}

/** Every member a cluster member, one leader known to all. */
function quorum(db: Db): Promise<true> {
  return eventually(`every ${db} member in the cluster, one leader known to all`, 300_000, async () => {
    const all = await Promise.all([1, 2, 3].map((i) => memberStatus(db, i)));
    const leaders = all.filter((s) => s.role === "leader");
    const ok =
      all.every((s) => s.status === "cluster member" && s.leader !== "unknown") && leaders.length === 1;
    return ok ? true : undefined;
  });
}

function daemonName(db: Db, index: number): string {
  return `${sb.ctx().topo.central.name}/ovsdb-server-${db}${index}`;
}

function api(): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(adminKubeconfig(sb.layout));
  return kc.makeApiClient(CoreV1Api);
}

function podManifest(name: string, node: string): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: OVERLAY.namespace, labels: { app: "raft" } },
    spec: {
      nodeName: node,
      containers: [
        {
          name: "podserver",
          image: "zstack-ovn/podserver",
          ports: [{ containerPort: POD_TCP_PORT, protocol: "TCP" }],
        },
      ],
    },
  };
}

/** The pods Running with an address and Ready: name -> { ip, node }. */
async function runningPods(core: CoreV1Api): Promise<Map<string, { ip: string; node: string }>> {
  const list = await core.listNamespacedPod({ namespace: OVERLAY.namespace, labelSelector: "app=raft" });
  const out = new Map<string, { ip: string; node: string }>();
  for (const p of list.items) {
    const ready = p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    if (p.status?.phase === "Running" && p.status.podIP && ready)
      out.set(p.metadata?.name as string, { ip: p.status.podIP, node: p.spec?.nodeName as string });
  }
  return out;
}

function plain(v: unknown): unknown {
  if (!Array.isArray(v)) return v;
  if (v[0] === "set") return (v[1] as unknown[]).map(plain);
  if (v[0] === "map")
    return Object.fromEntries((v[1] as [unknown, unknown][]).map(([k, x]) => [plain(k), plain(x)]));
  if (v[0] === "uuid" || v[0] === "named-uuid") return v[1];
  return v;
}

function listOf(v: unknown): unknown[] {
  const p = plain(v);
  return Array.isArray(p) ? p : p === undefined || p === null ? [] : [p];
}

/** Our pod ports in the dump: uuid, name, pod key, addresses. */
function podPorts(dump: DatabaseDump): { uuid: string; name: string; pod: string; addresses: string[] }[] {
  return Object.entries(dump.Logical_Switch_Port ?? {}).flatMap(([uuid, r]) => {
    const ids = plain(r.external_ids) as Record<string, string>;
    if (ids[OWNER_KEY] !== CONTROLLER || ids[KIND_KEY] !== "pod-port") return [];
    return [
      { uuid, name: String(r.name), pod: ids[POD_KEY] ?? "", addresses: listOf(r.addresses).map(String) },
    ];
  });
}

/** Whether `ip` appears as a whole address anywhere in the row's wire JSON. */
function mentions(row: unknown, ip: string): boolean {
  return new RegExp(`(^|[^0-9.])${ip.replaceAll(".", "\\.")}([^0-9]|$)`).test(JSON.stringify(row));
}

describe("zovn sandbox up --zstack --raft", { timeout: UP_TIMEOUT_MS + 40 * 60_000 }, () => {
  let zstackBefore: DatabaseDump;
  let killed: { index: number; pid: number; term: number } | undefined;

  before(async () => {
    // A sandbox of this name left by an earlier aborted run.
    await sb.zovn(["down"]);
  });

  after(async () => {
    await sb.zovn(["down", "--purge"]).catch(() => "");
  });

  it("brings ZStack up with 3-member Raft NB and SB and every client given every member", async (t) => {
    const load = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
    const started = Date.now();
    const out = await sb.zovn(UP, UP_TIMEOUT_MS);
    t.diagnostic(`up --zstack --raft in ${Date.now() - started} ms (1-minute load average ${load} before)`);
    const { topo } = sb.ctx();
    assert.deepEqual(topo.centralIps, ["192.168.200.201", "192.168.200.202", "192.168.200.203"]);
    const remote = (port: number) => topo.centralIps.map((ip) => `tcp:${ip}:${port}`).join(",");
    assert.ok(out.includes(`OVN NB/SB    ${remote(NB_PORT)} / ${remote(SB_PORT)}`), out);
    for (const db of ["nb", "sb"] as const) await quorum(db);
    // ZStack's hypervisors and our nodes' ovn-controllers on every SB member.
    for (const host of ["zh1", "zh2", "node1", "node2"])
      assert.equal(
        await sb.inside(host, ["ovs-vsctl", "get", "Open_vSwitch", ".", "external_ids:ovn-remote"]),
        `"${remote(SB_PORT)}"`,
        host,
      );
    // The controller is given every member of NB and SB (its environment, as the sandbox started it).
    const ctl = sb.ctx().state.daemons.find((d) => d.name === "cp/zstack-ovnkube-controller");
    assert.ok(ctl && isAlive(ctl));
    const env = new Map(
      readFileSync(`/proc/${ctl.pid}/environ`, "utf8")
        .split("\0")
        .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)] as const),
    );
    assert.equal(env.get("ZSTACK_OVN_NBDB_ADDRESS"), remote(NB_PORT));
    assert.equal(env.get("ZSTACK_OVN_SBDB_ADDRESS"), remote(SB_PORT));
    assert.equal(env.get("ZSTACK_OVN_MODE"), "external");
    // A northd per member: one active, two standby (SB's lock).
    const northd = await Promise.all(
      [1, 2, 3].map((i) =>
        run("ovs-appctl", ["-t", `${sb.layout.centralDir}/ovn-northd${i}.ctl`, "status"]).then((s) =>
          s.trim(),
        ),
      ),
    );
    assert.deepEqual(northd.sort(), ["Status: active", "Status: standby", "Status: standby"]);
    // `status` names the cluster and every member and northd, each running.
    const status = await sb.zovn(["status"]);
    assert.match(
      status,
      /NB\/SB 3-member Raft on 192\.168\.200\.201, 192\.168\.200\.202, 192\.168\.200\.203/,
    );
    for (const d of ["ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd"])
      for (const i of [1, 2, 3])
        assert.match(status, new RegExp(`^ {2}zs/${d}${i} +running pid \\d+`, "m"), status);
    const subnet = JSON.parse(await sb.zovn(["kubectl", "get", "sn", OVERLAY.subnet, "-o", "json"])) as {
      status: { conditions?: { type: string; status: string }[] };
    };
    assert.ok(subnet.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    zstackBefore = foreignRows(await dumpNb(sb));
    assert.ok(zstackRows(zstackBefore).length > 30, "ZStack's content is there");
  });

  it("the NB leader killed while pods are created on ZStack's overlay switch: every pod comes up once with a working port", async (t) => {
    const { topo, state } = sb.ctx();
    const core = api();
    for (const p of PODS.slice(0, BEFORE_KILL))
      await core.createNamespacedPod({ namespace: OVERLAY.namespace, body: podManifest(p.name, p.node) });
    await eventually(`${BEFORE_KILL} pods Running`, 600_000, async () =>
      (await runningPods(core)).size >= BEFORE_KILL ? true : undefined,
    );
    const leader = await leaderOf("nb");
    const record = state.daemons.find((d) => d.name === daemonName("nb", leader.index));
    assert.ok(record && isAlive(record), `the sandbox started NB member ${leader.index} and it runs`);
    const pidfile = centralMembers(sb.layout, topo, "nb")[leader.index - 1]?.pidfile as string;
    assert.equal(Number(readFileSync(pidfile, "utf8").trim()), record.pid, "the member's pidfile names it");

    const rest = PODS.slice(BEFORE_KILL);
    let created = 0;
    let killedAt = 0;
    let runningAtKill = 0;
    const survivors = [1, 2, 3].filter((i) => i !== leader.index);
    // Resolves with the new leader and the time from the kill until a survivor says it leads.
    const kill = async () => {
      killedAt = Date.now();
      process.kill(record.pid, "SIGKILL");
      killed = { index: leader.index, pid: record.pid, term: leader.term };
      runningAtKill = (await runningPods(core)).size;
      await eventually("the killed member gone", 30_000, async () => (isAlive(record) ? undefined : true));
      const next = await leaderOf("nb", survivors);
      return { ...next, electedMs: Date.now() - killedAt };
    };
    let killing: ReturnType<typeof kill> | undefined;
    for (const p of rest) {
      await core.createNamespacedPod({ namespace: OVERLAY.namespace, body: podManifest(p.name, p.node) });
      created++;
      if (created === KILL_AFTER) killing = kill();
    }
    const next = await killing;
    assert.ok(next);
    assert.ok(next.term > leader.term, "a new term");
    const pods = await eventually(`all ${PODS.length} pods Running`, 900_000, async () => {
      const r = await runningPods(core);
      return r.size === PODS.length ? r : undefined;
    });
    t.diagnostic(
      `NB member ${leader.index} (leader, term ${leader.term}) killed with ${BEFORE_KILL + KILL_AFTER} pods created (${runningAtKill} Running just after), ${rest.length - KILL_AFTER} created after; member ${next.index} leads (term ${next.term}) ${next.electedMs} ms after; all ${PODS.length} pods Running ${Date.now() - killedAt} ms after the kill (1-minute load average ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]})`,
    );

    // `status` shows the killed member down (and exits non-zero) until the next `up`.
    const status = await sb.zovn(["status"]).then(
      () => assert.fail("status exits 0 with a member down"),
      (e: unknown) => (e instanceof CommandError ? e.stdout : String(e)),
    );
    assert.match(status, new RegExp(`^ {2}${daemonName("nb", leader.index)} +NOT RUNNING`, "m"), status);

    // Each pod's port works: it dials a VM and the VM dials it (each node's pods take both VMs, on both hypervisors).
    const podserver = sb.binary("PODSERVER");
    const vms = (topo.zstack?.vms ?? []).filter((v) => v.network === "overlay");
    assert.equal(vms.length, 2);
    const failed: string[] = [];
    for (const [i, p] of PODS.entries()) {
      const pod = pods.get(p.name);
      assert.ok(pod);
      const vm = vms[Math.floor(i / 2) % vms.length] as (typeof vms)[0];
      const exchanges = [
        {
          from: `${OVERLAY.namespace}/${p.name}`,
          to: `${vm.ip}:${VM_TCP_PORT}`,
          server: vm.name,
          client: pod.ip,
        },
        { from: vm.name, to: `${pod.ip}:${POD_TCP_PORT}`, server: p.name, client: vm.ip },
      ];
      for (const x of exchanges) {
        let reply = "";
        for (let attempt = 0; attempt < 60; attempt++) {
          reply = await dial(sb.layout, topo, podserver, x.from, x.to, "raft").catch((e: Error) => e.message);
          const [server, client] = reply.split(" ");
          if (server === x.server && client?.split(":")[0] === x.client) break;
          reply = `FAIL ${reply}`;
          await sleep(500);
        }
        if (reply.startsWith("FAIL")) failed.push(`${x.from} -> ${x.to}: ${reply}`);
      }
    }
    assert.deepEqual(failed, [], "every pod and its VM exchange TCP, each seeing the other's own address");

    // Nothing duplicated in NB: one port per pod, by pod, by name and by address, each the pod's own address.
    const dump = await dumpNb(sb);
    const ports = podPorts(dump).filter((p) => p.pod.startsWith(`${OVERLAY.namespace}/raft-`));
    assert.deepEqual(
      ports.map((p) => p.pod).sort(),
      PODS.map((p) => `${OVERLAY.namespace}/${p.name}`).sort(),
      "exactly one port per pod",
    );
    const names = Object.values(dump.Logical_Switch_Port ?? {}).map((r) => String(r.name));
    for (const p of ports)
      assert.equal(names.filter((n) => n === p.name).length, 1, `one port named ${p.name}`);
    const ips = ports.map((p) => {
      const pod = pods.get(p.pod.split("/")[1] as string);
      assert.ok(pod && p.addresses.length === 1 && p.addresses[0]?.split(" ").includes(pod.ip), p.name);
      return pod.ip;
    });
    assert.equal(new Set(ips).size, ips.length, "no address given twice");
    // In the pods' part of ZStack's network, never a VM's, and shown by no row of ZStack's.
    const foreign = foreignRows(dump);
    for (const ip of ips) {
      assert.ok(Number(ip.split(".")[3]) >= 128 && ip.startsWith("10.60.0."), ip);
      assert.ok(!vms.some((v) => v.ip === ip), `${ip} is a VM's`);
      const holders = Object.entries(foreign).flatMap(([table, rows]) =>
        Object.entries(rows)
          .filter(([, r]) => mentions(r, ip))
          .map(([u]) => `${table} ${u}`),
      );
      assert.deepEqual(holders, [], `no row of ZStack's shows ${ip}`);
    }
    // ZStack's overlay switch holds each pod port once (a set) and lost none of its own ports.
    const overlaySwitch = Object.values(dump.Logical_Switch ?? {}).find((r) =>
      JSON.stringify(r.external_ids).includes('"overlay-switch"'),
    );
    assert.ok(overlaySwitch);
    const onSwitch = new Set(listOf(overlaySwitch.ports) as string[]);
    for (const p of ports) assert.ok(onSwitch.has(p.uuid), `${p.name} on ZStack's overlay switch`);
    // ZStack's rows differ from before the pods only as documented; none is gone.
    const ours = new Set(ownedRows(dump).map((r) => r.split(" ")[1] as string));
    assert.deepEqual(onlyDocumentedMutations(zstackBefore, foreign, ours), []);
    assert.deepEqual(zstackRows(foreign).sort(), zstackRows(zstackBefore).sort());
  });

  it("up restarts the killed NB member, which rejoins the cluster; nothing else starts again", async (t) => {
    assert.ok(killed, "a member was killed");
    const { state } = sb.ctx();
    const others = state.daemons
      .filter((d) => d.name !== daemonName("nb", killed?.index ?? 0))
      .map((d) => `${d.name} ${d.pid}@${d.startTime}`)
      .sort();
    const nb = foreignRows(await dumpNb(sb));
    const started = Date.now();
    await sb.zovn(UP, UP_TIMEOUT_MS);
    const after = sb.ctx().state.daemons;
    const restarted = after.find((d) => d.name === daemonName("nb", killed?.index ?? 0));
    assert.ok(restarted && isAlive(restarted) && restarted.pid !== killed.pid);
    assert.deepEqual(
      after
        .filter((d) => d !== restarted)
        .map((d) => `${d.name} ${d.pid}@${d.startTime}`)
        .sort(),
      others,
      "no other process started again",
    );
    await quorum("nb");
    t.diagnostic(
      `member ${killed.index} restarted and back in the cluster ${Date.now() - started} ms after up began`,
    );
    const s = await memberStatus("nb", killed.index);
    assert.equal(s.status, "cluster member");
    assert.deepEqual(diffDumps(nb, foreignRows(await dumpNb(sb))), [], "ZStack's content not written again");
  });

  it("up on the running sandbox changes nothing", async () => {
    const daemons = () =>
      (sb.ctx().state.daemons ?? []).map((d) => `${d.name} ${d.pid}@${d.startTime}`).sort();
    const was = { daemons: daemons(), nb: foreignRows(await dumpNb(sb)) };
    await sb.zovn(UP, UP_TIMEOUT_MS);
    assert.deepEqual(daemons(), was.daemons, "no process started again");
    assert.deepEqual(diffDumps(was.nb, foreignRows(await dumpNb(sb))), [], "ZStack's content written once");
  });

  it("down leaves no netns, process or mount of the sandbox", async () => {
    const { state } = sb.ctx();
    await sb.zovn(["down"]);
    await assertNothingLeft(sb, state);
  });
});
