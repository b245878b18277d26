// The NetworkPolicy ACL plan of docs/network-policy.md on a real OVN node (userspace datapath), with the rows
// exactly as src/policy makes them (policy, isolation and own-node rows): port groups with to-lport allow-related rules
// over a default deny, an egress default deny and allow with apply-after-lb (so a ClusterIP connection is judged
// by its backend), a named-port address set, an endPort range, an ipBlock with except, ARP through the deny,
// replies of allowed connections in both directions, and the own-node allow from the management IP.
// Every probe is a real TCP connection or UDP datagram to a server that answers with its name and its peer.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { type IpAddress, parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { parseNetnsPath } from "../../../src/node/interface-name.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { type DesiredRow, findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import { ownedIds } from "../../../src/ovn/ownership.ts";
import { serviceLoadBalancers } from "../../../src/ovn/service-lb.ts";
import { CLUSTER_LB_GROUP } from "../../../src/ovn/topology.ts";
import { isolationRows, nodeRows } from "../../../src/policy/isolation-acls.ts";
import { nodeGroupName, peerSetName } from "../../../src/policy/nb-names.ts";
import { type PolicyInputs, policyRows } from "../../../src/policy/policy-acls.ts";
import { parseNetworkPolicy, podPeersOf } from "../../../src/policy/policy-model.ts";
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
} from "../node/one-node-cluster.ts";

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let attacher: PodAttacher;
const MGMT_IP = MGMT.ip.split("/")[0] ?? "";
const TCP_PORTS = [7000, 8080, 8082, 9001, 9002];
const UDP_PORTS = [8081, 8082];

interface Pod {
  name: string;
  netns: string;
  ip: string;
  lsp: string;
}

let seq = 0;
async function newPod(name: string): Promise<Pod> {
  const ip = `10.244.0.${20 + seq++}`;
  const uid = `uid-${name}`;
  const { mac, ipWithPrefix } = await c.addPodLsp({ namespace: "np", name, uid }, ip);
  const netns = (await c.node.addNetns(name)).path;
  await attacher.add({
    containerId: [...crypto.getRandomValues(new Uint8Array(32))]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join(""),
    ifname: ETH0,
    netns: parseNetnsPath(netns),
    podNamespace: "np",
    podName: name,
    podUid: uid,
    network: podNetwork([ipWithPrefix], mac),
  });
  const lsp = c.nb.cache
    .table("Logical_Switch_Port")
    .findOne((r) => r.addresses.some((a) => a.endsWith(` ${ip}`)));
  assert.ok(lsp, `no LSP for ${name}`);
  const js = `const n=require("net"),d=require("dgram"),name=${JSON.stringify(name)};
for (const p of ${JSON.stringify(TCP_PORTS)}) n.createServer((s)=>s.on("error",()=>{}).end(name+" "+s.remoteAddress+"\\n")).listen(p, "0.0.0.0");
for (const p of ${JSON.stringify(UDP_PORTS)}) { const u=d.createSocket("udp4"); u.on("message",(m,r)=>u.send(name+" "+r.address+"\\n",r.port,r.address)); u.bind(p); }
setTimeout(()=>console.log("up"),200);`;
  const child: ChildProcess = spawn("nsenter", [`--net=${netns}`, "--", process.execPath, "-e", js], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(() => child.kill("SIGKILL"));
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`server ${name} exited with ${code}`)));
    child.stdout?.once("data", () => resolve());
  });
  return { name, netns, ip, lsp: lsp._uuid };
}

/** "<server name> <peer it saw>" when the connection got through, "" when it did not. */
async function tcp(from: string, host: string, port: number): Promise<string> {
  const r = await execIn(from, "nc", ["-N", "-w", "2", host, String(port)]);
  return r.stdout.trim();
}
async function udp(from: string, host: string, port: number): Promise<string> {
  const r = await execIn(from, "nc", ["-u", "-w", "1", host, String(port)], { input: "x\n" });
  return r.stdout.trim();
}

