// A one-node OVN cluster for the node agent's integration tests: a rig node (its netns, OVS on the userspace
// datapath, NB, SB, northd, ovn-controller), our OVSDB clients to its Open_vSwitch and NB databases, an
// "external host" netns on the node's underlay link, and the controller's real logical topology (cluster
// router, join switch, the default subnet, this node's management port and egress policy). Pod logical
// ports are created the way the controller does. Plus the traffic probes the tests use: ping, a TCP payload
// and a UDP datagram between namespaces, and who an external host sees as the source.

import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { type InterfaceName, parseInterfaceName, parseNetnsPath } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import {
  type PodNetwork,
  parsePodNetwork,
  podNetworksAnnotation,
  podPortRow,
} from "../../../src/ovn/pod-port.ts";
import {
  type ClusterNetworks,
  desiredTopology,
  macFromIPv4,
  mgmtPortName,
  nodePodsAddressSet,
  type SubnetTopology,
  topologyScope,
} from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { type AfterHook, type NetnsHandle, type OvsNode, useOvsNode } from "../../rig/ovs-node.ts";

export const NODE = "node1";
export const NODE_IP = "192.168.250.1";
export const EXT_IP = "192.168.250.2";
export const UNDERLAY_PREFIX = 24;
export const NET: ClusterNetworks = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};
export const SUBNET: SubnetTopology = { name: "default", cidrs: ["10.244.0.0/16"], gateways: ["10.244.0.1"] };
export const MGMT = {
  ip: "100.64.0.2/16",
  mac: macFromIPv4("100.64.0.2"),
  lsp: mgmtPortName(NODE),
  /** The node's service SNAT address, held by the management port as the controller writes it. */
  serviceSnatIp: "100.64.0.3",
};

export const ETH0: InterfaceName = parseInterfaceName("eth0");

/** The typed network the agent would parse from the controller's annotation for these values. */
export function podNetwork(
  ips: readonly string[],
  mac: string,
  gateways: readonly string[] = SUBNET.gateways,
): PodNetwork {
  const n = parsePodNetwork(
    podNetworksAnnotation({
      subnet: SUBNET.name,
      logicalSwitch: `subnet-${SUBNET.name}`,
      mac,
      ipsWithPrefix: ips,
      gateways,
    }),
  );
  if (!n) throw new Error("no network");
  return n;
}

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface OneNodeCluster {
  node: OvsNode;
  ovs: OvsdbClient<VswitchTables>;
  nb: OvsdbClient<NbTables>;
  /** The external host, 192.168.250.2 on the node's underlay link ul0 (192.168.250.1). */
  ext: NetnsHandle;
  /** Creates the pod's logical port on a subnet (default SUBNET) and adds its IP to the node's address set. */
  addPodLsp(pod: PodRef, ip: string, subnet?: SubnetTopology): Promise<{ mac: string; ipWithPrefix: string }>;
}

/** `subnets`: more subnets besides SUBNET, with their switches on the cluster router as the controller makes them. */
export async function startOneNodeCluster(
  t: AfterHook,
  opts: { subnets?: readonly SubnetTopology[] } = {},
): Promise<OneNodeCluster> {
  const node = await useOvsNode(t, { ovn: true });
  const ext = await node.addNetns("ext");
  // The underlay: the node's address lives on ul0, the external host is its peer.
  await node.exec("ip", ["link", "add", "ul0", "type", "veth", "peer", "name", "eth0", "netns", ext.path]);
  await node.exec("ip", ["addr", "add", `${NODE_IP}/${UNDERLAY_PREFIX}`, "dev", "ul0"]);
  await node.exec("ip", ["link", "set", "ul0", "up"]);
  await node.execIn(ext.path, "ip", ["addr", "add", `${EXT_IP}/${UNDERLAY_PREFIX}`, "dev", "eth0"]);
  await node.execIn(ext.path, "ip", ["link", "set", "eth0", "up"]);

  const ovs = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
  t.after(() => ovs.close());
  await ovs.connect();
  const nb = new OvsdbClient<NbTables>({ remotes: node.nb?.unix ?? "", model: nbModel });
  t.after(() => nb.close());
  await nb.connect();

  const txn = nb.transaction();
  plan(
    nb.cache as never,
    nb.schema,
    txn as never,
    desiredTopology(
      NET,
      [SUBNET, ...(opts.subnets ?? [])],
      [{ name: NODE, mgmtIP: MGMT.ip, mgmtMAC: MGMT.mac, serviceSnatIP: MGMT.serviceSnatIp }],
    ),
    topologyScope,
  );
  await txn.commit();
  // The topology's default route (to a reserved join address) lets egress reach the reroute policy stage.

  const addPodLsp = async (pod: PodRef, ip: string, subnet: SubnetTopology = SUBNET) => {
    const mac = macFromIPv4(ip);
    const ipWithPrefix = `${ip}/${(subnet.cidrs[0] ?? "").split("/")[1]}`;
    const ls = findOwned(nb.cache as never, "Logical_Switch", `subnet/${subnet.name}`);
    const set = nb.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet(NODE, 4));
    if (!ls || !set) throw new Error("the topology is not in the NB cache");
    const row = podPortRow(
      pod,
      {
        subnet: subnet.name,
        logicalSwitch: `subnet-${subnet.name}`,
        mac,
        ipsWithPrefix: [ipWithPrefix],
        gateways: subnet.gateways,
        node: NODE,
      },
      { table: "Logical_Switch", column: "ports", uuid: ls._uuid },
    );
    await nb.transact((tx) => {
      const p = tx.insert("Logical_Switch_Port", row.row as never);
      tx.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", [p]]]);
      tx.mutate("Address_Set", [["_uuid", "==", set._uuid]], [["addresses", "insert", [ip]]]);
    });
    return { mac, ipWithPrefix };
  };

  return { node, ovs, nb, ext, addPodLsp };
}

