// Hostile pod annotations and CNI inputs against the agent's real request path: the CNI skeleton (dispatch),
// the agent's handler, its pod watch on a real kube-apiserver, and PodAttacher on a real OVS in a netns the
// rig creates. Whatever the input, ADD answers with a clear error (109 for the annotation, 4 for CNI_*) and
// nothing runs: no netns appears, no link is created in the node or the pod, no file a `sh -c` payload would
// write exists, no OVS port is added.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { AgentCniHandler } from "../../../src/agent/cni-handler.ts";
import { NodePods } from "../../../src/agent/pod-networks.ts";
import { dispatch } from "../../../src/cni/dispatch.ts";
import { CniErrorCode } from "../../../src/cni/error.ts";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { listPodPorts } from "../../../src/node/ovs-port.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { runTool } from "../../../src/node/tool.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { POD_NETWORKS_ANNOTATION } from "../../../src/ovn/pod-port.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { useKubeApiserver } from "../../rig/kube-apiserver.ts";
import { type NetnsHandle, type OvsNode, RIG_NETNS_PREFIX, useOvsNode } from "../../rig/ovs-node.ts";

const NODE = "node1";
/** The netns the exploit's `netns add` would create. */
const PWN_NETNS = "zovnpwn";
const CONFIG = JSON.stringify({ cniVersion: "1.1.0", name: "zstack-ovn", type: "zstack-ovn-cni" });
const GOOD = {
  ip_addresses: ["10.244.0.5/16"],
  mac_address: "0a:58:0a:f4:00:05",
  gateway_ips: ["10.244.0.1"],
  routes: [] as unknown[],
  logical_switch: "subnet-default",
};

const cleanups: (() => unknown)[] = [];
let node: OvsNode;
let pod: NetnsHandle;
let api: ApiClient;
let ovs: OvsdbClient<VswitchTables>;
let handler: AgentCniHandler;
/** Where a payload that ran would leave files. */
let marks: string;
let seq = 0;

async function linkNames(netns: string): Promise<string[]> {
  const r = await runTool("ip", ["-o", "link", "show"], { netns });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => (l.split(": ")[1] ?? "").split("@")[0] ?? "")
    .sort();
}

interface Snapshot {
  netns: string[];
  nodeLinks: string[];
  podLinks: string[];
  marks: string[];
  ovsPorts: number;
}

async function snapshot(): Promise<Snapshot> {
  return {
    // Other engineers' rigs come and go under zn-: only ours and anything else count.
    netns: readdirSync("/run/netns")
      .filter((n) => !n.startsWith(RIG_NETNS_PREFIX) || n.startsWith(node.netns.name))
      .sort(),
    nodeLinks: await linkNames(node.netns.path),
    podLinks: await linkNames(pod.path),
    marks: readdirSync(marks),
    ovsPorts: listPodPorts(ovs).length,
  };
}

/** A pod on this node with the given annotation value (a string, as Kubernetes requires). */
async function podWith(annotation: string): Promise<string> {
  const name = `hostile-${seq++}`;
  await api.request("/api/v1/namespaces/default/pods", {
    method: "POST",
    body: {
      metadata: { name, annotations: { [POD_NETWORKS_ANNOTATION]: annotation } },
      spec: { nodeName: NODE, containers: [{ name: "c", image: "x" }] },
    },
  });
  return name;
}

