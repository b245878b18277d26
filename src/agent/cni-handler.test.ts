// The node agent's CNI handler maps each failure to its documented CNI code (docs/cni.md). Pure logic: the
// attacher and the pod watch are stand-ins here; the real ones are exercised by the node and e2e suites.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CniError, CniErrorCode } from "../cni/error.ts";
import type { AddRequest, DelRequest } from "../cni/handler.ts";
import { type Cidr, parseCidr } from "../ipam/cidr.ts";
import type { ApiClient } from "../k8s/api-client.ts";
import { StepError, StepTimeoutError } from "../node/errors.ts";
import type { PodAttacher } from "../node/pod-attachment.ts";
import { silentLogger } from "../observability/log.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import { AgentCniHandler } from "./cni-handler.ts";
import { type NodePod, NodePods, podNetworkOf, TimedOutError } from "./pod-networks.ts";

const ANNOTATION = {
  ip_addresses: ["10.244.0.5/16"],
  mac_address: "0a:58:0a:f4:00:05",
  gateway_ips: ["10.244.0.1"],
  routes: [],
  logical_switch: "subnet-default",
};

const podWith = (annotation: unknown): NodePod => ({
  metadata: {
    name: "p",
    namespace: "ns",
    uid: "u1",
    annotations: { [POD_NETWORKS_ANNOTATION]: JSON.stringify({ default: annotation }) },
  },
});

const network = podNetworkOf(podWith(ANNOTATION));

// Stand-ins for the pod's netns and the node's (the attacher's host netns): files of their own.
const scratch = mkdtempSync(join(tmpdir(), "zovn-handler-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const POD_NETNS = join(scratch, "pod");
const HOST_NETNS = join(scratch, "host");
writeFileSync(POD_NETNS, "");
writeFileSync(HOST_NETNS, "");

function handler(o: {
  add?: () => Promise<unknown>;
  del?: () => Promise<unknown>;
  waitFor?: () => Promise<unknown>;
  fetch?: () => Promise<unknown>;
  notReady?: string;
  routeDestinations?: readonly Cidr[];
}): AgentCniHandler {
  const attacher = {
    add: o.add ?? (async () => ({ result: { interfaces: [], ips: [], routes: [] }, timings: {} })),
    del: o.del ?? (async () => ({ portsRemoved: [], vethRemoved: false })),
    hostNetnsPath: HOST_NETNS,
  } as unknown as PodAttacher;
  const pods = {
    waitFor: o.waitFor ?? (async () => network),
    fetch: o.fetch ?? (async () => ({ uid: "u1", info: network })),
    current: () => undefined,
  } as unknown as NodePods;
  return new AgentCniHandler({
    attacher,
    pods,
    log: silentLogger,
    notReady: () => o.notReady,
    ...(o.routeDestinations ? { routeDestinations: o.routeDestinations } : {}),
  });
}

const add = (): AddRequest =>
  ({
    command: "ADD",
    cniVersion: "1.1.0",
    config: {},
    cniPath: [],
    signal: new AbortController().signal,
    containerId: "c1",
    ifname: "eth0",
    args: {},
    netns: POD_NETNS,
    k8s: { podNamespace: "ns", podName: "p", podUid: "u1" },
  }) as unknown as AddRequest;

const del = (): DelRequest =>
  ({ command: "DEL", containerId: "c1", ifname: "eth0", netns: "", k8s: {} }) as unknown as DelRequest;

async function codeOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof CniError, `a CniError, got ${String(e)}`);
    return e.code;
  }
  assert.fail("expected a CNI error");
}

test("ADD and STATUS before the agent is ready: 11 and 50", async () => {
  const h = handler({ notReady: "the management port is not set up yet" });
  assert.equal(await codeOf(h.add(add())), CniErrorCode.TryAgainLater);
  assert.equal(await codeOf(h.status({} as never)), CniErrorCode.PluginNotAvailable);
});

test("ADD with a missing netns is 102, and an annotation that never comes is 100", async () => {
  assert.equal(
    await codeOf(handler({}).add({ ...add(), netns: "/nonexistent/netns" })),
    CniErrorCode.NetnsMissing,
  );
  const waiting = handler({
    waitFor: async () => {
      throw new TimedOutError("no annotation");
    },
  });
  assert.equal(await codeOf(waiting.add(add())), CniErrorCode.PodAnnotationTimeout);
});

