import assert from "node:assert/strict";
import { test } from "node:test";
import {
  allHosts,
  allNetns,
  centralRemote,
  chassisOf,
  controlPlanePodRoutes,
  controlPlaneSources,
  DEFAULT_SPEC,
  findHost,
  NB_PORT,
  planTopology,
  SB_PORT,
} from "./topology.ts";
import { controlPlaneLines, hostAddressLines } from "./underlay.ts";

test("the default plan has a control-plane host, three nodes and an external host on one /24", () => {
  const t = planTopology(DEFAULT_SPEC);
  assert.equal(t.controlPlane.ip, "192.168.200.2");
  assert.deepEqual(
    t.nodes.map((n) => [n.name, n.ip, n.netns]),
    [
      ["node1", "192.168.200.11", "zsb-node1"],
      ["node2", "192.168.200.12", "zsb-node2"],
      ["node3", "192.168.200.13", "zsb-node3"],
    ],
  );
  assert.equal(t.external.ip, "192.168.200.100");
  assert.deepEqual(t.external.extraIps, ["192.168.200.1"]);
  assert.equal(t.underlayNetns, "zsb-underlay");
});

test("every netns name carries the instance prefix and no two hosts share an address", () => {
  const t = planTopology({ ...DEFAULT_SPEC, name: "e2e", nodes: 40, raft: true });
  const names = [t.underlayNetns, ...allHosts(t).map((h) => h.netns)];
  assert.ok(names.every((n) => n.startsWith("e2e-")));
  assert.equal(new Set(names).size, names.length);
  const ips = allHosts(t).flatMap((h) => [h.ip, ...h.extraIps]);
  assert.equal(new Set(ips).size, ips.length);
  assert.ok(allHosts(t).every((h) => h.underlayPort.length <= 15));
});

test("Raft mode gives the control-plane host three central addresses and clients all three remotes", () => {
  const t = planTopology({ ...DEFAULT_SPEC, raft: true });
  assert.deepEqual(t.centralIps, ["192.168.200.2", "192.168.200.3", "192.168.200.4"]);
  assert.deepEqual(t.controlPlane.extraIps, ["192.168.200.3", "192.168.200.4"]);
  assert.equal(
    centralRemote(t, SB_PORT),
    "tcp:192.168.200.2:6642,tcp:192.168.200.3:6642,tcp:192.168.200.4:6642",
  );
  assert.equal(centralRemote(planTopology(DEFAULT_SPEC), SB_PORT), "tcp:192.168.200.2:6642");
});

test("a name that could collide with another instance's prefix or a bad node count is refused", () => {
  assert.throws(() => planTopology({ ...DEFAULT_SPEC, name: "zsb-x" }));
  assert.throws(() => planTopology({ ...DEFAULT_SPEC, name: "Z" }));
  assert.throws(() => planTopology({ ...DEFAULT_SPEC, nodes: 0 }));
  assert.throws(() => planTopology({ ...DEFAULT_SPEC, nodes: 1.5 }));
});

test("hosts are found by short name and by alias", () => {
  const t = planTopology(DEFAULT_SPEC);
  assert.equal(findHost(t, "control-plane")?.name, "cp");
  assert.equal(findHost(t, "external")?.name, "ext");
  assert.equal(findHost(t, "node2")?.ip, "192.168.200.12");
  assert.equal(findHost(t, "node9"), undefined);
});

test("real nodes: the control-plane host routes the pods and Services via node1, and the agents admit it", () => {
  const real = planTopology({ ...DEFAULT_SPEC, kubelet: true });
  assert.deepEqual(controlPlanePodRoutes(real), {
    cidrs: ["10.244.0.0/16", "10.96.0.0/16"],
    via: "192.168.200.11",
  });
  assert.deepEqual(controlPlaneLines(real).slice(-2), [
    "route replace 10.244.0.0/16 via 192.168.200.11 dev eth0",
    "route replace 10.96.0.0/16 via 192.168.200.11 dev eth0",
  ]);
  assert.deepEqual(controlPlaneSources(real), ["192.168.200.2/32"]);
  assert.deepEqual(controlPlaneSources(planTopology({ ...DEFAULT_SPEC, kubelet: true, raft: true })), [
    "192.168.200.2/32",
    "192.168.200.3/32",
    "192.168.200.4/32",
  ]);
  // The simulator mode, or real nodes without the agent, keep the control-plane host off the pod network.
  for (const spec of [DEFAULT_SPEC, { ...DEFAULT_SPEC, kubelet: true, nodeAgent: false }]) {
    const topo = planTopology(spec);
    assert.equal(controlPlanePodRoutes(topo), undefined);
    assert.deepEqual(controlPlaneLines(topo), hostAddressLines(topo.controlPlane, true));
  }
});

