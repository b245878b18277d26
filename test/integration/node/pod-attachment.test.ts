// CNI ADD/DEL/CHECK/GC's networking against real OVS (userspace datapath) and a real OVN control plane, in
// network namespaces the rig creates and removes.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CheckFailedError, StepError, StepTimeoutError } from "../../../src/node/errors.ts";
import { parseInterfaceName, parseNetnsPath } from "../../../src/node/interface-name.ts";
import { interfaceWithAddress, podMtu } from "../../../src/node/mtu.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { findPodPort, listPodPorts } from "../../../src/node/ovs-port.ts";
import { type AddOutcome, type AddRequest, PodAttacher } from "../../../src/node/pod-attachment.ts";
import { spawnedTools } from "../../../src/node/tool.ts";
import { ensurePodInterface, hostVethName, listHostVeths } from "../../../src/node/veth.ts";
import { formatInterfaceAddress } from "../../../src/ovn/pod-port.ts";
import type { NetnsHandle } from "../../rig/ovs-node.ts";
import {
  ETH0,
  execIn,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  ping,
  podNetwork,
  startOneNodeCluster,
  tcpTransfer,
  udpTransfer,
} from "./one-node-cluster.ts";

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let attacher: PodAttacher;
let mtu: number;

function containerId(): string {
  return [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

interface Pod {
  req: AddRequest;
  netns: NetnsHandle;
  ip: string;
}

let podSeq = 0;
/** A pod with its logical port in NB and a fresh sandbox netns; not yet added. */
async function newPod(name: string): Promise<Pod> {
  const ip = `10.244.0.${10 + podSeq++}`;
  const uid = `uid-${name}`;
  const { mac, ipWithPrefix } = await c.addPodLsp({ namespace: "default", name, uid }, ip);
  const netns = await c.node.addNetns(name);
  return {
    ip,
    netns,
    req: {
      containerId: containerId(),
      ifname: ETH0,
      netns: parseNetnsPath(netns.path),
      podNamespace: "default",
      podName: name,
      podUid: uid,
      network: podNetwork([ipWithPrefix], mac),
    },
  };
}

describe("pod attachment on a real OVS and OVN node", () => {
  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    const setup = new NodeSetup({
      client: c.ovs,
      hostNetns: c.node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: {
        ovnRemote: c.node.sb?.unix ?? "",
        encapType: "vxlan",
        encapIp: NODE_IP,
        systemId: NODE,
        bridgeDatapathType: "netdev",
      },
    });
    await setup.reconcile();
    const encap = await interfaceWithAddress(NODE_IP, { netns: c.node.netns.path });
    mtu = podMtu({ encapMtu: encap.mtu, encapType: "vxlan" });
    attacher = new PodAttacher({
      client: c.ovs,
      mtu,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
      ovnInstalledBudgetMs: 15_000,
    });
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  let pa: Pod;
  let pb: Pod;
  const adds: AddOutcome[] = [];

  test("two pods on one node exchange ping, a 256 KiB TCP payload and a UDP datagram through OVN", async (t) => {
    pa = await newPod("pa");
    pb = await newPod("pb");
    adds.push(await attacher.add(pa.req));
    adds.push(await attacher.add(pb.req));
    assert.equal(mtu, 1450, "VXLAN over a 1500-byte underlay");

    for (const [from, to] of [
      [pa, pb],
      [pb, pa],
    ] as const) {
      const r = await ping(from.netns.path, to.ip);
      assert.equal(r.code, 0, `ping ${to.ip}: ${r.stdout}${r.stderr}`);
    }
    const tcp = await tcpTransfer(pa.netns.path, pb.netns.path, pb.ip, 5001);
    assert.equal(tcp.client.code, 0, tcp.client.stderr);
    assert.equal(tcp.received, tcp.sent, "the TCP payload arrives intact (TX checksum offload is off)");
    assert.equal(tcp.peer, pa.ip);
    assert.equal(
      await udpTransfer(pb.netns.path, pa.netns.path, pa.ip, 5002, "hello over udp\n"),
      "hello over udp\n",
    );

    const result = adds[0]?.result;
    assert.equal(result?.interfaces[0]?.name, hostVethName(pa.req.containerId));
    assert.match(result?.interfaces[0]?.mac ?? "", /^[0-9a-f:]{17}$/);
    assert.deepEqual(result?.interfaces[1], {
      name: "eth0",
      mac: pa.req.network.mac,
      mtu,
      sandbox: pa.netns.path,
    });
    assert.deepEqual(result?.ips, [
      { address: formatInterfaceAddress(pa.req.network.ips[0]!), gateway: "10.244.0.1", interface: 1 },
    ]);
    assert.deepEqual(result?.routes, [{ dst: "0.0.0.0/0", gw: "10.244.0.1" }]);
    const port = findPodPort(c.ovs, pa.req.containerId);
    assert.equal(port?.ifaceId, "default_pa");
    assert.equal(port?.ovnInstalled, true);
    for (const a of adds) t.diagnostic(`ADD timings (ms): ${JSON.stringify(roundAll(a.timings))}`);
  });

  test("a pod ADD spawns four processes: the pod-side link add and ip batch, the host-side ip batch and ethtool", async (t) => {
    const pod = await newPod("pc");
    const before = spawnedTools();
    const out = await attacher.add(pod.req);
    assert.equal(spawnedTools() - before, 4);
    t.diagnostic(`ADD timings (ms): ${JSON.stringify(roundAll(out.timings))}`);
    await attacher.del(pod.req);
  });

  test("ADD repeated with the same request keeps one port and one veth and the pod stays reachable", async () => {
    const again = await attacher.add(pa.req);
    assert.equal(again.portName, hostVethName(pa.req.containerId));
    assert.equal(listPodPorts(c.ovs).filter((p) => p.ifaceId === "default_pa").length, 1);
    const veths = await listHostVeths({ netns: c.node.netns.path });
    assert.equal(veths.filter((v) => v === again.portName).length, 1);
    const r = await ping(pb.netns.path, pa.ip);
    assert.equal(r.code, 0, r.stdout);
    await attacher.check(pa.req);
  });

  test("an ADD retried after an interrupted one (veth made, no OVS port yet) completes the attachment", async () => {
    const pod = await newPod("pr");
    await ensurePodInterface(
      { ...pod.req, ...pod.req.network, mtu, txChecksumOff: true },
      { netns: c.node.netns.path },
    );
    assert.equal(findPodPort(c.ovs, pod.req.containerId), undefined);
    await attacher.add(pod.req);
    await attacher.check(pod.req);
    const r = await ping(pod.netns.path, pa.ip);
    assert.equal(r.code, 0, r.stdout);
    await attacher.del(pod.req);
  });

  test("an interface name that is also an ip keyword is created under that name and reaches the other pods", async () => {
    const pod = await newPod("pkw");
    const req = { ...pod.req, ifname: parseInterfaceName("type") };
    await attacher.add(req);
    await attacher.check(req);
    const links = await execIn(pod.netns.path, "ip", ["-o", "link", "show", "dev", "type"]);
    assert.equal(links.code, 0, links.stderr);
    const r = await ping(pod.netns.path, pa.ip);
    assert.equal(r.code, 0, r.stdout);
    await attacher.del(req);
  });

  test("an ADD whose request is aborted while waiting rejects with the abort reason and leaves nothing", async () => {
    const netns = await c.node.addNetns("pab");
    const req: AddRequest = {
      containerId: containerId(),
      ifname: ETH0,
      netns: parseNetnsPath(netns.path),
      podNamespace: "default",
      podName: "aborted",
      podUid: "uid-aborted",
      network: podNetwork(["10.244.0.98/16"], "0a:58:0a:f4:00:62"),
    };
    const reason = new Error("the runtime went away");
    const ac = new AbortController();
    setTimeout(() => ac.abort(reason), 200);
    await assert.rejects(attacher.add(req, { signal: ac.signal }), (e: unknown) => e === reason);
    assert.equal(findPodPort(c.ovs, req.containerId), undefined);
    assert.ok(!(await listHostVeths({ netns: c.node.netns.path })).includes(hostVethName(req.containerId)));
  });

  test("CHECK passes for a wired pod and names what differs once the pod's address is gone", async () => {
    await attacher.check(pb.req);
    await execIn(pb.netns.path, "ip", [
      "addr",
      "del",
      formatInterfaceAddress(pb.req.network.ips[0]!),
      "dev",
      "eth0",
    ]);
    await assert.rejects(attacher.check(pb.req), (e: unknown) => {
      assert.ok(e instanceof CheckFailedError);
      assert.deepEqual(e.problems, [
        `eth0 lacks address ${formatInterfaceAddress(pb.req.network.ips[0]!)}`,
        "default route via nothing, expected 10.244.0.1",
      ]);
      return true;
    });
    // ADD again repairs it.
    await attacher.add(pb.req);
    await attacher.check(pb.req);
  });

  test("a DEL carrying the old container id keeps the port of the pod's newer sandbox", async () => {
    const old = await newPod("pd");
    await attacher.add(old.req);
    const oldPort = hostVethName(old.req.containerId);
    // The runtime recreates the sandbox under a new container id, in a new netns, before the old DEL arrives.
    const netns2 = await c.node.addNetns("pd2");
    const fresh: AddRequest = { ...old.req, containerId: containerId(), netns: parseNetnsPath(netns2.path) };
    const added = await attacher.add(fresh);
    const newPort = hostVethName(fresh.containerId);
    assert.deepEqual(
      listPodPorts(c.ovs)
        .filter((p) => p.ifaceId === "default_pd")
        .map((p) => p.portName),
      [newPort],
      "the new sandbox's ADD replaced the old port: one interface per logical port",
    );
    assert.equal(added.portName, newPort);

    const del = await attacher.del(old.req);
    assert.deepEqual(del.portsRemoved, []);
    assert.equal(del.vethRemoved, true, "the old sandbox's veth goes");
    const port = findPodPort(c.ovs, fresh.containerId);
    assert.equal(port?.portName, newPort);
    assert.equal(port?.ovnInstalled, true);
    const veths = await listHostVeths({ netns: c.node.netns.path });
    assert.ok(veths.includes(newPort) && !veths.includes(oldPort), veths.join(","));
    const r = await ping(netns2.path, pa.ip);
    assert.equal(r.code, 0, r.stdout);
    await attacher.del(fresh);
  });

  test("DEL succeeds and changes nothing when the port, the veth and the netns are gone already", async () => {
    const pod = await newPod("pe");
    await attacher.add(pod.req);
    await c.node.deleteNetns(pod.netns);
    // The kernel tears the namespace down asynchronously: the veth may or may not be gone yet.
    const first = await attacher.del(pod.req);
    assert.deepEqual(first.portsRemoved, [hostVethName(pod.req.containerId)]);
    assert.ok(
      !(await listHostVeths({ netns: c.node.netns.path })).includes(hostVethName(pod.req.containerId)),
    );
    const second = await attacher.del(pod.req);
    assert.deepEqual(second, { portsRemoved: [], vethRemoved: false });
    const unknown = await attacher.del({ containerId: containerId(), ifname: "eth0" });
    assert.deepEqual(unknown, { portsRemoved: [], vethRemoved: false });
  });

  test("GC removes exactly the ports and veths of attachments not in the valid list", async () => {
    const pf = await newPod("pf");
    await attacher.add(pf.req);
    // An orphan veth of ours (an ADD that died before its OVS port), a foreign veth and a foreign OVS port.
    const orphan = hostVethName(containerId());
    await c.node.exec("ip", ["link", "add", orphan, "type", "veth", "peer", "name", "zz-orphan"]);
    await c.node.exec("ip", ["link", "add", "foreign0", "type", "veth", "peer", "name", "foreign1"]);
    await c.node.vsctl("add-port", "br-int", "foreign0");
    const before = listPodPorts(c.ovs).map((p) => p.portName);
    assert.ok(before.includes(hostVethName(pf.req.containerId)));

    const out = await attacher.gc([pa.req, pb.req]);
    assert.deepEqual(out.portsRemoved, [hostVethName(pf.req.containerId)]);
    assert.deepEqual(out.vethsRemoved.sort(), [hostVethName(pf.req.containerId), orphan].sort());
    const ports = listPodPorts(c.ovs)
      .map((p) => p.portName)
      .sort();
    assert.deepEqual(ports, [hostVethName(pa.req.containerId), hostVethName(pb.req.containerId)].sort());
    const bridgePorts = (await c.node.vsctl("list-ports", "br-int")).trim().split("\n").sort();
    assert.deepEqual(bridgePorts, [...ports, "foreign0"].sort());
    const links = await c.node.exec("ip", ["-o", "link", "show"]);
    assert.match(links, /foreign0@foreign1/);
    assert.doesNotMatch(links, new RegExp(orphan));
    const r = await ping(pa.netns.path, pb.ip);
    assert.equal(r.code, 0, "the valid pods still talk");
  });

  test("ADD latency per step: 10 pods one after another, then 10 at once", async (t) => {
    const measure = async (label: string, pods: Pod[], concurrent: boolean) => {
      const outs: AddOutcome[] = [];
      if (concurrent) outs.push(...(await Promise.all(pods.map((p) => attacher.add(p.req)))));
      else for (const p of pods) outs.push(await attacher.add(p.req));
      const summary: Record<string, string> = {};
      for (const step of ["veth", "ovs-port", "ovn-installed", "total"] as const) {
        const xs = outs.map((o) => o.timings[step]).sort((a, b) => a - b);
        summary[step] = `p50 ${percentile(xs, 0.5).toFixed(1)} p99 ${percentile(xs, 0.99).toFixed(1)}`;
      }
      t.diagnostic(`${label}: ${JSON.stringify(summary)}`);
      for (const p of pods) await attacher.del(p.req);
      return outs;
    };
    const seq = await measure(
      "sequential ADD (ms)",
      await Promise.all(range(10).map((i) => newPod(`s${i}`))),
      false,
    );
    const par = await measure(
      "10 concurrent ADDs (ms)",
      await Promise.all(range(10).map((i) => newPod(`c${i}`))),
      true,
    );
    // Loose bounds: a shared 2-core machine; the figures themselves are the point of this test.
    assert.ok(
      percentile(
        seq.map((o) => o.timings.total).sort((a, b) => a - b),
        0.5,
      ) < 500,
    );
    assert.ok(Math.max(...par.map((o) => o.timings.total)) < 5000);
  });

  test("ADD of a pod without a logical port times out naming ovn-installed, and leaves no port or veth", async () => {
    const netns = await c.node.addNetns("pg");
    const short = new PodAttacher({
      client: c.ovs,
      mtu,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
      ovnInstalledBudgetMs: 1000,
    });
    const req: AddRequest = {
      containerId: containerId(),
      ifname: ETH0,
      netns: parseNetnsPath(netns.path),
      podNamespace: "default",
      podName: "no-lsp",
      podUid: "uid-no-lsp",
      network: podNetwork(["10.244.0.99/16"], "0a:58:0a:f4:00:63"),
    };
    await assert.rejects(short.add(req), (e: unknown) => {
      assert.ok(e instanceof StepTimeoutError, String(e));
      assert.equal(e.step, "ovn-installed");
      assert.match(e.message, /timed out after 1000 ms in step ovn-installed/);
      return true;
    });
    assert.equal(findPodPort(c.ovs, req.containerId), undefined);
    assert.ok(!(await listHostVeths({ netns: c.node.netns.path })).includes(hostVethName(req.containerId)));
  });

  test("ADD into a netns whose interface of that name is not our veth fails in the veth step and leaves it untouched", async () => {
    // A device of another kind, and a veth whose peer is not our host end (as the node's eth0 would be).
    const foreign: [string, string[]][] = [
      ["pf1", ["link", "add", "name", ETH0, "type", "bridge"]],
      ["pf2", ["link", "add", "name", ETH0, "type", "veth", "peer", "name", "other"]],
    ];
    for (const [name, create] of foreign) {
      const pod = await newPod(name);
      const ns = pod.netns.path;
      for (const args of [
        create,
        ["addr", "add", "192.0.2.77/24", "dev", ETH0],
        ["link", "set", ETH0, "up"],
      ]) {
        const r = await execIn(ns, "ip", args);
        assert.equal(r.code, 0, r.stderr);
      }
      const state = async () =>
        (await execIn(ns, "ip", ["-o", "addr", "show", "dev", ETH0])).stdout +
        (await execIn(ns, "ip", ["-o", "link", "show", "dev", ETH0])).stdout +
        (await execIn(ns, "ip", ["route", "show"])).stdout;
      const before = await state();
      await assert.rejects(attacher.add(pod.req), (e: unknown) => {
        assert.ok(e instanceof StepError, String(e));
        assert.equal(e.step, "veth");
        assert.match(e.message, /already has eth0/);
        return true;
      });
      assert.equal(await state(), before, `${name}: the existing ${ETH0} must not be reconfigured`);
      assert.equal(findPodPort(c.ovs, pod.req.containerId), undefined);
    }
  });

  test("ADD into a missing netns fails naming the veth step", async () => {
    const pod = await newPod("ph");
    await c.node.deleteNetns(pod.netns);
    await assert.rejects(attacher.add(pod.req), (e: unknown) => {
      assert.ok(e instanceof StepError, String(e));
      assert.equal(e.step, "veth");
      assert.match(e.message, /does not exist/);
      return true;
    });
    assert.equal(findPodPort(c.ovs, pod.req.containerId), undefined);
  });
});

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function percentile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

function roundAll(o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round(v * 10) / 10]));
}
