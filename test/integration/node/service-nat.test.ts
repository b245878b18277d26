// Services on the host path against the kernel's nftables and a real one-node OVN cluster: the node's Service
// table is installed in the node's netns, and real TCP/UDP connections go from an external host, the node
// itself and a pod to a pod endpoint behind OVN and to a host-network endpoint on the external host. Each
// endpoint is a small server that answers with its name and the client address it sees.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ownNodeIps } from "../../../src/controller/policy-index.ts";
import { formatIp, parseIp } from "../../../src/ipam/address.ts";
import { cidrContains, parseCidr } from "../../../src/ipam/cidr.ts";
import { parseInterfaceName } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME } from "../../../src/node/mgmt-port.ts";
import type { NodeSetupConfig } from "../../../src/node/node-setup.ts";
import { deleteUdpFlows, staleUdpFlows, udpServiceFlows } from "../../../src/node/service-conntrack.ts";
import {
  applyServiceNat,
  type NatServicePort,
  readAffinity,
  SERVICE_NFT_TABLE,
  serviceRuleset,
  serviceTablePresent,
} from "../../../src/node/service-nat.ts";
import { type DesiredRow, plan } from "../../../src/ovn/nb-diff.ts";
import { podPortName } from "../../../src/ovn/pod-port.ts";
import { nodeRows as isolationAclNodeRows, isolationRows } from "../../../src/policy/isolation-acls.ts";
import { isolationGroup, nodeGroupName } from "../../../src/policy/nb-names.ts";
import { policyRows } from "../../../src/policy/policy-acls.ts";
import { parseNetworkPolicy } from "../../../src/policy/policy-model.ts";
import {
  EXT_IP,
  type Exec,
  execIn,
  MGMT,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  setUpNodeWithPod,
  startOneNodeCluster,
} from "./one-node-cluster.ts";

const POD_IP = "10.244.0.20";
const MGMT_IP = MGMT.ip.split("/")[0]!;
/** The source of Service connections that entered the node: not the node's own for NetworkPolicy. */
const SNAT_IP = MGMT.serviceSnatIp;
const EXTERNAL_IP = "192.168.251.10";
const LB_IP = "192.168.251.11";
// LB IPs with loadBalancerSourceRanges: the external host only; the pod network only; the node's network.
const FW_EXT_IP = "192.168.251.12";
const FW_POD_IP = "192.168.251.13";
const FW_NODE_IP = "192.168.251.14";
const ip = (t: string) => parseIp(t);
const POD_EP = { ip: ip(POD_IP), port: 8080 };
const HOST_EP = { ip: ip(EXT_IP), port: 9000 };

function port(key: string, over: Partial<NatServicePort>): NatServicePort {
  return {
    key,
    protocol: "tcp",
    port: 80,
    clusterIPs: [],
    externalIPs: [],
    endpoints: [POD_EP],
    localEndpoints: [POD_EP],
    internalTrafficLocal: false,
    externalTrafficLocal: false,
    ...over,
  };
}

