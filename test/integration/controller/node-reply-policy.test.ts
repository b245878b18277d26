// The controller's per-node reply policies (topology.ts nodeReplyMatch) against a real kube-apiserver and NB:
// each Node's validated InternalIPs become its policy and its annotation's nodeReplyIps; an address claimed by
// two Nodes, inside the cluster's own ranges or beyond the first 16, is refused with a Warning Event naming the field; the policy
// follows an InternalIP change and leaves with its Node; a restart with nothing changed writes nothing.

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { MGMT_PORT_ANNOTATION } from "../../../src/controller/management-ports.ts";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { KIND_KEY, NODE_KEY } from "../../../src/ovn/ownership.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { startInProcess, until, useCluster } from "./harness.ts";

interface EventList {
  items: { reason: string; type: string; message: string; involvedObject: { name: string; kind: string } }[];
}
interface NodeView {
  metadata: { annotations?: Record<string, string> };
}

test("node reply policies follow the Nodes' validated InternalIPs; refused addresses are reported; a restart writes nothing", async (t) => {
  const { api, srv } = await useCluster(t);
  const addNode = (name: string, ...ips: string[]) =>
    api.request("/api/v1/nodes", {
      method: "POST",
      body: {
        metadata: { name },
        status: {
          addresses: [
            ...ips.map((address) => ({ type: "InternalIP", address })),
            { type: "Hostname", address: name },
          ],
        },
      },
    });
  const setIps = (name: string, ...ips: string[]) =>
    api.request(`/api/v1/nodes/${name}/status`, {
      method: "PATCH",
      body: { status: { addresses: ips.map((address) => ({ type: "InternalIP", address })) } },
    });
  await addNode("node1", "192.168.200.11");
  await addNode("node2", "192.168.200.12");

  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-controller" });
  let run = await startInProcess({ api, srv }, { events });
  t.after(() => run.stop());

  /** node → the addresses its reply policy holds, as NB has them (and the policy's next hop is its port's). */
  const policies = () => {
    const out = new Map<string, string>();
    for (const p of run.nb.cache.table("Logical_Router_Policy").values()) {
      if (p.external_ids[KIND_KEY] !== "node-reply-policy") continue;
      const node = p.external_ids[NODE_KEY] as string;
      const mgmt = run.nb.cache
        .table("Logical_Switch_Port")
        .findOne((r) => r.external_ids[KIND_KEY] === "mgmt-port" && r.external_ids[NODE_KEY] === node);
      assert.ok(mgmt?.addresses[0]?.split(" ")[1], `${node}'s management port`);
      assert.deepEqual(p.nexthops, [mgmt.addresses[0].split(" ")[1]]);
      out.set(node, /^ip4\.dst == \{([^}]*)\}/.exec(p.match)?.[1] ?? "?");
    }
    return Object.fromEntries([...out].sort());
  };
  const replyIpsOf = async (name: string) => {
    const n = await api.request<NodeView>(`/api/v1/nodes/${name}`);
    const a = n.metadata.annotations?.[MGMT_PORT_ANNOTATION];
    return a ? ((JSON.parse(a).nodeReplyIps as string[] | undefined) ?? []) : undefined;
  };
  const settle = async (
    what: string,
    want: Record<string, string>,
    annotations: Record<string, string[]>,
  ) => {
    await until(
      what,
      async () => {
        await run.nb.echo();
        if (JSON.stringify(policies()) !== JSON.stringify(want)) return undefined;
        for (const [n, ips] of Object.entries(annotations))
          if (JSON.stringify(await replyIpsOf(n)) !== JSON.stringify(ips)) return undefined;
        return true;
      },
      60_000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}: policies ${JSON.stringify(policies())}`);
    });
  };
  const refusal = (node: string, pattern: RegExp) =>
    until(`NodeAddressRefused on ${node}`, async () => {
      const l = await api.request<EventList>("/api/v1/namespaces/default/events");
      return l.items.find(
        (e) =>
          e.involvedObject.kind === "Node" &&
          e.involvedObject.name === node &&
          e.reason === "NodeAddressRefused" &&
          pattern.test(e.message),
      );
    });

  await settle(
    "each node's policy holds its own address",
    { node1: "192.168.200.11", node2: "192.168.200.12" },
    { node1: ["192.168.200.11"], node2: ["192.168.200.12"] },
  );

  // A third Node claims node1's address: neither keeps it, both hear why.
  await addNode("node3", "192.168.200.11");
  await settle(
    "the claimed address is refused for both",
    { node2: "192.168.200.12" },
    { node1: [], node3: [] },
  );
  for (const n of ["node1", "node3"]) {
    const e = await refusal(
      n,
      /^status\.addresses\[0\]: "192\.168\.200\.11" is also another Node's InternalIP/,
    );
    assert.equal(e.type, "Warning");
  }
  // The claimant gone, the owner has it back.
  await api.request("/api/v1/nodes/node3", { method: "DELETE" });
  await settle(
    "node1's address back after node3 left",
    { node1: "192.168.200.11", node2: "192.168.200.12" },
    { node1: ["192.168.200.11"] },
  );

  // A Node claiming a pod or join address gets no policy for it, and an Event naming the field.
  await addNode("node4", "192.168.200.14", "10.244.7.7");
  await settle(
    "node4's pod-network address refused, its own kept",
    { node1: "192.168.200.11", node2: "192.168.200.12", node4: "192.168.200.14" },
    { node4: ["192.168.200.14"] },
  );
  await refusal("node4", /^status\.addresses\[1\]: "10\.244\.7\.7" is inside 10\.244\.0\.0\/16/);

  // An InternalIP that changes moves the policy with it.
  await setIps("node2", "192.168.200.22");
  await settle(
    "node2's policy follows its new address",
    { node1: "192.168.200.11", node2: "192.168.200.22", node4: "192.168.200.14" },
    { node2: ["192.168.200.22"] },
  );

  // A Node listing more InternalIPs than a reply policy holds (some cloud controllers do): the first 16 in
  // address order are kept, each other one is refused with its field.
  const many = Array.from({ length: 18 }, (_, i) => `192.168.201.${27 - i}`);
  await addNode("node5", ...many);
  const first16 = [...many].reverse().slice(0, 16);
  await settle(
    "node5's policy holds its first 16 addresses",
    {
      node1: "192.168.200.11",
      node2: "192.168.200.22",
      node4: "192.168.200.14",
      node5: first16.join(", "),
    },
    { node5: first16 },
  );
  for (const [i, a] of [
    [0, "27"],
    [1, "26"],
  ] as const)
    await refusal(
      "node5",
      new RegExp(
        `^status\\.addresses\\[${i}\\]: "192\\.168\\.201\\.${a}" is beyond the first 16 InternalIPs`,
      ),
    );
  await api.request("/api/v1/nodes/node5", { method: "DELETE" });
  await settle(
    "node5's policy gone with it",
    { node1: "192.168.200.11", node2: "192.168.200.22", node4: "192.168.200.14" },
    {},
  );

  // Restart with nothing changed: not one NB write.
  await run.stop();
  const before = await writeRecords(srv, "OVN_Northbound");
  run = await startInProcess({ api, srv }, { events });
  await run.synced;
  await delay(3000);
  assert.equal(
    (await writeRecords(srv, "OVN_Northbound")) - before,
    0,
    "a restart with no changes writes nothing",
  );

  // A Node that leaves takes its policy along.
  await api.request("/api/v1/nodes/node4", { method: "DELETE" });
  await settle("node4's policy gone with it", { node1: "192.168.200.11", node2: "192.168.200.22" }, {});
});
