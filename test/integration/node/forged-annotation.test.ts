// A pod created with a k8s.ovn.org/pod-networks annotation of its own (no admission policy to stop it) must
// not get that network: the agent's real request path (CNI skeleton, handler, pod watch and re-read on a real
// kube-apiserver, PodAttacher on real OVS and OVN) wires the pod, and by the time OVN has bound the port the
// controller has replaced the annotation, so the attachment is undone with 11 and the retried ADD gets the
// controller's address. The controller's two writes (its port in NB, its annotation) are made here in the
// order the controller makes them.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { AgentCniHandler } from "../../../src/agent/cni-handler.ts";
import { NodePods } from "../../../src/agent/pod-networks.ts";
import { dispatch } from "../../../src/cni/dispatch.ts";
import { CniErrorCode } from "../../../src/cni/error.ts";
import { parseIp } from "../../../src/ipam/address.ts";
import { macFromIPv4 } from "../../../src/ipam/mac.ts";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { findPodPort } from "../../../src/node/ovs-port.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { hostVethName, listHostVeths } from "../../../src/node/veth.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  formatInterfaceAddress,
  POD_NETWORKS_ANNOTATION,
  podNetworksAnnotation,
} from "../../../src/ovn/pod-port.ts";
import { useKubeApiserver } from "../../rig/kube-apiserver.ts";
import type { NetnsHandle } from "../../rig/ovs-node.ts";
import {
  execIn,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  SUBNET,
  startOneNodeCluster,
} from "./one-node-cluster.ts";

const CONFIG = JSON.stringify({ cniVersion: "1.1.0", name: "zstack-ovn", type: "zstack-ovn-cni" });
/** The address the forger wants published as the pod's IP (say, another pod's or a service backend's). */
const VICTIM = "10.244.0.99";
/** The address the controller assigns. */
const ASSIGNED = "10.244.0.50";
const CONTAINER = "f0e9ed0000000000000000000000000000000000000000000000000000000001";

const annotationFor = (ip: string) =>
  podNetworksAnnotation({
    subnet: SUBNET.name,
    logicalSwitch: `subnet-${SUBNET.name}`,
    mac: macFromIPv4(parseIp(ip)),
    ipsWithPrefix: [`${ip}/16`],
    gateways: SUBNET.gateways,
  });

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let api: ApiClient;
let pods: NodePods;
let handler: AgentCniHandler;
let podNetns: NetnsHandle;

async function until(
  what: string,
  cond: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function cni(command: "ADD" | "DEL") {
  return dispatch(
    {
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: CONTAINER,
        CNI_NETNS: podNetns.path,
        CNI_IFNAME: "eth0",
        CNI_ARGS: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=forged",
        CNI_PATH: "/opt/cni/bin",
      },
      stdin: CONFIG,
    },
    handler,
    new AbortController().signal,
  );
}

describe("a pod created with a forged pod-networks annotation", () => {
  before(async () => {
    const t = { after: (fn: () => unknown) => cleanups.push(fn) };
    c = await startOneNodeCluster(t);
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
    const kube = await useKubeApiserver(t);
    api = new ApiClient(kube.kubeConfig);
    cleanups.push(() => api.close());
    await api.request("/api/v1/namespaces/default/serviceaccounts", {
      method: "POST",
      body: { metadata: { name: "default" } },
    });
    pods = new NodePods(api, NODE, silentLogger);
    pods.start();
    cleanups.push(() => pods.stop());
    await pods.informer.waitForSync();
    const attacher = new PodAttacher({
      client: c.ovs,
      mtu: 1400,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
      ovnInstalledBudgetMs: 30_000,
    });
    handler = new AgentCniHandler({ attacher, pods, log: silentLogger, notReady: () => undefined });
    podNetns = await c.node.addNetns("forged");
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("is attached, found replaced once OVN binds the port, undone with 11, and the retry gets the controller's address", async () => {
    const created = await api.request<{ metadata: { uid: string } }>("/api/v1/namespaces/default/pods", {
      method: "POST",
      body: {
        metadata: { name: "forged", annotations: { [POD_NETWORKS_ANNOTATION]: annotationFor(VICTIM) } },
        spec: { nodeName: NODE, containers: [{ name: "c", image: "x" }] },
      },
    });
    await until("the watch to see the pod", () => !!pods.current("default", "forged"));
    const first = cni("ADD");
    // The agent has wired the pod with the forged network and waits for OVN; now the controller acts.
    await until("the pod's OVS port", () => findPodPort(c.ovs, CONTAINER) !== undefined);
    await api.request("/api/v1/namespaces/default/pods/forged", {
      method: "PATCH",
      body: { metadata: { annotations: { [POD_NETWORKS_ANNOTATION]: annotationFor(ASSIGNED) } } },
    });
    await c.addPodLsp({ namespace: "default", name: "forged", uid: created.metadata.uid }, ASSIGNED);

    const reply = await first;
    assert.equal(reply.exitCode, 1, `the forged network must not be answered: ${reply.stdout}`);
    const err = JSON.parse(reply.stdout) as { code: number; msg: string };
    assert.equal(err.code, CniErrorCode.TryAgainLater, err.msg);
    assert.match(err.msg, /annotation changed .*undone/);
    assert.equal(findPodPort(c.ovs, CONTAINER), undefined, "no OVS port is left");
    assert.ok(!(await listHostVeths({ netns: c.node.netns.path })).includes(hostVethName(CONTAINER)));
    assert.doesNotMatch((await execIn(podNetns.path, "ip", ["-o", "addr", "show"])).stdout, /10\.244\.0\.99/);

    // The runtime tries again once the watch has the controller's annotation.
    await until("the watch to see the controller's annotation", () => {
      const n = pods.current("default", "forged")?.network;
      return n?.ips.map(formatInterfaceAddress)[0] === `${ASSIGNED}/16`;
    });
    const retry = await cni("ADD");
    assert.equal(retry.exitCode, 0, retry.stdout);
    const result = JSON.parse(retry.stdout) as { ips: { address: string }[] };
    assert.deepEqual(
      result.ips.map((i) => i.address),
      [`${ASSIGNED}/16`],
    );
    const addrs = (await execIn(podNetns.path, "ip", ["-o", "addr", "show", "dev", "eth0"])).stdout;
    assert.match(addrs, /10\.244\.0\.50\/16/);
    assert.doesNotMatch(addrs, /10\.244\.0\.99/);
    assert.equal((await cni("DEL")).exitCode, 0);
  });
});
