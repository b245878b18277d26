// Services against a real kube-apiserver and NB (EndpointSlices made by hand: no slice controller here): the
// load balancers appear in the cluster group, follow endpoint changes with one write, survive a lost reply on
// their insert as one row, carry per-chassis template variables for internalTrafficPolicy Local, go with their
// Service (also while the controller is down), a restart with nothing changed writes nothing, and a bad field
// gets a Warning Event without disturbing other Services. Services present before the controller starts are
// written in batches of 100 per transaction (one row each, also when a batch's reply is lost).
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { ID_KEY, rowUuid, SERVICE_KEY } from "../../../src/ovn/ownership.ts";
import { CLUSTER_IP_LB_GROUP, CLUSTER_LB_GROUP, subnetSwitchName } from "../../../src/ovn/topology.ts";
import type { OvsdbClient } from "../../../src/ovsdb/client.ts";
import type { NbTables } from "../../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { startOvsdbFaultProxy } from "../../rig/ovsdb-fault-proxy.ts";
import { type InProcessController, startInProcess, untilOk as until, useCluster } from "./harness.ts";

const NS = "default";

test("Services become load balancers in the cluster group and follow their endpoints", async (t) => {
  const { api, srv, nb: witness } = await useCluster(t);
  for (const n of ["node1", "node2"])
    await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: n } } });
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-controller" });
  t.after(() => events.close());
  let run: InProcessController = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  t.after(() => run.stop());
  const nb = (): OvsdbClient<NbTables> => run.nb;
  const lbs = (id: string) =>
    [...nb().cache.table("Load_Balancer").values()].filter((r) => r.external_ids[ID_KEY] === id);
  const lb = (id: string) => lbs(id)[0];
  const group = () => nb().cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
  const ipGroup = () => nb().cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_IP_LB_GROUP);

  const createService = async (name: string, spec: Record<string, unknown>) => {
    const svc = await api.request<{ spec: { clusterIP: string } }>(`/api/v1/namespaces/${NS}/services`, {
      method: "POST",
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }], ...spec } },
    });
    return svc.spec.clusterIP;
  };
  const slice = (service: string, eps: { ip: string; node: string }[], port = 8080) => ({
    metadata: { name: `${service}-x`, labels: { "kubernetes.io/service-name": service } },
    addressType: "IPv4",
    endpoints: eps.map((e) => ({ addresses: [e.ip], nodeName: e.node, conditions: { ready: true } })),
    ports: [{ name: "http", protocol: "TCP", port }],
  });
  const putSlice = async (service: string, eps: { ip: string; node: string }[]) => {
    const path = `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`;
    const body = slice(service, eps);
    const existing = await api
      .request<{ metadata: { resourceVersion: string } }>(`${path}/${body.metadata.name}`)
      .catch(() => undefined);
    if (!existing) await api.request(path, { method: "POST", body });
    else
      await api.request(`${path}/${body.metadata.name}`, {
        method: "PUT",
        body: { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata.resourceVersion } },
      });
  };
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

  // The group exists and the default Subnet's switch refers to it.
  await until("default switch in the group", () => {
    const ls = nb()
      .cache.table("Logical_Switch")
      .findOne((r) => r.name === subnetSwitchName("default"));
    const g = group();
    return ls && g && ls.load_balancer_group.includes(g._uuid) ? true : undefined;
  });

  // A lost reply on the load balancer's insert: the retry finds it and there is still exactly one row. The
  // insert carries the row's derived uuid (ovsdb-server 3.1 takes it), so no `wait` guard scans the table.
  let lostOps: readonly Record<string, unknown>[] = [];
  const lost = proxy.loseNextReply((ops) => {
    lostOps = ops;
    return ops.some((o) => o.op === "insert" && o.table === "Load_Balancer");
  });
  const webIP = await createService("web", {});
  await lost;
  const lbInsert = lostOps.find((o) => o.op === "insert" && o.table === "Load_Balancer");
  assert.equal(lbInsert?.uuid, rowUuid("service-lb", `${NS}/web/tcp`));
  assert.equal(lostOps.filter((o) => o.op === "wait").length, 0, "no wait guard with a chosen uuid");
  await until("web LB", () => lb(`${NS}/web/tcp`));
  await until("both groups hold web's LB (cluster IPs only)", () => {
    const l = lb(`${NS}/web/tcp`);
    return l && group()?.load_balancer.includes(l._uuid) && ipGroup()?.load_balancer.includes(l._uuid)
      ? true
      : undefined;
  });
  await settledWrites();
  assert.equal(lbs(`${NS}/web/tcp`).length, 1, "one LB row after the lost reply");
  const web = lb(`${NS}/web/tcp`);
  assert.ok(web);
  assert.equal(web.name, `zovn-svc_${NS}_web_tcp`);
  assert.equal(web.protocol, "tcp");
  assert.deepEqual(web.vips, { [`${webIP}:80`]: "" });
  assert.equal(web.options.reject, "true");
  assert.equal(web.options.ct_flush, "true", "ovn-controller flushes a removed backend's conntrack entries");
  assert.equal(web.external_ids[SERVICE_KEY], `${NS}/web`);

  // A second row with the same id (written by hand) is removed; the first stays.
  const dupTxn = witness.transaction();
  const dupRef = dupTxn.insert("Load_Balancer", {
    name: web.name,
    protocol: "tcp",
    vips: web.vips,
    options: web.options,
    external_ids: web.external_ids,
  } as never);
  const dup = (await dupTxn.commit()).uuid(dupRef);
  // ovsdb-server sends the update before the reply: the duplicate is in the witness' cache now.
  assert.ok(witness.cache.table("Load_Balancer").get(dup), "the witness saw the duplicate");
  await until("the duplicate removed", () =>
    witness.cache.table("Load_Balancer").get(dup) ? undefined : true,
  );
  assert.equal(lbs(`${NS}/web/tcp`).length, 1);
  assert.equal(lb(`${NS}/web/tcp`)?._uuid, web._uuid);

  // A load balancer changed by hand is put back as the Service says (our own writes coming back are not such a
  // change, but this one must still be seen as one).
  await witness.transact((txn) => {
    txn.update("Load_Balancer", byUuid(web._uuid), { vips: { "10.96.99.99:80": "10.244.9.9:8080" } });
  });
  assert.deepEqual(witness.cache.table("Load_Balancer").get(web._uuid)?.vips, {
    "10.96.99.99:80": "10.244.9.9:8080",
  });
  await until("web's vips put back", () =>
    JSON.stringify(witness.cache.table("Load_Balancer").get(web._uuid)?.vips) ===
    JSON.stringify({ [`${webIP}:80`]: "" })
      ? true
      : undefined,
  );

  // Endpoints appear, then scale: each change rewrites that one row in one transaction.
  await putSlice("web", [{ ip: "10.244.0.5", node: "node1" }]);
  await until("web has a backend", () =>
    lb(`${NS}/web/tcp`)?.vips[`${webIP}:80`] === "10.244.0.5:8080" ? true : undefined,
  );
  const other = await createService("other", {});
  await until("other LB", () => lb(`${NS}/other/tcp`));
  const otherBefore = lb(`${NS}/other/tcp`);
  const before = await settledWrites();
  await putSlice("web", [
    { ip: "10.244.0.5", node: "node1" },
    { ip: "10.244.0.6", node: "node2" },
    { ip: "10.244.0.7", node: "node2" },
  ]);
  await until("web scaled to 3", () =>
    lb(`${NS}/web/tcp`)?.vips[`${webIP}:80`] === "10.244.0.5:8080,10.244.0.6:8080,10.244.0.7:8080"
      ? true
      : undefined,
  );
  assert.equal((await settledWrites()) - before, 1, "one NB write for one endpoint change");
  assert.deepEqual(lb(`${NS}/other/tcp`), otherBefore, "the other Service's LB is untouched");
  assert.ok(other);

  // internalTrafficPolicy Local: the cluster IP moves to a template LB, backends per chassis.
  const localIP = await createService("local", { internalTrafficPolicy: "Local" });
  await putSlice("local", [
    { ip: "10.244.0.8", node: "node1" },
    { ip: "10.244.0.9", node: "node1" },
  ]);
  const tpl = await until("template LB", () => lb(`${NS}/local/tcp/local-v4`));
  assert.equal(tpl.options.template, "true");
  assert.equal(tpl.options["address-family"], "ipv4");
  assert.equal(lb(`${NS}/local/tcp`), undefined, "no plain LB: the Service has no other VIP");
  const beVar = String(tpl.vips[`${localIP}:80`]).slice(1);
  assert.match(beVar, /^zsvc_be_/);
  const vars = (chassis: string) =>
    nb()
      .cache.table("Chassis_Template_Var")
      .findOne((r) => r.chassis === chassis)?.variables;
  await until("per-chassis backends", () =>
    vars("node1")?.[beVar] === "10.244.0.8:8080,10.244.0.9:8080" && vars("node2")?.[beVar] === ""
      ? true
      : undefined,
  );
  assert.ok(group()?.load_balancer.includes(tpl._uuid));

  // A foreign key in a chassis' variables is left alone when our keys change.
  const row = nb()
    .cache.table("Chassis_Template_Var")
    .findOne((r) => r.chassis === "node2");
  assert.ok(row);
  await nb().transact((tx) =>
    tx.mutate(
      "Chassis_Template_Var",
      [["_uuid", "==", row._uuid]],
      [["variables", "insert", { theirs: "x" }]],
    ),
  );
  await putSlice("local", [{ ip: "10.244.0.10", node: "node2" }]);
  await until("backends moved to node2", () =>
    vars("node1")?.[beVar] === "" && vars("node2")?.[beVar] === "10.244.0.10:8080" ? true : undefined,
  );
  assert.equal(vars("node2")?.theirs, "x");

  // A node gone: its chassis keeps none of our keys (and still the foreign one).
  await api.request("/api/v1/nodes/node2", { method: "DELETE" });
  await until("node2's row without our keys", () =>
    beVar in (vars("node2") ?? {}) ? undefined : vars("node1")?.[beVar] === "" ? true : undefined,
  );
  assert.equal(vars("node2")?.theirs, "x");

  // A bad field: a Warning Event naming it, the rest of the Service realized, others undisturbed.
  const badIP = await createService("bad", { externalIPs: ["10.244.5.5", "192.168.200.60"] });
  await until("bad LBs", () => lb(`${NS}/bad/tcp`) && lb(`${NS}/bad/tcp/external`));
  assert.deepEqual(Object.keys(lb(`${NS}/bad/tcp`)?.vips ?? {}), [`${badIP}:80`]);
  assert.deepEqual(Object.keys(lb(`${NS}/bad/tcp/external`)?.vips ?? {}), ["192.168.200.60:80"]);
  // The externalIP's row is in the full group only: never in the one ZStack's switches refer to.
  const badExt = lb(`${NS}/bad/tcp/external`)?._uuid as string;
  await until("the externalIP row in the full group", () =>
    group()?.load_balancer.includes(badExt) ? true : undefined,
  );
  assert.ok(!ipGroup()?.load_balancer.includes(badExt), "not in the cluster-IP group");
  const warning = await until("a Warning Event on the bad Service", async () => {
    const list = await api.request<{
      items: { type: string; reason: string; message: string; involvedObject: { name: string } }[];
    }>(`/api/v1/namespaces/${NS}/events`);
    // Ours only: kube-apiserver's ClusterIP repair loop may post its own Warning on a new Service.
    return list.items.find(
      (e) => e.involvedObject.name === "bad" && e.type === "Warning" && e.reason === "ServiceNotRealized",
    );
  });
  assert.match(warning.message, /spec\.externalIPs\[0\].*cluster CIDR/);
  assert.ok(lb(`${NS}/web/tcp`), "web still there");

  // An externalIP that is a node's address or the API server's (the kubernetes Service's endpoint) is refused:
  // it would take the node's SSH or kubelet port, or every client's API server traffic.
  // The rig's apiserver runs no endpoint reconciler: its slice is written here, as kube-apiserver writes it.
  const apiServerIP = "192.168.200.2";
  await api.request("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
    method: "POST",
    body: {
      metadata: { name: "kubernetes", labels: { "kubernetes.io/service-name": "kubernetes" } },
      addressType: "IPv4",
      endpoints: [{ addresses: [apiServerIP], conditions: { ready: true } }],
      ports: [{ name: "https", protocol: "TCP", port: 6443 }],
    },
  });
  await api.request("/api/v1/nodes/node1/status", {
    method: "PATCH",
    body: { status: { addresses: [{ type: "InternalIP", address: "192.168.200.11" }] } },
  });
  const hijackIP = await createService("hijack", {
    externalIPs: ["192.168.200.11", apiServerIP, "192.168.200.61"],
  });
  await until("hijack LB without the node's and the API server's address", () => {
    const vips = [
      ...Object.keys(lb(`${NS}/hijack/tcp`)?.vips ?? {}),
      ...Object.keys(lb(`${NS}/hijack/tcp/external`)?.vips ?? {}),
    ].sort();
    return vips.length > 1 ? vips : undefined;
  }).then((vips) => assert.deepEqual(vips, [`${hijackIP}:80`, "192.168.200.61:80"].sort()));
  const hijackWarnings = await until("Warning Events on the hijacking Service", async () => {
    const list = await api.request<{
      items: { reason: string; message: string; involvedObject: { name: string } }[];
    }>(`/api/v1/namespaces/${NS}/events`);
    const mine = list.items.filter(
      (e) => e.involvedObject.name === "hijack" && e.reason === "ServiceNotRealized",
    );
    return mine.length >= 2 ? mine.map((e) => e.message).sort() : undefined;
  });
  assert.match(hijackWarnings[0] ?? "", /spec\.externalIPs\[0\]: 192\.168\.200\.11 is a node's address/);
  assert.match(hijackWarnings[1] ?? "", /spec\.externalIPs\[1\]: .* is the API server's address/);

  // Deleting a Service removes its rows and its chassis variables.
  await api.request(`/api/v1/namespaces/${NS}/services/local`, { method: "DELETE" });
  await until("template LB gone", () => (lb(`${NS}/local/tcp/local-v4`) ? undefined : true));
  await until("its variables gone", () => (beVar in (vars("node1") ?? {}) ? undefined : true));
  assert.equal(vars("node2")?.theirs, "x");

  // While the controller is down: a Service is deleted, and the subnet switch loses its group (as a switch
  // made before the group existed). The next start removes the LB and links the switch again.
  await run.stop();
  await api.request(`/api/v1/namespaces/${NS}/services/other`, { method: "DELETE" });
  const switchRow = () =>
    witness.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("default"));
  const ls = switchRow();
  assert.ok(ls);
  await witness.transact((tx) =>
    tx.mutate(
      "Logical_Switch",
      [["_uuid", "==", ls._uuid]],
      [["load_balancer_group", "delete", ls.load_balancer_group]],
    ),
  );
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  await run.synced;
  await until("other's LB removed at start", () => (lb(`${NS}/other/tcp`) ? undefined : true));
  await until("the switch refers to the group again", () =>
    switchRow()?.load_balancer_group.length === 1 ? true : undefined,
  );
  assert.ok(lb(`${NS}/web/tcp`));

  // A restart with nothing changed writes nothing.
  const beforeRestart = await settledWrites();
  await run.stop();
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote, events });
  await run.synced;
  assert.equal((await settledWrites()) - beforeRestart, 0, "no NB write after a restart with no change");
});