async function add(
  podName: string,
  env: Record<string, string> = {},
): Promise<{ code: number; msg: string }> {
  const reply = await dispatch(
    {
      env: {
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: `c0ffee${(seq * 7919).toString(16).padStart(10, "0")}`,
        CNI_NETNS: pod.path,
        CNI_IFNAME: "eth0",
        CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${podName}`,
        CNI_PATH: "/opt/cni/bin",
        ...env,
      },
      stdin: CONFIG,
    },
    handler,
    new AbortController().signal,
  );
  assert.equal(reply.exitCode, 1, `ADD must fail, got ${reply.stdout}`);
  const out = JSON.parse(reply.stdout) as { code: number; msg: string };
  return out;
}

/** Runs ADD for a pod with this annotation and checks the refusal and that nothing changed. */
async function refusesAnnotation(annotation: string, before: Snapshot): Promise<void> {
  const out = await add(await podWith(annotation));
  assert.equal(existsSync(`/run/netns/${PWN_NETNS}`), false, "the exploit's netns must never appear");
  assert.deepEqual(await snapshot(), before, "nothing may be created");
  assert.equal(out.code, CniErrorCode.InvalidPodNetwork, out.msg);
  assert.match(
    out.msg,
    /invalid k8s\.ovn\.org\/pod-networks annotation.*(default|k8s\.ovn\.org\/pod-networks)/s,
  );
}

describe("hostile pod annotations and CNI inputs", () => {
  before(async () => {
    const t = { after: (fn: () => unknown) => cleanups.push(fn) };
    // Registered first, so it runs last: whatever an old agent let through is removed.
    cleanups.push(async () => {
      if (existsSync(`/run/netns/${PWN_NETNS}`)) await runTool("ip", ["netns", "del", PWN_NETNS]);
      rmSync(marks, { recursive: true, force: true });
    });
    marks = mkdtempSync(join(tmpdir(), "zovn-hostile-"));
    node = await useOvsNode(t);
    pod = await node.addNetns("hostile");
    const kube = await useKubeApiserver(t);
    api = new ApiClient(kube.kubeConfig);
    cleanups.push(() => api.close());
    // No controller-manager here: pods are admitted only once their namespace has its service account.
    await api.request("/api/v1/namespaces/default/serviceaccounts", {
      method: "POST",
      body: { metadata: { name: "default" } },
    });
    ovs = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    cleanups.push(() => ovs.close());
    await ovs.connect();
    await runTool("ovs-vsctl", [
      `--db=${node.ovsRemote}`,
      "--may-exist",
      "add-br",
      "br-int",
      "--",
      "set",
      "Bridge",
      "br-int",
      "datapath_type=netdev",
    ]);
    const pods = new NodePods(api, NODE, silentLogger);
    pods.start();
    cleanups.push(() => pods.stop());
    await pods.informer.waitForSync();
    const attacher = new PodAttacher({
      client: ovs,
      mtu: 1400,
      userspaceDatapath: true,
      hostNetns: node.netns.path,
      ovnInstalledBudgetMs: 2000,
    });
    handler = new AgentCniHandler({
      attacher,
      pods,
      log: silentLogger,
      notReady: () => undefined,
      annotationBudgetMs: 5000,
    });
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("the exploit (a route dest with a newline and `netns add`) is refused and no netns appears", async () => {
    const before = await snapshot();
    await refusesAnnotation(
      JSON.stringify({
        default: {
          ...GOOD,
          routes: [{ dest: `10.0.0.0/8 via 10.244.0.1\nnetns add ${PWN_NETNS}`, nextHop: "10.244.0.1" }],
        },
      }),
      before,
    );
  });

  test("a `sh -c` payload in an address, gateway or MAC never runs", async () => {
    const before = await snapshot();
    const payload = `\nnetns exec ${pod.name} sh -c 'touch ${marks}/ran'`;
    for (const d of [
      { ip_addresses: [`10.244.0.5/16${payload}`] },
      { gateway_ips: [`10.244.0.1${payload}`] },
      { mac_address: `0a:58:0a:f4:00:05${payload}` },
      { routes: [{ dest: "10.0.0.0/8", nextHop: `10.244.0.1${payload}` }] },
    ])
      await refusesAnnotation(JSON.stringify({ default: { ...GOOD, ...d } }), before);
    assert.deepEqual(readdirSync(marks), []);
  });

  test("fuzz: any hostile annotation is refused with 109 naming the field, and nothing is executed or created", async () => {
    const before = await snapshot();
    const fragments = [
      `\nnetns add ${PWN_NETNS}`,
      `\nnetns exec ${pod.name} sh -c 'touch ${marks}/a'`,
      `; touch ${marks}/b`,
      `$(touch ${marks}/c)`,
      `\`touch ${marks}/d\``,
      " dev lo",
      " table 100",
      " via 10.244.0.1",
      "\n",
      "#",
      "x".repeat(9000),
    ];
    const tainted = (valid: string) => fc.constantFrom(...fragments).map((f) => valid + f);
    const junk = fc.oneof(
      fc.integer(),
      fc.constant(null),
      fc.boolean(),
      fc.array(fc.constantFrom(...fragments), { maxLength: 2 }),
      fc.dictionary(fc.constantFrom("dest", "nextHop", "x"), fc.constantFrom(...fragments)),
      fc.constant({ dest: { dest: "10.0.0.0/8" }, nextHop: ["10.244.0.1"] }),
    );
    const field = fc.oneof(
      fc
        .oneof(tainted("10.0.0.0/8"), junk, fc.constantFrom("::ffff:10.0.0.0/104", "fd00::/64", "10.0.0.1/8"))
        .map((dest) => ({ routes: [{ dest, nextHop: "10.244.0.1" }] })),
      fc
        .oneof(tainted("10.244.0.1"), junk, fc.constantFrom("fd00::1", "::ffff:10.244.0.1", "224.0.0.1"))
        .map((nextHop) => ({ routes: [{ dest: "10.0.0.0/8", nextHop }] })),
      fc
        .oneof(
          tainted("10.244.0.5/16"),
          junk,
          fc.constantFrom("::ffff:10.244.0.5/112", "10.244.0.5", "0.0.0.0/0"),
        )
        .map((ip) => ({ ip_addresses: [ip] })),
      fc
        .oneof(
          tainted("10.244.0.1"),
          junk,
          fc.constantFrom("fd00::1", "::ffff:10.244.0.1", "255.255.255.255"),
        )
        .map((gw) => ({ gateway_ips: [gw] })),
      fc
        .oneof(tainted("0a:58:0a:f4:00:05"), junk, fc.constantFrom("01:00:5e:00:00:01", "00:00:00:00:00:00"))
        .map((mac_address) => ({ mac_address })),
      fc.oneof(tainted("subnet-default"), junk).map((logical_switch) => ({ logical_switch })),
      // null and [] are valid routes (no routes), so they are no junk here.
      junk.filter((v) => v !== null && !(Array.isArray(v) && v.length === 0)).map((routes) => ({ routes })),
      junk.map((ip_addresses) => ({ ip_addresses })),
    );
    await fc.assert(
      fc.asyncProperty(field, async (d) => {
        await refusesAnnotation(JSON.stringify({ default: { ...GOOD, ...d } }), before);
      }),
      { numRuns: 60 },
    );
    assert.deepEqual(readdirSync(marks), []);
  });

  test("ADD into the node's own netns is refused with 4 naming CNI_NETNS, and the node's links are untouched", async () => {
    const name = await podWith(JSON.stringify({ default: GOOD }));
    const before = await snapshot();
    const nodeAddrs = await runTool("ip", ["-o", "addr", "show"], { netns: node.netns.path });
    const out = await add(name, { CNI_NETNS: node.netns.path });
    assert.deepEqual(await snapshot(), before);
    assert.equal(
      (await runTool("ip", ["-o", "addr", "show"], { netns: node.netns.path })).stdout,
      nodeAddrs.stdout,
    );
    assert.equal(out.code, CniErrorCode.InvalidEnvironment, out.msg);
    assert.match(out.msg, /CNI_NETNS=.*node's own network namespace/);
  });

  test("fuzz: hostile CNI_IFNAME, CNI_NETNS and CNI_CONTAINERID are refused with 4 naming the variable", async () => {
    const name = await podWith(JSON.stringify({ default: GOOD }));
    const before = await snapshot();
    const hostile = fc.oneof(
      fc
        .constantFrom(
          `eth0\nnetns add ${PWN_NETNS}`,
          "eth 0",
          "eth0#",
          "x".repeat(16),
          "..",
          "a/b",
          "e\u0001",
          "e'0",
        )
        .map((v) => ["CNI_IFNAME", v] as const),
      fc
        .constantFrom(
          `${pod.path}\nnetns add ${PWN_NETNS}`,
          "run/netns/x",
          `${pod.path} x`,
          "/run/netns/../../etc",
          `$(touch ${marks}/e)`,
          // The node's own netns (the rig's stand-in for it): its eth0 would get the pod's address and route.
          node.netns.path,
        )
        .map((v) => ["CNI_NETNS", v] as const),
      fc
        .constantFrom(`c1\nnetns add ${PWN_NETNS}`, "-c1", "c 1", "$(id)", "`id`")
        .map((v) => ["CNI_CONTAINERID", v] as const),
    );
    await fc.assert(
      fc.asyncProperty(hostile, async ([key, value]) => {
        const out = await add(name, { [key]: value });
        assert.equal(existsSync(`/run/netns/${PWN_NETNS}`), false);
        assert.deepEqual(await snapshot(), before);
        assert.equal(out.code, CniErrorCode.InvalidEnvironment, out.msg);
        assert.match(out.msg, new RegExp(key));
      }),
      { numRuns: 30 },
    );
  });
});