const SERVICES: NatServicePort[] = [
  port("t/cluster/tcp", { clusterIPs: [ip("10.96.0.10")], nodePort: 30080, externalIPs: [ip(LB_IP)] }),
  port("t/local/tcp", {
    clusterIPs: [ip("10.96.0.11")],
    nodePort: 30081,
    externalIPs: [ip(EXTERNAL_IP)],
    externalTrafficLocal: true,
  }),
  port("t/host/tcp", {
    clusterIPs: [ip("10.96.0.12")],
    nodePort: 30082,
    endpoints: [HOST_EP],
    localEndpoints: [],
  }),
  port("t/empty/tcp", { clusterIPs: [ip("10.96.0.13")], nodePort: 30083, endpoints: [], localEndpoints: [] }),
  port("t/sticky/tcp", {
    clusterIPs: [ip("10.96.0.14")],
    endpoints: [POD_EP, HOST_EP],
    affinityTimeoutSeconds: 600,
  }),
  port("t/spread/tcp", { clusterIPs: [ip("10.96.0.15")], endpoints: [POD_EP, HOST_EP] }),
  port("t/itp/tcp", {
    clusterIPs: [ip("10.96.0.16")],
    endpoints: [POD_EP, HOST_EP],
    internalTrafficLocal: true,
  }),
  port("t/fw-ext/tcp", {
    externalIPs: [ip(FW_EXT_IP)],
    firewalledIPs: [ip(FW_EXT_IP)],
    sourceRanges: [parseCidr(`${EXT_IP}/32`)],
  }),
  port("t/fw-pod/tcp", {
    externalIPs: [ip(FW_POD_IP)],
    firewalledIPs: [ip(FW_POD_IP)],
    sourceRanges: [parseCidr("10.244.0.0/16"), parseCidr("2001:db8::/32")],
  }),
  port("t/fw-node/tcp", {
    externalIPs: [ip(FW_NODE_IP)],
    firewalledIPs: [ip(FW_NODE_IP)],
    sourceRanges: [parseCidr("192.168.250.0/30")],
  }),
  port("t/dns/udp", {
    protocol: "udp",
    port: 53,
    clusterIPs: [ip("10.96.0.17")],
    nodePort: 30053,
    endpoints: [{ ip: ip(POD_IP), port: 5353 }],
    localEndpoints: [{ ip: ip(POD_IP), port: 5353 }],
  }),
];

const SPEC = {
  mgmtIfname: parseInterfaceName(MGMT_IFNAME),
  nodeIps: [ip(NODE_IP)],
  serviceSnatIps: [ip(SNAT_IP)],
  ports: SERVICES,
};

const _chassis = (sbRemote: string): NodeSetupConfig["chassis"] => ({
  ovnRemote: sbRemote,
  encapType: "vxlan",
  encapIp: NODE_IP,
  systemId: NODE,
  bridgeDatapathType: "netdev",
});

/** A TCP server in a netns that answers every connection with "<name> <client address>". */
async function identityServer(
  netns: string,
  name: string,
  host: string,
  listenPort: number,
): Promise<ChildProcess> {
  const js = `require("net").createServer((s) => s.on("error", () => {}).end(${JSON.stringify(name)} + " " + s.remoteAddress + "\\n")).listen(${listenPort}, ${JSON.stringify(host)}, () => console.log("up"))`;
  const child = spawn("nsenter", [`--net=${netns}`, "--", process.execPath, "-e", js], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`identity server ${name} exited with ${code}`)));
    child.stdout?.once("data", () => resolve());
  });
  // A server that died later fails the next dial by name instead of showing up as "Connection refused".
  child.once("exit", (code, signal) => {
    if (!stopping) serversDied.push(`${name} (code ${code}, signal ${signal})`);
  });
  return child;
}

/** Identity servers that exited while the tests ran (a client's reset must never end one). */
const serversDied: string[] = [];
let stopping = false;

/** One TCP connection; "<name> <peer>" of whoever answered, or the client's failure. */
async function dial(from: string, host: string, p: number): Promise<Exec & { who?: string; peer?: string }> {
  assert.deepEqual(serversDied, [], "an identity server exited");
  const r = await execIn(from, "nc", ["-v", "-N", "-w", "5", host, String(p)]);
  const [who, peer] = r.stdout.trim().split(" ");
  return { ...r, ...(who ? { who } : {}), ...(peer ? { peer } : {}) };
}

