// Node setup against real OVS (userspace datapath) and, for the management port and egress, a real OVN
// control plane: br-int, ovn-controller's settings, the management port and SNAT, in namespaces the rig
// creates and removes.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { parseInterfaceName, parseNetnsPath } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import { NodeSetup, type NodeSetupConfig } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { listEgressSnat } from "../../../src/node/snat.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { useOvsNode } from "../../rig/ovs-node.ts";
import {
  ETH0,
  EXT_IP,
  execIn,
  MGMT,
  NET,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  ping,
  podNetwork,
  startOneNodeCluster,
  tcpTransfer,
} from "./one-node-cluster.ts";

const chassis = (sbRemote: string): NodeSetupConfig["chassis"] => ({
  ovnRemote: sbRemote,
  encapType: "vxlan",
  encapIp: NODE_IP,
  systemId: NODE,
  bridgeDatapathType: "netdev",
});

async function until(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

async function externalIds(vsctl: (...a: string[]) => Promise<string>): Promise<Record<string, string>> {
  const out = await vsctl("--format=json", "--columns=external_ids", "list", "Open_vSwitch");
  const data = (JSON.parse(out) as { data: [["map", [string, string][]]][] }).data;
  return Object.fromEntries(data[0]?.[0]?.[1] ?? []);
}

describe("node setup on a real Open_vSwitch database", () => {
  test("creates the root row and br-int (secure, netdev, in-band off) in an empty database; a second pass writes nothing", async (t) => {
    const node = await useOvsNode(t, { initDb: false });
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("unix:/nonexistent/sb.sock"),
    });
    const first = await setup.reconcile();
    assert.deepEqual(first.bridge, ["created"]);
    assert.equal(first.chassis.length, 5);
    const get = async (col: string) => (await node.vsctl("get", "Bridge", "br-int", col)).trim();
    assert.equal(await get("fail_mode"), "secure");
    assert.equal(await get("datapath_type"), "netdev");
    assert.equal(await get("other_config:disable-in-band"), '"true"');
    assert.equal((await node.vsctl("get", "Interface", "br-int", "type")).trim(), "internal");
    // ovs-vswitchd accepted the bridge: it created the userspace datapath's device for it.
    await until("br-int's device", async () => (await node.exec("ip", ["link", "show"])).includes("br-int"));

    const second = await setup.reconcile();
    assert.deepEqual([second.bridge, second.chassis, second.mgmt, second.egress], [[], [], [], false]);
  });

  test("chassis config changes only its keys: foreign keys survive and an overwritten key is restored", async (t) => {
    const node = await useOvsNode(t);
    await node.vsctl(
      "set",
      "Open_vSwitch",
      ".",
      "external_ids:hostname=h1",
      "external_ids:ovn-bridge-mappings=physnet:br-ex",
      "external_ids:ovn-remote=tcp:10.0.0.9:6642",
      "external_ids:foo=bar",
    );
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("unix:/run/sb.sock"),
      resyncIntervalMs: 0,
    });
    t.after(() => setup.stop());
    setup.start();
    await until(
      "the chassis keys",
      async () => (await externalIds(node.vsctl))["ovn-remote"] === "unix:/run/sb.sock",
    );
    assert.deepEqual(await externalIds(node.vsctl), {
      hostname: "h1",
      "ovn-bridge-mappings": "physnet:br-ex",
      foo: "bar",
      "ovn-remote": "unix:/run/sb.sock",
      "ovn-encap-type": "vxlan",
      "ovn-encap-ip": NODE_IP,
      "system-id": NODE,
      "ovn-bridge-datapath-type": "netdev",
    });
    // Someone else changes one of our keys and one of theirs; the agent restores its own and keeps theirs.
    await node.vsctl(
      "set",
      "Open_vSwitch",
      ".",
      "external_ids:ovn-encap-type=geneve",
      "external_ids:foo=baz",
    );
    await until(
      "ovn-encap-type restored",
      async () => (await externalIds(node.vsctl))["ovn-encap-type"] === "vxlan",
    );
    const ids = await externalIds(node.vsctl);
    assert.equal(ids.foo, "baz");
    assert.equal(ids.hostname, "h1");
  });
});

