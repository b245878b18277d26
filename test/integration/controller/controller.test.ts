// zstack-ovnkube-controller against a real kube-apiserver and a real OVN NB database.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { MGMT_PORT_ANNOTATION } from "../../../src/controller/management-ports.ts";
import { POD_NETWORKS_ANNOTATION, parsePodNetworksAnnotation } from "../../../src/ovn/pod-port.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { startInProcess, until, useCluster } from "./harness.ts";

interface Pod {
  metadata: { name: string; namespace: string; uid: string; annotations?: Record<string, string> };
}

test("the controller gives nodes management ports and pods addresses and ports, removes deleted pods' ports, and a restart writes nothing", async (t) => {
  const { api, srv } = await useCluster(t);

  for (const n of ["node1", "node2"]) {
    await api.request("/api/v1/nodes", {
      method: "POST",
      body: {
        metadata: { name: n },
        status: {
          addresses: [{ type: "InternalIP", address: n === "node1" ? "192.168.200.11" : "192.168.200.12" }],
        },
      },
    });
  }
  for (const ns of ["a", "b"]) {
    await api.request("/api/v1/namespaces", { method: "POST", body: { metadata: { name: ns } } });
    await api.request(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      method: "POST",
      body: { metadata: { name: "default" } },
    });
  }

  let run = await startInProcess({ api, srv });
  t.after(() => run.stop());

  // The default subnet is created from the cluster CIDR and becomes Ready.
  const def = await until("default subnet Ready", async () => {
    const s = await api.request<Subnet>(`${SUBNET_PATH}/default`).catch(() => undefined);
    return s?.status?.conditions?.find((c) => c.type === "Ready" && c.status === "True") ? s : undefined;
  });
  assert.equal(def.status?.phase, "Active");
  assert.equal(def.status?.logicalSwitch, "subnet-default");
  assert.equal(def.status?.portCapacity, 2048);

  // Nodes get their management port annotation.
  const mgmt = await until("node1 mgmt annotation", async () => {
    const n = await api.request<{ metadata: { annotations?: Record<string, string> } }>(
      "/api/v1/nodes/node1",
    );
    return n.metadata.annotations?.[MGMT_PORT_ANNOTATION];
  });
  assert.match(mgmt, /"ip":"100\.64\.0\.[23]\/16"/);

  // A node that rewrites its own annotation (its agent may patch its Node) to claim another node's management
  // address as its service SNAT address gets the controller's value back: NB is the truth, the annotation a copy.
  const node2Mgmt = await until("node2 mgmt annotation", async () => {
    const n = await api.request<{ metadata: { annotations?: Record<string, string> } }>(
      "/api/v1/nodes/node2",
    );
    return n.metadata.annotations?.[MGMT_PORT_ANNOTATION];
  });
  const forged = { ...JSON.parse(mgmt), serviceSnatIp: (JSON.parse(node2Mgmt).ip as string).split("/")[0] };
  await api.request("/api/v1/nodes/node1", {
    method: "PATCH",
    body: { metadata: { annotations: { [MGMT_PORT_ANNOTATION]: JSON.stringify(forged) } } },
  });
  await until("node1's annotation restored from NB", async () => {
    const n = await api.request<{ metadata: { annotations?: Record<string, string> } }>(
      "/api/v1/nodes/node1",
    );
    return n.metadata.annotations?.[MGMT_PORT_ANNOTATION] === mgmt ? true : undefined;
  });

  // 40 pods that can never be scheduled: the controller works before scheduling.
  const names: [string, string][] = [];
  for (let i = 0; i < 40; i++) {
    const ns = i % 2 ? "a" : "b";
    names.push([ns, `p${i}`]);
    await api.request(`/api/v1/namespaces/${ns}/pods`, {
      method: "POST",
      body: {
        metadata: { name: `p${i}` },
        spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
      },
    });
  }
  const ips = new Map<string, string>();
  for (const [ns, name] of names) {
    const ann = await until(`annotation of ${ns}/${name}`, async () => {
      const p = await api.request<Pod>(`/api/v1/namespaces/${ns}/pods/${name}`);
      return parsePodNetworksAnnotation(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
    });
    ips.set(`${ns}/${name}`, ann.ip_addresses[0] as string);
    assert.equal(ann.logical_switch, "subnet-default");
  }
  assert.equal(new Set(ips.values()).size, 40, "every pod has its own address");
  await run.nb.echo();
  const lsps = () =>
    run.nb.cache.table("Logical_Switch_Port").find((r) => r.external_ids["zstack.io/kind"] === "pod-port");
  assert.equal(lsps().length, 40);

  // Delete half of them.
  for (const [ns, name] of names.slice(0, 20)) {
    await api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
      method: "DELETE",
      query: { gracePeriodSeconds: 0 },
    });
  }
  await until("20 pod ports left", () => (lsps().length === 20 ? true : undefined));

  // Restart: nothing changed, so nothing is written to NB.
  await run.stop();
  const before = await writeRecords(srv, "OVN_Northbound");
  run = await startInProcess({ api, srv });
  await delay(3000);
  assert.equal(
    (await writeRecords(srv, "OVN_Northbound")) - before,
    0,
    "a restart with no changes writes nothing to NB",
  );
  await run.nb.echo();
  assert.equal(lsps().length, 20, "no stale port, none lost");
  for (const p of lsps()) {
    const key = p.external_ids["zstack.io/pod"] as string;
    assert.ok(ips.has(key));
    assert.ok(p.addresses[0]?.endsWith(` ${(ips.get(key) as string).split("/")[0]}`), "addresses unchanged");
  }

  // A pod deleted while the controller was down loses its port at the next start.
  await run.stop();
  const [gns, gname] = names[25] as [string, string];
  await api.request(`/api/v1/namespaces/${gns}/pods/${gname}`, {
    method: "DELETE",
    query: { gracePeriodSeconds: 0 },
  });
  run = await startInProcess({ api, srv });
  await until("the port of the pod deleted during downtime is gone", () =>
    lsps().length === 19 ? true : undefined,
  );
});