test("ADD of a pod with an invalid annotation is 109, names the field, and never reaches the attacher", async () => {
  let attached = 0;
  const h = handler({
    add: async () => {
      attached++;
      return { result: { interfaces: [], ips: [], routes: [] }, timings: {} };
    },
    waitFor: async () =>
      podNetworkOf(
        podWith({ ...ANNOTATION, routes: [{ dest: "10.0.0.0/8\nnetns add x", nextHop: "10.244.0.1" }] }),
      ),
  });
  await assert.rejects(
    h.add(add()),
    (e: unknown) =>
      e instanceof CniError &&
      e.code === CniErrorCode.InvalidPodNetwork &&
      /pod ns\/p has an invalid k8s.ovn.org\/pod-networks annotation.*default\.routes\[0\]\.dest/.test(
        e.message,
      ),
  );
  assert.equal(attached, 0);
});

test("ADD of a pod whose annotation routes outside the cluster, service and join networks is 109 and configures nothing", async () => {
  const ROUTED = [parseCidr("10.244.0.0/16"), parseCidr("10.96.0.0/16"), parseCidr("100.64.0.0/16")];
  const own = { ...ANNOTATION, ip_addresses: ["10.60.0.5/24"], gateway_ips: ["10.60.0.1"] };
  let attached = 0;
  const make = (routes: { dest: string; nextHop: string }[]) =>
    handler({
      add: async () => {
        attached++;
        return { result: { interfaces: [], ips: [], routes: [] }, timings: {} };
      },
      waitFor: async () => podNetworkOf(podWith({ ...own, routes })),
      fetch: async () => ({ uid: "u1", info: podNetworkOf(podWith({ ...own, routes })) }),
      routeDestinations: ROUTED,
    });
  // What the controller writes for a pod on a ZStack switch: accepted.
  await make([
    { dest: "10.244.0.0/16", nextHop: "10.60.0.2" },
    { dest: "10.96.0.0/16", nextHop: "10.60.0.2" },
    { dest: "100.64.0.0/16", nextHop: "10.60.0.2" },
  ]).add(add());
  assert.equal(attached, 1);
  // Half the Internet (the parser refuses only a default route), or a network wider than the cluster's: refused.
  for (const dest of ["128.0.0.0/1", "10.244.0.0/15", "192.168.200.0/24"]) {
    await assert.rejects(
      make([{ dest, nextHop: "10.60.0.2" }]).add(add()),
      (e: unknown) =>
        e instanceof CniError &&
        e.code === CniErrorCode.InvalidPodNetwork &&
        e.message.includes(
          `default.routes[0].dest ${dest} is outside the cluster, service and join networks`,
        ),
    );
  }
  assert.equal(attached, 1, "a refused annotation never reaches the attacher");
});

test("ADD with an interface name or netns path that cannot be an ip or nsenter argument is 4", async () => {
  for (const bad of [
    { ifname: "eth0\nnetns" },
    { ifname: "a\u0001" },
    { netns: "/run/netns/x y" },
    { netns: "run/x" },
  ])
    assert.equal(
      await codeOf(handler({}).add({ ...add(), ...bad })),
      CniErrorCode.InvalidEnvironment,
      JSON.stringify(bad),
    );
});

test("ADD into the node's own netns (under any name) is 4 naming CNI_NETNS, and never reaches the attacher", async () => {
  let attached = 0;
  const h = handler({
    add: async () => {
      attached++;
      return { result: { interfaces: [], ips: [], routes: [] }, timings: {} };
    },
  });
  for (const netns of ["/proc/self/ns/net", `/proc/${process.pid}/ns/net`, HOST_NETNS])
    await assert.rejects(
      h.add({ ...add(), netns }),
      (e: unknown) =>
        e instanceof CniError &&
        e.code === CniErrorCode.InvalidEnvironment &&
        /CNI_NETNS=.* is the node's own network namespace/.test(e.message),
      netns,
    );
  // Init's netns: the same refusal where this process may look at pid 1 (as the agent, with all capabilities,
  // can); where it may not, neither could ip, and the path reads as missing.
  const initVisible = existsSync("/proc/1/ns/net");
  assert.equal(
    await codeOf(h.add({ ...add(), netns: "/proc/1/ns/net" })),
    initVisible ? CniErrorCode.InvalidEnvironment : CniErrorCode.NetnsMissing,
  );
  assert.equal(attached, 0);
});

