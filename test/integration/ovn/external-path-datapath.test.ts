// The paths of a pod on a ZStack switch (External mode), on a real OVN node (NB, SB, northd, ovn-controller, the
// userspace datapath): a ZStack-like VPC (its router with a port on its switch, a VM on the switch, none of it ours)
// next to our topology (cluster router, join switch, the node's management port, a Subnet switch of ours). Our
// router port joins ZStack's switch and the pod gets the routes of its annotation, all written by the functions the
// controller uses. TCP: node (management address) → pod and back, pod → the node's management address, pod ↔ a
// pod on our Subnet switch, pod → a Service VIP (the cluster-IP load-balancer group on ZStack's switch), VM ↔ pod;
// the pod's default route stays ZStack's router. And what must not work: a Service's externalIP aimed at a VM does
// not capture the other VMs' traffic to it, and a VM that routes through our router port (to the join CIDR, or to
// a VM on a second ZStack switch with a router port of ours) is dropped at the port.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { parseInterfaceName, parseNetnsPath } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { externalPodRoutes, externalRouterPortRows } from "../../../src/ovn/external-router-port.ts";
import { findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import { parsePodNetwork, podNetworksAnnotation, podPortRow } from "../../../src/ovn/pod-port.ts";
import { serviceLoadBalancers } from "../../../src/ovn/service-lb.ts";
import {
  CLUSTER_IP_LB_GROUP,
  CLUSTER_LB_GROUP,
  EXTERNAL_PODS_ADDRESS_SET_V4,
  externalPodsRows,
  macFromIPv4,
  nodePodsAddressSet,
} from "../../../src/ovn/topology.ts";
import { parseService } from "../../../src/services/service-model.ts";
import {
  ETH0,
  execIn,
  MGMT,
  NET,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  podNetwork,
  startOneNodeCluster,
  tcpTransfer,
} from "../node/one-node-cluster.ts";

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let attacher: PodAttacher;
let nodeNetns: string;

/** ZStack's network: its router holds .1, our router port .2, the VM .10, our pod .5. */
const ZS_CIDR = "10.60.0.0/24";
const ZS_GATEWAY = "10.60.0.1";
const OUR_ROUTER_PORT = "10.60.0.2/24";
const VM_IP = "10.60.0.10";
const VM2_IP = "10.60.0.11";
/** A second ZStack switch with a router port of ours (Subnet zs2) and a VM. */
const ZS2_CIDR = "10.61.0.0/24";
const ZS2_ROUTER_PORT = "10.61.0.2/24";
const VM3_IP = "10.61.0.10";
const POD_IP = "10.60.0.5";
const OVERLAY_POD_IP = "10.244.0.20";
const VIP = "10.96.0.70";
const MGMT_IP = MGMT.ip.slice(0, MGMT.ip.indexOf("/"));

let switchUuid = "";
let zpod = "";
let vm = "";
let vm2 = "";
let vm3 = "";
let opod = "";

/** A netns wired as CNI ADD would wire it, to the logical port named `<namespace>_<name>`. */
async function attach(
  namespace: string,
  name: string,
  uid: string,
  network: NonNullable<ReturnType<typeof parsePodNetwork>>,
): Promise<string> {
  const netns = await c.node.addNetns(name);
  const id = [...crypto.getRandomValues(new Uint8Array(32))]
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");
  await attacher.add({
    containerId: id,
    ifname: ETH0,
    netns: parseNetnsPath(netns.path),
    podNamespace: namespace,
    podName: name,
    podUid: uid,
    network,
  });
  return netns.path;
}

/** Until ovn-controller has installed the flows of everything written so far. */
async function untilInstalled(): Promise<void> {
  await c.nb.transact((tx) => tx.mutate("NB_Global", [], [["nb_cfg", "+=", 1]]));
  const want = (c.nb.cache.table("NB_Global").values().next().value as { nb_cfg: number }).nb_cfg;
  for (let i = 0; i < 600; i++) {
    const g = c.nb.cache.table("NB_Global").values().next().value as { hv_cfg: number } | undefined;
    if ((g?.hv_cfg ?? 0) >= want) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("ovn-controller did not catch up with NB");
}

describe("a pod on a ZStack switch: node, pods, Services and VMs reach it through our router port", () => {
  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    nodeNetns = c.node.netns.path;
    // The node agent: the management port routes the cluster and service CIDRs and the accepted Subnets' CIDRs,
    // the ZStack Subnet's included (src/agent/subnet-routes.ts).
    const setup = new NodeSetup({
      client: c.ovs,
      hostNetns: nodeNetns,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: {
        ovnRemote: c.node.sb?.unix ?? "",
        encapType: "vxlan",
        encapIp: NODE_IP,
        systemId: NODE,
        bridgeDatapathType: "netdev",
      },
      mgmt: {
        bridge: "br-int",
        lspName: MGMT.lsp,
        mac: MGMT.mac,
        ip: MGMT.ip,
        gateway: NET.joinGateway,
        routeCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs, ZS_CIDR].map((x) => parseCidr(x)),
        mtu: 1400,
      },
      egress: {
        mgmtIfname: parseInterfaceName(MGMT_IFNAME),
        insideCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs, NET.joinCIDR].map((x) => parseCidr(x)),
        nodeIps: [parseIp(NODE_IP)],
      },
      resyncIntervalMs: 0,
    });
    cleanups.push(() => setup.stop());
    await setup.reconcile();
    attacher = new PodAttacher({
      client: c.ovs,
      mtu: 1400,
      userspaceDatapath: true,
      hostNetns: nodeNetns,
      ovnInstalledBudgetMs: 30_000,
    });

    // ZStack's VPC, as ZStack writes it: no row carries our ownership keys.
    await c.nb.transact((tx) => {
      const lrp = tx.insert("Logical_Router_Port", {
        name: "zs-vpc-lrp",
        mac: "fa:16:3e:00:00:01",
        networks: [`${ZS_GATEWAY}/24`],
        external_ids: { "zstack.sim/role": "router-port-overlay" },
      } as never);
      tx.insert("Logical_Router", {
        name: "zs-vpc-router",
        ports: [lrp],
        external_ids: { "zstack.sim/role": "router" },
      } as never);
      const rtr = tx.insert("Logical_Switch_Port", {
        name: "zs-vpc-rtr",
        type: "router",
        addresses: ["router"],
        options: { "router-port": "zs-vpc-lrp" },
      } as never);
      const vmPort = tx.insert("Logical_Switch_Port", {
        name: "vm_one",
        addresses: [`fa:16:3e:00:00:0a ${VM_IP}`],
        port_security: [`fa:16:3e:00:00:0a ${VM_IP}`],
      } as never);
      const vm2Port = tx.insert("Logical_Switch_Port", {
        name: "vm_two",
        addresses: [`fa:16:3e:00:00:0b ${VM2_IP}`],
        port_security: [`fa:16:3e:00:00:0b ${VM2_IP}`],
      } as never);
      tx.insert("Logical_Switch", {
        name: "l3-vpc-network",
        ports: [rtr, vmPort, vm2Port],
        other_config: { subnet: ZS_CIDR },
        external_ids: { "zstack.sim/role": "overlay-switch" },
      } as never);
      const vm3Port = tx.insert("Logical_Switch_Port", {
        name: "vm_three",
        addresses: [`fa:16:3e:00:00:0c ${VM3_IP}`],
        port_security: [`fa:16:3e:00:00:0c ${VM3_IP}`],
      } as never);
      tx.insert("Logical_Switch", {
        name: "l3-vpc-network-2",
        ports: [vm3Port],
        other_config: { subnet: ZS2_CIDR },
        external_ids: { "zstack.sim/role": "overlay-switch" },
      } as never);
    });
    const zs = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === "l3-vpc-network");
    assert.ok(zs);
    switchUuid = zs._uuid;
    const zs2 = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === "l3-vpc-network-2");
    assert.ok(zs2);

    // Ours, as the controller writes it in External mode: the Service groups (core step; the Subnet switch refers
    // to the full one), the external pods' set and allow policy (core step), our router ports (with their source
    // guards) on ZStack's switches and each switch's reference to the cluster-IP group (the Subnets' reconciles).
    const ours = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/default");
    assert.ok(ours);
    await c.nb.transact((tx) => {
      const g = tx.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP });
      tx.insert("Load_Balancer_Group", { name: CLUSTER_IP_LB_GROUP });
      tx.mutate("Logical_Switch", [["_uuid", "==", ours._uuid]], [["load_balancer_group", "insert", [g]]]);
    });
    const group = c.nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
    const ipGroup = c.nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_IP_LB_GROUP);
    assert.ok(group && ipGroup);
    {
      const txn = c.nb.transaction();
      plan(c.nb.cache as never, c.nb.schema, txn as never, [
        ...externalPodsRows(),
        ...externalRouterPortRows({ subnet: "zs", switchUuid, networks: [OUR_ROUTER_PORT] }),
        ...externalRouterPortRows({ subnet: "zs2", switchUuid: zs2._uuid, networks: [ZS2_ROUTER_PORT] }),
      ]);
      for (const ls of [switchUuid, zs2._uuid])
        txn.mutate(
          "Logical_Switch",
          [["_uuid", "==", ls]],
          [["load_balancer_group", "insert", [ipGroup._uuid]]],
        );
      await txn.commit();
    }

    // The pod on ZStack's switch: its port (by mutate on ZStack's switch), its address in its node's set and in
    // the external pods' set (as the allocator writes them), and the annotation the agent parses.
    const routes = externalPodRoutes([OUR_ROUTER_PORT.split("/")[0] as string], [ZS_CIDR], NET);
    const addressing = {
      subnet: "zs",
      logicalSwitch: switchUuid,
      mac: macFromIPv4(POD_IP),
      ipsWithPrefix: [`${POD_IP}/24`],
      gateways: [ZS_GATEWAY],
      routes,
      node: NODE,
    };
    const row = podPortRow({ namespace: "zs", name: "zpod", uid: "uid-zpod" }, addressing, {
      table: "Logical_Switch",
      uuid: switchUuid,
      column: "ports",
    });
    const nodeSet = c.nb.cache.table("Address_Set").lookupOne("name", nodePodsAddressSet(NODE, 4));
    const extSet = c.nb.cache.table("Address_Set").lookupOne("name", EXTERNAL_PODS_ADDRESS_SET_V4);
    assert.ok(nodeSet && extSet);
    {
      const txn = c.nb.transaction();
      plan(c.nb.cache as never, c.nb.schema, txn as never, [row]);
      txn.mutate("Address_Set", [["_uuid", "==", nodeSet._uuid]], [["addresses", "insert", [POD_IP]]]);
      txn.mutate("Address_Set", [["_uuid", "==", extSet._uuid]], [["addresses", "insert", [POD_IP]]]);
      await txn.commit();
    }
    const network = parsePodNetwork(podNetworksAnnotation(addressing));
    assert.ok(network);
    zpod = await attach("zs", "zpod", "uid-zpod", network);

    // ZStack's VM on the same switch: its default route is ZStack's router, nothing else.
    const vmNet = parsePodNetwork(
      JSON.stringify({
        default: {
          ip_addresses: [`${VM_IP}/24`],
          mac_address: "fa:16:3e:00:00:0a",
          gateway_ips: [ZS_GATEWAY],
          routes: [],
          logical_switch: switchUuid,
        },
      }),
    );
    assert.ok(vmNet);
    vm = await attach("vm", "one", "uid-vm", vmNet);
    const vmNetOf = (ip: string, mac: string, gw: string, ls: string) =>
      parsePodNetwork(
        JSON.stringify({
          default: {
            ip_addresses: [`${ip}/24`],
            mac_address: mac,
            gateway_ips: [gw],
            routes: [],
            logical_switch: ls,
          },
        }),
      );
    const vm2Net = vmNetOf(VM2_IP, "fa:16:3e:00:00:0b", ZS_GATEWAY, switchUuid);
    const vm3Net = vmNetOf(VM3_IP, "fa:16:3e:00:00:0c", "10.61.0.1", zs2._uuid);
    assert.ok(vm2Net && vm3Net);
    vm2 = await attach("vm", "two", "uid-vm2", vm2Net);
    vm3 = await attach("vm", "three", "uid-vm3", vm3Net);

    // A pod on a Subnet switch of ours, the Service's backend.
    const { mac, ipWithPrefix } = await c.addPodLsp(
      { namespace: "default", name: "opod", uid: "uid-opod" },
      OVERLAY_POD_IP,
    );
    opod = await attach("default", "opod", "uid-opod", podNetwork([ipWithPrefix], mac));

    // A Service VIP:80 → the overlay pod's 8080, in the cluster group, as the Service reconcile writes it.
    const { model } = parseService({
      metadata: { namespace: "default", name: "web" },
      spec: { clusterIP: VIP, ports: [{ name: "http", port: 80, protocol: "TCP" }] },
    } as V1Service);
    assert.ok(model);
    const slices = [
      {
        addressType: "IPv4",
        endpoints: [{ addresses: [OVERLAY_POD_IP], nodeName: NODE, conditions: { ready: true } }],
        ports: [{ name: "http", protocol: "TCP", port: 8080 }],
      } as V1EndpointSlice,
    ];
    // A tenant's Service aimed at a VM: externalIPs = VM2's address, port 8000, no endpoint (rejected where the
    // load balancer applies).
    const { model: aimed } = parseService({
      metadata: { namespace: "tenant", name: "aimed" },
      spec: {
        clusterIP: "10.96.0.71",
        externalIPs: [VM2_IP],
        ports: [{ name: "x", port: 8000, protocol: "TCP" }],
      },
    } as V1Service);
    assert.ok(aimed);
    const serviceCidrs = NET.serviceCIDRs.map((x) => parseCidr(x));
    const rows = [
      ...serviceLoadBalancers(model, slices, [{ node: NODE }], serviceCidrs).rows,
      ...serviceLoadBalancers(aimed, [], [{ node: NODE }], serviceCidrs).rows,
    ];
    {
      // As the Service reconcile links them: every row in the full group, cluster-IP rows in the cluster-IP group.
      const txn = c.nb.transaction();
      plan(
        c.nb.cache as never,
        c.nb.schema,
        txn as never,
        rows.map((r) => ({
          ...r,
          parent: { table: "Load_Balancer_Group", uuid: group._uuid, column: "load_balancer" },
          ...(r.audience === "cluster"
            ? {
                alsoParents: [{ table: "Load_Balancer_Group", uuid: ipGroup._uuid, column: "load_balancer" }],
              }
            : {}),
        })),
      );
      await txn.commit();
    }
    await untilInstalled();
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("the pod's default route is ZStack's router; the cluster's networks go via our router port", async () => {
    const out = await execIn(zpod, "ip", ["-4", "route", "show"]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^default via ${ZS_GATEWAY.replaceAll(".", "\\.")} dev eth0`, "m"));
    for (const dest of ["100.64.0.0/16", "10.244.0.0/16", "10.96.0.0/16"])
      assert.match(
        out.stdout,
        new RegExp(`^${dest.replaceAll(".", "\\.")} via 10\\.60\\.0\\.2 dev eth0`, "m"),
      );
  });

  test("the node reaches the pod from its management address (kubelet probes), and the reply comes back", async () => {
    const r = await tcpTransfer(nodeNetns, zpod, POD_IP, 7101);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.received, r.sent);
    assert.equal(r.peer, MGMT_IP);
  });

  test("the pod reaches its node's management address", async () => {
    const r = await tcpTransfer(zpod, nodeNetns, MGMT_IP, 7102);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.received, r.sent);
    assert.equal(r.peer, POD_IP);
  });

  test("the pod and a pod on our Subnet switch reach each other, each seeing the other's own address", async () => {
    const there = await tcpTransfer(zpod, opod, OVERLAY_POD_IP, 7103);
    assert.equal(there.client.code, 0, there.client.stderr);
    assert.equal(there.received, there.sent);
    assert.equal(there.peer, POD_IP);
    const back = await tcpTransfer(opod, zpod, POD_IP, 7104);
    assert.equal(back.client.code, 0, back.client.stderr);
    assert.equal(back.received, back.sent);
    assert.equal(back.peer, OVERLAY_POD_IP);
  });

  test("the pod reaches a Service VIP: DNAT on ZStack's switch (our group), the pod's own address as source", async () => {
    const server = execIn(opod, "timeout", ["10", "nc", "-n", "-v", "-l", OVERLAY_POD_IP, "8080"], {
      timeoutMs: 12_000,
    });
    for (let i = 0; i < 100; i++) {
      const s = await execIn(opod, "ss", ["-tln", "sport = :8080"]);
      if (s.stdout.includes(":8080")) break;
      await new Promise((res) => setTimeout(res, 20));
    }
    const cl = await execIn(zpod, "nc", ["-N", "-w", "5", VIP, "80"], { input: "hello\n" });
    const got = await server;
    assert.equal(cl.code, 0, cl.stderr);
    assert.equal(got.stdout, "hello\n");
    assert.match(got.stderr, new RegExp(`Connection received on ${POD_IP.replaceAll(".", "\\.")} `));
  });

  test("the VM and the pod still reach each other directly on ZStack's switch", async () => {
    const toPod = await tcpTransfer(vm, zpod, POD_IP, 7105);
    assert.equal(toPod.client.code, 0, toPod.client.stderr);
    assert.equal(toPod.received, toPod.sent);
    assert.equal(toPod.peer, VM_IP);
    const toVm = await tcpTransfer(zpod, vm, VM_IP, 7106);
    assert.equal(toVm.client.code, 0, toVm.client.stderr);
    assert.equal(toVm.received, toVm.sent);
    assert.equal(toVm.peer, POD_IP);
  });

  test("a Service's externalIP aimed at a VM does not capture another VM's connection to it", async () => {
    const r = await tcpTransfer(vm, vm2, VM2_IP, 8000);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.received, r.sent);
    assert.equal(r.peer, VM_IP);
  });

  test("a VM that routes the join CIDR via our router port does not reach the node's management address", async () => {
    const add = await execIn(vm, "ip", ["route", "add", NET.joinCIDR, "via", "10.60.0.2"]);
    assert.equal(add.code, 0, add.stderr);
    try {
      const r = await tcpTransfer(vm, nodeNetns, MGMT_IP, 7107, 1024);
      assert.notEqual(r.client.code, 0, "the VM's connection to the management address was accepted");
      assert.equal(r.peer, undefined);
    } finally {
      await execIn(vm, "ip", ["route", "del", NET.joinCIDR, "via", "10.60.0.2"]);
    }
    // The pod on the same switch still does (its source is in the external pods' set).
    const ok = await tcpTransfer(zpod, nodeNetns, MGMT_IP, 7108);
    assert.equal(ok.client.code, 0, ok.client.stderr);
    assert.equal(ok.peer, POD_IP);
  });

  test("VMs on two ZStack switches with our router ports cannot use the cluster router to reach each other", async () => {
    const there = await execIn(vm, "ip", ["route", "add", ZS2_CIDR, "via", "10.60.0.2"]);
    assert.equal(there.code, 0, there.stderr);
    const back = await execIn(vm3, "ip", ["route", "add", ZS_CIDR, "via", "10.61.0.2"]);
    assert.equal(back.code, 0, back.stderr);
    try {
      const r = await tcpTransfer(vm, vm3, VM3_IP, 7109, 1024);
      assert.notEqual(r.client.code, 0, "the VM's connection through the cluster router was accepted");
      assert.equal(r.peer, undefined);
    } finally {
      await execIn(vm, "ip", ["route", "del", ZS2_CIDR, "via", "10.60.0.2"]);
      await execIn(vm3, "ip", ["route", "del", ZS_CIDR, "via", "10.61.0.2"]);
    }
  });
});
