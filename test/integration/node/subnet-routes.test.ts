// The node reaches pods on every accepted Subnet, not only the cluster CIDR: the agent's Subnet informer (on a
// real kube-apiserver with the Subnet CRD) drives the management port's routes in the node's netns, on a real
// one-node OVN cluster whose topology has a second Subnet's switch. The Subnets' acceptance (status Ready) is
// written here the way the controller writes it; a hostile Subnet marked Ready never becomes a route.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { mgmtRouteCidrs, SubnetRoutes } from "../../../src/agent/subnet-routes.ts";
import { SUBNET_PATH } from "../../../src/api/subnet.ts";
import { parseIp } from "../../../src/ipam/address.ts";
import { type Cidr, parseCidr } from "../../../src/ipam/cidr.ts";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { parseNetnsPath } from "../../../src/node/interface-name.ts";
import { MGMT_IFNAME, type MgmtPortSpec } from "../../../src/node/mgmt-port.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { SubnetTopology } from "../../../src/ovn/topology.ts";
import { useKubeApiserver } from "../../rig/kube-apiserver.ts";
import {
  ETH0,
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

const CRD = new URL("../../../deploy/crds/subnet.network.zstack.io.yaml", import.meta.url).pathname;
const BLUE: SubnetTopology = { name: "blue", cidrs: ["10.250.0.0/24"], gateways: ["10.250.0.1"] };
const POD_IP = "10.250.0.10";

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let api: ApiClient;
let podNetns: string;

async function until(
  what: string,
  cond: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const mgmtRoutes = () => c.node.exec("ip", ["route", "show", "dev", MGMT_IFNAME]);
const hasRoute = async (cidr: string) =>
  (await mgmtRoutes()).split("\n").some((l) => l.startsWith(`${cidr} `));

async function createSubnet(name: string, cidr: string, gateway: string): Promise<void> {
  await api.request(SUBNET_PATH, {
    method: "POST",
    body: { apiVersion: "network.zstack.io/v1", kind: "Subnet", metadata: { name }, spec: { cidr, gateway } },
  });
}

/** What the controller writes when it accepts (or refuses) a Subnet's current spec. */
async function setReady(name: string, status: "True" | "False", message = ""): Promise<void> {
  const s = await api.request<{ metadata: { generation: number } }>(`${SUBNET_PATH}/${name}`);
  const generation = s.metadata.generation;
  await api.request(`${SUBNET_PATH}/${name}/status`, {
    method: "PATCH",
    body: {
      status: {
        phase: status === "True" ? "Active" : "Failed",
        observedGeneration: generation,
        conditions: [
          {
            type: "Ready",
            status,
            observedGeneration: generation,
            lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
            reason: status === "True" ? "Reconciled" : "Invalid",
            message,
          },
        ],
      },
    },
  });
}

describe("node routes to pods on every accepted Subnet", () => {
  let routes: SubnetRoutes;

  before(async () => {
    const t = { after: (fn: () => unknown) => cleanups.push(fn) };
    c = await startOneNodeCluster(t, { subnets: [BLUE] });
    const kube = await useKubeApiserver(t);
    await kube.kubectl(["apply", "-f", CRD]);
    await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
    api = new ApiClient(kube.kubeConfig);
    cleanups.push(() => api.close());

    const base: Cidr[] = [...NET.clusterCIDRs, ...NET.serviceCIDRs].map((x) => parseCidr(x));
    const mgmt = (subnets: readonly Cidr[]): MgmtPortSpec => ({
      bridge: "br-int",
      lspName: MGMT.lsp,
      mac: MGMT.mac,
      ip: MGMT.ip,
      gateway: NET.joinGateway,
      routeCidrs: mgmtRouteCidrs(base, subnets),
      mtu: 1450,
    });
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
      mgmt: mgmt([]),
      // Short, so a route deleted by hand comes back within the test's patience.
      resyncIntervalMs: 500,
    });
    cleanups.push(() => setup.stop());
    await setup.reconcile();
    setup.start();
    routes = new SubnetRoutes(
      api,
      { joinCidr: parseCidr(NET.joinCIDR), serviceCidrs: base.slice(1), nodeIps: [parseIp(NODE_IP)] },
      (cidrs) => setup.update({ mgmt: mgmt(cidrs) }),
      silentLogger,
    );
    cleanups.push(() => routes.stop());
    routes.start();
    await routes.informer.waitForSync();

    const pod = { namespace: "default", name: "blue-pod", uid: "uid-blue-pod" };
    const { mac, ipWithPrefix } = await c.addPodLsp(pod, POD_IP, BLUE);
    const netns = await c.node.addNetns("blue");
    podNetns = netns.path;
    const attacher = new PodAttacher({
      client: c.ovs,
      mtu: 1450,
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
    });
    await attacher.add({
      containerId: "b1ue0000feed0001",
      ifname: ETH0,
      netns: parseNetnsPath(podNetns),
      podNamespace: pod.namespace,
      podName: pod.name,
      podUid: pod.uid,
      network: podNetwork([ipWithPrefix], mac, BLUE.gateways),
    });
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("a Subnet not accepted yet, and a hostile one marked Ready, give the node no route", async () => {
    await createSubnet("blue", BLUE.cidrs[0] as string, BLUE.gateways[0] as string);
    // Covers the node's own underlay address: routing it through OVN would cut the node off.
    await createSubnet("evil", "192.168.250.0/24", "192.168.250.254");
    await setReady("evil", "True");
    await until(
      "the informer to see blue and evil's Ready status",
      () =>
        !!routes.informer.get("blue") &&
        !!routes.informer
          .get("evil")
          ?.status?.conditions?.some((x) => x.type === "Ready" && x.status === "True"),
    );
    assert.deepEqual(routes.plan().cidrs, []);
    assert.match(routes.plan().refused[0]?.reason ?? "", /node's own address 192\.168\.250\.1/);
    assert.equal(await hasRoute("10.250.0.0/24"), false);
  });

  test("a Subnet on the link-local range (cloud metadata) marked Ready gives the node no route", async () => {
    await createSubnet("metadata", "169.254.169.0/24", "169.254.169.1");
    await setReady("metadata", "True");
    await until(
      "the informer to see metadata's Ready status",
      () =>
        !!routes.informer
          .get("metadata")
          ?.status?.conditions?.some((x) => x.type === "Ready" && x.status === "True"),
    );
    const refused = routes.plan().refused.find((r) => r.subnet === "metadata");
    assert.match(refused?.reason ?? "", /link-local range/);
    assert.doesNotMatch(await mgmtRoutes(), /169\.254\./);
  });

  test("once the Subnet is accepted the node reaches its pod (ping and TCP) through the management port", async () => {
    await setReady("blue", "True");
    await until("the route to blue", () => hasRoute("10.250.0.0/24"));
    const routesNow = await mgmtRoutes();
    assert.match(routesNow, /10\.250\.0\.0\/24 via 100\.64\.0\.1 (proto \w+ )?src 100\.64\.0\.2/);
    assert.equal(
      (routesNow.match(/^10\.250\.0\.0\/24 /gm) ?? []).length,
      1,
      "exactly one route per Subnet CIDR",
    );
    // The hostile Subnet was in the store when this route set was computed: still no route for it.
    assert.doesNotMatch(routesNow, /192\.168\.250\.0\/24/);
    const r = await ping(c.node.netns.path, POD_IP);
    assert.equal(r.code, 0, `ping ${POD_IP}: ${r.stdout}${r.stderr}`);
    const tcp = await tcpTransfer(c.node.netns.path, podNetns, POD_IP, 5101);
    assert.equal(tcp.client.code, 0, tcp.client.stderr);
    assert.equal(tcp.received, tcp.sent);
  });

  test("status updates that leave a Subnet's CIDRs and acceptance as they were do not recompute the routes", async () => {
    const plans = routes.stats.plans;
    for (const n of [1, 2, 3]) await setReady("blue", "True", `${n} addresses in use`);
    await until(
      "the informer to see the last status",
      () => routes.informer.get("blue")?.status?.conditions?.[0]?.message === "3 addresses in use",
    );
    await sleep(200);
    assert.equal(routes.stats.plans, plans);
    assert.equal(await hasRoute("10.250.0.0/24"), true);
  });

  test("a route deleted by hand comes back", async () => {
    await c.node.exec("ip", ["route", "del", "10.250.0.0/24", "dev", MGMT_IFNAME]);
    assert.equal(await hasRoute("10.250.0.0/24"), false);
    await until("the route to blue restored", () => hasRoute("10.250.0.0/24"));
    assert.equal((await ping(c.node.netns.path, POD_IP)).code, 0);
  });

  test("when the node gains an address inside a routed Subnet, the refreshed guard withdraws its route", async () => {
    const guard = {
      joinCidr: parseCidr(NET.joinCIDR),
      serviceCidrs: [...NET.serviceCIDRs].map((x) => parseCidr(x)),
      nodeIps: [parseIp(NODE_IP)],
    };
    routes.setGuard({ ...guard, nodeIps: [...guard.nodeIps, parseIp("10.250.0.200")] });
    await until("the route to blue removed", async () => !(await hasRoute("10.250.0.0/24")));
    assert.match(
      routes.plan().refused.find((r) => r.subnet === "blue")?.reason ?? "",
      /node's own address 10\.250\.0\.200/,
    );
    routes.setGuard(guard);
    await until("the route to blue back", () => hasRoute("10.250.0.0/24"));
  });

  test("a Subnet whose acceptance is withdrawn, then deleted, loses its route and the node no longer reaches it", async () => {
    await setReady("blue", "False");
    await until("the route to blue removed", async () => !(await hasRoute("10.250.0.0/24")));
    await setReady("blue", "True");
    await until("the route to blue back", () => hasRoute("10.250.0.0/24"));
    await api.request(`${SUBNET_PATH}/blue`, { method: "DELETE" });
    await until("the route to blue removed after the delete", async () => !(await hasRoute("10.250.0.0/24")));
    const r = await ping(c.node.netns.path, POD_IP, 1);
    assert.notEqual(r.code, 0, "without the route the pod is not reachable from the node");
    // The cluster and service routes stay.
    assert.match(await mgmtRoutes(), /10\.244\.0\.0\/16 via 100\.64\.0\.1/);
  });
});