/** Waits until ovn-controller has installed the flows of every NB change so far. */
async function synced(): Promise<void> {
  await c.nb.transact((tx) => tx.mutate("NB_Global", [], [["nb_cfg", "+=", 1]]));
  const want = (c.nb.cache.table("NB_Global").values().next().value as { nb_cfg: number }).nb_cfg;
  for (let i = 0; i < 400; i++) {
    const g = c.nb.cache.table("NB_Global").values().next().value as { hv_cfg: number } | undefined;
    if ((g?.hv_cfg ?? 0) >= want) return;
    await sleep(50);
  }
  throw new Error("ovn-controller did not catch up with NB");
}

async function service(name: string, clusterIP: string, backend: string): Promise<void> {
  const { model } = parseService({
    metadata: { namespace: "np", name },
    spec: { clusterIP, ports: [{ name: "http", port: 80 }] },
  } as V1Service);
  assert.ok(model);
  const slice = {
    addressType: "IPv4",
    endpoints: [{ addresses: [backend], nodeName: NODE, conditions: { ready: true } }],
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
  } as V1EndpointSlice;
  const { rows } = serviceLoadBalancers(model, [slice], [{ node: NODE }]);
  const group = c.nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
  assert.ok(group);
  const txn = c.nb.transaction();
  plan(
    c.nb.cache as never,
    c.nb.schema,
    txn as never,
    rows.map((r) => ({
      ...r,
      parent: { table: "Load_Balancer_Group", uuid: group._uuid, column: "load_balancer" },
    })),
  );
  await txn.commit();
}