describe("Services on the host path (nftables) with a one-node OVN cluster", () => {
  const cleanups: (() => unknown)[] = [];
  let c: OneNodeCluster;
  let podNetns: string;
  let nodeNetns: string;

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    ({ nodeNetns, podNetns } = await setUpNodeWithPod(c, cleanups, {
      namespace: "t",
      name: "web",
      uid: "uid-web",
      ip: POD_IP,
      containerId: "feedfacecafe0002",
    }));
    // The external host sends externalIP and LB IP traffic to the node, as a router or an announcer would.
    for (const vip of [EXTERNAL_IP, LB_IP, FW_EXT_IP, FW_POD_IP, FW_NODE_IP])
      await c.node.execIn(c.ext.path, "ip", ["route", "add", vip, "via", NODE_IP]);
    // The node routes the filtered LB IPs towards the load balancer (the external host), as its default route
    // would: a refused connection must be refused by the filter, not by a missing route.
    for (const vip of [FW_EXT_IP, FW_POD_IP, FW_NODE_IP])
      await c.node.exec("ip", ["route", "add", vip, "via", EXT_IP]);
    for (const [netns, name, host, p] of [
      [podNetns, "pod", POD_IP, 8080],
      [c.ext.path, "ext", EXT_IP, 9000],
    ] as const) {
      const child = await identityServer(netns, name, host, p);
      cleanups.push(() => child.kill("SIGKILL"));
    }
    await applyServiceNat(serviceRuleset(SPEC), { netns: nodeNetns });
    // The pod's port is bound once ovn-controller has installed its flows.
    for (let i = 0; i < 200 && (await dial(nodeNetns, POD_IP, 8080)).who !== "pod"; i++) await sleep(50);
  });
  let cleanupPolicy: (() => Promise<void>) | undefined;
  after(async () => {
    stopping = true;
    await cleanupPolicy?.();
    for (const fn of cleanups.reverse()) await fn();
  });

  test("external client → NodePort, externalTrafficPolicy Cluster: reaches the pod, which sees the service SNAT address", async () => {
    const r = await dial(c.ext.path, NODE_IP, 30080);
    assert.equal(r.who, "pod", r.stderr);
    assert.equal(r.peer, SNAT_IP, "OVN routes the reply to the management port, which holds the address");
  });

  test("external client → NodePort, externalTrafficPolicy Local: the pod sees the client's own address", async () => {
    const r = await dial(c.ext.path, NODE_IP, 30081);
    assert.equal(r.who, "pod", r.stderr);
    assert.equal(r.peer, EXT_IP);
  });

  test("external client → externalIP (Local) and load balancer IP (Cluster)", async () => {
    const e = await dial(c.ext.path, EXTERNAL_IP, 80);
    assert.equal(e.who, "pod", e.stderr);
    assert.equal(e.peer, EXT_IP);
    const lb = await dial(c.ext.path, LB_IP, 80);
    assert.equal(lb.who, "pod", lb.stderr);
    assert.equal(lb.peer, SNAT_IP);
  });

  test("the node reaches a clusterIP: DNAT on the host to the pod through the management port", async () => {
    const r = await dial(nodeNetns, "10.96.0.10", 80);
    assert.equal(r.who, "pod", r.stderr);
    assert.equal(r.peer, MGMT_IP);
  });

  test("the node reaches a host-network endpoint through a clusterIP, masqueraded to its node IP", async () => {
    const r = await dial(nodeNetns, "10.96.0.12", 80);
    assert.equal(r.who, "ext", r.stderr);
    assert.equal(r.peer, NODE_IP);
  });

  test("external client → NodePort of a host-network endpoint: masqueraded to the node IP, not the service SNAT address", async () => {
    const r = await dial(c.ext.path, NODE_IP, 30082);
    assert.equal(r.who, "ext", r.stderr);
    assert.equal(r.peer, NODE_IP);
  });

  test("a pod reaching an ETP Local NodePort is treated as in-cluster: SNATed (not as the node), and it reaches itself", async () => {
    const r = await dial(podNetns, NODE_IP, 30081);
    assert.equal(r.who, "pod", r.stderr);
    assert.equal(r.peer, SNAT_IP);
  });

  /** The pod counts the connection attempts it gets on its port 8080, by source (a table of the test's own). */
  const SYN_COUNTERS = "h2_probe";
  async function countSyns(sources: Record<string, string>): Promise<() => Promise<Record<string, number>>> {
    const r = await execIn(podNetns, "nft", ["-f", "-"], {
      input: [
        `table inet ${SYN_COUNTERS} {`,
        "  chain in {",
        "    type filter hook input priority -300; policy accept;",
        ...Object.entries(sources).map(
          ([k, a]) => `    ip saddr ${a} tcp dport 8080 tcp flags syn counter comment "${k}"`,
        ),
        "  }",
        "}",
      ].join("\n"),
    });
    assert.equal(r.code, 0, r.stderr);
    return async () => {
      const l = await execIn(podNetns, "nft", ["-j", "list", "table", "inet", SYN_COUNTERS]);
      const out: Record<string, number> = {};
      for (const item of (JSON.parse(l.stdout) as { nftables: Record<string, unknown>[] }).nftables) {
        const rule = item.rule as
          | { comment?: string; expr?: { counter?: { packets: number } }[] }
          | undefined;
        const n = rule?.expr?.find((e) => e.counter)?.counter?.packets;
        if (rule?.comment && n !== undefined) out[rule.comment] = n;
      }
      return out;
    };
  }
  const dropSynCounters = () => execIn(podNetns, "nft", ["delete", "table", "inet", SYN_COUNTERS]);

  test("accept_local=1: a NodePort connection from outside with the node's own address as source is not taken for the node's own (never masqueraded to the management address)", async () => {
    // The external host forges the node's address as the source of its NodePort connections (it never sees a
    // reply: that goes to the node).
    const sources = { mgmt: MGMT_IP, snat: SNAT_IP, node: NODE_IP };
    const count = await countSyns(sources);
    const forge = "h2_forge";
    // The kernel takes `all` OR the interface's own value.
    const sysctl = (v: 0 | 1) => c.node.exec("sysctl", ["-q", "-w", `net.ipv4.conf.all.accept_local=${v}`]);
    try {
      const r = await execIn(c.ext.path, "nft", ["-f", "-"], {
        input: [
          `table ip ${forge} {`,
          "  chain pre { type filter hook prerouting priority -200; policy accept; ct state new counter; }",
          "  chain post {",
          "    type nat hook postrouting priority srcnat; policy accept;",
          `    ip daddr ${NODE_IP} tcp dport { 30080, 30081 } snat to ${NODE_IP}`,
          "  }",
          "}",
        ].join("\n"),
      });
      assert.equal(r.code, 0, r.stderr);
      await sysctl(1);
      await c.node.appctl("dpctl/flush-conntrack");
      const before = await count();
      // The forged connections cannot complete (the reply goes to the node itself): only their SYNs matter.
      await Promise.all(
        [30080, 30081].map((p) => execIn(c.ext.path, "nc", ["-z", "-w", "2", NODE_IP, String(p)])),
      );
      const got = await count();
      const delta = (k: keyof typeof sources) => (got[k] ?? 0) - (before[k] ?? 0);
      assert.equal(
        delta("mgmt"),
        0,
        `a forged source reached the pod as the node's own: ${JSON.stringify(got)}`,
      );
      assert.ok(delta("snat") > 0, `ETP Cluster: SNATed to the service SNAT address: ${JSON.stringify(got)}`);
      assert.ok(delta("node") > 0, `ETP Local: the client's (forged) address kept: ${JSON.stringify(got)}`);
    } finally {
      await sysctl(0);
      await execIn(c.ext.path, "nft", ["delete", "table", "ip", forge]);
      await dropSynCounters();
    }
  });

  test("a node cannot source another node's join address into OVN: what its management port sends from a join address not its own is dropped", async () => {
    /** Another node's management address (its own-node allow in NetworkPolicy). */
    const OTHER = "100.64.0.9";
    const count = await countSyns({ other: OTHER, snat: SNAT_IP });
    const spoof = "h2_spoof";
    /** The node's connections to the pod leave the management port with `source`, as a node agent told it might. */
    const sourceAs = async (source: string) => {
      await execIn(nodeNetns, "nft", ["delete", "table", "ip", spoof]);
      const r = await execIn(nodeNetns, "nft", ["-f", "-"], {
        input: [
          `table ip ${spoof} {`,
          "  chain post {",
          "    type nat hook postrouting priority srcnat - 10; policy accept;",
          `    ip daddr ${POD_IP} tcp dport 8080 oifname "${MGMT_IFNAME}" snat to ${source}`,
          "  }",
          "}",
        ].join("\n"),
      });
      assert.equal(r.code, 0, r.stderr);
    };
    /** SYNs the pod got from `key` during one connection attempt, on fresh flows. */
    const attempt = async (key: "other" | "snat") => {
      await c.node.appctl("dpctl/flush-conntrack");
      await c.node.appctl("dpctl/del-flows");
      const before = (await count())[key] ?? 0;
      await execIn(nodeNetns, "nc", ["-z", "-w", "2", POD_IP, "8080"]);
      return ((await count())[key] ?? 0) - before;
    };
    try {
      await sourceAs(OTHER);
      // ovn-controller installs the join switch's ACLs in its own time.
      const started = Date.now();
      while ((await attempt("other")) > 0) {
        if (Date.now() - started > 120_000)
          assert.fail(`the pod still gets SYNs from ${OTHER} through ${NODE}'s management port after 120 s`);
        await sleep(500);
      }
      console.log(`another node's join address refused after ${Date.now() - started} ms`);
      // The node's own service SNAT address passes the same way.
      await sourceAs(SNAT_IP);
      assert.ok(
        (await attempt("snat")) > 0,
        "a SYN from the node's own service SNAT address reaches the pod",
      );
    } finally {
      await execIn(nodeNetns, "nft", ["delete", "table", "ip", spoof]);
      await dropSynCounters();
    }
  });

  test("no endpoints: the connection is refused (TCP reset), from the node and from outside", async () => {
    for (const [from, host, p] of [
      [nodeNetns, "10.96.0.13", 80],
      [c.ext.path, NODE_IP, 30083],
    ] as const) {
      const r = await dial(from, host, p);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /Connection refused/, `${host}:${p}`);
    }
  });

  test("session affinity keeps one client on one endpoint; without it connections spread", async () => {
    const sticky = new Set<string | undefined>();
    for (let i = 0; i < 12; i++) sticky.add((await dial(nodeNetns, "10.96.0.14", 80)).who);
    assert.equal(sticky.size, 1, [...sticky].join(","));
    assert.ok(["pod", "ext"].includes([...sticky][0] ?? ""));
    const spread = new Set<string | undefined>();
    // Two endpoints chosen at random: all 40 on one side happens once in 2^39 runs.
    for (let i = 0; i < 40 && spread.size < 2; i++) spread.add((await dial(nodeNetns, "10.96.0.15", 80)).who);
    assert.deepEqual([...spread].sort(), ["ext", "pod"]);
  });

  test("affinity survives the table being replaced: entries are read back and carried over", async () => {
    const first = (await dial(nodeNetns, "10.96.0.14", 80)).who;
    assert.ok(first === "pod" || first === "ext");
    for (let i = 0; i < 4; i++) {
      const affinity = await readAffinity({ netns: nodeNetns });
      assert.ok(
        [...affinity.values()].some((l) => l.some((e) => formatIp(e.ip) === MGMT_IP)),
        "the node's client address is remembered",
      );
      await applyServiceNat(serviceRuleset({ ...SPEC, affinity }), { netns: nodeNetns });
      assert.equal((await dial(nodeNetns, "10.96.0.14", 80)).who, first);
    }
  });

  test("internalTrafficPolicy Local: the node's clusterIP traffic goes only to its own endpoint", async () => {
    const seen = new Set<string | undefined>();
    for (let i = 0; i < 12; i++) seen.add((await dial(nodeNetns, "10.96.0.16", 80)).who);
    assert.deepEqual([...seen], ["pod"]);
  });

  test("loadBalancerSourceRanges: a listed source reaches the LB IP, any other is dropped before DNAT", async () => {
    // The external host is listed for FW_EXT_IP: it gets the pod; the node (192.168.250.1) and the pod are not.
    const ok = await dial(c.ext.path, FW_EXT_IP, 80);
    assert.equal(ok.who, "pod", ok.stderr);
    for (const from of [nodeNetns, podNetns]) {
      const r = await dial(from, FW_EXT_IP, 80);
      assert.equal(r.who, undefined, `${from === podNetns ? "pod" : "node"} got ${r.stdout}`);
      assert.match(r.stderr, /timed out/, "dropped, not refused or unroutable");
    }
    // The pod network is listed for FW_POD_IP: the pod (through the management port) reaches itself; ext not.
    const pod = await dial(podNetns, FW_POD_IP, 80);
    assert.equal(pod.who, "pod", pod.stderr);
    const ext = await dial(c.ext.path, FW_POD_IP, 80);
    assert.equal(ext.who, undefined, ext.stdout);
    assert.match(ext.stderr, /timed out/, "dropped, not refused or unroutable");
    // A range holding the node's own address admits the node's own connections.
    const node = await dial(nodeNetns, FW_NODE_IP, 80);
    assert.equal(node.who, "pod", node.stderr);
  });

  test("UDP: an external datagram to a NodePort reaches the pod; the node's to the clusterIP too", async () => {
    for (const [from, host, p] of [
      [c.ext.path, NODE_IP, 30053],
      [nodeNetns, "10.96.0.17", 53],
    ] as const) {
      const server = execIn(podNetns, "timeout", ["10", "nc", "-u", "-l", "-W", "1", POD_IP, "5353"]);
      for (let i = 0; i < 100; i++) {
        if ((await execIn(podNetns, "ss", ["-uln", "sport = :5353"])).stdout.includes(":5353")) break;
        await sleep(20);
      }
      await execIn(from, "nc", ["-u", "-w", "1", host, String(p)], { input: `hello ${host}\n` });
      assert.equal((await server).stdout, `hello ${host}\n`);
    }
  });

  // Upstream e2e "Conntrack should be able to cleanup conntrack entries when UDP service target port changes
  // for a NodePort service" (and the pod-cycles specs through the host path): one UDP flow keeps its source
  // port; after the endpoint changes, the node agent deletes the kernel's entries of the removed endpoint
  // and the flow's next datagram is DNATed anew, to the new endpoint.
  test("UDP: a flow to a NodePort and the node's to a clusterIP follow a changed target port once the removed endpoint's conntrack entries are deleted", async () => {
    const before = SERVICES;
    const after = SERVICES.map((p) =>
      p.key === "t/dns/udp"
        ? {
            ...p,
            endpoints: [{ ip: ip(POD_IP), port: 5354 }],
            localEndpoints: [{ ip: ip(POD_IP), port: 5354 }],
          }
        : p,
    );
    const listen = async (p: number) => {
      const got = execIn(podNetns, "timeout", ["8", "nc", "-n", "-u", "-l", POD_IP, String(p)]);
      for (let i = 0; i < 100; i++) {
        if ((await execIn(podNetns, "ss", ["-uln", `sport = :${p}`])).stdout.includes(`:${p}`)) break;
        await sleep(20);
      }
      return { got };
    };
    const conntrackIn = (netns: string) => execIn(netns, "conntrack", ["-L", "-p", "udp"]);
    try {
      for (const [from, host, p, sport] of [
        [c.ext.path, NODE_IP, 30053, 40_053],
        [nodeNetns, "10.96.0.17", 53, 40_054],
      ] as const) {
        await applyServiceNat(serviceRuleset({ ...SPEC, ports: before }), { netns: nodeNetns });
        const old = await listen(5353);
        const fresh = await listen(5354);
        const send = (text: string) =>
          execIn(from, "nc", ["-n", "-u", "-w", "1", "-p", String(sport), host, String(p)], { input: text });
        await send("one\n");
        await applyServiceNat(serviceRuleset({ ...SPEC, ports: after }), { netns: nodeNetns });
        const stale = staleUdpFlows(before, after);
        assert.equal(stale.length, 2, "the clusterIP's and the NodePort's flow to the old port");
        // This flow's entry, and any other client's of the old port (the test above leaves one for 30 s).
        const live = udpServiceFlows(after);
        const deleted = await deleteUdpFlows(stale, live, { netns: nodeNetns });
        assert.ok(deleted >= 1, "this flow's entry was deleted");
        const left = (await conntrackIn(nodeNetns)).stdout;
        assert.ok(!left.includes(`sport=${sport} `), `no entry of this flow is left: ${left}`);
        assert.equal(await deleteUdpFlows(stale, live, { netns: nodeNetns }), 0, "a repeat deletes nothing");
        for (let i = 0; i < 3; i++) await send(`two-${i}\n`);
        const [o, n] = await Promise.all([old.got, fresh.got]);
        assert.equal(o.stdout, "one\n", `${host}:${p}: the old port got the first datagram only`);
        assert.match(n.stdout, /^two-0\n/, `${host}:${p}: the new port got the datagrams after the change`);
      }
    } finally {
      await applyServiceNat(serviceRuleset(SPEC), { netns: nodeNetns });
    }
  });

  test("nft accepts a dual-stack ruleset with every feature and carried affinity entries", async () => {
    const v6 = { ip: ip("fd00:10:244::5"), port: 8080 };
    const ports: NatServicePort[] = SERVICES.map((p, i) => ({
      ...p,
      clusterIPs: [...p.clusterIPs, ip(`fd00:96::${i + 10}`)],
      endpoints: [...p.endpoints, v6],
      localEndpoints: [...p.localEndpoints, v6],
      affinityTimeoutSeconds: 30,
    }));
    const dual = { ...SPEC, nodeIps: [ip(NODE_IP), ip("fd00:250::1")], ports };
    const set = /set (\w+_a[0-9a-f]{12}) \{\n {4}type ipv6_addr/.exec(serviceRuleset(dual))?.[1];
    assert.ok(set);
    const script = serviceRuleset({
      ...dual,
      affinity: new Map([[set, [{ ip: ip("fd00:250::2"), expiresSeconds: 20 }]]]),
    });
    const r = await execIn(c.ext.path, "unshare", ["--net", "nft", "-c", "-f", "-"], { input: script });
    assert.equal(r.code, 0, r.stderr);
    assert.match(script, /dnat ip6 to \[fd00:10:244::5\]:8080/);
  });

  test("replacing the ruleset is one transaction and leaves exactly one table of ours", async () => {
    await applyServiceNat(serviceRuleset(SPEC), { netns: nodeNetns });
    const tables = await c.node.exec("nft", ["list", "tables"]);
    assert.equal(tables.split("\n").filter((l) => l.includes(SERVICE_NFT_TABLE)).length, 1, tables);
    assert.equal((await dial(nodeNetns, "10.96.0.10", 80)).who, "pod");
    assert.equal(await serviceTablePresent({ netns: nodeNetns }), true);
    await c.node.exec("nft", ["delete", "table", "inet", SERVICE_NFT_TABLE]);
    assert.equal(await serviceTablePresent({ netns: nodeNetns }), false);
    await applyServiceNat(serviceRuleset(SPEC), { netns: nodeNetns });
  });

  test("NetworkPolicy: under deny-all ingress a NodePort from outside is dropped while the node still reaches the pod; an ipBlock of the node's address does not admit it; allow-all does", async () => {
    const lsp = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === MGMT.lsp);
    assert.ok(lsp);
    // What the controller's policy index takes as the node's own: the management address alone.
    const own = ownNodeIps(lsp);
    assert.deepEqual(own.map(formatIp), [MGMT_IP]);
    const podLsp = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === podPortName("t", "web"));
    assert.ok(podLsp, "the pod's port");
    const policy = (name: string, spec: Record<string, unknown>) =>
      policyRows(parseNetworkPolicy({ metadata: { namespace: "t", name }, spec }), {
        families: [4],
        ingressNamed: () => new Map(),
        egressNamed: () => new Map(),
        nodeMgmtIps: (b) => (cidrContains(b.cidr, ip(NODE_IP)) ? own : []),
      });
    const deny = policy("deny", { podSelector: {}, policyTypes: ["Ingress"] });
    const block = policy("node-block", {
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: `${NODE_IP}/32` } }] }],
    });
    const allow = policy("allow", { podSelector: {}, ingress: [{}] });
    const groups = [deny, block, allow].map((p) => p.groupName);
    const write = async (rows: DesiredRow[]) => {
      const txn = c.nb.transaction();
      plan(c.nb.cache as never, c.nb.schema, txn as never, rows);
      await txn.commit();
      await c.nb.echo();
    };
    const join = async (names: readonly string[]) => {
      await c.nb.transact((tx) => {
        for (const name of names)
          tx.mutate("Port_Group", [["name", "==", name]], [["ports", "insert", [podLsp._uuid]]]);
      });
    };
    const drop = async (names: readonly string[]) => {
      await c.nb.transact((tx) => {
        for (const name of names) tx.delete("Port_Group", [["name", "==", name]]);
      });
    };
    // Each probe round starts from new connections and flows (stale megaflows of the userspace datapath).
    const fresh = async () => {
      await c.node.appctl("dpctl/flush-conntrack");
      await c.node.appctl("dpctl/del-flows");
    };
    /** Probes until the NodePort gives `want` (ovn-controller installs the ACLs in its own time). */
    const nodePortUntil = async (want: boolean) => {
      const started = Date.now();
      for (;;) {
        await fresh();
        const r = await dial(c.ext.path, NODE_IP, 30080);
        if ((r.who === "pod") === want) return r;
        if (Date.now() - started > 120_000)
          assert.fail(
            `NodePort ${want ? "still refused" : "still open"} after 120 s: ${r.stdout} ${r.stderr}`,
          );
        await sleep(500);
      }
    };
    const isolationGroups = [isolationGroup("ingress"), nodeGroupName(NODE)];
    cleanupPolicy = () => drop([...groups, ...isolationGroups]);
    await write([...isolationRows("ingress"), ...isolationAclNodeRows(NODE, own), ...deny.rows]);
    await join([...isolationGroups, deny.groupName]);

    const t0 = Date.now();
    await nodePortUntil(false);
    console.log(`deny-all in force on the NodePort after ${Date.now() - t0} ms`);
    // The kubelet path: the node to the pod directly and through a clusterIP (masqueraded to the management IP).
    await fresh();
    const direct = await dial(nodeNetns, POD_IP, 8080);
    assert.equal(direct.who, "pod", direct.stderr);
    assert.equal(direct.peer, MGMT_IP);
    const viaService = await dial(nodeNetns, "10.96.0.10", 80);
    assert.equal(viaService.who, "pod", viaService.stderr);
    assert.equal(viaService.peer, MGMT_IP);
    // A pod reaching the NodePort is not the node either.
    assert.notEqual((await dial(podNetns, NODE_IP, 30080)).who, "pod");

    // An ipBlock holding the node's address admits the node's own sources, not what entered through it.
    await write(block.rows);
    await join([block.groupName]);
    const nodeOwn = await c.nb.echo().then(async () => {
      // The block's ACL is in NB with the management address only.
      const acls = [...c.nb.cache.table("ACL").values()].filter((a) => a.match.includes(`${NODE_IP}/32`));
      assert.equal(acls.length, 1);
      assert.match(acls[0]!.match, new RegExp(MGMT_IP.replaceAll(".", "\\.")));
      assert.doesNotMatch(acls[0]!.match, new RegExp(SNAT_IP.replaceAll(".", "\\.")));
      return acls[0]!.match;
    });
    await fresh();
    await sleep(3000);
    const viaBlock = await dial(c.ext.path, NODE_IP, 30080);
    assert.notEqual(viaBlock.who, "pod", `the ipBlock ${nodeOwn} admitted the NodePort`);

    // An allow-all ingress policy lets the NodePort through again.
    await write(allow.rows);
    await join([allow.groupName]);
    const open = await nodePortUntil(true);
    assert.equal(open.peer, SNAT_IP);
  });
});
