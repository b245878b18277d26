// Pods' hostPorts against the kernel's nftables and a real one-node OVN cluster: the node's hostPort table is
// installed in the node's netns, and real TCP and UDP connections go from an external host, the node itself
// (to its address and to 127.0.0.1) and the pod itself (hairpin) to a pod behind OVN. The pod's servers answer
// with their name and the client address they see.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIp } from "../../../src/ipam/address.ts";
import {
  applyHostPortNat,
  enableRouteLocalnet,
  HOSTPORT_NFT_TABLE,
  type HostPortMapping,
  hostPortRuleset,
  hostPortTablePresent,
  installedHostPortDigest,
  rulesetDigest,
} from "../../../src/node/host-port-nat.ts";
import { parseInterfaceName } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import {
  EXT_IP,
  type Exec,
  execIn,
  MGMT,
  NODE_IP,
  type OneNodeCluster,
  setUpNodeWithPod,
  startOneNodeCluster,
} from "./one-node-cluster.ts";

const POD_IP = "10.244.0.30";
const MGMT_IP = MGMT.ip.split("/")[0]!;
const ip = (t: string) => parseIp(t);
const MGMT_DEV = parseInterfaceName(MGMT_IFNAME);

/** The conformance case, plus a wildcard hostPort: each a port of its own on the one pod. */
const MAPPINGS: HostPortMapping[] = [
  { key: "any", protocol: "tcp", hostPort: 18080, podIP: ip(POD_IP), containerPort: 8080 },
  {
    key: "lo",
    protocol: "tcp",
    hostPort: 54321,
    hostIP: ip("127.0.0.1"),
    podIP: ip(POD_IP),
    containerPort: 8081,
  },
  {
    key: "node",
    protocol: "tcp",
    hostPort: 54321,
    hostIP: ip(NODE_IP),
    podIP: ip(POD_IP),
    containerPort: 8082,
  },
  {
    key: "udp",
    protocol: "udp",
    hostPort: 54321,
    hostIP: ip(NODE_IP),
    podIP: ip(POD_IP),
    containerPort: 8083,
  },
];
const SPEC = { mgmtIfname: MGMT_DEV, mappings: MAPPINGS };

/** One process in the pod: TCP servers on 8080-8082 and a UDP one on 8083, each answering "<port> <client>". */
async function podServers(netns: string): Promise<ChildProcess> {
  const js = `
    const net = require("net"), dgram = require("dgram");
    let up = 0; const ready = () => { if (++up === 4) console.log("up"); };
    for (const p of [8080, 8081, 8082])
      net.createServer((s) => s.on("error", () => {}).end(p + " " + s.remoteAddress + "\\n")).listen(p, ${JSON.stringify(POD_IP)}, ready);
    const u = dgram.createSocket("udp4");
    u.on("message", (_m, r) => u.send("8083 " + r.address + "\\n", r.port, r.address));
    u.bind(8083, ${JSON.stringify(POD_IP)}, ready);`;
  const child = spawn("nsenter", [`--net=${netns}`, "--", process.execPath, "-e", js], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`pod servers exited with ${code}`)));
    child.stdout?.once("data", () => resolve());
  });
  return child;
}

type Answer = Exec & { who?: string; peer?: string };
const parse = (r: Exec): Answer => {
  const [who, peer] = r.stdout.trim().split(" ");
  return { ...r, ...(who ? { who } : {}), ...(peer ? { peer } : {}) };
};
const dial = async (from: string, host: string, p: number, source?: string) =>
  parse(
    await execIn(from, "nc", ["-v", "-N", "-w", "5", ...(source ? ["-s", source] : []), host, String(p)]),
  );
const dialUdp = async (from: string, host: string, p: number) =>
  parse(await execIn(from, "nc", ["-u", "-w", "3", host, String(p)], { input: "hello\n" }));

