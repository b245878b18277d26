// The node's own connection to its ETP Local NodePort, served by a pod on another node, keeps the node's address
// as source (upstream e2e "Services should implement NodePort and HealthCheckNodePort correctly when
// ExternalTrafficPolicy changes", its short-circuit step), against the kernel's nftables and a real OVN.
//
// Two nodes in one OVN: node1 is the rig's node (its netns, chassis, management port and the node agent's
// Service table); node2 is the rig's external host, 192.168.250.2 on node1's underlay, with node2's management
// port as a veth into the same br-int (OVN's routing decisions are logical: which management port a packet is
// sent to does not depend on where that port is bound). Pod "near" is node1's, pod "far" node2's (in node2's
// pod address set, so the egress reroute sends its traffic to node2's management port).

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseInterfaceName, parseNetnsPath } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { ensureReservedPorts, RESERVED_PORTS_SYSCTL } from "../../../src/node/reserved-ports.ts";
import { applyServiceNat, type NatServicePort, serviceRuleset } from "../../../src/node/service-nat.ts";
import { NFT_TABLE } from "../../../src/node/snat.ts";
import { findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import { KIND_KEY } from "../../../src/ovn/ownership.ts";
import {
  CLUSTER_ROUTER,
  macFromIPv4,
  mgmtPortName,
  NODE_REPLY_POLICY_PRIORITY,
  NODE_REPLY_PORT_MIN,
  nodePodsAddressSet,
  nodeRows,
  nodeScope,
} from "../../../src/ovn/topology.ts";
import {
  ETH0,
  EXT_IP,
  type Exec,
  execIn,
  MGMT,
  NET,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  podNetwork,
  setUpNodeWithPod,
  startOneNodeCluster,
} from "./one-node-cluster.ts";

const NODE2 = "node2";
/** node2's InternalIP: the rig's external host. */
const NODE2_IP = EXT_IP;
const NODE2_MGMT = { ip: "100.64.0.4/16", mac: macFromIPv4("100.64.0.4"), serviceSnatIp: "100.64.0.5" };
const NEAR_IP = "10.244.0.20";
const FAR_IP = "10.244.0.30";
const MGMT_IP = MGMT.ip.split("/")[0] as string;
const ip = (t: string) => parseIp(t);

function port(key: string, over: Partial<NatServicePort>): NatServicePort {
  return {
    key,
    protocol: "tcp",
    port: 80,
    clusterIPs: [],
    externalIPs: [],
    endpoints: [],
    localEndpoints: [],
    internalTrafficLocal: false,
    externalTrafficLocal: false,
    ...over,
  };
}

const FAR_TCP = { ip: ip(FAR_IP), port: 8080 };
const FAR_UDP = { ip: ip(FAR_IP), port: 5353 };
const NEAR_TCP = { ip: ip(NEAR_IP), port: 8080 };
/** node1's view: `far` is on another node, `near` is its own. */
const PORTS: NatServicePort[] = [
  port("t/far-local/tcp", {
    clusterIPs: [ip("10.96.0.21")],
    nodePort: 30091,
    externalIPs: [ip("192.168.251.21")],
    endpoints: [FAR_TCP],
    externalTrafficLocal: true,
  }),
  port("t/far-local/udp", {
    protocol: "udp",
    port: 53,
    clusterIPs: [ip("10.96.0.21")],
    nodePort: 30091,
    endpoints: [FAR_UDP],
    externalTrafficLocal: true,
  }),
  port("t/far-cluster/tcp", { clusterIPs: [ip("10.96.0.22")], nodePort: 30092, endpoints: [FAR_TCP] }),
  port("t/near-local/tcp", {
    clusterIPs: [ip("10.96.0.23")],
    nodePort: 30093,
    endpoints: [NEAR_TCP],
    localEndpoints: [NEAR_TCP],
    externalTrafficLocal: true,
  }),
];

/** A server in a netns that answers each TCP connection or UDP datagram with "<name> <client address>". */
async function identityServer(
  netns: string,
  name: string,
  host: string,
  p: number,
  udp = false,
): Promise<ChildProcess> {
  const reply = `${JSON.stringify(name)} + " " + `;
  const js = udp
    ? `const s = require("dgram").createSocket("udp4"); s.on("message", (m, r) => s.send(${reply}r.address + "\\n", r.port, r.address)); s.bind(${p}, ${JSON.stringify(host)}, () => console.log("up"))`
    : `require("net").createServer((s) => s.on("error", () => {}).end(${reply}s.remoteAddress + "\\n")).listen(${p}, ${JSON.stringify(host)}, () => console.log("up"))`;
  const child = spawn("nsenter", [`--net=${netns}`, "--", process.execPath, "-e", js], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`identity server ${name} exited with ${code}`)));
    child.stdout?.once("data", () => resolve());
  });
  return child;
}

