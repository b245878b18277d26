// `zovn sandbox up --zstack` end to end (issue 14, "Acceptance (e2e in the sandbox)"): the sandbox's cluster in
// External mode on a simulated ZStack, with the real programs (the controller, the node agents, the CNI, the node
// simulator) as the sandbox runs them. Pods on ZStack's overlay switch and ZStack's VMs on both hypervisors talk
// TCP both ways, each seeing the other's own address; each node reaches its pods through its management port
// (the path of kubelet probes) and the pods reach their node's management address; a pod reaches a Service backed
// by the pods on ZStack's switch. ZStack's rows change only as documented while the plugin runs. `down` leaves no
// netns, process or mount of the sandbox.
// Sandbox name zsbzs (docs/sandbox.md); run it under its lock: flock /work/locks/zsbzs.lock node --import tsx
// --test test/e2e/zstack-sandbox.test.ts

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { run } from "../../src/sandbox/command.ts";
import { localRemote } from "../../src/sandbox/ovn-central.ts";
import { ZSTACK_NETWORKS } from "../../src/sandbox/topology.ts";
import { runZStackDemo } from "../../src/sandbox/zstack/demo.ts";
import { sandboxHandle } from "../rig/sandbox-handle.ts";
import { assertNothingLeft, dumpNb, zstackRows } from "../rig/zstack-sandbox.ts";
import { diffDumps, foreignRows, onlyDocumentedMutations, ownedRows } from "../rig/zstack-sim.ts";

const NAME = "zsbzs";
const sb = sandboxHandle(NAME);
const UP_TIMEOUT_MS = 40 * 60_000; // the first run may build Kubernetes into the binary cache