describe("management port and egress on a one-node OVN cluster", () => {
  const cleanups: (() => unknown)[] = [];
  let c: OneNodeCluster;
  let setup: NodeSetup;
  let podNetns: string;
  const podIp = "10.244.0.20";

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    setup = new NodeSetup({
      client: c.ovs,
      hostNetns: c.node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis(c.node.sb?.unix ?? ""),
      mgmt: {
        bridge: "br-int",
        lspName: MGMT.lsp,
        mac: MGMT.mac,
        ip: MGMT.ip,
        gateway: NET.joinGateway,
        routeCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs].map((c) => parseCidr(c)),
        mtu: 1450,
      },
      egress: {
        mgmtIfname: parseInterfaceName(MGMT_IFNAME),
        insideCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs, NET.joinCIDR].map((c) => parseCidr(c)),
        nodeIps: [parseIp(NODE_IP)],
      },
      resyncIntervalMs: 0,
    });
    cleanups.push(() => setup.stop());
    assert.equal(setup.mgmtConfigured, false, "no pass yet: the agent reports not ready");
    await setup.reconcile();
    assert.equal(setup.mgmtConfigured, true);
    setup.start();
    const pod = { namespace: "default", name: "web", uid: "uid-web" };
    const { mac, ipWithPrefix } = await c.addPodLsp(pod, podIp);
    const netns = await c.node.addNetns("web");
    podNetns = netns.path;
    const attacher = new PodAttacher({
      client: c.ovs,
      mtu: 1450,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
    });
    await attacher.add({
      containerId: "feedfacecafe0001",
      ifname: ETH0,
      netns: parseNetnsPath(podNetns),
      podNamespace: pod.namespace,
      podName: pod.name,
      podUid: pod.uid,
      network: podNetwork([ipWithPrefix], mac),
    });
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("the management port gets its MAC, address and routes, and is bound in OVN", async () => {
    const link = await c.node.exec("ip", ["-j", "addr", "show", "dev", MGMT_IFNAME]);
    const [dev] = JSON.parse(link) as {
      address: string;
      mtu: number;
      addr_info: { local: string; prefixlen: number }[];
    }[];
    assert.equal(dev?.address, MGMT.mac);
    assert.equal(dev?.mtu, 1450);
    assert.deepEqual(
      dev?.addr_info.filter((a) => a.local.includes(".")).map((a) => `${a.local}/${a.prefixlen}`),
      [MGMT.ip],
    );
    const routes = await c.node.exec("ip", ["route", "show", "dev", MGMT_IFNAME]);
    assert.match(
      routes,
      /10\.244\.0\.0\/16 via 100\.64\.0\.1 proto \w+ src 100\.64\.0\.2|10\.244\.0\.0\/16 via 100\.64\.0\.1 src 100\.64\.0\.2/,
    );
    assert.match(routes, /10\.96\.0\.0\/16 via 100\.64\.0\.1 (proto \w+ )?src 100\.64\.0\.2/);
    await until(
      "ovn-installed on the management port",
      async () =>
        (
          await c.node.vsctl("get", "Interface", MGMT_IFNAME, "external_ids:ovn-installed").catch(() => "")
        ).includes("true"),
      10_000,
    );
  });

  test("the node reaches a pod through the management port (ping and TCP), and the pod reaches the node", async () => {
    const r = await ping(c.node.netns.path, podIp);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const toPod = await tcpTransfer(c.node.netns.path, podNetns, podIp, 8080);
    assert.equal(toPod.received, toPod.sent);
    assert.equal(toPod.peer, "100.64.0.2", "node-to-pod traffic has the management address as source");
    const toNode = await tcpTransfer(podNetns, c.node.netns.path, NODE_IP, 8081);
    assert.equal(toNode.received, toNode.sent);
    assert.equal(toNode.peer, podIp, "pod-to-node traffic is not SNATed");
  });

  test("pod traffic to an external host leaves SNATed to the node IP", async () => {
    const out = await tcpTransfer(podNetns, c.ext.path, EXT_IP, 9090);
    assert.equal(out.client.code, 0, out.client.stderr);
    assert.equal(out.received, out.sent);
    assert.equal(out.peer, NODE_IP, "the external host sees the node, not the pod");
    const fwd = await execIn(c.node.netns.path, "sysctl", ["-n", "net.ipv4.ip_forward"]);
    assert.equal(fwd.stdout.trim(), "1");
  });

  test("the egress table is replaced as a whole: applying it again leaves one rule pair (ported, then the rest)", async () => {
    setup.update({
      egress: {
        mgmtIfname: parseInterfaceName(MGMT_IFNAME),
        insideCidrs: [...NET.clusterCIDRs, NET.joinCIDR].map((c) => parseCidr(c)),
        nodeIps: [parseIp(NODE_IP)],
      },
    });
    await until(
      "the new egress rules",
      async () => !(await listEgressSnat({ netns: c.node.netns.path }))?.includes("10.96.0.0/16"),
    );
    const table = (await listEgressSnat({ netns: c.node.netns.path })) ?? "";
    assert.equal(table.match(/th sport >= 1024 snat ip to [0-9.]+:1024-61439\n/g)?.length, 1, table);
    assert.equal(table.match(/snat ip to [0-9.]+\n/g)?.length, 1, table);
    const all = await c.node.exec("nft", ["list", "tables"]);
    assert.equal(all.trim(), "table inet zstack_ovn");
  });

  test("after ovs-vswitchd restarts the pod is reachable over the management port again", async () => {
    await c.node.restartVswitchd();
    await until(
      "the pod reachable",
      async () => (await ping(c.node.netns.path, podIp, 1)).code === 0,
      15_000,
    );
  });

  test("a management port removed from OVS by someone else is recreated and its new device configured", async () => {
    const ifindexBefore = (await c.node.vsctl("get", "Interface", MGMT_IFNAME, "ifindex")).trim();
    await c.node.vsctl("del-port", "br-int", MGMT_IFNAME);
    await until(
      "the management address on a new device",
      async () => {
        const ifindex = (
          await c.node.vsctl("get", "Interface", MGMT_IFNAME, "ifindex").catch(() => "")
        ).trim();
        const addr = await execIn(c.node.netns.path, "ip", ["-4", "addr", "show", "dev", MGMT_IFNAME]);
        return ifindex !== "" && ifindex !== ifindexBefore && addr.stdout.includes("100.64.0.2/16");
      },
      10_000,
    );
    await until(
      "the pod reachable again",
      async () => (await ping(c.node.netns.path, podIp, 1)).code === 0,
      10_000,
    );
    const routes = await c.node.exec("ip", ["route", "show", "dev", MGMT_IFNAME]);
    assert.match(routes, /10\.244\.0\.0\/16 via 100\.64\.0\.1/);
  });
});
