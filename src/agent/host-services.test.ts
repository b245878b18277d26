import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { formatIp } from "../ipam/address.ts";
import { formatCidr, parseCidr } from "../ipam/cidr.ts";
import type { NatEndpoint } from "../node/service-nat.ts";
import { planHostServices, sliceServiceKey } from "./host-services.ts";

function svc(name: string, spec: Record<string, unknown>, status: Record<string, unknown> = {}): V1Service {
  return {
    metadata: { namespace: "ns", name },
    spec: { clusterIP: "10.96.0.10", ports: [{ name: "http", protocol: "TCP", port: 80 }], ...spec },
    status,
  } as V1Service;
}

function slice(
  service: string,
  eps: { ip: string; node: string; ready?: boolean }[],
  port = 8080,
): V1EndpointSlice {
  return {
    metadata: { namespace: "ns", name: `${service}-abc`, labels: { "kubernetes.io/service-name": service } },
    addressType: "IPv4",
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      nodeName: e.node,
      conditions: { ready: e.ready ?? true },
    })),
    ports: [{ name: "http", protocol: "TCP", port }],
  } as V1EndpointSlice;
}

const show = (eps: readonly NatEndpoint[]) => eps.map((e) => `${formatIp(e.ip)}:${e.port}`);
const slicesFrom = (all: V1EndpointSlice[]) => (ns: string, name: string) =>
  all.filter((s) => sliceServiceKey(s) === `${ns}/${name}`);