describe("hostPorts (nftables) with a one-node OVN cluster", () => {
  const cleanups: (() => unknown)[] = [];
  let c: OneNodeCluster;
  let podNetns: string;
  let nodeNetns: string;

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    ({ nodeNetns, podNetns } = await setUpNodeWithPod(c, cleanups, {
      namespace: "t",
      name: "hp",
      uid: "uid-hp",
      ip: POD_IP,
      containerId: "feedfacecafe0013",
    }));
    const servers = await podServers(podNetns);
    cleanups.push(() => servers.kill("SIGKILL"));
    await enableRouteLocalnet(MGMT_DEV, { netns: nodeNetns });
    await applyHostPortNat(hostPortRuleset(SPEC), { netns: nodeNetns });
    // The pod's port is bound once ovn-controller has installed its flows.
    for (let i = 0; i < 200 && (await dial(nodeNetns, POD_IP, 8080)).who !== "8080"; i++) await sleep(50);
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("external client → node address on a wildcard hostPort: reaches the pod, which sees the client's address", async () => {
    const r = await dial(c.ext.path, NODE_IP, 18080);
    assert.equal(r.who, "8080", r.stderr);
    assert.equal(r.peer, EXT_IP);
  });

  test("the conformance case: 127.0.0.1, the node address over TCP and over UDP on one hostPort each reach their own port", async () => {
    // From the node itself, as the upstream test's host-network pod dials (with the node address as source).
    const lo = await dial(nodeNetns, "127.0.0.1", 54321);
    assert.equal(lo.who, "8081", lo.stderr);
    assert.equal(lo.peer, MGMT_IP, "masqueraded: the pod never sees a loopback source");
    const loFromNodeIp = await dial(nodeNetns, "127.0.0.1", 54321, NODE_IP);
    assert.equal(loFromNodeIp.who, "8081", loFromNodeIp.stderr);
    const node = await dial(nodeNetns, NODE_IP, 54321);
    assert.equal(node.who, "8082", node.stderr);
    const udp = await dialUdp(nodeNetns, NODE_IP, 54321);
    assert.equal(udp.who, "8083", udp.stderr);
    // And from outside: the node address over TCP and UDP.
    assert.equal((await dial(c.ext.path, NODE_IP, 54321)).who, "8082");
    assert.equal((await dialUdp(c.ext.path, NODE_IP, 54321)).who, "8083");
  });

  test("the node reaches a wildcard hostPort on its own address, never through 127.0.0.1 (its loopback services stay its own)", async () => {
    assert.equal((await dial(nodeNetns, NODE_IP, 18080)).who, "8080");
    // 127.0.0.1 is served only for an explicit hostIP 127.0.0.1: a wildcard pod must not take, say, a control-plane
    // node's etcd on 127.0.0.1:2379. Nothing listens there in the node, so the connection is refused.
    const lo = await dial(nodeNetns, "127.0.0.1", 18080);
    assert.notEqual(lo.who, "8080", "the wildcard pod did not answer on 127.0.0.1");
  });

  test("the pod reaches its own hostPort through its node's address (hairpin, masqueraded)", async () => {
    const r = await dial(podNetns, NODE_IP, 18080);
    assert.equal(r.who, "8080", r.stderr);
    assert.equal(r.peer, MGMT_IP);
  });

  test("nothing addressed to 127.0.0.1 from outside the node is DNATed to the pod (wildcard or loopback hostPort)", async () => {
    // The external host's packets arrive at the node carrying 127.0.0.1 as destination (a neighbour trying
    // CVE-2020-8558; rewritten on arrival, before conntrack, since the external host could not ARP for it), and
    // the pod counts the connection attempts it receives.
    const mangle = "zovn_hp_mangle";
    const count = "zovn_hp_count";
    const load = (netns: string, lines: string[]) =>
      execIn(netns, "nft", ["-f", "-"], { input: lines.join("\n") });
    const m = await load(nodeNetns, [
      `table ip ${mangle} {`,
      "  chain arrive {",
      "    type filter hook prerouting priority -350; policy accept;",
      `    ip saddr ${EXT_IP} ip daddr ${NODE_IP} tcp dport { 18080, 54321 } counter ip daddr set 127.0.0.1`,
      "  }",
      "}",
    ]);
    assert.equal(m.code, 0, m.stderr);
    const k = await load(podNetns, [
      `table inet ${count} {`,
      "  chain in {",
      "    type filter hook input priority -300; policy accept;",
      "    tcp dport { 8080, 8081 } tcp flags syn counter",
      "  }",
      "}",
    ]);
    assert.equal(k.code, 0, k.stderr);
    try {
      for (const p of [18080, 54321]) {
        const d = await execIn(c.ext.path, "nc", ["-v", "-N", "-w", "2", NODE_IP, String(p)]);
        assert.equal(d.stdout, "", `port ${p} answered`);
      }
      const arrived = await execIn(nodeNetns, "nft", ["list", "table", "ip", mangle]);
      assert.doesNotMatch(arrived.stdout, /counter packets 0 /, "the probes reached the node");
      const listed = await execIn(podNetns, "nft", ["list", "table", "inet", count]);
      assert.match(listed.stdout, /counter packets 0 bytes 0/, listed.stdout);
    } finally {
      await execIn(nodeNetns, "nft", ["delete", "table", "ip", mangle]);
      await execIn(podNetns, "nft", ["delete", "table", "inet", count]);
    }
  });

  test("the ruleset in the kernel carries the script's digest; applying the same script again changes nothing", async () => {
    assert.equal(await hostPortTablePresent({ netns: nodeNetns }), true);
    const script = hostPortRuleset(SPEC);
    assert.equal(await installedHostPortDigest({ netns: nodeNetns }), rulesetDigest(script));
    const before = await execIn(nodeNetns, "nft", ["list", "table", "inet", HOSTPORT_NFT_TABLE]);
    await applyHostPortNat(script, { netns: nodeNetns });
    const after = await execIn(nodeNetns, "nft", ["list", "table", "inet", HOSTPORT_NFT_TABLE]);
    assert.equal(after.stdout, before.stdout);
    assert.match(after.stdout, /192\.168\.250\.1 \. tcp \. 54321 : goto h[0-9a-f]{16}/);
    assert.match(after.stdout, /127\.0\.0\.1 \. tcp \. 54321 : goto h[0-9a-f]{16}/);
  });

  test("a mapping removed from the table is no longer served", async () => {
    await applyHostPortNat(hostPortRuleset({ ...SPEC, mappings: MAPPINGS.filter((m) => m.key !== "any") }), {
      netns: nodeNetns,
    });
    try {
      const r = await dial(c.ext.path, NODE_IP, 18080);
      assert.notEqual(r.who, "8080");
    } finally {
      await applyHostPortNat(hostPortRuleset(SPEC), { netns: nodeNetns });
    }
  });
});