test("--zstack: ZStack's controller host and hypervisors clear of the nodes, the central on ZStack's controller, a VM per hypervisor and switch", () => {
  const t = planTopology({ ...DEFAULT_SPEC, name: "zsbzs", nodes: 80, zstack: true, encap: "geneve" });
  assert.ok(t.zstack);
  assert.equal(t.central, t.zstack.controller);
  assert.deepEqual(t.centralIps, ["192.168.200.201"]);
  assert.equal(centralRemote(t, SB_PORT), "tcp:192.168.200.201:6642");
  assert.deepEqual(t.controlPlane.extraIps, []);
  assert.deepEqual(
    t.zstack.hypervisors.map((h) => [h.name, h.ip, h.role]),
    [
      ["zh1", "192.168.200.211", "hypervisor"],
      ["zh2", "192.168.200.212", "hypervisor"],
    ],
  );
  assert.deepEqual(
    t.zstack.vms.map((v) => [v.name, v.host, v.network, v.ip, v.tap]),
    [
      ["vm21", "zh1", "overlay", "10.60.0.21", "vnic21.0"],
      ["vm22", "zh2", "overlay", "10.60.0.22", "vnic22.0"],
      ["vm31", "zh1", "flat", "192.168.100.31", "vnic31.0"],
      ["vm32", "zh2", "flat", "192.168.100.32", "vnic32.0"],
    ],
  );
  // With the most nodes, still no address twice; every netns is the instance's.
  const ips = allHosts(t).flatMap((h) => [h.ip, ...h.extraIps]);
  assert.equal(new Set(ips).size, ips.length);
  const netns = allNetns(t);
  assert.ok(netns.every((n) => n.startsWith("zsbzs-")));
  assert.equal(new Set(netns).size, netns.length);
  assert.ok(netns.includes("zsbzs-vm21") && netns.includes("zsbzs-zs"));
  assert.equal(findHost(t, "zh2"), t.zstack.hypervisors[1]);
  assert.equal(chassisOf(t, t.nodes[0] as (typeof t.nodes)[0]), "k8s-node1");
  assert.equal(
    chassisOf(planTopology(DEFAULT_SPEC), planTopology(DEFAULT_SPEC).nodes[0] as (typeof t.nodes)[0]),
    "node1",
  );
  assert.equal(planTopology(DEFAULT_SPEC).zstack, undefined);
});

test("--zstack --raft: ZStack's NB and SB members on three addresses of its controller host, every member in each remote", () => {
  const t = planTopology({
    ...DEFAULT_SPEC,
    name: "zsbzr",
    nodes: 80,
    zstack: true,
    encap: "geneve",
    raft: true,
  });
  assert.ok(t.zstack);
  assert.equal(t.central, t.zstack.controller);
  assert.deepEqual(t.centralIps, ["192.168.200.201", "192.168.200.202", "192.168.200.203"]);
  assert.deepEqual(t.zstack.controller.extraIps, ["192.168.200.202", "192.168.200.203"]);
  assert.equal(
    centralRemote(t, NB_PORT),
    "tcp:192.168.200.201:6641,tcp:192.168.200.202:6641,tcp:192.168.200.203:6641",
  );
  assert.deepEqual(t.controlPlane.extraIps, []);
  const ips = allHosts(t).flatMap((h) => [h.ip, ...h.extraIps]);
  assert.equal(new Set(ips).size, ips.length);
  // Without --raft, one member on the host's one address, as before.
  const standalone = planTopology({ ...DEFAULT_SPEC, zstack: true, encap: "geneve" });
  assert.deepEqual(standalone.zstack?.controller.extraIps, []);
});

test("--zstack refuses what it does not support, naming it", () => {
  const zs = { ...DEFAULT_SPEC, zstack: true, encap: "geneve" as const };
  assert.throws(() => planTopology({ ...zs, kubelet: true }), /--kubelet/);
  assert.throws(() => planTopology({ ...zs, nodeAgent: false }), /--no-node-agent/);
  assert.throws(() => planTopology({ ...zs, encap: "vxlan" }), /--encap vxlan \(ZStack's hosts use geneve\)/);
});
