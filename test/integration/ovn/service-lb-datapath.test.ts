// Service load balancers as src/ovn/service-lb.ts writes them, on a real OVN node (userspace datapath): a pod
// reaches a cluster IP (DNAT on its own switch through the cluster group), reaches itself through it (hairpin),
// is refused at once by a VIP with no endpoint, and reaches the node-local backend of an internalTrafficPolicy
// Local template load balancer whose backends ovn-controller expands from this chassis' variable.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseNetnsPath } from "../../../src/node/interface-name.ts";
import { interfaceWithAddress, podMtu } from "../../../src/node/mtu.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { PodAttacher } from "../../../src/node/pod-attachment.ts";
import { ovsUnnatedArgs } from "../../../src/node/udp-first-endpoint.ts";
import { findOwned, plan } from "../../../src/ovn/nb-diff.ts";
import { serviceLoadBalancers } from "../../../src/ovn/service-lb.ts";
import { CLUSTER_LB_GROUP } from "../../../src/ovn/topology.ts";
import { parseService } from "../../../src/services/service-model.ts";
import type { NetnsHandle } from "../../rig/ovs-node.ts";
import {
  ETH0,
  type Exec,
  execIn,
  NODE,
  NODE_IP,
  type OneNodeCluster,
  podNetwork,
  startOneNodeCluster,
} from "../node/one-node-cluster.ts";

const cleanups: (() => unknown)[] = [];
let c: OneNodeCluster;
let attacher: PodAttacher;

interface Pod {
  netns: NetnsHandle;
  ip: string;
}

let seq = 0;
async function newPod(name: string): Promise<Pod> {
  const ip = `10.244.0.${20 + seq++}`;
  const uid = `uid-${name}`;
  const { mac, ipWithPrefix } = await c.addPodLsp({ namespace: "default", name, uid }, ip);
  const netns = await c.node.addNetns(name);
  const id = [...crypto.getRandomValues(new Uint8Array(32))]
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");
  await attacher.add({
    containerId: id,
    ifname: ETH0,
    netns: parseNetnsPath(netns.path),
    podNamespace: "default",
    podName: name,
    podUid: uid,
    network: podNetwork([ipWithPrefix], mac),
  });
  return { netns, ip };
}

/** One TCP exchange: `server` listens on its own ip:port, `client` connects to vip:vport and sends a line. */
async function exchange(
  client: Pod,
  server: Pod,
  port: number,
  vip: string,
  vport: number,
): Promise<{ client: Exec; got: Exec }> {
  const listening = execIn(
    server.netns.path,
    "timeout",
    ["8", "nc", "-n", "-v", "-l", server.ip, String(port)],
    {
      timeoutMs: 10_000,
    },
  );
  for (let i = 0; i < 100; i++) {
    const r = await execIn(server.netns.path, "ss", ["-tln", `sport = :${port}`]);
    if (r.stdout.includes(`:${port}`)) break;
  }
  const cl = await execIn(client.netns.path, "nc", ["-N", "-w", "5", vip, String(vport)], {
    input: "hello\n",
  });
  return { client: cl, got: await listening };
}

interface Backend {
  ip: string;
  node: string;
  /** The endpoint's (target) port; 8080 unless given. */
  port?: number;
}

/** A UDP listener on the pod's own address for `seconds`; its stdout is every datagram it got. */
async function udpListen(server: Pod, port: number, seconds: number): Promise<{ got: Promise<Exec> }> {
  const got = execIn(
    server.netns.path,
    "timeout",
    [String(seconds), "nc", "-n", "-u", "-l", server.ip, String(port)],
    { timeoutMs: (seconds + 5) * 1000 },
  );
  for (let i = 0; i < 100; i++) {
    const r = await execIn(server.netns.path, "ss", ["-uln", `sport = :${port}`]);
    if (r.stdout.includes(`:${port}`)) break;
  }
  return { got };
}

/** One datagram from a fixed source port: each one is the same UDP flow (the same conntrack entry). */
function udpSend(client: Pod, vip: string, vport: number, sport: number, text: string): Promise<Exec> {
  return execIn(client.netns.path, "nc", ["-n", "-u", "-w", "1", "-p", String(sport), vip, String(vport)], {
    input: text,
  });
}

function slice(eps: Backend[], protocol: "TCP" | "UDP"): V1EndpointSlice[] {
  // One slice per target port, as the EndpointSlice controller writes them.
  const ports = [...new Set(eps.map((e) => e.port ?? 8080))];
  return (ports.length === 0 ? [8080] : ports).map(
    (port) =>
      ({
        addressType: "IPv4",
        endpoints: eps
          .filter((e) => (e.port ?? 8080) === port)
          .map((e) => ({ addresses: [e.ip], nodeName: e.node, conditions: { ready: true } })),
        ports: [{ name: "http", protocol, port }],
      }) as V1EndpointSlice,
  );
}