describe("NetworkPolicy ACL plan on a real OVN node", () => {
  let pa: Pod; // egress-isolated client: may reach pb on TCP 8080, 9001-9001 (endPort) and UDP by named port
  let pb: Pod; // ingress-isolated server
  let pc: Pod; // unisolated client, excluded from pb's ipBlock
  let pd: Pod; // unisolated server, not a peer of pa
  let nodePg = "";

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
      mgmt: {
        bridge: "br-int",
        lspName: MGMT.lsp,
        mac: MGMT.mac,
        ip: MGMT.ip,
        gateway: NET.joinGateway,
        routeCidrs: [...NET.clusterCIDRs, ...NET.serviceCIDRs].map((x) => parseCidr(x)),
        mtu: 1450,
      },
      resyncIntervalMs: 0,
    });
    cleanups.push(() => setup.stop());
    await setup.reconcile();
    attacher = new PodAttacher({
      client: c.ovs,
      mtu: 1450,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
      ovnInstalledBudgetMs: 15_000,
    });
    const ls = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/default");
    assert.ok(ls);
    await c.nb.transact((tx) => {
      const g = tx.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP });
      tx.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["load_balancer_group", "insert", [g]]]);
    });
    pa = await newPod("pa");
    pb = await newPod("pb");
    pc = await newPod("pc");
    pd = await newPod("pd");
    await service("to-b", "10.96.0.50", pb.ip);
    await service("to-d", "10.96.0.51", pd.ip);
    await synced();
    // Before any ACL everything passes: the negative probes below are the ACLs' doing.
    for (let i = 0; i < 100 && (await tcp(pa.netns, pb.ip, 8080)) === ""; i++) await sleep(100);
    assert.equal(await tcp(pc.netns, pd.ip, 8080), `pd ${pc.ip}`);

    // The rows exactly as src/policy makes them for two policies: b admits a (TCP 8080, 9000-9001, its named UDP
    // port) and an ipBlock except pc on 7000; a may egress only to b on the same ports.
    const policyB = parseNetworkPolicy({
      metadata: { namespace: "np", name: "b" },
      spec: {
        podSelector: { matchLabels: { app: "b" } },
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { app: "a" } } }],
            ports: [{ port: 8080 }, { port: 9000, endPort: 9001 }],
          },
          {
            from: [{ podSelector: { matchLabels: { app: "a" } } }],
            ports: [{ port: "serve-udp", protocol: "UDP" }],
          },
          {
            from: [{ ipBlock: { cidr: "10.244.0.0/24", except: [`${pc.ip}/32`] } }],
            ports: [{ port: 7000 }],
          },
        ],
      },
    });
    const policyA = parseNetworkPolicy({
      metadata: { namespace: "np", name: "a" },
      spec: {
        podSelector: { matchLabels: { app: "a" } },
        policyTypes: ["Egress"],
        egress: [
          {
            to: [{ podSelector: { matchLabels: { app: "b" } } }],
            ports: [{ port: 8080 }, { port: 9000, endPort: 9001 }],
          },
          {
            to: [{ podSelector: { matchLabels: { app: "b" } } }],
            ports: [{ port: "serve-udp", protocol: "UDP" }],
          },
        ],
      },
    });
    // pb declares serve-udp as UDP 8081; it is the selected pod of b and the peer of a.
    const named = (): Map<number, IpAddress[]> => new Map([[8081, [parseIp(pb.ip)]]]);
    const inputs: PolicyInputs = {
      families: [4],
      ingressNamed: named,
      egressNamed: named,
      nodeMgmtIps: () => [],
    };
    const withPorts = (rows: DesiredRow[], ports: string[]) =>
      rows.map((r) => (r.table === "Port_Group" ? { ...r, row: { ...r.row, ports } } : r));
    const peerSets: DesiredRow[] = [policyA, policyB].flatMap((m) =>
      [...podPeersOf(m)].map(([key, peer]) => ({
        table: "Address_Set",
        id: `np-peer/${key}`,
        row: {
          name: peerSetName(key, 4),
          addresses: [(peer.pods.requirements[0]?.values[0] === "a" ? pa : pb).ip],
          external_ids: ownedIds("network-policy-peer", `np-peer/${key}`),
        },
      })),
    );
    const rows = [
      ...peerSets,
      ...withPorts(policyRows(policyB, inputs).rows, [pb.lsp]),
      ...withPorts(policyRows(policyA, inputs).rows, [pa.lsp]),
      ...withPorts(isolationRows("ingress"), [pb.lsp]),
      ...withPorts(isolationRows("egress"), [pa.lsp]),
      ...withPorts(nodeRows(NODE, [parseIp(MGMT_IP)]), [pb.lsp]),
    ];
    nodePg = nodeGroupName(NODE);
    const txn = c.nb.transaction();
    plan(c.nb.cache as never, c.nb.schema, txn as never, rows);
    await txn.commit();
    await synced();
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("ingress: an allowed peer reaches the allowed port over TCP, its replies pass", async () => {
    assert.equal(await tcp(pa.netns, pb.ip, 8080), `pb ${pa.ip}`);
  });

  test("ingress: another port and another peer are dropped by the default deny", async () => {
    assert.equal(await tcp(pa.netns, pb.ip, 8082), "");
    assert.equal(await tcp(pc.netns, pb.ip, 8080), "");
  });

  test("endPort: a range match `a <= tcp.dst <= b` admits the range's end and nothing past it", async () => {
    assert.equal(await tcp(pa.netns, pb.ip, 9001), `pb ${pa.ip}`);
    assert.equal(await tcp(pa.netns, pb.ip, 9002), "");
  });

  test("named port over UDP: the named set admits its port, the datagram's reply comes back", async () => {
    assert.equal(await udp(pa.netns, pb.ip, 8081), `pb ${pa.ip}`);
    assert.equal(await udp(pa.netns, pb.ip, 8082), "");
  });

  test("ipBlock with except: the block admits a pod, except keeps another out", async () => {
    assert.equal(await tcp(pd.netns, pb.ip, 7000), `pb ${pd.ip}`);
    assert.equal(await tcp(pc.netns, pb.ip, 7000), "");
  });

  test("replies: an ingress-isolated pod's own connections and an egress-isolated pod's answers pass", async () => {
    assert.equal(await tcp(pb.netns, pd.ip, 8080), `pd ${pb.ip}`);
    assert.equal(await udp(pb.netns, pd.ip, 8081), `pd ${pb.ip}`);
    assert.equal(await tcp(pc.netns, pa.ip, 8080), `pa ${pc.ip}`);
    assert.equal(await udp(pc.netns, pa.ip, 8081), `pa ${pc.ip}`);
  });

  test("egress: an isolated pod reaches only its allowed peer", async () => {
    assert.equal(await tcp(pa.netns, pd.ip, 8080), "");
    assert.equal(await udp(pa.netns, pd.ip, 8081), "");
  });

  test("egress after load balancing: a ClusterIP is judged by its backend", async () => {
    assert.equal(await tcp(pa.netns, "10.96.0.50", 80), `pb ${pa.ip}`);
    assert.equal(await tcp(pa.netns, "10.96.0.51", 80), "");
    assert.equal(await tcp(pc.netns, "10.96.0.51", 80), `pd ${pc.ip}`);
  });

  test("without apply-after-lb the egress allow sees the ClusterIP, and the connection through it is dropped", async () => {
    const allows = [...c.nb.cache.table("ACL").values()].filter(
      (a) =>
        a.direction === "from-lport" &&
        a.action === "allow-related" &&
        a.options["apply-after-lb"] === "true",
    );
    assert.ok(allows.length > 0);
    const setOptions = async (options: Record<string, string>) => {
      await c.nb.transact((tx) => {
        for (const a of allows) tx.update("ACL", [["_uuid", "==", a._uuid]], { options } as never);
      });
      await synced();
    };
    await setOptions({});
    try {
      assert.equal(await tcp(pa.netns, "10.96.0.50", 80), "");
    } finally {
      await setOptions({ "apply-after-lb": "true" });
    }
    assert.equal(await tcp(pa.netns, "10.96.0.50", 80), `pb ${pa.ip}`);
  });

  test("ARP passes the default deny of both directions", async () => {
    for (const p of [pa, pb]) {
      await execIn(p.netns, "ip", ["neigh", "flush", "all"]);
      // The gateway's MAC is resolved by ARP through the isolated port; OVN answers for it.
      const ping = await execIn(p.netns, "ping", ["-c", "1", "-W", "1", "10.244.0.1"]);
      assert.ok(ping.code !== null);
      const neigh = await execIn(p.netns, "ip", ["neigh", "show", "10.244.0.1"]);
      assert.match(neigh.stdout, /lladdr [0-9a-f:]{17}/, `${p.name}: ${neigh.stdout}`);
    }
  });

  test("the own node (source = management IP) reaches an ingress-isolated pod on any port", async () => {
    const host = c.node.netns.path;
    assert.equal(await tcp(host, pb.ip, 8082), `pb ${MGMT_IP}`);
    assert.equal(await udp(host, pb.ip, 8082), `pb ${MGMT_IP}`);
    // Without the own-node group the default deny applies to the node too.
    const pg = c.nb.cache.table("Port_Group").lookupOne("name", nodePg);
    assert.ok(pg);
    await c.nb.transact((tx) =>
      tx.mutate("Port_Group", [["_uuid", "==", pg._uuid]], [["ports", "delete", [pb.lsp]]]),
    );
    await synced();
    assert.equal(await tcp(host, pb.ip, 8082), "");
    await c.nb.transact((tx) =>
      tx.mutate("Port_Group", [["_uuid", "==", pg._uuid]], [["ports", "insert", [pb.lsp]]]),
    );
    await synced();
    assert.equal(await tcp(host, pb.ip, 8082), `pb ${MGMT_IP}`);
  });
});