describe("host Services plan", () => {
  const eps = [
    { ip: "10.244.0.5", node: "node1" },
    { ip: "10.244.1.5", node: "node2" },
    { ip: "10.244.1.6", node: "node2", ready: false },
  ];

  test("a ClusterIP Service becomes one port with every ready endpoint and this node's among them", () => {
    const plan = planHostServices([svc("web", {})], slicesFrom([slice("web", eps)]), "node1");
    assert.equal(plan.ports.length, 1);
    const [p] = plan.ports;
    assert.equal(p?.key, "ns/web/tcp/80");
    assert.deepEqual(p?.clusterIPs.map(formatIp), ["10.96.0.10"]);
    assert.deepEqual(show(p?.endpoints ?? []), ["10.244.0.5:8080", "10.244.1.5:8080"]);
    assert.deepEqual(show(p?.localEndpoints ?? []), ["10.244.0.5:8080"]);
    assert.equal(p?.nodePort, undefined);
    assert.deepEqual(plan.healthChecks, []);
  });

  test("a LoadBalancer with ETP Local: LB ingress IPs join externalIPs, nodePort kept, health check counts local endpoints", () => {
    const s = svc(
      "lb",
      {
        type: "LoadBalancer",
        externalTrafficPolicy: "Local",
        healthCheckNodePort: 32000,
        externalIPs: ["192.0.2.10"],
        ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: 30080 }],
      },
      { loadBalancer: { ingress: [{ ip: "198.51.100.7" }, { hostname: "lb.example" }] } },
    );
    const slices = slicesFrom([slice("lb", eps)]);
    const plan = planHostServices([s], slices, "node2");
    const [p] = plan.ports;
    assert.equal(p?.externalTrafficLocal, true);
    assert.equal(p?.nodePort, 30080);
    assert.deepEqual(p?.externalIPs.map(formatIp), ["192.0.2.10", "198.51.100.7"]);
    assert.deepEqual(plan.healthChecks, [{ port: 32000, namespace: "ns", name: "lb", localEndpoints: 1 }]);
    assert.equal(planHostServices([s], slices, "node3").healthChecks[0]?.localEndpoints, 0);
  });

  test("the health check counts only ready local endpoints: serving-and-terminating ones still take traffic but give 503", () => {
    const s = svc("lb", {
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      healthCheckNodePort: 32000,
      ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: 30080 }],
    });
    const terminating = slice("lb", [{ ip: "10.244.0.5", node: "node1" }]);
    const conditions = { ready: false, serving: true, terminating: true };
    (terminating.endpoints ?? []).forEach((e) => {
      e.conditions = conditions;
    });
    const plan = planHostServices([s], slicesFrom([terminating]), "node1");
    assert.deepEqual(show(plan.ports[0]?.localEndpoints ?? []), ["10.244.0.5:8080"]);
    assert.deepEqual(plan.healthChecks, [{ port: 32000, namespace: "ns", name: "lb", localEndpoints: 0 }]);
  });

  test("headless and ExternalName Services program nothing; a Service without slices has no endpoints", () => {
    const plan = planHostServices(
      [
        svc("headless", { clusterIP: "None" }),
        svc("ext", { type: "ExternalName", clusterIP: undefined, externalName: "example.com" }),
        svc("lonely", { clusterIP: "10.96.0.20" }),
      ],
      slicesFrom([]),
      "node1",
    );
    assert.deepEqual(
      plan.ports.map((p) => [p.key, p.endpoints.length]),
      [["ns/lonely/tcp/80", 0]],
    );
  });

  test("an externalIP inside the cluster's ranges is dropped, the rest of the Service is kept", () => {
    const ranges = {
      clusterCIDRs: [parseCidr("10.244.0.0/16")],
      serviceCIDRs: [parseCidr("10.96.0.0/16")],
      joinCIDRs: [parseCidr("100.64.0.0/16")],
    };
    const plan = planHostServices(
      [svc("web", { externalIPs: ["10.244.0.5", "192.0.2.1"] })],
      slicesFrom([slice("web", eps)]),
      "node1",
      ranges,
    );
    assert.deepEqual(plan.ports[0]?.externalIPs.map(formatIp), ["192.0.2.1"]);
  });

  test("a healthCheckNodePort claimed twice is served for the first Service only", () => {
    const lb = (name: string) =>
      svc(name, {
        type: "LoadBalancer",
        externalTrafficPolicy: "Local",
        healthCheckNodePort: 32000,
        ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: name === "a" ? 30001 : 30002 }],
      });
    const plan = planHostServices([lb("b"), lb("a")], slicesFrom([]), "node1");
    assert.deepEqual(
      plan.healthChecks.map((h) => h.name),
      ["a"],
    );
    assert.match(plan.refused[0]?.reason ?? "", /already served for ns\/a/);
  });

  test("ports come out in key order whatever the order of Services", () => {
    const a = svc("a", { clusterIP: "10.96.0.1" });
    const b = svc("b", { clusterIP: "10.96.0.2" });
    const keys = (l: V1Service[]) => planHostServices(l, slicesFrom([]), "n").ports.map((p) => p.key);
    assert.deepEqual(keys([b, a]), keys([a, b]));
  });

  test("topology hints: the Cluster-policy endpoints are this node's zone's; local ones stay unhinted", () => {
    const hinted = slice("web", [
      { ip: "10.244.0.5", node: "node1" },
      { ip: "10.244.1.5", node: "node2" },
    ]);
    hinted.endpoints = (hinted.endpoints ?? []).map((e, i) => ({
      ...e,
      hints: { forZones: [{ name: i === 0 ? "zone-a" : "zone-b" }] },
    }));
    const plan = (node: string, zone?: string) =>
      planHostServices([svc("web", {})], slicesFrom([hinted]), node, undefined, zone).ports[0];
    assert.deepEqual(show(plan("node3", "zone-b")?.endpoints ?? []), ["10.244.1.5:8080"]);
    assert.deepEqual(show(plan("node1", "zone-a")?.endpoints ?? []), ["10.244.0.5:8080"]);
    // No zone label: every endpoint, as kube-proxy.
    assert.deepEqual(show(plan("node3")?.endpoints ?? []), ["10.244.0.5:8080", "10.244.1.5:8080"]);
    assert.deepEqual(show(plan("node2", "zone-a")?.localEndpoints ?? []), ["10.244.1.5:8080"]);
  });

  test("loadBalancerSourceRanges and ipMode Proxy reach the nft port: filtered LB IPs, ranges, no Proxy IP", () => {
    const s = svc(
      "lb",
      {
        type: "LoadBalancer",
        allocateLoadBalancerNodePorts: false,
        externalIPs: ["192.168.202.10"],
        loadBalancerSourceRanges: ["192.168.200.100/32"],
      },
      {
        loadBalancer: {
          ingress: [{ ip: "192.168.201.10" }, { ip: "192.168.201.11", ipMode: "Proxy" }],
        },
      },
    );
    const [p] = planHostServices([s], slicesFrom([]), "node1").ports;
    assert.deepEqual(p?.externalIPs.map(formatIp), ["192.168.202.10", "192.168.201.10"]);
    assert.deepEqual(p?.firewalledIPs?.map(formatIp), ["192.168.201.10"]);
    assert.deepEqual(p?.sourceRanges?.map(formatCidr), ["192.168.200.100/32"]);
  });
});