test("ADD answers with the network it was wired with when the API server still holds that annotation", async () => {
  let undone = 0;
  const h = handler({
    add: async () => ({
      result: { interfaces: [], ips: [{ address: "10.244.0.5/16", interface: 1 }], routes: [] },
      timings: {},
    }),
    del: async () => {
      undone++;
      return { portsRemoved: [], vethRemoved: true };
    },
    // Same network, other spelling: canonical forms are compared.
    fetch: async () => ({
      uid: "u1",
      info: podNetworkOf(podWith({ ...ANNOTATION, mac_address: "0A:58:0A:F4:00:05" })),
    }),
  });
  const r = await h.add(add());
  assert.deepEqual(r.ips, [{ address: "10.244.0.5/16", interface: 1 }]);
  assert.equal(undone, 0);
});

test("ADD with a forged annotation replaced (or the pod gone) during the attachment is undone and answers 11", async () => {
  const forged = podNetworkOf(podWith({ ...ANNOTATION, ip_addresses: ["10.96.0.1/16"] }));
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    ["replaced", async () => ({ uid: "u1", info: network }), /annotation changed/],
    ["removed", async () => ({ uid: "u1", info: undefined }), /annotation was removed/],
    ["gone", async () => undefined, /deleted or replaced/],
    ["recreated", async () => ({ uid: "u2", info: forged }), /deleted or replaced/],
    [
      "unreadable",
      async () => {
        throw new Error("connection refused");
      },
      /could not be read again/,
    ],
  ];
  for (const [what, fetch, why] of cases) {
    const undone: string[] = [];
    const h = handler({
      waitFor: async () => forged,
      fetch,
      del: async () => {
        undone.push("c1");
        return { portsRemoved: [], vethRemoved: true };
      },
    });
    await assert.rejects(
      h.add(add()),
      (e: unknown) =>
        e instanceof CniError &&
        e.code === CniErrorCode.TryAgainLater &&
        why.test(e.message) &&
        /attachment was undone/.test(e.message),
      what,
    );
    assert.deepEqual(undone, ["c1"], what);
  }
});

test("ADD failures carry the code of their step", async () => {
  const failing = (e: Error) =>
    handler({
      add: async () => {
        throw e;
      },
    }).add(add());
  assert.equal(await codeOf(failing(new StepError("ovs-port", "x"))), CniErrorCode.OvsPortFailed);
  assert.equal(await codeOf(failing(new StepError("veth", "x"))), CniErrorCode.InterfaceSetupFailed);
  assert.equal(
    await codeOf(failing(new StepTimeoutError("ovn-installed", 1000))),
    CniErrorCode.OvnInstalledTimeout,
  );
  assert.equal(await codeOf(failing(new Error("surprise"))), CniErrorCode.Internal);
});

test("an ADD abandoned while waiting for its annotation answers with the signal's reason", async () => {
  const ac = new AbortController();
  const reason = new CniError(CniErrorCode.TryAgainLater, "zstack-ovnkube-node is stopping");
  const h = handler({
    waitFor: () =>
      new Promise((_, reject) => ac.signal.addEventListener("abort", () => reject(ac.signal.reason))),
  });
  const pending = codeOf(h.add({ ...add(), signal: ac.signal }));
  ac.abort(reason);
  assert.equal(await pending, CniErrorCode.TryAgainLater);
});

test("DEL failures carry the code of their step", async () => {
  const failing = (e: Error) =>
    handler({
      del: async () => {
        throw e;
      },
    }).del(del());
  assert.equal(await codeOf(failing(new StepError("ovs-port", "x"))), CniErrorCode.OvsPortFailed);
  assert.equal(await codeOf(failing(new StepError("veth", "x"))), CniErrorCode.InterfaceSetupFailed);
});

test("NodePods.waitFor, abandoned, rejects with the signal's reason, and times out with TimedOutError", async () => {
  // Never started: no request reaches any API server; the pod is simply not (yet) known.
  const pods = new NodePods({} as ApiClient, "node1", silentLogger);
  const ac = new AbortController();
  const reason = new CniError(CniErrorCode.TryAgainLater, "zstack-ovnkube-node is stopping");
  const waiting = pods.waitFor("ns", "p", undefined, 60_000, ac.signal);
  ac.abort(reason);
  await assert.rejects(waiting, (e) => e === reason);
  // Abandoned before the wait began: rejected at once, not after the 60 s timeout.
  await assert.rejects(pods.waitFor("ns", "p", undefined, 60_000, ac.signal), (e) => e === reason);
  await assert.rejects(pods.waitFor("ns", "p", undefined, 10), TimedOutError);
});
