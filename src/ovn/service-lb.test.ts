import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import fc from "fast-check";
import { parseCidr } from "../ipam/cidr.ts";
import { parseService, type ServiceModel } from "../services/service-model.ts";
import {
  backendsVariable,
  generalLoadBalancers,
  serviceLoadBalancers,
  topologyVariable,
  variablesOf,
  vipVariable,
} from "./service-lb.ts";

function model(spec: Record<string, unknown>, status: Record<string, unknown> = {}): ServiceModel {
  const { model: m } = parseService({
    metadata: { namespace: "ns", name: "web" },
    spec: { clusterIP: "10.96.0.10", ports: [{ name: "http", port: 80 }], ...spec },
    status,
  } as V1Service);
  assert.ok(m);
  return m;
}

function slice(
  addressType: string,
  eps: { ip: string; node: string; ready?: boolean }[],
  ports = [{ name: "http", protocol: "TCP", port: 8080 }],
): V1EndpointSlice {
  return {
    addressType,
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      nodeName: e.node,
      conditions: { ready: e.ready ?? true },
    })),
    ports,
  } as V1EndpointSlice;
}

const v4 = slice("IPv4", [
  { ip: "10.244.0.5", node: "n1" },
  { ip: "10.244.0.6", node: "n2" },
]);