test("Services present before the controller starts are written in batches, and a restart writes nothing", async (t) => {
  const { api, srv } = await useCluster(t);
  const N = 150;
  const ENDPOINTS = 10;
  // Nodes exist, as in any cluster: each gets an (empty) template-variable entry, which must not turn the bulk
  // write off.
  for (const n of ["node1", "node2"])
    await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: n } } });
  const ips = new Map<string, string>();
  const names = Array.from({ length: N }, (_, i) => `bulk-${i}`);
  for (let i = 0; i < N; i += 10)
    await Promise.all(
      names.slice(i, i + 10).map(async (name, j) => {
        const svc = await api.request<{ spec: { clusterIP: string } }>(`/api/v1/namespaces/${NS}/services`, {
          method: "POST",
          body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
        });
        ips.set(name, svc.spec.clusterIP);
        await api.request(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, {
          method: "POST",
          body: {
            metadata: { name: `${name}-x`, labels: { "kubernetes.io/service-name": name } },
            addressType: "IPv4",
            endpoints: Array.from({ length: ENDPOINTS }, (_, e) => ({
              addresses: [`10.244.${i + j}.${e + 1}`],
              conditions: { ready: true },
            })),
            ports: [{ name: "http", protocol: "TCP", port: 8080 }],
          },
        });
      }),
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
  const expected = (k: number) =>
    Array.from({ length: ENDPOINTS }, (_, e) => `10.244.${k}.${e + 1}:8080`).join(",");

  const before = await writeRecords(srv, "OVN_Northbound");
  // The first batch's reply is lost: its retry must not add a second row for any of its Services.
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  let lostOps: readonly Record<string, unknown>[] = [];
  const lost = proxy.loseNextReply((ops) => {
    lostOps = ops;
    return ops.filter((o) => o.op === "insert" && o.table === "Load_Balancer").length > 1;
  });
  let run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await run.synced;
  await lost;
  // Every insert of the lost batch carries its row's derived uuid, and no wait guard scans the table.
  const inserts = lostOps.filter((o) => o.op === "insert" && o.table === "Load_Balancer");
  assert.equal(inserts.length, 100);
  for (const o of inserts) {
    const id = (o.row as { external_ids: [string, [string, string][]] }).external_ids[1].find(
      ([k]) => k === ID_KEY,
    )?.[1];
    assert.equal(o.uuid, rowUuid("service-lb", id ?? ""));
  }
  assert.equal(lostOps.filter((o) => o.op === "wait").length, 0);
  const lbOf = (name: string) =>
    run.nb.cache.table("Load_Balancer").findOne((r) => r.external_ids[ID_KEY] === `${NS}/${name}/tcp`);
  await until("every Service's LB with all its endpoints", () =>
    names.every((name, k) => lbOf(name)?.vips[`${ips.get(name)}:80`] === expected(k)) ? true : undefined,
  );
  const afterStart = await settledWrites();
  // The start-up topology (router, join switch, default Subnet's switch, group, the two nodes' management ports
  // and NetworkPolicy groups) takes about ten writes; the Services only ceil(N/100) of them, not one each.
  const written = afterStart - before;
  assert.ok(written <= Math.ceil(N / 100) + 12, `${written} NB writes at start for ${N} Services`);
  const group = run.nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
  assert.ok(group);
  for (const [k, name] of names.entries()) {
    const rows = [...run.nb.cache.table("Load_Balancer").values()].filter(
      (r) => r.external_ids[ID_KEY] === `${NS}/${name}/tcp`,
    );
    assert.equal(rows.length, 1, `one LB row for ${name}`);
    const lb = rows[0];
    assert.ok(lb);
    assert.equal(lb.name, `zovn-svc_${NS}_${name}_tcp`);
    assert.deepEqual(lb.vips, { [`${ips.get(name)}:80`]: expected(k) });
    assert.equal(lb.external_ids[SERVICE_KEY], `${NS}/${name}`);
    assert.ok(group.load_balancer.includes(lb._uuid), `${name}'s LB is in the group`);
  }

  await run.stop();
  run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  await run.synced;
  assert.equal((await settledWrites()) - afterStart, 0, "no NB write after a restart with no change");
});

