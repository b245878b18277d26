// The provider switch's localnet source guard on a real OVN node (userspace datapath): a host on the provider
// network, behind the node's provider bridge, sends UDP datagrams to pods on the provider switch. With its own
// address they arrive (the unisolated pod) or meet the default deny (the ingress-isolated pod); with a forged
// cluster source (the node's management IP, which the own-node allow admits, or an overlay pod's IP) the guard
// drops them before any policy is judged. The rows are exactly as src/ovn/topology.ts and src/policy make them.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { parseNetnsPath } from "../../../src/node/interface-name.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { parseBridgeMappings } from "../../../src/node/provider-bridges.ts";
import { type DesiredRow, findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import type { SubnetTopology } from "../../../src/ovn/topology.ts";
import { isolationRows, nodeRows } from "../../../src/policy/isolation-acls.ts";
import { isolationGroup, nodeGroupName } from "../../../src/policy/nb-names.ts";
import {
  ETH0,
  type Exec,
  execIn,
  MGMT,
  NET,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  podNetwork,
  startOneNodeCluster,
} from "../node/one-node-cluster.ts";

const PROVIDER: SubnetTopology = {
  name: "vlan",
  cidrs: ["172.30.100.0/24"],
  gateways: ["172.30.100.1"],
  provider: { name: "physnet1" },
};
const HOST_IP = "172.30.100.1";
const MGMT_IP = MGMT.ip.split("/")[0] ?? "";
const OVERLAY_POD_IP = "10.244.0.77";
const PORT = 8081;

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let host = ""; // the provider network's host netns

interface Pod {
  netns: string;
  ip: string;
  lsp: string;
}

async function newPod(name: string, ip: string): Promise<Pod> {
  const uid = `uid-${name}`;
  const { mac, ipWithPrefix } = await c.addPodLsp({ namespace: "vl", name, uid }, ip, PROVIDER);
  const netns = (await c.node.addNetns(name)).path;
  await new PodAttacher({
    client: c.ovs,
    mtu: 1450,
    userspaceDatapath: true,
    hostNetns: c.node.netns.path,
    ovnInstalledBudgetMs: 15_000,
  }).add({
    containerId: [...crypto.getRandomValues(new Uint8Array(32))]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join(""),
    ifname: ETH0,
    netns: parseNetnsPath(netns),
    podNamespace: "vl",
    podName: name,
    podUid: uid,
    network: podNetwork([ipWithPrefix], mac, PROVIDER.gateways),
  });
  const lsp = c.nb.cache
    .table("Logical_Switch_Port")
    .findOne((r) => r.addresses.some((a) => a.endsWith(` ${ip}`)));
  assert.ok(lsp, `no LSP for ${name}`);
  return { netns, ip, lsp: lsp._uuid };
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

/** One UDP datagram from the provider host with source `src` to pod:PORT; resolves with what the pod received. */
async function datagram(src: string, pod: Pod, text: string): Promise<string> {
  const server: Promise<Exec> = execIn(
    pod.netns,
    "timeout",
    ["3", "nc", "-u", "-l", "-W", "1", pod.ip, String(PORT)],
    {
      timeoutMs: 5_000,
    },
  );
  for (let i = 0; i < 100; i++) {
    const r = await execIn(pod.netns, "ss", ["-uln", `sport = :${PORT}`]);
    if (r.stdout.includes(`:${PORT}`)) break;
    await sleep(20);
  }
  await execIn(host, "nc", ["-u", "-w", "1", "-s", src, pod.ip, String(PORT)], { input: `${text}\n` });
  return (await server).stdout.trim();
}

describe("the localnet source guard of a provider network switch on a real OVN node", () => {
  let open: Pod; // no policy selects it
  let isolated: Pod; // ingress-isolated: deny-all, plus the own-node allow from the management IP

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) }, { subnets: [PROVIDER] });
    // The provider network: the node's uplink ulp on br-phys, its peer the host's eth0 (the flat network).
    host = (await c.node.addNetns("phys")).path;
    await c.node.exec("ip", ["link", "add", "ulp", "type", "veth", "peer", "name", "eth0", "netns", host]);
    await c.node.exec("ip", ["link", "set", "ulp", "up"]);
    await c.node.execIn(host, "ip", ["addr", "add", `${HOST_IP}/24`, "dev", "eth0"]);
    // The forged sources, as a host on the VLAN would claim them.
    for (const a of [MGMT_IP, OVERLAY_POD_IP])
      await c.node.execIn(host, "ip", ["addr", "add", `${a}/32`, "dev", "eth0"]);
    await c.node.execIn(host, "ip", ["link", "set", "eth0", "up"]);
    // The userspace datapath forwards what the veth hands it: checksums must be complete (as for pods).
    await c.node.execIn(host, "ethtool", ["-K", "eth0", "tx", "off"]);
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
        bridgeMappings: "physnet1:br-phys",
      },
      providers: parseBridgeMappings("physnet1:br-phys:ulp"),
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
    open = await newPod("pv-open", "172.30.100.10");
    isolated = await newPod("pv-iso", "172.30.100.11");
    // Ingress isolation for one pod, exactly as src/policy makes it, with the own-node allow from node1's
    // management IP; the pod is in both groups.
    const rows: DesiredRow[] = [...isolationRows("ingress"), ...nodeRows(NODE, [parseIp(MGMT_IP)])];
    const txn = c.nb.transaction();
    plan(c.nb.cache as never, c.nb.schema, txn as never, rows);
    await txn.commit();
    await c.nb.echo();
    await c.nb.transact((tx) => {
      for (const g of [isolationGroup("ingress"), nodeGroupName(NODE)])
        tx.mutate("Port_Group", [["name", "==", g]], [["ports", "insert", [isolated.lsp]]]);
    });
    await synced();
    // The provider network delivers: the host's own address reaches the open pod (a first datagram may go
    // while ovn-controller still patches the provider bridge).
    let got = "";
    for (let i = 0; i < 10 && got === ""; i++) got = await datagram(HOST_IP, open, "warm-up");
    if (got !== "warm-up") {
      const diag = [
        await c.node.vsctl("show"),
        (await execIn(host, "ip", ["neigh"])).stdout,
        (await execIn(c.node.netns.path, "ovs-ofctl", ["dump-flows", "br-phys"])).stdout,
        (await execIn(c.node.netns.path, "ovs-ofctl", ["dump-ports", "br-phys"])).stdout,
      ];
      assert.fail(`the provider host does not reach a pod on the provider switch:\n${diag.join("\n")}`);
    }
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("the provider switch carries the guard on its localnet port", () => {
    const ls = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/vlan") as
      | { acls: string[] }
      | undefined;
    const guard = c.nb.cache
      .table("ACL")
      .findOne((r) => r.external_ids["zstack.io/kind"] === "localnet-source-guard");
    assert.ok(guard && ls?.acls.includes(guard._uuid));
  });

  test("the host's own address reaches the open pod and meets the isolated pod's default deny", async () => {
    assert.equal(await datagram(HOST_IP, open, "own"), "own");
    assert.equal(await datagram(HOST_IP, isolated, "own"), "", "deny-all ingress holds for the VLAN host");
  });

  test("a datagram forged with node1's management IP reaches neither pod, though the own-node allow admits that source", async () => {
    assert.equal(await datagram(MGMT_IP, isolated, "forged-mgmt"), "");
    assert.equal(await datagram(MGMT_IP, open, "forged-mgmt"), "");
  });

  test("a datagram forged with an overlay pod's IP reaches no pod", async () => {
    assert.equal(await datagram(OVERLAY_POD_IP, open, "forged-pod"), "");
    assert.equal(await datagram(OVERLAY_POD_IP, isolated, "forged-pod"), "");
  });

  test("the host's own address still reaches the open pod afterwards", async () => {
    assert.equal(await datagram(HOST_IP, open, "again"), "again");
  });
});