describe("serviceLoadBalancers", () => {
  it("makes a load balancer per protocol for the cluster IPs and one for the externalIPs, owned and rejecting", () => {
    const m = model({
      ports: [
        { name: "http", port: 80 },
        { name: "dns", protocol: "UDP", port: 53 },
      ],
      externalIPs: ["192.168.200.60"],
    });
    const dns = slice(
      "IPv4",
      [{ ip: "10.244.0.7", node: "n1" }],
      [{ name: "dns", protocol: "UDP", port: 5353 }],
    );
    const { rows } = serviceLoadBalancers(m, [v4, dns], [{ node: "n1" }, { node: "n2" }]);
    assert.deepEqual(
      rows.map((r) => [r.id, r.row.name, r.row.protocol, r.row.vips, r.row.options]),
      [
        [
          "ns/web/tcp",
          "zovn-svc_ns_web_tcp",
          "tcp",
          { "10.96.0.10:80": "10.244.0.5:8080,10.244.0.6:8080" },
          { reject: "true", ct_flush: "true" },
        ],
        [
          "ns/web/tcp/external",
          "zovn-svc_ns_web_tcp_external",
          "tcp",
          { "192.168.200.60:80": "10.244.0.5:8080,10.244.0.6:8080" },
          { reject: "true", ct_flush: "true" },
        ],
        [
          "ns/web/udp",
          "zovn-svc_ns_web_udp",
          "udp",
          { "10.96.0.10:53": "10.244.0.7:5353" },
          { reject: "true", ct_flush: "true" },
        ],
        [
          "ns/web/udp/external",
          "zovn-svc_ns_web_udp_external",
          "udp",
          { "192.168.200.60:53": "10.244.0.7:5353" },
          { reject: "true", ct_flush: "true" },
        ],
      ],
    );
    assert.deepEqual(
      rows.map((r) => r.audience),
      ["cluster", "external", "cluster", "external"],
    );
    assert.deepEqual(rows[0]?.row.external_ids, {
      "zstack.io/owner": "zstack-ovnkube-controller",
      "zstack.io/kind": "service-lb",
      "zstack.io/id": "ns/web/tcp",
      "zstack.io/service": "ns/web",
    });
  });

  it("writes IPv6 VIPs and backends in brackets, each family with its own endpoints", () => {
    const m = model({ clusterIPs: ["10.96.0.10", "fd00:96::a"], ipFamilies: ["IPv4", "IPv6"] });
    const v6 = slice("IPv6", [{ ip: "fd00:10:244::5", node: "n1" }]);
    const { rows } = serviceLoadBalancers(m, [v4, v6], []);
    assert.deepEqual(rows[0]?.row.vips, {
      "10.96.0.10:80": "10.244.0.5:8080,10.244.0.6:8080",
      "[fd00:96::a]:80": "[fd00:10:244::5]:8080",
    });
  });

  it("keeps a VIP with no endpoint, with empty backends (rejected at once)", () => {
    const { rows } = serviceLoadBalancers(model({}), [], []);
    assert.deepEqual(rows[0]?.row.vips, { "10.96.0.10:80": "" });
    assert.deepEqual(rows[0]?.row.options, { reject: "true", ct_flush: "true" });
  });

  it("adds load-balancer ingress IPs and the affinity timeout", () => {
    const m = model(
      {
        type: "LoadBalancer",
        ports: [{ name: "http", port: 80, nodePort: 30080 }],
        sessionAffinity: "ClientIP",
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 30 } },
      },
      { loadBalancer: { ingress: [{ ip: "192.168.200.70" }] } },
    );
    const { rows } = serviceLoadBalancers(m, [v4], []);
    assert.deepEqual(
      rows.map((r) => [r.id, Object.keys(r.row.vips as object), r.row.options]),
      [
        ["ns/web/tcp", ["10.96.0.10:80"], { reject: "true", ct_flush: "true", affinity_timeout: "30" }],
        [
          "ns/web/tcp/external",
          ["192.168.200.70:80"],
          { reject: "true", ct_flush: "true", affinity_timeout: "30" },
        ],
      ],
    );
  });

  it("makes no load balancer for a Service without ports", () => {
    assert.deepEqual(serviceLoadBalancers(model({ ports: [] }), [v4], [{ node: "n1" }]).rows, []);
  });

  it("puts cluster IPs of internalTrafficPolicy Local into template LBs with per-chassis backends", () => {
    const m = model({
      internalTrafficPolicy: "Local",
      clusterIPs: ["10.96.0.10", "fd00:96::a"],
      externalIPs: ["192.168.200.60"],
    });
    const v6 = slice("IPv6", [{ ip: "fd00:10:244::5", node: "n1" }]);
    const { rows, variables } = serviceLoadBalancers(
      m,
      [v4, v6],
      [{ node: "n1" }, { node: "n2" }, { node: "n3" }],
    );
    const port = m.ports[0]!;
    const be4 = backendsVariable(m, port, 4);
    const be6 = backendsVariable(m, port, 6);
    const vip6 = vipVariable(m, m.clusterIPs[1]!);
    assert.deepEqual(
      rows.map((r) => [r.id, r.row.vips, r.row.options]),
      [
        [
          "ns/web/tcp/external",
          { "192.168.200.60:80": "10.244.0.5:8080,10.244.0.6:8080" },
          { reject: "true", ct_flush: "true" },
        ],
        [
          "ns/web/tcp/local-v4",
          { "10.96.0.10:80": `^${be4}` },
          { reject: "true", ct_flush: "true", template: "true", "address-family": "ipv4" },
        ],
        [
          "ns/web/tcp/local-v6",
          { [`^${vip6}:80`]: `^${be6}` },
          { reject: "true", ct_flush: "true", template: "true", "address-family": "ipv6" },
        ],
      ],
    );
    assert.deepEqual(Object.fromEntries(variables), {
      n1: { [be4]: "10.244.0.5:8080", [vip6]: "fd00:96::a", [be6]: "[fd00:10:244::5]:8080" },
      n2: { [be4]: "10.244.0.6:8080", [vip6]: "fd00:96::a", [be6]: "" },
      n3: { [be4]: "", [vip6]: "fd00:96::a", [be6]: "" },
    });
    assert.deepEqual(variablesOf(rows[2]?.row.vips as Record<string, string>).sort(), [be6, vip6].sort());
    assert.match(be4, /^zsvc_be_[0-9a-f]{16}$/);
  });

  it("names template variables per Service, port and family", () => {
    const a = model({});
    const b = { ...a, name: "other" };
    const p = a.ports[0]!;
    assert.notEqual(backendsVariable(a, p, 4), backendsVariable(b, p, 4));
    assert.notEqual(backendsVariable(a, p, 4), backendsVariable(a, p, 6));
    assert.notEqual(backendsVariable(a, p, 4), backendsVariable(a, { ...p, port: 81 }, 4));
  });

  it("has no template variables without internalTrafficPolicy Local", () => {
    const { variables } = serviceLoadBalancers(model({}), [v4], [{ node: "n1" }]);
    assert.deepEqual(Object.fromEntries(variables), { n1: {} });
  });

  it("moves every Cluster-policy VIP into template LBs when topology hints give nodes different endpoints", () => {
    const m = model({ externalIPs: ["192.168.200.60"] });
    const hinted = {
      ...v4,
      endpoints: (v4.endpoints ?? []).map((e, i) => ({
        ...e,
        hints: { forZones: [{ name: i ? "b" : "a" }] },
      })),
    } as V1EndpointSlice;
    const chassis = [{ node: "n1", zone: "a" }, { node: "n2", zone: "b" }, { node: "n3" }];
    const { rows, variables } = serviceLoadBalancers(m, [hinted], chassis);
    const bt = topologyVariable(m, m.ports[0]!, 4);
    assert.deepEqual(
      rows.map((r) => [r.id, r.row.vips]),
      [
        ["ns/web/tcp/local-v4", { "10.96.0.10:80": `^${bt}` }],
        ["ns/web/tcp/external-v4", { "192.168.200.60:80": `^${bt}` }],
      ],
    );
    assert.deepEqual(Object.fromEntries(variables), {
      n1: { [bt]: "10.244.0.5:8080" },
      n2: { [bt]: "10.244.0.6:8080" },
      // No zone label: every endpoint, as kube-proxy on that node.
      n3: { [bt]: "10.244.0.5:8080,10.244.0.6:8080" },
    });
  });

  it("keeps a plain load balancer when the hints give every node the same endpoints", () => {
    const m = model({});
    const hinted = {
      ...v4,
      endpoints: (v4.endpoints ?? []).map((e) => ({ ...e, hints: { forZones: [{ name: "a" }] } })),
    } as V1EndpointSlice;
    const { rows } = serviceLoadBalancers(m, [hinted], [{ node: "n1", zone: "a" }, { node: "n2" }]);
    assert.deepEqual(
      rows.map((r) => [r.id, r.row.vips]),
      [["ns/web/tcp", { "10.96.0.10:80": "10.244.0.5:8080,10.244.0.6:8080" }]],
    );
  });

  it("leaves an LB IP filtered by loadBalancerSourceRanges out of OVN (pods take the node path), other VIPs stay", () => {
    const m = model(
      {
        type: "LoadBalancer",
        allocateLoadBalancerNodePorts: false,
        externalIPs: ["192.168.200.60"],
        loadBalancerSourceRanges: ["192.168.200.100/32"],
      },
      { loadBalancer: { ingress: [{ ip: "192.168.201.10" }, { ip: "2001:db8::10" }] } },
    );
    const { rows } = serviceLoadBalancers(m, [v4], []);
    // Only the IPv4 family is filtered: the IPv6 LB IP stays a VIP (with no IPv6 endpoint).
    assert.deepEqual(
      rows.map((r) => [r.id, Object.keys(r.row.vips as object).sort()]),
      [
        ["ns/web/tcp", ["10.96.0.10:80"]],
        ["ns/web/tcp/external", ["192.168.200.60:80", "[2001:db8::10]:80"]],
      ],
    );
  });

  it("with internalTrafficPolicy Local and hints, cluster IPs keep local backends and externalIPs get hinted ones", () => {
    const m = model({ internalTrafficPolicy: "Local", externalIPs: ["192.168.200.60"] });
    const hinted = {
      ...v4,
      endpoints: (v4.endpoints ?? []).map((e, i) => ({
        ...e,
        hints: { forZones: [{ name: i ? "b" : "a" }] },
      })),
    } as V1EndpointSlice;
    const { rows, variables } = serviceLoadBalancers(
      m,
      [hinted],
      [
        { node: "n1", zone: "b" },
        { node: "n2", zone: "b" },
      ],
    );
    const port = m.ports[0]!;
    const be = backendsVariable(m, port, 4);
    const bt = topologyVariable(m, port, 4);
    assert.deepEqual(
      rows.map((r) => [r.id, r.row.vips]),
      [
        ["ns/web/tcp/local-v4", { "10.96.0.10:80": `^${be}` }],
        ["ns/web/tcp/external-v4", { "192.168.200.60:80": `^${bt}` }],
      ],
    );
    assert.deepEqual(Object.fromEntries(variables), {
      n1: { [bt]: "10.244.0.6:8080", [be]: "10.244.0.5:8080" },
      n2: { [bt]: "10.244.0.6:8080", [be]: "10.244.0.6:8080" },
    });
    // Every variable written is named by a load balancer, so it is found stale when it goes.
    const named = new Set(rows.flatMap((r) => variablesOf(r.row.vips as Record<string, string>)));
    for (const vars of variables.values()) for (const k of Object.keys(vars)) assert.ok(named.has(k), k);
  });

  it("puts a cluster IP outside the given service CIDRs with the externalIPs, never in the cluster-IP row", () => {
    const m = model({ clusterIPs: ["10.96.0.10", "fd00:96::a"], ipFamilies: ["IPv4", "IPv6"] });
    const { rows } = serviceLoadBalancers(m, [v4], [], [parseCidr("10.96.0.0/16")]);
    assert.deepEqual(
      rows.map((r) => [r.id, r.audience, Object.keys(r.row.vips as object)]),
      [
        ["ns/web/tcp", "cluster", ["10.96.0.10:80"]],
        ["ns/web/tcp/external", "external", ["[fd00:96::a]:80"]],
      ],
    );
  });
});

