// NetworkPolicies against a real kube-apiserver and NB: a policy becomes its port group, ACLs, named-port set,
// shared peer set and isolation/own-node membership; a pod relabel, a pod replaced (new address, new named port)
// and a namespace relabel change only the rows they affect, each affected reconcile in one transaction; two
// policies share one peer set until the last is gone; a lost reply on the insert leaves one row of each; a
// deny-all policy isolates with no ACL of its own; a restart with nothing changed writes nothing, and one after a
// policy was deleted while the controller was down removes its rows. (The apiserver refuses every policy our
// parser refuses, so the Warning Event path is covered by unit tests: src/controller/policy-index.test.ts.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { ID_KEY, KIND_KEY, type Kind, rowUuid } from "../../../src/ovn/ownership.ts";
import { podPortId } from "../../../src/ovn/pod-port.ts";
import type { OvsdbClient } from "../../../src/ovsdb/client.ts";
import type { NbTables } from "../../../src/ovsdb/models/nb.generated.ts";
import { DEFAULT_DENY, OWN_NODE_ALLOW, POLICY_ALLOW } from "../../../src/policy/acl-priority.ts";
import {
  ISOLATED_EGRESS,
  ISOLATED_INGRESS,
  nodeGroupName,
  POLICY_KEY,
  peerSetName,
  policyGroupId,
  policyGroupName,
} from "../../../src/policy/nb-names.ts";
import { parseNetworkPolicy, podPeersOf } from "../../../src/policy/policy-model.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import {
  createNamespace,
  type InProcessController,
  startInProcess,
  untilOk as until,
  useCluster,
} from "./harness.ts";

const NS = "np-a";
const NS_B = "np-b";
const NODE = "node1";