/** Writes a Service's load balancers (and its template variables on this chassis) as the controller would. */
async function realize(
  name: string,
  spec: Record<string, unknown>,
  eps: Backend[],
  protocol: "TCP" | "UDP" = "TCP",
) {
  const { model } = parseService({
    metadata: { namespace: "default", name },
    spec: { ports: [{ name: "http", port: 80, protocol }], ...spec },
  } as V1Service);
  assert.ok(model);
  const { rows, variables } = serviceLoadBalancers(model, slice(eps, protocol), [{ node: NODE }]);
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
  const vars = variables.get(NODE) ?? {};
  const existing = [...c.nb.cache.table("Chassis_Template_Var").values()].find(
    (r) => (r as { chassis: string }).chassis === NODE,
  ) as { _uuid: string; variables: Record<string, string> } | undefined;
  if (existing && Object.keys(vars).length > 0)
    txn.update("Chassis_Template_Var", [["_uuid", "==", existing._uuid]], {
      variables: { ...existing.variables, ...vars },
    } as never);
  else if (Object.keys(vars).length > 0)
    txn.insert("Chassis_Template_Var", { chassis: NODE, variables: vars } as never);
  await txn.commit();
  // Until ovn-controller has installed the flows of this change.
  await c.nb.transact((tx) => tx.mutate("NB_Global", [], [["nb_cfg", "+=", 1]]));
  const want = (c.nb.cache.table("NB_Global").values().next().value as { nb_cfg: number }).nb_cfg;
  for (let i = 0; i < 300; i++) {
    const g = c.nb.cache.table("NB_Global").values().next().value as { hv_cfg: number } | undefined;
    if ((g?.hv_cfg ?? 0) >= want) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("ovn-controller did not catch up with NB");
}

describe("Service load balancers on a real OVN node", () => {
  let pa: Pod;
  let pb: Pod;

  before(async () => {
    c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
    await new NodeSetup({
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
    }).reconcile();
    const encap = await interfaceWithAddress(NODE_IP, { netns: c.node.netns.path });
    attacher = new PodAttacher({
      client: c.ovs,
      mtu: podMtu({ encapMtu: encap.mtu, encapType: "vxlan" }),
      userspaceDatapath: true,
      hostNetns: c.node.netns.path,
      ovnInstalledBudgetMs: 15_000,
    });
    // The cluster group, and the subnet switch referring to it, as the controller's core and subnet steps make them.
    const ls = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/default");
    assert.ok(ls);
    await c.nb.transact((tx) => {
      const g = tx.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP });
      tx.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["load_balancer_group", "insert", [g]]]);
    });
    pa = await newPod("svc-client");
    pb = await newPod("svc-server");
    await realize("web", { clusterIP: "10.96.0.50" }, [{ ip: pb.ip, node: NODE }]);
    await realize("empty", { clusterIP: "10.96.0.51" }, []);
    await realize("local", { clusterIP: "10.96.0.52", internalTrafficPolicy: "Local" }, [
      { ip: pb.ip, node: NODE },
    ]);
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("a pod reaches a cluster IP: DNAT to the endpoint's port, the pod's own address as source", async () => {
    const r = await exchange(pa, pb, 8080, "10.96.0.50", 80);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.got.stdout, "hello\n");
    assert.match(r.got.stderr, new RegExp(`Connection received on ${pa.ip.replaceAll(".", "\\.")} `));
  });

  test("a pod reaches itself through its Service (hairpin, source rewritten to the VIP)", async () => {
    const r = await exchange(pb, pb, 8080, "10.96.0.50", 80);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.got.stdout, "hello\n");
    assert.match(r.got.stderr, /Connection received on 10\.96\.0\.50 /);
  });

  test("a VIP with no endpoint refuses the connection at once (TCP reset)", async () => {
    const r = await execIn(pa.netns.path, "nc", ["-v", "-N", "-w", "5", "10.96.0.51", "80"], {
      input: "x\n",
    });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /refused/i);
  });

  test("internalTrafficPolicy Local: the template LB's backends come from this chassis' variable", async () => {
    const r = await exchange(pa, pb, 8080, "10.96.0.52", 80);
    assert.equal(r.client.code, 0, r.client.stderr);
    assert.equal(r.got.stdout, "hello\n");
  });
  /**
   * One UDP flow (a fixed source port) to `vip`:80: a datagram, then `change`, then five more (the upstream client
   * sends one a second). The old listener must get only the first, the new one those after the change.
   */
  async function udpFlowFollows(
    vip: string,
    sport: number,
    oldGot: { got: Promise<Exec> },
    newGot: { got: Promise<Exec> },
    change: () => Promise<unknown>,
    what: string,
  ): Promise<void> {
    await udpSend(pa, vip, 80, sport, "one\n");
    await change();
    for (let i = 0; i < 5; i++) await udpSend(pa, vip, 80, sport, `two-${i}\n`);
    const [o, n] = await Promise.all([oldGot.got, newGot.got]);
    assert.equal(o.stdout, "one\n", `the old ${what} got the first datagram only`);
    assert.match(
      n.stdout,
      /^two-0\n/,
      `the new ${what} got the datagrams after the change: ${JSON.stringify(n.stdout)}`,
    );
  }

  // Upstream e2e "Conntrack should be able to preserve UDP traffic when server pod cycles" and "... cleanup
  // conntrack entries when UDP service target port changes": one UDP flow keeps sending while its backend
  // changes; the datagram after the change must reach the new backend, not follow the old conntrack entry.
  test("a UDP flow to a cluster IP reaches the new backend once its backend is replaced (ct_flush)", async () => {
    const pc = await newPod("svc-server-2");
    await realize("udp-cycle", { clusterIP: "10.96.0.53" }, [{ ip: pb.ip, node: NODE }], "UDP");
    const oldGot = await udpListen(pb, 8080, 20);
    const newGot = await udpListen(pc, 8080, 20);
    await udpFlowFollows(
      "10.96.0.53",
      40_001,
      oldGot,
      newGot,
      () => realize("udp-cycle", { clusterIP: "10.96.0.53" }, [{ ip: pc.ip, node: NODE }], "UDP"),
      "backend",
    );
  });

  test("a UDP flow to a cluster IP reaches the backend's new port once the target port changes", async () => {
    await realize("udp-port", { clusterIP: "10.96.0.54" }, [{ ip: pb.ip, node: NODE, port: 8081 }], "UDP");
    const oldGot = await udpListen(pb, 8081, 20);
    const newGot = await udpListen(pb, 8082, 20);
    await udpFlowFollows(
      "10.96.0.54",
      40_002,
      oldGot,
      newGot,
      () => realize("udp-port", { clusterIP: "10.96.0.54" }, [{ ip: pb.ip, node: NODE, port: 8082 }], "UDP"),
      "port",
    );
  });
  test("internalTrafficPolicy Local: a UDP flow reaches the new backend once this chassis' variable changes", async () => {
    const pd = await newPod("svc-server-3");
    const spec = { clusterIP: "10.96.0.55", internalTrafficPolicy: "Local" };
    const oldGot = await udpListen(pb, 8083, 20);
    const newGot = await udpListen(pd, 8083, 20);
    await realize("udp-local", spec, [{ ip: pb.ip, node: NODE, port: 8083 }], "UDP");
    await udpFlowFollows(
      "10.96.0.55",
      40_003,
      oldGot,
      newGot,
      () => realize("udp-local", spec, [{ ip: pd.ip, node: NODE, port: 8083 }], "UDP"),
      "backend",
    );
  });
  /** The client's entries of `sport` in OVS's datapath conntrack (every zone). */
  async function ovsEntries(sport: number): Promise<string[]> {
    const ct = await c.node.appctl("dpctl/dump-conntrack");
    return ct.split("\n").filter((l) => l.includes(`sport=${sport},`));
  }

  /**
   * Upstream e2e "Conntrack should be able to preserve UDP traffic when server pod cycles" (its first backend):
   * the client sends before the Service has an endpoint here; OVN commits that datagram's flow without DNAT in
   * the client port's zone, and the flow's later datagrams stay on it after the first endpoint appears, until the
   * node agent deletes the un-NATed entries of the address (what ServiceProxy runs when the destination goes
   * from no endpoint to one; src/node/udp-first-endpoint.ts).
   */
  async function udpFirstEndpoint(
    name: string,
    spec: Record<string, unknown>,
    vip: string,
    port: number,
    sport: number,
    before: "empty" | "none",
    stateful: boolean,
  ): Promise<void> {
    // `stateful`: as any allow-related ACL makes the switch (a NetworkPolicy's, a node's own allow): every new
    // flow is committed.
    const ls = findOwned(c.nb.cache as never, "Logical_Switch", "subnet/default");
    assert.ok(ls);
    const ACL_MATCH = "ip4.src == 192.0.2.1";
    if (stateful)
      await c.nb.transact((tx) => {
        const a = tx.insert("ACL", {
          direction: "to-lport",
          priority: 1000,
          action: "allow-related",
          match: ACL_MATCH,
        } as never);
        tx.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["acls", "insert", [a]]]);
      });
    try {
      if (before === "empty") await realize(name, spec, [], "UDP");
      const got = await udpListen(pb, port, 25);
      await udpSend(pa, vip, 80, sport, "before\n");
      const stuck = await ovsEntries(sport);
      assert.ok(
        stuck.some((l) => l.includes(`reply=(src=${vip},`)),
        `committed to the VIP itself, never DNATed: ${stuck.join("\n")}`,
      );
      await realize(name, spec, [{ ip: pb.ip, node: NODE, port }], "UDP");
      await udpSend(pa, vip, 80, sport, "still\n");
      assert.ok(
        (await ovsEntries(sport)).some((l) => l.includes(`reply=(src=${vip},`)),
        "with the first endpoint installed the flow's datagram stays on its un-NATed entry",
      );
      await c.node.appctl(...ovsUnnatedArgs({ tracker: "ovs", ip: parseIp(vip), port: undefined }));
      for (let i = 0; i < 5; i++) await udpSend(pa, vip, 80, sport, `after-${i}\n`);
      const r = await got.got;
      assert.match(
        r.stdout,
        /after-0\n/,
        `the first endpoint gets the flow's datagrams: ${JSON.stringify(r.stdout)}`,
      );
      assert.doesNotMatch(r.stdout, /before|still/);
      // The deletion spares what was DNATed: repeated (as after a restart), the flow keeps its entry.
      await c.node.appctl(...ovsUnnatedArgs({ tracker: "ovs", ip: parseIp(vip), port: undefined }));
      assert.ok(
        (await ovsEntries(sport)).some(
          (l) => l.includes(`dst=${vip},`) && l.includes(`reply=(src=${pb.ip},`),
        ),
        "the DNATed entry is left",
      );
    } finally {
      const acl = [...c.nb.cache.table("ACL").values()].find(
        (r) => (r as { match: string }).match === ACL_MATCH,
      ) as { _uuid: string } | undefined;
      if (acl)
        await c.nb.transact((tx) => {
          tx.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["acls", "delete", [acl._uuid]]]);
        });
    }
  }

  test("internalTrafficPolicy Local, stateful switch: a UDP flow begun before this chassis had an endpoint reaches the first one once its un-NATed entry is deleted", async () => {
    await udpFirstEndpoint(
      "udp-first-local",
      { clusterIP: "10.96.0.57", internalTrafficPolicy: "Local" },
      "10.96.0.57",
      8085,
      40_004,
      "empty",
      true,
    );
  });

  test("a UDP flow begun before the Service's load balancer was written (a switch with no ACL) reaches its first endpoint once its un-NATed entry is deleted", async () => {
    await udpFirstEndpoint(
      "udp-first-new",
      { clusterIP: "10.96.0.58" },
      "10.96.0.58",
      8086,
      40_005,
      "none",
      false,
    );
  });

  // Upstream e2e "Networking Granular Checks: Services should be able to handle large requests: udp" (known
  // limit, docs/services.md "Fragmented UDP through a cluster IP"): the datagram leaves the pod in two fragments.
  // OVN's load balancer flows match the UDP port; OVS's userspace datapath hands the fragments on one by one
  // after conntrack has reassembled them, and the later fragment has no port, so the two never meet the same
  // DNAT. This test pins the behaviour: when an OVN/OVS upgrade fixes it, it fails and the docs must change.
  test("a 2,000-byte UDP datagram (two fragments at the pod MTU) reaches a pod directly; through a cluster IP the userspace datapath loses it, committing the flow without DNAT", async () => {
    await realize("udp-large", { clusterIP: "10.96.0.56" }, [{ ip: pb.ip, node: NODE, port: 8084 }], "UDP");
    const payload = `${"x".repeat(1999)}\n`;
    const completed = async () =>
      Number(
        /v4 frags completed: (\d+)/.exec(await c.node.appctl("dpctl/ipf-get-status"))?.[1] ?? Number.NaN,
      );
    const before = await completed();

    const direct = await udpListen(pb, 8084, 6);
    await udpSend(pa, pb.ip, 8084, 40_010, payload);
    assert.equal((await direct.got).stdout, payload, "the pod's own address: both fragments arrive");

    const viaVip = await udpListen(pb, 8084, 6);
    await udpSend(pa, "10.96.0.56", 80, 40_011, payload);
    assert.equal((await viaVip.got).stdout, "", "through the cluster IP: nothing arrives (the known limit)");
    assert.ok((await completed()) >= before + 2, "conntrack's ipf reassembled both datagrams");
    const ct = await c.node.appctl("dpctl/dump-conntrack");
    const entry = ct.split("\n").find((l) => l.includes("sport=40011"));
    assert.ok(entry, ct);
    assert.match(
      entry,
      /reply=\(src=10\.96\.0\.56,/,
      "the flow was committed to the VIP itself, never DNATed",
    );
  });
});