/** One TCP connection (or one UDP datagram and its answer); "<name> <peer>" of whoever answered. */
async function dial(
  from: string,
  host: string,
  p: number,
  opts: { udp?: boolean; sourcePort?: number } = {},
): Promise<Exec & { who?: string; peer?: string }> {
  const args = [
    ...(opts.udp ? ["-u", "-w", "2"] : ["-N", "-w", "5"]),
    ...(opts.sourcePort ? ["-p", String(opts.sourcePort)] : []),
    host,
    String(p),
  ];
  const r = await execIn(from, "nc", args, { input: opts.udp ? "hello\n" : "" });
  const [who, peer] = r.stdout.trim().split(" ");
  return { ...r, ...(who ? { who } : {}), ...(peer ? { peer } : {}) };
}

describe("node-local traffic to an ETP Local Service keeps the node's address (two nodes in one OVN)", () => {
  const cleanups: (() => unknown)[] = [];
  let c: OneNodeCluster;
  let nodeNetns: string;
  let nearNetns: string;
  let farNetns: string;
  const spec = (withReplies: boolean) => ({
    mgmtIfname: parseInterfaceName(MGMT_IFNAME),
    nodeIps: [ip(NODE_IP)],
    serviceSnatIps: [ip(MGMT.serviceSnatIp)],
    ...(withReplies ? { nodeReplyIps: [ip(NODE_IP)] } : {}),
    ports: PORTS,
  });
  /** node1's and node2's rows as the controller writes them, with or without their reply policies. */
  const writeNodes = async (withReplies: boolean) => {
    for (const [name, mgmt, own] of [
      [NODE, { ip: MGMT.ip, mac: MGMT.mac, serviceSnatIp: MGMT.serviceSnatIp }, NODE_IP],
      [NODE2, NODE2_MGMT, NODE2_IP],
    ] as const) {
      const rows = nodeRows({
        name,
        mgmtIP: mgmt.ip,
        mgmtMAC: mgmt.mac,
        serviceSnatIP: mgmt.serviceSnatIp,
        replyIPs: withReplies ? [own] : [],
      });
      // node2's management port is bound on this rig's only chassis.
      if (name === NODE2) (rows[0]!.row as { options: Record<string, string> }).options = {};
      const txn = c.nb.transaction();
      const summary = plan(c.nb.cache as never, c.nb.schema, txn as never, rows, nodeScope(name));
      if (!summary.empty) await txn.commit();
    }
    await c.nb.echo();
  };
  const replyPolicies = () =>
    [...c.nb.cache.table("Logical_Router_Policy").values()].filter(
      (p) => p.external_ids[KIND_KEY] === "node-reply-policy",
    );

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    ({ nodeNetns, podNetns: nearNetns } = await setUpNodeWithPod(c, cleanups, {
      namespace: "t",
      name: "near",
      uid: "uid-near",
      ip: NEAR_IP,
      containerId: "e7a9c0de00310001",
    }));
    await writeNodes(true);
    // Pod "far": bound here, but node2's pod for the cluster router (node2's pod address set).
    const far = { namespace: "t", name: "far", uid: "uid-far" };
    const { mac, ipWithPrefix } = await c.addPodLsp(far, FAR_IP);
    const setOf = (node: string) =>
      c.nb.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet(node, 4));
    await c.nb.transact((tx) => {
      tx.mutate("Address_Set", [["_uuid", "==", setOf(NODE)!._uuid]], [["addresses", "delete", [FAR_IP]]]);
      tx.mutate("Address_Set", [["_uuid", "==", setOf(NODE2)!._uuid]], [["addresses", "insert", [FAR_IP]]]);
    });
    farNetns = (await c.node.addNetns("far")).path;
    await new PodAttacher({
      client: c.ovs,
      mtu: 1450,
      userspaceDatapath: true,
      hostNetns: nodeNetns,
    }).add({
      containerId: "e7a9c0de00320001",
      ifname: ETH0,
      netns: parseNetnsPath(farNetns),
      podNamespace: far.namespace,
      podName: far.name,
      podUid: far.uid,
      network: podNetwork([ipWithPrefix], mac),
    });
    // node2's management port: a veth from its host (the external host) into br-int.
    await c.node.exec("ip", [
      "link",
      "add",
      "mp2-ovs",
      "type",
      "veth",
      "peer",
      "name",
      "mp2",
      "netns",
      c.ext.path,
    ]);
    await c.node.exec("ip", ["link", "set", "mp2-ovs", "up"]);
    await c.node.vsctl(
      "add-port",
      "br-int",
      "mp2-ovs",
      "--",
      "set",
      "interface",
      "mp2-ovs",
      `external_ids:iface-id=${mgmtPortName(NODE2)}`,
    );
    for (const args of [
      ["link", "set", "mp2", "address", NODE2_MGMT.mac],
      ["addr", "add", NODE2_MGMT.ip, "dev", "mp2"],
      ["link", "set", "mp2", "up"],
    ])
      await c.node.execIn(c.ext.path, "ip", args);
    await c.node.execIn(c.ext.path, "ethtool", ["-K", "mp2", "tx", "off"]);
    for (const [netns, name, host, p, udp] of [
      [farNetns, "far", FAR_IP, 8080, false],
      [farNetns, "far", FAR_IP, 5353, true],
      [nearNetns, "near", NEAR_IP, 8080, false],
      [c.ext.path, "node2", NODE2_IP, 9000, false],
    ] as const) {
      const child = await identityServer(netns, name, host, p, udp);
      cleanups.push(() => child.kill("SIGKILL"));
    }
    // The node's route to the externalIP (towards whoever announces it), as its default route would be.
    await c.node.exec("ip", ["route", "add", "192.168.251.21", "via", NODE2_IP]);
    await applyServiceNat(serviceRuleset(spec(true)), { netns: nodeNetns });
    // The pods' ports are bound once ovn-controller has installed their flows.
    for (const [to, who] of [
      [FAR_IP, "far"],
      [NEAR_IP, "near"],
    ] as const)
      for (let i = 0; i < 200 && (await dial(nodeNetns, to, 8080)).who !== who; i++) await sleep(50);
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("the controller's rows hold one reply policy per node, for its own address and the reserved ports", () => {
    const policies = replyPolicies();
    assert.equal(policies.length, 2);
    const mine = policies.find((p) => p.nexthops.includes(MGMT_IP));
    assert.ok(mine);
    assert.equal(mine.match.startsWith(`ip4.dst == {${NODE_IP}} && `), true, mine.match);
    assert.match(mine.match, new RegExp(`tcp\\.dst >= ${NODE_REPLY_PORT_MIN}`));
  });

  test("short-circuit: the node → its own ETP Local NodePort, endpoint on another node: the pod sees the node's address (TCP and UDP)", async () => {
    // The e2e's client binds the node address (curl --interface); an unbound client gets it too (a local route).
    const tcp = await dial(nodeNetns, NODE_IP, 30091);
    assert.equal(tcp.who, "far", tcp.stderr);
    assert.equal(tcp.peer, NODE_IP);
    const udp = await dial(nodeNetns, NODE_IP, 30091, { udp: true });
    assert.equal(udp.who, "far", udp.stderr);
    assert.equal(udp.peer, NODE_IP);
    // The same Service's externalIP, from the node: kept too.
    const ext = await dial(nodeNetns, "192.168.251.21", 80);
    assert.equal(ext.who, "far", ext.stderr);
    assert.equal(ext.peer, NODE_IP);
  });

  test("without the reply policy the pod's reply goes to the pod's own node and the connection fails: the policy is what returns it", async () => {
    try {
      await writeNodes(false);
      assert.equal(replyPolicies().length, 0);
      await c.node.appctl("dpctl/flush-conntrack");
      let r = await dial(nodeNetns, NODE_IP, 30091);
      for (let i = 0; i < 60 && r.who === "far"; i++) {
        // ovn-controller removes the flows in its own time.
        await sleep(500);
        r = await dial(nodeNetns, NODE_IP, 30091);
      }
      assert.equal(r.who, undefined, `answered without the reply policy: ${r.stdout}`);
      // The agent without the controller's word (no reply addresses) masquerades, as before: it works.
      await applyServiceNat(serviceRuleset(spec(false)), { netns: nodeNetns });
      const m = await dial(nodeNetns, NODE_IP, 30091);
      assert.equal(m.who, "far", m.stderr);
      assert.equal(m.peer, MGMT_IP);
    } finally {
      await writeNodes(true);
      await applyServiceNat(serviceRuleset(spec(true)), { netns: nodeNetns });
    }
    let back = await dial(nodeNetns, NODE_IP, 30091);
    for (let i = 0; i < 60 && back.peer !== NODE_IP; i++) {
      await sleep(500);
      back = await dial(nodeNetns, NODE_IP, 30091);
    }
    assert.equal(back.peer, NODE_IP, back.stderr);
  });

  test("unchanged: the node → its ETP Local NodePort with its own endpoint: the pod sees the management address (own-node allow)", async () => {
    const r = await dial(nodeNetns, NODE_IP, 30093);
    assert.equal(r.who, "near", r.stderr);
    assert.equal(r.peer, MGMT_IP);
  });

  test("unchanged: the node → an ETP Cluster NodePort and a clusterIP: the pod elsewhere sees the management address", async () => {
    for (const [host, p] of [
      [NODE_IP, 30092],
      ["10.96.0.22", 80],
      ["10.96.0.21", 80],
    ] as const) {
      const r = await dial(nodeNetns, host, p);
      assert.equal(r.who, "far", `${host}:${p} ${r.stderr}`);
      assert.equal(r.peer, MGMT_IP, `${host}:${p}`);
    }
  });

  test("unchanged: another node's host → this node's ETP Local NodePort keeps its address, and the reply returns through this node", async () => {
    // node2 is the client: node1 DNATs to its own pod without SNAT; the pod's reply to node2's address (a port
    // below the reserved range) takes the egress path through node1, not node2's reply policy.
    const r = await dial(c.ext.path, NODE_IP, 30093, { sourcePort: 40_093 });
    assert.equal(r.who, "near", r.stderr);
    assert.equal(r.peer, NODE2_IP);
  });

  test("why the policy matches the reserved ports: a reroute on the node's address alone would send node2's replies from node1's pod to node2, and node2's connection fails", async () => {
    const naive = "h_naive_reply";
    try {
      await c.nb.transact((tx) => {
        const p = tx.insert("Logical_Router_Policy", {
          priority: NODE_REPLY_POLICY_PRIORITY,
          match: `ip4.dst == ${NODE2_IP}`,
          action: "reroute",
          nexthops: [NODE2_MGMT.ip.split("/")[0] as string],
          external_ids: { [naive]: "1" },
        } as never);
        tx.mutate("Logical_Router", [["name", "==", CLUSTER_ROUTER]], [["policies", "insert", [p]]]);
      });
      await c.node.appctl("dpctl/flush-conntrack");
      let r = await dial(c.ext.path, NODE_IP, 30093, { sourcePort: 40_094 });
      for (let i = 0; i < 60 && r.who === "near"; i++) {
        // ovn-controller installs the flows in its own time.
        await sleep(500);
        r = await dial(c.ext.path, NODE_IP, 30093, { sourcePort: 40_094 });
      }
      assert.equal(r.who, undefined, `answered through the naive reroute: ${r.stdout}`);
    } finally {
      const rows = [...c.nb.cache.table("Logical_Router_Policy").values()].filter(
        (p) => p.external_ids[naive],
      );
      await c.nb.transact((tx) => {
        for (const p of rows) {
          tx.mutate("Logical_Router", [["name", "==", CLUSTER_ROUTER]], [["policies", "delete", [p._uuid]]]);
          tx.delete("Logical_Router_Policy", [["_uuid", "==", p._uuid]]);
        }
      });
    }
    let back = await dial(c.ext.path, NODE_IP, 30093, { sourcePort: 40_095 });
    for (let i = 0; i < 60 && back.who !== "near"; i++) {
      await sleep(500);
      back = await dial(c.ext.path, NODE_IP, 30093, { sourcePort: 40_095 });
    }
    assert.equal(back.peer, NODE2_IP, back.stderr);
  });

  test("unchanged: a pod → another node's address leaves through its own node, SNATed to it", async () => {
    const r = await dial(nearNetns, NODE2_IP, 9000);
    assert.equal(r.who, "node2", r.stderr);
    assert.equal(r.peer, NODE_IP);
  });

  test("the reserved source ports: a pod elsewhere answering a node connection from them is returned to that node", async () => {
    // node1 reaches the far pod directly from its own address and a reserved port: the reply policy brings the
    // answer to node1's management port (routes keep it symmetric), where before it went out through node2.
    await c.node.exec("ip", [
      "route",
      "replace",
      `${FAR_IP}/32`,
      "via",
      NET.joinGateway,
      "dev",
      MGMT_IFNAME,
      "src",
      NODE_IP,
    ]);
    try {
      const r = await dial(nodeNetns, FAR_IP, 8080, { sourcePort: NODE_REPLY_PORT_MIN + 7 });
      assert.equal(r.who, "far", r.stderr);
      assert.equal(r.peer, NODE_IP);
    } finally {
      await c.node.exec("ip", ["route", "del", `${FAR_IP}/32`]);
    }
  });

  test("the node setup step reserved the reply policy's ports for the host, and a merge keeps an operator's entries", async () => {
    const read = async () => (await execIn(nodeNetns, "sysctl", ["-n", RESERVED_PORTS_SYSCTL])).stdout.trim();
    const before = await read();
    assert.equal(before, "61440-65535");
    try {
      await execIn(nodeNetns, "sysctl", ["-q", "-w", `${RESERVED_PORTS_SYSCTL}=8080,9000-9001`]);
      assert.equal(await ensureReservedPorts({ netns: nodeNetns }), true);
      assert.equal(await read(), "8080,9000-9001,61440-65535");
      // Already there: nothing written.
      assert.equal(await ensureReservedPorts({ netns: nodeNetns }), false);
    } finally {
      await execIn(nodeNetns, "sysctl", ["-q", "-w", `${RESERVED_PORTS_SYSCTL}=${before}`]);
    }
  });

  test("a pod whose source port is in the reserved range reaches another node's ETP Local NodePort: its egress SNAT moves the port below 61440", async () => {
    // node2 as a node serving an ETP Local NodePort with its pod "far": DNAT without SNAT (the client's address is
    // kept), the pod reached through node2's management port, whose egress reroute brings the reply back there.
    const np = 30_095;
    const nodePortTable = [
      "table ip etpfix_np {",
      "  chain pre {",
      "    type nat hook prerouting priority -100; policy accept;",
      `    iifname "eth0" tcp dport ${np} dnat to ${FAR_IP}:8080`,
      "  }",
      "}",
      "",
    ].join("\n");
    const ext = c.ext.path;
    const egressOf = async () =>
      (await execIn(nodeNetns, "nft", ["list", "table", "inet", NFT_TABLE])).stdout;
    const fixed = await egressOf();
    assert.match(
      fixed,
      new RegExp(`th sport >= 1024 snat ip to ${NODE_IP.replaceAll(".", "\\.")}:1024-61439`),
    );
    let sport = NODE_REPLY_PORT_MIN + 60;
    const fromPod = () => dial(nearNetns, NODE2_IP, np, { sourcePort: sport++ });
    try {
      for (const [cmd, args] of [
        ["sysctl", ["-q", "-w", "net.ipv4.ip_forward=1"]],
        ["ip", ["route", "replace", `${FAR_IP}/32`, "via", NET.joinGateway, "dev", "mp2"]],
      ] as const) {
        const r = await execIn(ext, cmd, args);
        assert.equal(r.code, 0, r.stderr);
      }
      const r = await execIn(ext, "nft", ["-f", "-"], { input: nodePortTable });
      assert.equal(r.code, 0, r.stderr);
      let got = await fromPod();
      for (let i = 0; i < 20 && got.who !== "far"; i++) {
        await sleep(500);
        got = await fromPod();
      }
      assert.equal(got.who, "far", got.stderr);
      assert.equal(got.peer, NODE_IP);
      // The control: the same egress SNAT without the port range keeps the pod's port, the reply is rerouted
      // to this node's management port by its reply policy, and the connection fails.
      const unranged = fixed
        .split("\n")
        .filter((l) => !l.includes("th sport"))
        .join("\n");
      const load = await execIn(nodeNetns, "nft", ["-f", "-"], {
        input: `table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n${unranged}`,
      });
      assert.equal(load.code, 0, load.stderr);
      const bad = await fromPod();
      assert.equal(bad.who, undefined, `answered without the port range: ${bad.stdout}`);
    } finally {
      await execIn(nodeNetns, "nft", ["-f", "-"], {
        input: `table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n${fixed}`,
      });
      await execIn(ext, "nft", ["delete", "table", "ip", "etpfix_np"]);
      await execIn(ext, "ip", ["route", "del", `${FAR_IP}/32`]);
    }
    assert.equal(await egressOf(), fixed);
  });

  test("a restart of the reconcile with nothing changed writes nothing", async () => {
    for (const [name, mgmt, own] of [
      [NODE, { ip: MGMT.ip, mac: MGMT.mac, serviceSnatIp: MGMT.serviceSnatIp }, NODE_IP],
      [NODE2, NODE2_MGMT, NODE2_IP],
    ] as const) {
      const rows = nodeRows({
        name,
        mgmtIP: mgmt.ip,
        mgmtMAC: mgmt.mac,
        serviceSnatIP: mgmt.serviceSnatIp,
        replyIPs: [own],
      });
      if (name === NODE2) (rows[0]!.row as { options: Record<string, string> }).options = {};
      const txn = c.nb.transaction();
      assert.equal(plan(c.nb.cache as never, c.nb.schema, txn as never, rows, nodeScope(name)).empty, true);
    }
    assert.ok(findOwned(c.nb.cache as never, "Logical_Router_Policy", `node/${NODE}/node-reply-v4`));
  });
});