test("NetworkPolicies become port groups, ACLs and address sets, and follow pods and namespaces with small diffs", async (t) => {
  const { api, srv, nb: witness } = await useCluster(t);
  await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: NODE } } });
  await createNamespace(api, NS);
  await createNamespace(api, NS_B);
  await api.request(`/api/v1/namespaces/${NS_B}`, {
    method: "PATCH",
    body: { metadata: { labels: { team: "b" } } },
  });
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-controller" });
  t.after(() => events.close());
  let run: InProcessController = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  t.after(() => run.stop());
  const nb = (): OvsdbClient<NbTables> => run.nb;

  const createPod = async (ns: string, name: string, labels: Record<string, string>, webPort?: number) => {
    await api.request(`/api/v1/namespaces/${ns}/pods`, {
      method: "POST",
      body: {
        metadata: { name, labels },
        spec: {
          nodeName: NODE,
          containers: [
            {
              name: "c",
              image: "x",
              ...(webPort ? { ports: [{ name: "web", containerPort: webPort, protocol: "TCP" }] } : {}),
            },
          ],
        },
      },
    });
  };
  const deletePod = (ns: string, name: string) =>
    api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
      method: "DELETE",
      query: { gracePeriodSeconds: 0 },
    });
  const relabel = (path: string, labels: Record<string, string | null>) =>
    api.request(path, {
      method: "PATCH",
      body: { metadata: { labels } },
    });
  const createPolicy = (name: string, spec: Record<string, unknown>) =>
    api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`, {
      method: "POST",
      body: { metadata: { name }, spec },
    });
  const deletePolicy = (name: string) =>
    api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/${name}`, { method: "DELETE" });
  const lsp = (ns: string, name: string) =>
    nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.external_ids[ID_KEY] === podPortId(ns, name));
  const ipOf = (ns: string, name: string) => lsp(ns, name)?.addresses[0]?.split(" ")[1];
  const pg = (name: string) => nb().cache.table("Port_Group").lookupOne("name", name);
  const set = (name: string) => nb().cache.table("Address_Set").lookupOne("name", name);
  const aclsOf = (name: string) => {
    const g = pg(name);
    return g ? g.acls.map((u) => nb().cache.table("ACL").get(u)).filter((a) => a !== undefined) : [];
  };
  const ownedBy = (key: string) =>
    (["Port_Group", "ACL", "Address_Set"] as const).flatMap((tb) =>
      [...nb().cache.table(tb).values()].filter((r) => r.external_ids[POLICY_KEY] === key),
    );
  /** Waits until the server's write count stops moving, and returns it. */
  const settledWrites = async () => {
    let last = await writeRecords(srv, "OVN_Northbound");
    for (;;) {
      await delay(1500);
      const now = await writeRecords(srv, "OVN_Northbound");
      if (now === last) return now;
      last = now;
    }
  };
  /** Every row's uuid and content, to tell which rows a change touched. */
  const snapshot = () => {
    const m = new Map<string, string>();
    for (const tb of ["Port_Group", "ACL", "Address_Set"] as const)
      for (const r of nb().cache.table(tb).values()) m.set(`${tb}/${r._uuid}`, JSON.stringify(r));
    return m;
  };
  const changedRows = (a: Map<string, string>, b: Map<string, string>) =>
    [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k) !== b.get(k)).sort();

  await createPod(NS, "server", { app: "server" }, 8080);
  await createPod(NS, "client", { app: "client" });
  await createPod(NS_B, "other", { app: "client" });
  await until("pod ports", () => ipOf(NS, "server") && ipOf(NS, "client") && ipOf(NS_B, "other"));
  await until("node1's management port", () =>
    nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.name === `zovn-mgmt-${NODE}`),
  );
  const serverIp = ipOf(NS, "server") as string;
  const clientIp = ipOf(NS, "client") as string;
  const otherIp = ipOf(NS_B, "other") as string;

  // web: from app=client pods of this namespace and from namespaces labelled team=b, to the named port and 9000.
  const webSpec = {
    podSelector: { matchLabels: { app: "server" } },
    ingress: [
      {
        from: [
          { podSelector: { matchLabels: { app: "client" } } },
          { namespaceSelector: { matchLabels: { team: "b" } } },
        ],
        ports: [{ port: "web" }, { port: 9000 }],
      },
    ],
  };
  // A lost reply on the policy's first write: the retry finds its rows and there is one of each.
  const lost = proxy.loseNextReply((ops) =>
    ops.some(
      (o) =>
        o.op === "insert" &&
        o.table === "Port_Group" &&
        JSON.stringify(o).includes(policyGroupName(`${NS}/web`)),
    ),
  );
  await createPolicy("web", webSpec);
  await lost;
  const model = parseNetworkPolicy({ metadata: { namespace: NS, name: "web" }, spec: webSpec });
  const [clientPeer, teamPeer] = [...podPeersOf(model).keys()];
  assert.ok(clientPeer && teamPeer);
  const G = policyGroupName(`${NS}/web`);
  await until("web's rows", () => {
    const acls = aclsOf(G);
    return pg(G)?.ports.length === 1 &&
      acls.length === 2 &&
      set(peerSetName(clientPeer, 4)) &&
      set(peerSetName(teamPeer, 4))
      ? true
      : undefined;
  });
  await until("isolation and own-node membership", () =>
    pg(ISOLATED_INGRESS)?.ports.length === 1 && pg(nodeGroupName(NODE))?.ports.length === 1
      ? true
      : undefined,
  );
  await settledWrites();
  assert.equal(
    [...nb().cache.table("Port_Group").values()].filter((r) => r.name === G).length,
    1,
    "one port group after the lost reply",
  );
  assert.equal(aclsOf(G).length, 2);
  assert.equal(
    [...nb().cache.table("ACL").values()].filter((r) => r.external_ids[POLICY_KEY] === `${NS}/web`).length,
    2,
    "no stray ACL after the lost reply",
  );
  const serverPort = lsp(NS, "server")?._uuid;
  assert.deepEqual(pg(G)?.ports, [serverPort]);
  assert.deepEqual(set(peerSetName(clientPeer, 4))?.addresses, [clientIp]);
  assert.deepEqual(set(peerSetName(teamPeer, 4))?.addresses, [otherIp]);
  const matches = aclsOf(G)
    .map((a) => a.match)
    .sort();
  const peerTerm = `(ip4.src == $${peerSetName(clientPeer, 4)} || ip4.src == $${peerSetName(teamPeer, 4)})`;
  assert.equal(matches[0], `outport == @${G} && ${peerTerm} && tcp.dst == 9000`);
  const namedMatch =
    /^outport == @\S+ && ip4\.dst == \$(zovn_np_named_[0-9a-f]{16}_v4) && tcp\.dst == 8080 && /.exec(
      matches[1] ?? "",
    );
  assert.ok(namedMatch, matches[1]);
  assert.deepEqual(set(namedMatch[1] as string)?.addresses, [serverIp]);
  for (const a of aclsOf(G)) {
    assert.equal(a.priority, POLICY_ALLOW);
    assert.equal(a.action, "allow-related");
    assert.equal(a.direction, "to-lport");
  }
  const iso = aclsOf(ISOLATED_INGRESS).find((a) => a.action === "drop");
  assert.equal(iso?.priority, DEFAULT_DENY);
  assert.deepEqual(pg(ISOLATED_INGRESS)?.ports, [serverPort]);
  assert.equal(pg(ISOLATED_EGRESS)?.ports.length, 0, "no egress policy: nobody egress-isolated");
  const own = aclsOf(nodeGroupName(NODE))[0];
  assert.equal(own?.priority, OWN_NODE_ALLOW);
  assert.match(own?.match ?? "", /ip4\.src == \{100\.64\.0\.\d+\}$/);

  // A pod relabelled out of a peer: only that peer's set changes, in one transaction.
  let before = snapshot();
  let writes = await settledWrites();
  await relabel(`/api/v1/namespaces/${NS}/pods/client`, { app: "none" });
  await until("client out of the peer set", () =>
    set(peerSetName(clientPeer, 4))?.addresses.length === 0 ? true : undefined,
  );
  assert.equal((await settledWrites()) - writes, 1, "one NB write for a relabel out of a peer");
  assert.deepEqual(changedRows(before, snapshot()), [
    `Address_Set/${set(peerSetName(clientPeer, 4))?._uuid}`,
  ]);

  // A namespace relabelled out of a namespaceSelector: only that peer's set changes, in one transaction.
  before = snapshot();
  writes = await settledWrites();
  await relabel(`/api/v1/namespaces/${NS_B}`, { team: "c" });
  await until("other out of the team peer set", () =>
    set(peerSetName(teamPeer, 4))?.addresses.length === 0 ? true : undefined,
  );
  assert.equal((await settledWrites()) - writes, 1, "one NB write for a namespace relabel");
  assert.deepEqual(changedRows(before, snapshot()), [`Address_Set/${set(peerSetName(teamPeer, 4))?._uuid}`]);
  await relabel(`/api/v1/namespaces/${NS_B}`, { team: "b" });
  await until("other back", () => (set(peerSetName(teamPeer, 4))?.addresses.length === 1 ? true : undefined));

  // A peer pod replaced under another address (a filler takes the old one): the set follows the new address.
  await deletePod(NS_B, "other");
  await until("other out of the set", () =>
    set(peerSetName(teamPeer, 4))?.addresses.length === 0 ? true : undefined,
  );
  await createPod(NS_B, "filler", { app: "none" });
  await until("filler's port", () => ipOf(NS_B, "filler"));
  await createPod(NS_B, "other", { app: "client" });
  const newOtherIp = await until("other's new port", () => ipOf(NS_B, "other"));
  assert.notEqual(newOtherIp, otherIp);
  // The team peer is every pod of team=b namespaces: the filler too.
  const fillerIp = ipOf(NS_B, "filler") as string;
  await until("the set holds other's new address and the filler's", () =>
    set(peerSetName(teamPeer, 4))?.addresses.join() === [fillerIp, newOtherIp].sort().join()
      ? true
      : undefined,
  );

  // A pod relabelled into the policy's selector: its group, the isolation group and its node's group gain it,
  // and it leaves no peer (it was in none): one write per affected reconcile, nothing written twice.
  before = snapshot();
  writes = await settledWrites();
  await relabel(`/api/v1/namespaces/${NS}/pods/client`, { app: "server" });
  const clientPort = lsp(NS, "client")?._uuid as string;
  await until("client selected", () =>
    pg(G)?.ports.includes(clientPort) &&
    pg(ISOLATED_INGRESS)?.ports.includes(clientPort) &&
    pg(nodeGroupName(NODE))?.ports.includes(clientPort)
      ? true
      : undefined,
  );
  assert.equal(
    (await settledWrites()) - writes,
    3,
    "three reconciles (policy, isolation, node), one write each",
  );
  assert.deepEqual(
    changedRows(before, snapshot()),
    [G, ISOLATED_INGRESS, nodeGroupName(NODE)].map((n) => `Port_Group/${pg(n)?._uuid}`).sort(),
  );

  // The server replaced, declaring the named port on another number: a new named set and ACL, the old ones gone.
  await deletePod(NS, "server");
  await until("server's port gone", () => (lsp(NS, "server") ? undefined : true));
  await createPod(NS, "server", { app: "server" }, 8081);
  await until("the named port follows the new pod", () =>
    aclsOf(G).some((a) => a.match.includes("tcp.dst == 8081")) &&
    !aclsOf(G).some((a) => a.match.includes("tcp.dst == 8080"))
      ? true
      : undefined,
  );
  const newNamed = /\$(zovn_np_named_[0-9a-f]{16}_v4)/.exec(
    aclsOf(G).find((a) => a.match.includes("tcp.dst == 8081"))?.match ?? "",
  )?.[1];
  await until("the named set holds the new server's address", () =>
    set(newNamed ?? "")?.addresses[0] === ipOf(NS, "server") ? true : undefined,
  );
  assert.equal(set(namedMatch[1] as string), undefined, "the old named set is gone");

  // A second policy with the same client peer shares its set; deleting one keeps it, deleting both removes it.
  await relabel(`/api/v1/namespaces/${NS}/pods/client`, { app: "client" });
  await createPolicy("web2", {
    podSelector: { matchLabels: { app: "server" } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: "client" } } }], ports: [{ port: 81 }] }],
  });
  await until("web2's ACL", () => (aclsOf(policyGroupName(`${NS}/web2`)).length === 1 ? true : undefined));
  await until("client back in the shared set", () =>
    set(peerSetName(clientPeer, 4))?.addresses[0] === clientIp ? true : undefined,
  );
  assert.equal(
    [...nb().cache.table("Address_Set").values()].filter((r) => r.name === peerSetName(clientPeer, 4)).length,
    1,
  );
  await deletePolicy("web");
  await until("web's rows gone", () => (ownedBy(`${NS}/web`).length === 0 ? true : undefined));
  await settledWrites();
  assert.ok(set(peerSetName(clientPeer, 4)), "web2 still refers to the client peer");
  assert.equal(set(peerSetName(teamPeer, 4)), undefined, "nobody refers to the team peer any more");
  await deletePolicy("web2");
  await until("the client peer's set gone", () => (set(peerSetName(clientPeer, 4)) ? undefined : true));
  await until("nobody isolated", () => (pg(ISOLATED_INGRESS)?.ports.length === 0 ? true : undefined));

  // Deny-all ingress for the server: its group holds the server and has no ACL; the server is isolated.
  await createPolicy("bad", { podSelector: { matchLabels: { app: "server" } }, policyTypes: ["Ingress"] });
  const badGroup = policyGroupName(`${NS}/bad`);
  await until("bad's group with the server and no ACL", () =>
    pg(badGroup)?.ports.length === 1 && aclsOf(badGroup).length === 0 ? true : undefined,
  );
  await until("the server isolated", () => (pg(ISOLATED_INGRESS)?.ports.length === 1 ? true : undefined));

  // A restart with nothing changed writes nothing.
  let writesBefore = await settledWrites();
  await run.stop();
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  await run.synced;
  assert.equal((await settledWrites()) - writesBefore, 0, "no NB write after a restart with no change");

  // A policy deleted while the controller is down: the next start removes its rows.
  await createPolicy("gone", {
    podSelector: {},
    policyTypes: ["Egress"],
    egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1.0.0/16"] } }] }],
  });
  const goneGroup = policyGroupName(`${NS}/gone`);
  await until("gone's egress ACL", () => {
    const a = aclsOf(goneGroup)[0];
    return a?.direction === "from-lport" && a.options["apply-after-lb"] === "true" ? a : undefined;
  }).then((a) =>
    assert.equal(a.match, `inport == @${goneGroup} && (ip4.dst == 10.0.0.0/8 && ip4.dst != {10.1.0.0/16})`),
  );
  await until("egress isolation", () => ((pg(ISOLATED_EGRESS)?.ports.length ?? 0) >= 2 ? true : undefined));
  await settledWrites();
  await run.stop();
  await deletePolicy("gone");
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  await run.synced;
  await until("gone's rows removed at start", () =>
    ownedBy(`${NS}/gone`).length === 0 && pg(ISOLATED_EGRESS)?.ports.length === 0 ? true : undefined,
  );
  assert.ok(pg(badGroup), "the other policy's rows stay");
  writesBefore = await settledWrites();
  await run.stop();
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  await run.synced;
  assert.equal((await settledWrites()) - writesBefore, 0, "no NB write after the second restart");
  // The witness sees what the controller wrote (no row left only in a client's cache).
  assert.equal(
    [...witness.cache.table("Port_Group").values()].filter(
      (r) => r.external_ids[KIND_KEY] === "network-policy",
    ).length,
    1,
  );
});

