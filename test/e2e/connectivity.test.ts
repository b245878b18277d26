// Pods really talk: the sandbox with zstack-ovnkube-controller and zstack-ovnkube-node on every node, real
// kube-apiserver, OVN and OVS. TCP payloads and UDP between pods on one node and across nodes (VXLAN, then
// Geneve), node to pod, pod to node, pod to the external host (SNATed to the node IP), and pod churn that leaves
// nothing behind.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { run } from "../../src/sandbox/command.ts";
import { type DemoPod, runDemo } from "../../src/sandbox/demo.ts";
import { execArgv } from "../../src/sandbox/exec.ts";
import { kubectl } from "../../src/sandbox/kubectl.ts";
import { localRemote } from "../../src/sandbox/ovn-central.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbnet";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;
const inside = (target: string, command: string[]) => sandbox.inside(target, command, { timeoutMs: 15_000 });

describe("pod connectivity in the sandbox", { timeout: 30 * 60_000 }, () => {
  after(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  let pods: DemoPod[] = [];

  it("VXLAN: every demo pod reaches every other over TCP, and egress is SNATed to the pod's node", async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up"]);
    const { state, topo } = ctx();
    const report = await runDemo(layout, topo, state);
    pods = report.pods;
    assert.ok(new Set(pods.map((p) => p.node)).size === topo.nodes.length, "pods on every node");
    const bad = report.matrix.filter((m) => !m.ok);
    assert.deepEqual(bad, [], "every pod pair reachable with its payload echoed");
    assert.equal(report.matrix.length, pods.length * (pods.length - 1));
    assert.ok(
      report.egress.length === topo.nodes.length && report.egress.every((e) => e.ok),
      JSON.stringify(report.egress),
    );
  });

  it("UDP between pods on different nodes and on the same node", async () => {
    const { state } = ctx();
    const ps = state.binaries?.PODSERVER as string;
    const a = pods[0] as DemoPod;
    const other = pods.find((p) => p.node !== a.node) as DemoPod;
    const same = pods.find((p) => p.node === a.node && p !== a) as DemoPod;
    for (const b of [other, same]) {
      const reply = await inside(`default/${a.name}`, [
        ps,
        "dial",
        "udp",
        `${b.ip}:8081`,
        "--payload",
        "udp-check",
      ]);
      assert.equal(reply, `${b.name} ${a.ip}:${reply.split(" ")[1]?.split(":")[1]} udp-check`);
    }
  });

  it("a node reaches pods on other nodes (the kubelet probe path) and pods reach a node's address", async () => {
    const { state, topo } = ctx();
    const ps = state.binaries?.PODSERVER as string;
    const pod = pods.find((p) => p.node !== "node1") as DemoPod;
    const reply = await inside("node1", [ps, "dial", "tcp", `${pod.ip}:8080`, "--payload", "probe"]);
    assert.match(
      reply,
      new RegExp(`^${pod.name} 100\\.64\\.\\d+\\.\\d+:\\d+ probe$`),
      "source is node1's management address",
    );
    // A server in node2's own network namespace, reached from a pod on node1.
    const node2 = topo.nodes.find((n) => n.name === "node2");
    const srcPod = pods.find((p) => p.node === "node1") as DemoPod;
    const { spawn } = await import("node:child_process");
    const argv = execArgv(layout, topo, "node2", [ps, "--tcp", "9191", "--name", "node2-host"]);
    const server = spawn(argv[0] as string, argv.slice(1), { stdio: "ignore" });
    try {
      const r2 = await eventually("pod to node2", 10_000, () =>
        inside(`default/${srcPod.name}`, [ps, "dial", "tcp", `${node2?.ip}:9191`, "--payload", "to-node"]),
      );
      assert.match(r2, /^node2-host \d+\.\d+\.\d+\.\d+:\d+ to-node$/);
    } finally {
      server.kill();
    }
  });

  it("30 pods created and deleted 5 times leave no OVS port, veth, netns, logical port or address behind", async () => {
    const { state, topo } = ctx();
    const nbRemote = localRemote(layout, topo, "nb");
    const lsps = async () =>
      (
        await run("ovn-nbctl", [
          `--db=${nbRemote}`,
          "--bare",
          "--columns=name",
          "find",
          "Logical_Switch_Port",
          "external_ids:zstack.io/kind=pod-port",
        ])
      )
        .split("\n")
        .filter((l) => l.startsWith("default_churn"));
    const nodeCounts = async () => {
      let ports = 0;
      let veths = 0;
      for (const n of topo.nodes) {
        ports += (
          await inside(n.name, [
            "ovs-vsctl",
            "--bare",
            "--columns=name",
            "find",
            "Interface",
            "external_ids:zstack.io/pod=default/churn",
          ])
        )
          .split("\n")
          .filter(Boolean).length;
        veths += (await inside(n.name, ["ip", "-o", "link", "show"]))
          .split("\n")
          .filter((l) => /_zv[@:]/.test(l)).length;
      }
      return { ports, veths };
    };
    // Pod netns live in each node's private /run/netns (its mount namespace), not in the machine's, where
    // other suites' sandboxes come and go.
    const podNetns = async () => {
      let n = 0;
      for (const node of topo.nodes)
        n += (await inside(node.name, ["ip", "netns", "list"])).split("\n").filter(Boolean).length;
      return n;
    };
    const baseline = { netns: await podNetns(), nodes: await nodeCounts() };
    const used = async () =>
      Number(await kubectl(layout, state, ["get", "sn", "default", "-o", "jsonpath={.status.usedIPs}"]));
    const usedBefore = await used();
    for (let round = 0; round < 5; round++) {
      await kubectl(layout, state, [
        "create",
        "deployment",
        "churn",
        "--image=x",
        "--replicas=30",
        "--",
        "/podserver",
        "--tcp",
        "8080",
      ]);
      await eventually(`30 churn pods Running (round ${round})`, 180_000, async () => {
        const out = await kubectl(layout, state, [
          "get",
          "pods",
          "-l",
          "app=churn",
          "-o",
          "jsonpath={.items[*].status.phase}",
        ]);
        const phases = out.split(" ").filter(Boolean);
        return phases.length === 30 && phases.every((p) => p === "Running") ? true : undefined;
      });
      await kubectl(layout, state, ["delete", "deployment", "churn", "--wait=true"]);
      await eventually(`churn pods gone (round ${round})`, 180_000, async () => {
        const out = await kubectl(layout, state, ["get", "pods", "-l", "app=churn", "-o", "name"]);
        return out.trim() === "" ? true : undefined;
      });
    }
    await eventually("no churn logical ports", 60_000, async () =>
      (await lsps()).length === 0 ? true : undefined,
    );
    await eventually("no churn OVS ports or veths", 60_000, async () => {
      const now = await nodeCounts();
      return now.ports === baseline.nodes.ports && now.veths === baseline.nodes.veths ? true : undefined;
    });
    assert.equal(await podNetns(), baseline.netns, "no pod netns left");
    await eventually("addresses returned", 30_000, async () =>
      (await used()) === usedBefore ? true : undefined,
    );
  });

  it("Geneve: the same TCP matrix, UDP across nodes, node to pod and egress hold with geneve tunnels", async () => {
    await zovn(["down", "--purge"]);
    await zovn(["up", "--encap", "geneve"]);
    const { state, topo } = ctx();
    const encap = await run("ovn-sbctl", [
      `--db=${localRemote(layout, topo, "sb")}`,
      "--bare",
      "--columns=type",
      "list",
      "Encap",
    ]);
    assert.deepEqual([...new Set(encap.split("\n").filter(Boolean))], ["geneve"]);
    const report = await runDemo(layout, topo, state);
    assert.deepEqual(
      report.matrix.filter((m) => !m.ok),
      [],
    );
    assert.ok(
      report.egress.every((e) => e.ok),
      JSON.stringify(report.egress),
    );
    // UDP across nodes and node to pod over Geneve too.
    const ps = state.binaries?.PODSERVER as string;
    const a = report.pods[0] as DemoPod;
    const b = report.pods.find((p) => p.node !== a.node) as DemoPod;
    const udp = await inside(`default/${a.name}`, [
      ps,
      "dial",
      "udp",
      `${b.ip}:8081`,
      "--payload",
      "geneve-udp",
    ]);
    assert.ok(udp.startsWith(`${b.name} ${a.ip}:`) && udp.endsWith(" geneve-udp"), udp);
    const probe = await inside(a.node, [ps, "dial", "tcp", `${b.ip}:8080`, "--payload", "geneve-probe"]);
    assert.match(probe, /^\S+ 100\.64\.\d+\.\d+:\d+ geneve-probe$/);
  });

  it("Raft: with 3-member NB and SB clusters the controller and agents work through the leaders", async () => {
    await zovn(["down", "--purge"]);
    await zovn(["up", "--raft"]);
    const { state, topo } = ctx();
    for (const db of ["nb", "sb"] as const) {
      const remote = localRemote(layout, topo, db);
      const status = await run("ovsdb-client", ["dump", remote, "_Server", "Database", "name", "model"]);
      assert.match(status, /clustered/, `${db} is clustered`);
    }
    const report = await runDemo(layout, topo, state);
    assert.deepEqual(
      report.matrix.filter((m) => !m.ok),
      [],
    );
    assert.ok(
      report.egress.every((e) => e.ok),
      JSON.stringify(report.egress),
    );
  });
});