describe("serviceLoadBalancers of a Service whose backends are the same on every chassis", () => {
  it("writes what the general path writes, call after call with the same model", () => {
    const ip4 = fc.constantFrom("10.96.0.10", "10.97.0.3", "192.168.200.60", "203.0.113.9");
    const ip6 = fc.constantFrom("fd00:96::10", "fd00:97::3", "2001:db8::9");
    const port = fc.record({
      name: fc.constantFrom("http", "dns", ""),
      protocol: fc.constantFrom("TCP", "UDP", "SCTP"),
      port: fc.constantFrom(53, 80, 443),
    });
    const spec = fc.record({
      clusterIPs: fc.oneof(
        ip4.map((a) => [a]),
        ip6.map((a) => [a]),
        fc.tuple(ip4, ip6).map(([a, b]) => [a, b]),
      ),
      ports: fc.uniqueArray(port, { minLength: 1, maxLength: 3, selector: (p) => `${p.protocol}/${p.port}` }),
      externalIPs: fc.uniqueArray(fc.oneof(ip4, ip6), { maxLength: 2 }),
      sessionAffinity: fc.constantFrom("None", "ClientIP"),
    });
    const endpoint = fc.record({
      ip: fc.constantFrom("10.244.0.5", "10.244.0.6", "10.244.1.7", "fd00:244::5", "fd00:244::6"),
      node: fc.constantFrom("n1", "n2"),
      ready: fc.boolean(),
    });
    const slices = fc.array(
      fc.record({
        family: fc.constantFrom("IPv4", "IPv6"),
        eps: fc.array(endpoint, { maxLength: 4 }),
        ports: fc.uniqueArray(port, { maxLength: 3, selector: (p) => `${p.protocol}/${p.name}` }),
      }),
      { maxLength: 3 },
    );
    const serviceCidrs = [parseCidr("10.96.0.0/16"), parseCidr("fd00:96::/64")];
    const chassis = [{ node: "n1" }, { node: "n2" }];
    fc.assert(
      fc.property(
        spec,
        fc.array(slices, { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        (sp, rounds, cidrs) => {
          const m = model({ ...sp, clusterIP: sp.clusterIPs[0], ipFamilyPolicy: "PreferDualStack" });
          for (const round of rounds) {
            const s = round.map((r) =>
              slice(
                r.family,
                r.eps.filter((e) => e.ip.includes(":") === (r.family === "IPv6")),
                r.ports,
              ),
            );
            const cidr = cidrs ? serviceCidrs : undefined;
            assert.deepEqual(
              serviceLoadBalancers(m, s, chassis, cidr),
              generalLoadBalancers(m, s, chassis, cidr),
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