test("policies present before the controller starts are written in batches, and a restart writes nothing", async (t) => {
  const { api, srv } = await useCluster(t);
  await createNamespace(api, NS);
  await api.request(`/api/v1/namespaces/${NS}/pods`, {
    method: "POST",
    body: {
      metadata: { name: "p", labels: { app: "c0" } },
      spec: { containers: [{ name: "c", image: "x" }] },
    },
  });
  // The pod gets its port from a first run; the policies are created while no controller runs.
  const first = await startInProcess({ api, srv });
  await until("the pod's port", () =>
    first.nb.cache.table("Logical_Switch_Port").findOne((r) => r.external_ids[ID_KEY] === podPortId(NS, "p")),
  );
  await first.stop();
  const N = 120;
  const names = Array.from({ length: N }, (_, i) => `bulk-${i}`);
  for (let i = 0; i < N; i += 10)
    await Promise.all(
      names.slice(i, i + 10).map((name, j) =>
        api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`, {
          method: "POST",
          body: {
            metadata: { name },
            spec: {
              podSelector: {},
              ingress: [
                {
                  from: [{ podSelector: { matchLabels: { app: `c${(i + j) % 10}` } } }],
                  ports: [{ port: 1000 + i + j }],
                },
              ],
            },
          },
        }),
      ),
    );
  const settledWrites = async () => {
    let last = await writeRecords(srv, "OVN_Northbound");
    for (;;) {
      await delay(1500);
      const now = await writeRecords(srv, "OVN_Northbound");
      if (now === last) return now;
      last = now;
    }
  };
  const before = await writeRecords(srv, "OVN_Northbound");
  // The batches go out several at once; the first one's reply is lost (the proxy drops the connection, so the
  // replies of the others in flight are lost too): the per-policy reconciles find what landed, one row of each.
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  let lostOps: readonly Record<string, unknown>[] = [];
  const lost = proxy.loseNextReply((ops) => {
    lostOps = ops;
    return ops.filter((o) => o.op === "insert" && o.table === "Port_Group").length > 1;
  });
  let run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await run.synced;
  await lost;
  // Every insert of the batch carries its row's derived uuid (peer sets included), and no wait guard scans a table.
  const inserts = lostOps.filter((o) => o.op === "insert");
  assert.equal(inserts.filter((o) => o.table === "Port_Group").length, 100);
  for (const o of inserts) {
    const ids = Object.fromEntries((o.row as { external_ids: [string, [string, string][]] }).external_ids[1]);
    assert.equal(o.uuid, rowUuid(ids[KIND_KEY] as Kind, ids[ID_KEY] ?? ""), `${o.table} ${ids[ID_KEY]}`);
  }
  assert.equal(lostOps.filter((o) => o.op === "wait").length, 0);
  const pg = (name: string) => run.nb.cache.table("Port_Group").lookupOne("name", name);
  await until("every policy's group with the pod and its ACL", () =>
    names.every(
      (n) =>
        pg(policyGroupName(`${NS}/${n}`))?.ports.length === 1 &&
        pg(policyGroupName(`${NS}/${n}`))?.acls.length === 1,
    )
      ? true
      : undefined,
  );
  const afterStart = await settledWrites();
  // The isolation groups take two writes; the policies (and their ten shared peer sets) ceil(N/100), not one each.
  const written = afterStart - before;
  assert.ok(written <= Math.ceil(N / 100) + 4, `${written} NB writes at start for ${N} policies`);
  const peerSets = [...run.nb.cache.table("Address_Set").values()].filter((r) =>
    r.name.startsWith("zovn_np_peer_"),
  );
  assert.equal(peerSets.length, 10, "one set per distinct peer");
  const podIp = run.nb.cache
    .table("Logical_Switch_Port")
    .findOne((r) => r.external_ids[ID_KEY] === podPortId(NS, "p"))
    ?.addresses[0]?.split(" ")[1];
  assert.ok(podIp);
  assert.deepEqual(
    peerSets.filter((s) => s.addresses.length > 0).map((s) => s.addresses),
    [[podIp]],
    "only the app=c0 peer holds the pod",
  );
  for (const n of names) {
    const key = `${NS}/${n}`;
    const rows = (table: "Port_Group" | "ACL") =>
      [...run.nb.cache.table(table).values()].filter((r) => r.external_ids[POLICY_KEY] === key).length;
    assert.equal(rows("Port_Group"), 1, `one port group for ${n}`);
    assert.equal(rows("ACL"), 1, `one ACL for ${n}`);
  }
  await run.stop();
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  await run.synced;
  assert.equal((await settledWrites()) - afterStart, 0, "no NB write after a restart with no change");
});

test("with a server that refuses chosen uuids, or a foreign row under one, a policy's inserts are guarded by waits", async (t) => {
  const { api, srv, nb: witness } = await useCluster(t);
  await createNamespace(api, NS);
  const createPolicy = (name: string) =>
    api.request(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`, {
      method: "POST",
      body: {
        metadata: { name },
        spec: {
          podSelector: {},
          ingress: [{ from: [{ podSelector: { matchLabels: { app: name } } }], ports: [{ port: 80 }] }],
        },
      },
    });
  // Someone else's row under the uuid the controller would choose for the port group of `foreign`, written by
  // the start-up bulk write: the controller must not take "duplicate uuid" for its own write having landed.
  const foreign = witness.transaction();
  foreign.insert(
    "Port_Group",
    { name: "not_ours", external_ids: { owner: "someone-else" } } as never,
    undefined,
    {
      uuid: rowUuid("network-policy", policyGroupId(`${NS}/foreign`)),
    },
  );
  await foreign.commit();
  await createPolicy("foreign");
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await run.synced;
  const rows = (key: string, table: "Port_Group" | "ACL") =>
    [...run.nb.cache.table(table).values()].filter((r) => r.external_ids[POLICY_KEY] === key);
  await until("foreign's rows", () =>
    rows(`${NS}/foreign`, "Port_Group").length === 1 && rows(`${NS}/foreign`, "ACL").length === 1
      ? true
      : undefined,
  );
  assert.equal(
    witness.cache.table("Port_Group").lookupOne("name", "not_ours")?.external_ids.owner,
    "someone-else",
  );

  // The proxy now answers as an ovsdb-server before 2.17; the next policy's first write loses its reply.
  proxy.refuseInsertUuid();
  // Asked once per connection: a new one learns the server's answer.
  proxy.cut();
  let lostOps: readonly Record<string, unknown>[] = [];
  const lost = proxy.loseNextReply((ops) => {
    lostOps = ops;
    return ops.some(
      (o) =>
        o.op === "insert" &&
        o.table === "Port_Group" &&
        JSON.stringify(o).includes(policyGroupName(`${NS}/old`)),
    );
  });
  await createPolicy("old");
  await lost;
  assert.ok(
    lostOps.every((o) => o.op !== "insert" || !("uuid" in o)),
    "no uuid member for this server",
  );
  assert.equal(
    lostOps.filter((o) => o.op === "wait").length,
    lostOps.filter((o) => o.op === "insert").length,
    "each insert is guarded by a wait",
  );
  await until("old's rows", () =>
    rows(`${NS}/old`, "Port_Group").length > 0 && rows(`${NS}/old`, "ACL").length > 0 ? true : undefined,
  );
  await delay(1500);
  assert.equal(rows(`${NS}/old`, "Port_Group").length, 1, "one port group after the lost reply");
  assert.equal(rows(`${NS}/old`, "ACL").length, 1, "one ACL after the lost reply");
});