export interface Exec {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command inside a netns and resolves with its status and output, whatever the status. */
export function execIn(
  netns: string,
  command: string,
  args: readonly string[],
  opts: { input?: string | Buffer; timeoutMs?: number } = {},
): Promise<Exec> {
  return new Promise((resolve) => {
    const child = execFile(
      "nsenter",
      [`--net=${netns}`, "--", command, ...args],
      {
        timeout: opts.timeoutMs ?? 15_000,
        killSignal: "SIGKILL",
        maxBuffer: 64 * 1024 * 1024,
        encoding: "utf8",
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.on("error", () => {});
    child.stdin?.end(opts.input ?? "");
  });
}

export async function ping(from: string, ip: string, count = 2): Promise<Exec> {
  return execIn(from, "ping", ["-c", String(count), "-i", "0.2", "-W", "2", ip]);
}

/** Starts `nc -l` on ip:port in `to`; resolves with what it received and its stderr (the peer, with -v). */
function listen(to: string, ip: string, port: number, udp: boolean): Promise<Exec> {
  const args = udp ? ["-u", "-l", "-W", "1", ip, String(port)] : ["-n", "-v", "-l", ip, String(port)];
  return execIn(to, "timeout", ["10", "nc", ...args], { timeoutMs: 12_000 });
}

async function untilListening(netns: string, port: number, udp: boolean): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await execIn(netns, "ss", [udp ? "-uln" : "-tln", `sport = :${port}`]);
    if (r.stdout.includes(`:${port}`)) return;
    await sleep(20);
  }
  throw new Error(`nothing listens on port ${port}`);
}

function sha(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

/**
 * Sends `bytes` of random text over TCP from one netns to a listener in another; resolves with the digests of
 * what was sent and what arrived, and the peer address the listener saw.
 */
export async function tcpTransfer(
  from: string,
  to: string,
  ip: string,
  port: number,
  bytes = 256 * 1024,
): Promise<{ sent: string; received: string; peer: string | undefined; client: Exec }> {
  const payload = randomBytes(Math.ceil((bytes * 3) / 4)).toString("base64");
  const server = listen(to, ip, port, false);
  await untilListening(to, port, false);
  const client = await execIn(from, "nc", ["-N", "-w", "5", ip, String(port)], { input: payload });
  const got = await server;
  const peer = /Connection received on (\S+)/.exec(got.stderr)?.[1];
  return { sent: sha(payload), received: sha(got.stdout), peer, client };
}

/** One UDP datagram; resolves with what the listener printed. */
export async function udpTransfer(
  from: string,
  to: string,
  ip: string,
  port: number,
  text: string,
): Promise<string> {
  const server = listen(to, ip, port, true);
  await untilListening(to, port, true);
  await execIn(from, "nc", ["-u", "-w", "1", ip, String(port)], { input: text });
  return (await server).stdout;
}

/**
 * The node agent's node setup on the cluster's node (br-int, chassis settings, the management port with routes
 * to the cluster and service networks, egress SNAT), reconciled once, and one pod attached as CNI ADD would,
 * with strict reverse-path filtering on the node (as many distributions set it: every path must pass it).
 */
export async function setUpNodeWithPod(
  c: OneNodeCluster,
  cleanups: (() => unknown)[],
  pod: PodRef & { ip: string; containerId: string },
): Promise<{ nodeNetns: string; podNetns: string }> {
  const nodeNetns = c.node.netns.path;
  const mgmtIfname = parseInterfaceName(MGMT_IFNAME);
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
      routeCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs].map((x) => parseCidr(x)),
      mtu: 1450,
    },
    egress: {
      mgmtIfname,
      insideCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs, NET.joinCIDR].map((x) => parseCidr(x)),
      nodeIps: [parseIp(NODE_IP)],
    },
    reserveReplyPorts: true,
    resyncIntervalMs: 0,
  });
  cleanups.push(() => setup.stop());
  await setup.reconcile();
  const ref = { namespace: pod.namespace, name: pod.name, uid: pod.uid };
  const { mac, ipWithPrefix } = await c.addPodLsp(ref, pod.ip);
  const podNetns = (await c.node.addNetns(pod.name)).path;
  await new PodAttacher({ client: c.ovs, mtu: 1450, userspaceDatapath: true, hostNetns: nodeNetns }).add({
    containerId: pod.containerId,
    ifname: ETH0,
    netns: parseNetnsPath(podNetns),
    podNamespace: pod.namespace,
    podName: pod.name,
    podUid: pod.uid,
    network: podNetwork([ipWithPrefix], mac),
  });
  await c.node.exec("sysctl", [
    "-q",
    "-w",
    "net.ipv4.conf.all.rp_filter=1",
    "net.ipv4.conf.default.rp_filter=1",
  ]);
  return { nodeNetns, podNetns };
}