test("an overlapping Subnet is Failed naming the other one, and becomes Ready once the conflict is removed", async (t) => {
  const { api, srv } = await useCluster(t);
  const run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  const create = (name: string, cidr: string, gateway: string) =>
    api.request(SUBNET_PATH, {
      method: "POST",
      body: {
        apiVersion: "network.zstack.io/v1",
        kind: "Subnet",
        metadata: { name },
        spec: { cidr, gateway },
      },
    });
  const status = (name: string) => api.request<Subnet>(`${SUBNET_PATH}/${name}`).then((s) => s.status);
  await create("blue", "10.50.0.0/16", "10.50.0.1");
  await until("blue Ready", async () =>
    (await status("blue"))?.conditions?.[0]?.status === "True" ? true : undefined,
  );
  await delay(1100); // creationTimestamp has one-second resolution
  await create("green", "10.50.1.0/24", "10.50.1.1");
  const g = await until("green Failed", async () => {
    const s = await status("green");
    return s?.phase === "Failed" ? s : undefined;
  });
  assert.match(g.message ?? "", /overlaps Subnet blue/);
  assert.equal((await status("blue"))?.phase, "Active", "the older subnet keeps working");
  await api.request(`${SUBNET_PATH}/blue`, { method: "DELETE" });
  await until("green Ready", async () =>
    (await status("green"))?.conditions?.[0]?.status === "True" ? true : undefined,
  );
  await run.nb.echo();
  assert.ok(run.nb.cache.table("Logical_Switch").findOne((r) => r.name === "subnet-green"));
  assert.equal(
    run.nb.cache.table("Logical_Switch").findOne((r) => r.name === "subnet-blue"),
    undefined,
  );
});
