// Three Service fields against a real kube-apiserver and NB (EndpointSlices and their hints made by hand: no
// slice controller here): an ingress IP with ipMode Proxy is never a VIP; an LB IP filtered by
// loadBalancerSourceRanges is no VIP either (pods reach it through their node, whose nft filters the source)
// and becomes one when the ranges go; topology hints (trafficDistribution) put the Service's VIPs in a template
// load balancer whose backends are each chassis' hinted endpoints, following a node's zone label.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ID_KEY } from "../../../src/ovn/ownership.ts";
import { startInProcess, untilOk as until, useCluster } from "./harness.ts";

const NS = "default";
const ZONE = "topology.kubernetes.io/zone";

test("ipMode Proxy and source-filtered LB IPs are no VIPs; topology hints give each chassis its own backends", async (t) => {
  const { api, srv } = await useCluster(t);
  const nodes: [string, string | undefined][] = [
    ["node1", "zone-a"],
    ["node2", "zone-b"],
    ["node3", undefined],
  ];
  for (const [name, zone] of nodes)
    await api.request("/api/v1/nodes", {
      method: "POST",
      body: { metadata: { name, ...(zone ? { labels: { [ZONE]: zone } } : {}) } },
    });
  const run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  const lb = (id: string) =>
    [...run.nb.cache.table("Load_Balancer").values()].find((r) => r.external_ids[ID_KEY] === id);
  const vars = (chassis: string) =>
    run.nb.cache.table("Chassis_Template_Var").findOne((r) => r.chassis === chassis)?.variables;
  const createService = async (name: string, spec: Record<string, unknown>) => {
    const svc = await api.request<{ spec: { clusterIP: string } }>(`/api/v1/namespaces/${NS}/services`, {
      method: "POST",
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }], ...spec } },
    });
    return svc.spec.clusterIP;
  };
  const setIngress = (name: string, ingress: object[]) =>
    api.request(`/api/v1/namespaces/${NS}/services/${name}/status`, {
      method: "PATCH",
      body: { status: { loadBalancer: { ingress } } },
    });

  // ipMode Proxy and loadBalancerSourceRanges.
  const lbIP = await createService("lb", {
    type: "LoadBalancer",
    allocateLoadBalancerNodePorts: false,
    externalIPs: ["192.168.202.10"],
    loadBalancerSourceRanges: ["192.168.200.100/32"],
  });
  await setIngress("lb", [{ ip: "192.168.201.10" }, { ip: "192.168.201.11", ipMode: "Proxy" }]);
  // The cluster IPs are in the Service's cluster row, externalIPs and LB IPs in its external row.
  const vipsOf = (...ids: string[]) => ids.flatMap((id) => Object.keys(lb(id)?.vips ?? {})).sort();
  const expectVips = (what: string, want: string[]) =>
    until(what, () =>
      JSON.stringify(vipsOf(`${NS}/lb/tcp`, `${NS}/lb/tcp/external`)) === JSON.stringify(want.sort()) &&
      JSON.stringify(vipsOf(`${NS}/lb/tcp`)) === JSON.stringify([`${lbIP}:80`])
        ? true
        : undefined,
    );
  await expectVips("cluster IP and externalIP only (the LB IP is filtered, the other is Proxy)", [
    `${lbIP}:80`,
    "192.168.202.10:80",
  ]);
  // The ranges go: the VIP-mode LB IP becomes a VIP, the Proxy one never does.
  const current = await api.request<{ metadata: { resourceVersion: string }; spec: Record<string, unknown> }>(
    `/api/v1/namespaces/${NS}/services/lb`,
  );
  await api.request(`/api/v1/namespaces/${NS}/services/lb`, {
    method: "PUT",
    body: { ...current, spec: { ...current.spec, loadBalancerSourceRanges: [] } },
  });
  await expectVips("the unfiltered LB IP is a VIP", [`${lbIP}:80`, "192.168.202.10:80", "192.168.201.10:80"]);

  // Topology hints: node1 (zone-a) gets the zone-a endpoint, node2 (zone-b) the zone-b one, node3 (no zone) both.
  const hintedIP = await createService("hinted", { trafficDistribution: "PreferSameZone" });
  await api.request(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, {
    method: "POST",
    body: {
      metadata: { name: "hinted-x", labels: { "kubernetes.io/service-name": "hinted" } },
      addressType: "IPv4",
      endpoints: [
        {
          addresses: ["10.244.1.5"],
          nodeName: "node1",
          conditions: { ready: true },
          hints: { forZones: [{ name: "zone-a" }] },
        },
        {
          addresses: ["10.244.2.5"],
          nodeName: "node2",
          conditions: { ready: true },
          hints: { forZones: [{ name: "zone-b" }] },
        },
      ],
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    },
  });
  const tpl = await until("template LB of the hinted Service", () => lb(`${NS}/hinted/tcp/local-v4`));
  assert.equal(tpl.options.template, "true");
  assert.equal(lb(`${NS}/hinted/tcp`), undefined, "no plain LB: every VIP's backends depend on the chassis");
  const bt = String(tpl.vips[`${hintedIP}:80`]).slice(1);
  assert.match(bt, /^zsvc_bt_[0-9a-f]{16}$/);
  await until("per-chassis hinted backends", () =>
    vars("node1")?.[bt] === "10.244.1.5:8080" &&
    vars("node2")?.[bt] === "10.244.2.5:8080" &&
    vars("node3")?.[bt] === "10.244.1.5:8080,10.244.2.5:8080"
      ? true
      : undefined,
  );
  // node3 joins zone-a: its chassis now gets zone-a's endpoint.
  await api.request("/api/v1/nodes/node3", {
    method: "PATCH",
    body: { metadata: { labels: { [ZONE]: "zone-a" } } },
  });
  await until("node3 follows its new zone", () =>
    vars("node3")?.[bt] === "10.244.1.5:8080" ? true : undefined,
  );
  // The hints go (trafficDistribution removed): back to one plain load balancer, the variables removed.
  await api.request(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/hinted-x`, {
    method: "PATCH",
    body: {
      endpoints: [
        { addresses: ["10.244.1.5"], nodeName: "node1", conditions: { ready: true } },
        { addresses: ["10.244.2.5"], nodeName: "node2", conditions: { ready: true } },
      ],
    },
  });
  await until("plain LB again", () =>
    lb(`${NS}/hinted/tcp`)?.vips[`${hintedIP}:80`] === "10.244.1.5:8080,10.244.2.5:8080" &&
    !lb(`${NS}/hinted/tcp/local-v4`)
      ? true
      : undefined,
  );
  await until("the hinted variables gone", () =>
    nodes.every(([n]) => !(bt in (vars(n) ?? {}))) ? true : undefined,
  );
});