describe("zovn sandbox up --zstack", { timeout: UP_TIMEOUT_MS + 20 * 60_000 }, () => {
  before(async () => {
    // A sandbox of this name left by an earlier aborted run.
    await sb.zovn(["down"]);
  });

  after(async () => {
    await sb.zovn(["down", "--purge"]).catch(() => "");
  });

  it("brings up ZStack (controller host, two hypervisors, VMs) and the cluster in External mode on it", async (t) => {
    const started = Date.now();
    const out = await sb.zovn(["up", "--zstack", "--nodes", "2"], UP_TIMEOUT_MS);
    t.diagnostic(`up --zstack in ${Date.now() - started} ms`);
    for (const n of ZSTACK_NETWORKS)
      assert.match(
        out,
        new RegExp(`Subnet {7}${n.subnet} on ZStack's ${n.network} switch for namespace ${n.namespace}`),
      );
    assert.match(out, /^ {2}zh2 +ZStack hypervisor 192\.168\.200\.212 /m);
    const { topo } = sb.ctx();
    assert.ok(topo.zstack);
    const sbShow = await run("ovn-sbctl", [`--db=${localRemote(sb.layout, topo, "sb")}`, "show"]);
    // ZStack's hosts named as ZStack names them, ours k8s-<node>, every one on Geneve.
    for (const c of ["zstack-host-1", "zstack-host-2", "k8s-node1", "k8s-node2"])
      assert.match(sbShow, new RegExp(`^Chassis "?${c}"?$`, "m"), sbShow);
    assert.doesNotMatch(sbShow, /Encap vxlan/);
    for (const h of topo.zstack.hypervisors) assert.match(sbShow, new RegExp(`hostname: "${h.ip}"`));
    // Each Subnet is bound to its switch, named by UUID (the overlay switch's name is ZStack's twin switch's too).
    for (const n of ZSTACK_NETWORKS) {
      const subnet = JSON.parse(await sb.zovn(["kubectl", "get", "sn", n.subnet, "-o", "json"])) as {
        spec: { externalLogicalSwitch: string };
        status: { logicalSwitchUUID?: string };
      };
      assert.equal(subnet.status.logicalSwitchUUID, subnet.spec.externalLogicalSwitch);
    }
  });

  it("pods on ZStack's overlay and flat switches and VMs on both hypervisors talk TCP both ways; node -> pod, pod -> node, pod -> Service", async (t) => {
    const { topo, state } = sb.ctx();
    const before = await dumpNb(sb);
    const started = Date.now();
    const report = await runZStackDemo(sb.layout, topo, state);
    t.diagnostic(`demo in ${Date.now() - started} ms`);
    for (const c of report.checks)
      t.diagnostic(`${c.kind} ${c.from} -> ${c.to}: ${c.ok ? "ok" : "FAIL"} ${c.detail}`);
    assert.deepEqual(
      report.checks.filter((c) => !c.ok),
      [],
      "every exchange echoed by the right server, seeing the client's own address",
    );
    const kinds = new Map<string, number>();
    for (const c of report.checks) kinds.set(c.kind, (kinds.get(c.kind) ?? 0) + 1);
    const vms = topo.zstack?.vms ?? [];
    assert.equal(vms.length, 4);
    const pods = report.pods;
    assert.equal(pods.length, 4, "one pod per node on each of ZStack's switches");
    // The cluster's paths reach the pods of both switches through our router port on each: the flat switch, with
    // its localnet port, too (each node's chassis MAC replaces the router port's MAC on the flat network).
    const reached = ZSTACK_NETWORKS.filter((n) => n.clusterPath);
    assert.deepEqual(
      reached.map((n) => n.network),
      ["overlay", "flat"],
    );
    const expected: Record<string, number> = { "node -> pod": 4, "pod -> node": 4 };
    for (const n of ZSTACK_NETWORKS) {
      const on = vms.filter((v) => v.network === n.network);
      assert.equal(new Set(on.map((v) => v.host)).size, 2, `a VM on ${n.network} on each hypervisor`);
      expected[`pod -> vm (${n.network})`] = 2 * on.length;
      expected[`vm -> pod (${n.network})`] = 2 * on.length;
      if (n.clusterPath) expected[`pod -> service (${n.network})`] = 2;
      const netPods = pods.filter((p) => p.namespace === n.namespace);
      assert.deepEqual(netPods.map((p) => p.node).sort(), ["node1", "node2"]);
      // On ZStack's network, in the pods' part of it (above ZStack's range), never a VM's address.
      const base = n.cidr.split(".").slice(0, 3).join(".");
      for (const p of netPods) {
        assert.ok(p.ip.startsWith(`${base}.`) && Number(p.ip.split(".")[3]) >= 128, `${p.name} has ${p.ip}`);
        assert.ok(!vms.some((v) => v.ip === p.ip));
      }
    }
    assert.deepEqual(Object.fromEntries(kinds), expected);
    // While the plugin runs, ZStack's rows differ from before the demo only as documented (our rows, ZStack's
    // switch's ports grown by our pod ports); none of ZStack's rows is gone.
    const during = await dumpNb(sb);
    const ours = new Set(ownedRows(during).map((r) => r.split(" ")[1] as string));
    assert.deepEqual(onlyDocumentedMutations(foreignRows(before), foreignRows(during), ours), []);
    assert.deepEqual(zstackRows(during).sort(), zstackRows(before).sort());
    assert.ok(zstackRows(before).length > 30, "ZStack's content is there");
    // The Subnet's gateway (on the overlay switch ZStack's router) is the pods'; the cluster's networks go through
    // our router port on each switch.
    for (const n of ZSTACK_NETWORKS) {
      const list = JSON.parse(await sb.zovn(["kubectl", "-n", n.namespace, "get", "pods", "-o", "json"])) as {
        items: { metadata: { annotations?: Record<string, string> } }[];
      };
      assert.equal(list.items.length, 2);
      for (const p of list.items) {
        const net = JSON.parse(p.metadata.annotations?.["k8s.ovn.org/pod-networks"] ?? "{}").default as {
          gateway_ips: string[];
          routes: { dest: string; nextHop: string }[];
        };
        assert.deepEqual(net.gateway_ips, [n.gateway]);
        assert.deepEqual(
          net.routes.map((r) => r.dest).sort(),
          n.clusterPath ? ["10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16"] : [],
        );
      }
    }
  });

  it("up on the running sandbox changes nothing", async () => {
    const daemons = () =>
      (sb.ctx().state.daemons ?? []).map((d) => `${d.name} ${d.pid}@${d.startTime}`).sort();
    const before = { daemons: daemons(), nb: foreignRows(await dumpNb(sb)) };
    await sb.zovn(["up", "--zstack", "--nodes", "2"], UP_TIMEOUT_MS);
    assert.deepEqual(daemons(), before.daemons, "no process started again");
    assert.deepEqual(
      diffDumps(before.nb, foreignRows(await dumpNb(sb))),
      [],
      "ZStack's content written once",
    );
  });

  it("down leaves no netns, process or mount of the sandbox", async () => {
    const { state } = sb.ctx();
    await sb.zovn(["down"]);
    await assertNothingLeft(sb, state);
  });
});