test("with a server that refuses chosen uuids, a Service's insert is guarded by a wait and a lost reply leaves one row", async (t) => {
  const { api, srv } = await useCluster(t);
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  // The proxy answers as an ovsdb-server before 2.17: an insert with a "uuid" member is a parse error.
  proxy.refuseInsertUuid();
  let lostOps: readonly Record<string, unknown>[] = [];
  const lost = proxy.loseNextReply((ops) => {
    lostOps = ops;
    return ops.some(
      (o) =>
        o.op === "insert" && o.table === "Load_Balancer" && JSON.stringify(o).includes(`"${NS}/old/tcp"`),
    );
  });
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await run.synced;
  await api.request(`/api/v1/namespaces/${NS}/services`, {
    method: "POST",
    body: { metadata: { name: "old" }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
  });
  await lost;
  const insert = lostOps.find((o) => o.op === "insert" && o.table === "Load_Balancer");
  assert.ok(insert && !("uuid" in insert), "no uuid member for this server");
  assert.ok(
    lostOps.some((o) => o.op === "wait" && o.table === "Load_Balancer"),
    "the insert is guarded by a wait on its id",
  );
  const rows = () =>
    [...run.nb.cache.table("Load_Balancer").values()].filter(
      (r) => r.external_ids[ID_KEY] === `${NS}/old/tcp`,
    );
  await until("old's LB", () => (rows().length > 0 ? true : undefined));
  // Later reconciles (a change of the slice) find it: still one row.
  await api.request(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, {
    method: "POST",
    body: {
      metadata: { name: "old-x", labels: { "kubernetes.io/service-name": "old" } },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.244.9.9"], conditions: { ready: true } }],
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    },
  });
  await until("old's LB has its endpoint", () =>
    rows().some((r) => Object.values(r.vips).includes("10.244.9.9:8080")) ? true : undefined,
  );
  assert.equal(rows().length, 1, "one LB row after the lost reply");
});

test("a foreign row holding a Service's derived uuid does not stop its load balancers from being written", async (t) => {
  const { api, srv, nb: witness } = await useCluster(t);
  // Someone else's row (or ours with its external_ids cleared by hand) under the uuid the controller would
  // choose, for a Service written by the start-up bulk write and for one written by its reconcile.
  const ids = [`${NS}/early/tcp`, `${NS}/late/tcp`];
  const txn = witness.transaction();
  for (const id of ids)
    txn.insert(
      "Load_Balancer",
      { name: `not-ours-${id}`, external_ids: { owner: "someone-else" } } as never,
      undefined,
      {
        uuid: rowUuid("service-lb", id),
      },
    );
  await txn.commit();
  const createService = (name: string) =>
    api.request(`/api/v1/namespaces/${NS}/services`, {
      method: "POST",
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
    });
  await createService("early");
  const run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  await run.synced;
  await createService("late");
  const ours = (id: string) =>
    [...run.nb.cache.table("Load_Balancer").values()].filter((r) => r.external_ids[ID_KEY] === id);
  for (const id of ids) {
    await until(`${id}'s LB`, () => (ours(id).length === 1 ? true : undefined));
    const foreign = run.nb.cache.table("Load_Balancer").get(rowUuid("service-lb", id));
    assert.equal(foreign?.name, `not-ours-${id}`, "the foreign row is left alone");
    assert.deepEqual(foreign?.external_ids, { owner: "someone-else" });
    assert.notEqual(ours(id)[0]?._uuid, rowUuid("service-lb", id));
  }
});

test("with a server that refuses chosen uuids, a row that carries a Service's id but is not ours does not block it", async (t) => {
  const { api, srv, nb: witness } = await useCluster(t);
  const proxy = await startOvsdbFaultProxy(srv.unix);
  t.after(() => proxy.close());
  proxy.refuseInsertUuid();
  // The id key without our owner key (the owner changed by hand): not ours, so the wait guard must not see it.
  const id = `${NS}/copied/tcp`;
  const txn = witness.transaction();
  txn.insert("Load_Balancer", { name: "copied", external_ids: { [ID_KEY]: id } } as never);
  await txn.commit();
  const run = await startInProcess({ api, srv }, { nbRemote: proxy.remote });
  t.after(() => run.stop());
  await run.synced;
  await api.request(`/api/v1/namespaces/${NS}/services`, {
    method: "POST",
    body: { metadata: { name: "copied" }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
  });
  const rows = () =>
    [...run.nb.cache.table("Load_Balancer").values()].filter((r) => r.external_ids[ID_KEY] === id);
  await until("copied's LB", () => (rows().length === 2 ? true : undefined));
  assert.equal(rows().filter((r) => r.name === "copied").length, 1, "the foreign row is left alone");
  assert.ok(rows().some((r) => r.external_ids[SERVICE_KEY] === `${NS}/copied`));
});
