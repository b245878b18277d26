import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Service } from "@kubernetes/client-node";
import { formatIp } from "../ipam/address.ts";
import { formatCidr } from "../ipam/cidr.ts";
import { reservedAddresses } from "./reserved-addresses.ts";
import { clusterRanges, parseService, sourceFiltered } from "./service-model.ts";

const ranges = clusterRanges({
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16", "fd00:96::/112"],
  joinCIDRs: ["100.64.0.0/16"],
});

function svc(spec: Record<string, unknown>, status: Record<string, unknown> = {}): V1Service {
  return {
    metadata: { namespace: "ns", name: "web" },
    spec: { clusterIP: "10.96.0.10", ports: [{ name: "http", protocol: "TCP", port: 80 }], ...spec },
    status,
  } as V1Service;
}

const ips = (list: { family: 4 | 6; value: bigint }[] | undefined) => (list ?? []).map(formatIp);
const fields = (p: { field: string }[]) => p.map((x) => x.field);

describe("parseService", () => {
  it("parses a ClusterIP Service with defaults", () => {
    const { model, problems } = parseService(svc({}), ranges);
    assert.deepEqual(problems, []);
    assert.ok(model);
    assert.equal(model.namespace, "ns");
    assert.equal(model.name, "web");
    assert.equal(model.type, "ClusterIP");
    assert.deepEqual(ips(model.clusterIPs), ["10.96.0.10"]);
    assert.deepEqual(model.ports, [{ name: "http", protocol: "tcp", port: 80 }]);
    assert.equal(model.affinityTimeoutSeconds, undefined);
    assert.equal(model.externalTrafficLocal, false);
    assert.equal(model.internalTrafficLocal, false);
    assert.deepEqual(model.externalIPs, []);
    assert.deepEqual(model.loadBalancerIPs, []);
  });

  it("reads both cluster IPs of a dual-stack Service, IPv6 in canonical form", () => {
    const { model, problems } = parseService(
      svc({
        clusterIP: "10.96.0.10",
        clusterIPs: ["10.96.0.10", "FD00:96:0::A"],
        ipFamilies: ["IPv4", "IPv6"],
      }),
      ranges,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(ips(model?.clusterIPs), ["10.96.0.10", "fd00:96::a"]);
  });

  it("keeps the first cluster IP of a family and reports a second one", () => {
    const { model, problems } = parseService(svc({ clusterIPs: ["10.96.0.10", "10.96.0.11"] }), ranges);
    assert.deepEqual(ips(model?.clusterIPs), ["10.96.0.10"]);
    assert.deepEqual(fields(problems), ["spec.clusterIPs[1]"]);
  });

  it("returns no model and no problem for a headless Service", () => {
    assert.deepEqual(parseService(svc({ clusterIP: "None", clusterIPs: ["None"] }), ranges), {
      problems: [],
    });
  });

  it("returns no model for a Service labelled for another proxy or headless by label, whatever the value", () => {
    for (const label of ["service.kubernetes.io/service-proxy-name", "service.kubernetes.io/headless"])
      for (const value of ["", "foo-bar"]) {
        const s = svc({});
        s.metadata = { ...s.metadata, labels: { app: "web", [label]: value } };
        assert.deepEqual(parseService(s, ranges), { problems: [] }, `${label}=${value}`);
      }
    const other = svc({});
    other.metadata = { ...other.metadata, labels: { "service.kubernetes.io/other": "x" } };
    assert.ok(parseService(other, ranges).model, "another label changes nothing");
  });

  it("returns no model for an ExternalName Service", () => {
    const r = parseService(svc({ type: "ExternalName", clusterIP: undefined, externalName: "example.com" }));
    assert.deepEqual(r, { problems: [] });
  });

  it("returns no model and names spec.type for an unknown type", () => {
    const r = parseService(svc({ type: "Magic" }), ranges);
    assert.equal(r.model, undefined);
    assert.deepEqual(fields(r.problems), ["spec.type"]);
  });

  it("returns no model when the only cluster IP is malformed, naming the field", () => {
    const r = parseService(svc({ clusterIP: "10.96.0.300" }), ranges);
    assert.equal(r.model, undefined);
    assert.deepEqual(fields(r.problems), ["spec.clusterIP"]);
    assert.match(r.problems[0]!.message, /above 255/);
  });

  it("drops ports with a bad protocol or number and keeps the rest", () => {
    const { model, problems } = parseService(
      svc({
        ports: [
          { name: "a", protocol: "TCP", port: 80 },
          { name: "b", protocol: "ICMP", port: 81 },
          { name: "c", protocol: "UDP", port: 0 },
          { name: "d", protocol: "UDP", port: 70000 },
          { name: "e", protocol: "UDP", port: 53.5 },
          { name: "f", port: 443 },
          { name: "g", protocol: "SCTP", port: 9 },
          { name: "h", protocol: "TCP", port: 80 },
        ],
      }),
      ranges,
    );
    assert.deepEqual(model?.ports, [
      { name: "a", protocol: "tcp", port: 80 },
      { name: "f", protocol: "tcp", port: 443 },
      { name: "g", protocol: "sctp", port: 9 },
    ]);
    assert.deepEqual(fields(problems), [
      "spec.ports[1].protocol",
      "spec.ports[2].port",
      "spec.ports[3].port",
      "spec.ports[4].port",
      "spec.ports[7].port",
    ]);
    assert.match(problems[0]!.message, /not TCP, UDP or SCTP/);
  });

  it("keeps the same port number on TCP and UDP", () => {
    const { model, problems } = parseService(
      svc({
        ports: [
          { name: "dns-tcp", protocol: "TCP", port: 53 },
          { name: "dns", protocol: "UDP", port: 53 },
        ],
      }),
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(
      model?.ports.map((p) => p.protocol),
      ["tcp", "udp"],
    );
  });

  it("reads node ports of a NodePort Service and reports a missing or bad one", () => {
    const { model, problems } = parseService(
      svc({
        type: "NodePort",
        ports: [
          { name: "a", port: 80, nodePort: 30080 },
          { name: "b", port: 81 },
          { name: "c", port: 82, nodePort: 99999 },
        ],
      }),
      ranges,
    );
    assert.equal(model?.type, "NodePort");
    assert.deepEqual(model?.ports, [
      { name: "a", protocol: "tcp", port: 80, nodePort: 30080 },
      { name: "b", protocol: "tcp", port: 81 },
      { name: "c", protocol: "tcp", port: 82 },
    ]);
    assert.deepEqual(fields(problems), ["spec.ports[1].nodePort", "spec.ports[2].nodePort"]);
  });

  it("accepts a LoadBalancer without node ports when allocateLoadBalancerNodePorts is false", () => {
    const { model, problems } = parseService(
      svc({ type: "LoadBalancer", allocateLoadBalancerNodePorts: false, ports: [{ port: 80 }] }),
      ranges,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(model?.ports, [{ name: "", protocol: "tcp", port: 80 }]);
  });

  it("reports a missing node port of a LoadBalancer that allocates them", () => {
    const { problems } = parseService(svc({ type: "LoadBalancer", ports: [{ port: 80 }] }), ranges);
    assert.deepEqual(fields(problems), ["spec.ports[0].nodePort"]);
  });

  it("ignores a nodePort on a ClusterIP Service", () => {
    const { model, problems } = parseService(svc({ ports: [{ port: 80, nodePort: 30000 }] }), ranges);
    assert.deepEqual(problems, []);
    assert.deepEqual(model?.ports, [{ name: "", protocol: "tcp", port: 80 }]);
  });

  it("takes load-balancer ingress IPs of a LoadBalancer Service, skipping hostname-only entries", () => {
    const { model, problems } = parseService(
      svc(
        { type: "LoadBalancer", ports: [{ port: 80, nodePort: 30080 }] },
        {
          loadBalancer: {
            ingress: [{ hostname: "lb.example" }, { ip: "192.168.200.50" }, { ip: "2001:db8::50" }],
          },
        },
      ),
      ranges,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(ips(model?.loadBalancerIPs), ["192.168.200.50", "2001:db8::50"]);
  });

  it("ignores load-balancer ingress of a Service that is not a LoadBalancer", () => {
    const { model } = parseService(
      svc({}, { loadBalancer: { ingress: [{ ip: "192.168.200.50" }] } }),
      ranges,
    );
    assert.deepEqual(model?.loadBalancerIPs, []);
  });

  it("refuses an externalIP that is a node's or the API server's address, and an LB IP that is the API server's", () => {
    const reserved = reservedAddresses(
      [{ status: { addresses: [{ address: "192.168.200.11" }, { address: "node1.example" }] } }],
      [{ addressType: "IPv4", endpoints: [{ addresses: ["192.168.200.2"] }] }],
    );
    const { model, problems } = parseService(
      svc(
        {
          type: "LoadBalancer",
          ports: [{ port: 80, nodePort: 30080 }],
          externalIPs: ["192.168.200.11", "192.168.200.2", "192.168.200.60"],
        },
        { loadBalancer: { ingress: [{ ip: "192.168.200.2" }, { ip: "192.168.200.11" }] } },
      ),
      { ...ranges, reserved },
    );
    assert.deepEqual(ips(model?.externalIPs), ["192.168.200.60"]);
    // A load balancer implementation may announce node addresses (as kube-proxy serves them).
    assert.deepEqual(ips(model?.loadBalancerIPs), ["192.168.200.11"]);
    assert.deepEqual(fields(problems), [
      "spec.externalIPs[0]",
      "spec.externalIPs[1]",
      "status.loadBalancer.ingress[0].ip",
    ]);
    assert.match(
      problems[0]!.message,
      /192\.168\.200\.11 is a node's address.*NodePort.*DenyServiceExternalIPs/,
    );
    assert.match(problems[1]!.message, /192\.168\.200\.2 is the API server's address/);
    assert.match(problems[2]!.message, /API server's address/);
  });

  it("refuses a cluster IP that a ServiceCIDR overlapping the cluster's own addresses handed out", () => {
    const reserved = reservedAddresses(
      [{ status: { addresses: [{ address: "192.168.200.11" }] } }],
      [{ addressType: "IPv4", endpoints: [{ addresses: ["192.168.200.2"] }] }],
    );
    const withReserved = { ...ranges, reserved };
    for (const [clusterIP, why] of [
      ["10.244.0.7", /10\.244\.0\.7 is inside the cluster CIDR 10\.244\.0\.0\/16.*not served/],
      ["100.64.0.3", /join CIDR/],
      ["192.168.200.2", /API server's address/],
      ["192.168.200.11", /a node's address/],
      ["169.254.169.254", /link-local/],
    ] as const) {
      const { model, problems } = parseService(svc({ clusterIP }), withReserved);
      assert.equal(model, undefined, clusterIP);
      assert.deepEqual(fields(problems), ["spec.clusterIP"]);
      assert.match(problems[0]!.message, why);
    }
    const dual = parseService(svc({ clusterIPs: ["10.244.0.7", "fd00:96::10"] }), withReserved);
    assert.deepEqual(ips(dual.model?.clusterIPs), ["fd00:96::10"]);
    assert.deepEqual(fields(dual.problems), ["spec.clusterIPs[0]"]);
  });

  it("refuses externalIPs inside the cluster, service and join CIDRs and special ranges, naming each", () => {
    const { model, problems } = parseService(
      svc({
        externalIPs: [
          "192.168.200.60",
          "10.244.1.5",
          "10.96.0.1",
          "fd00:96::1",
          "100.64.0.2",
          "127.0.0.1",
          "224.0.0.1",
          "not-an-ip",
          "192.168.200.60",
        ],
      }),
      ranges,
    );
    assert.deepEqual(ips(model?.externalIPs), ["192.168.200.60"]);
    assert.deepEqual(fields(problems), [
      "spec.externalIPs[1]",
      "spec.externalIPs[2]",
      "spec.externalIPs[3]",
      "spec.externalIPs[4]",
      "spec.externalIPs[5]",
      "spec.externalIPs[6]",
      "spec.externalIPs[7]",
    ]);
    assert.match(problems[0]!.message, /cluster CIDR 10\.244\.0\.0\/16.*DenyServiceExternalIPs/);
    assert.match(problems[1]!.message, /service CIDR 10\.96\.0\.0\/16/);
    assert.match(problems[2]!.message, /service CIDR fd00:96::\/112/);
    assert.match(problems[3]!.message, /join CIDR 100\.64\.0\.0\/16/);
    assert.match(problems[4]!.message, /loopback/);
    assert.match(problems[5]!.message, /multicast/);
  });

  it("refuses a load-balancer IP inside the service CIDR, naming the ingress field", () => {
    const { model, problems } = parseService(
      svc(
        { type: "LoadBalancer", ports: [{ port: 80, nodePort: 30080 }] },
        { loadBalancer: { ingress: [{ ip: "10.96.5.5" }] } },
      ),
      ranges,
    );
    assert.deepEqual(model?.loadBalancerIPs, []);
    assert.deepEqual(fields(problems), ["status.loadBalancer.ingress[0].ip"]);
  });

  it("defaults the ClientIP affinity timeout to 10800", () => {
    const { model, problems } = parseService(svc({ sessionAffinity: "ClientIP" }), ranges);
    assert.deepEqual(problems, []);
    assert.equal(model?.affinityTimeoutSeconds, 10800);
  });

  it("keeps an affinity timeout up to 65535 and clamps a longer one with a problem", () => {
    const at = (t: number) =>
      parseService(
        svc({ sessionAffinity: "ClientIP", sessionAffinityConfig: { clientIP: { timeoutSeconds: t } } }),
      );
    assert.equal(at(65535).model?.affinityTimeoutSeconds, 65535);
    assert.deepEqual(at(65535).problems, []);
    const long = at(86400);
    assert.equal(long.model?.affinityTimeoutSeconds, 65535);
    assert.deepEqual(fields(long.problems), ["spec.sessionAffinityConfig.clientIP.timeoutSeconds"]);
    assert.match(long.problems[0]!.message, /65535/);
  });

  it("reports a bad affinity timeout and an unknown affinity", () => {
    const bad = parseService(
      svc({ sessionAffinity: "ClientIP", sessionAffinityConfig: { clientIP: { timeoutSeconds: -1 } } }),
    );
    assert.equal(bad.model?.affinityTimeoutSeconds, 10800);
    assert.deepEqual(fields(bad.problems), ["spec.sessionAffinityConfig.clientIP.timeoutSeconds"]);
    const odd = parseService(svc({ sessionAffinity: "Cookie" }));
    assert.equal(odd.model?.affinityTimeoutSeconds, undefined);
    assert.deepEqual(fields(odd.problems), ["spec.sessionAffinity"]);
  });

  it("reads traffic policies and the health check node port of a Local LoadBalancer", () => {
    const { model, problems } = parseService(
      svc({
        type: "LoadBalancer",
        ports: [{ port: 80, nodePort: 30080 }],
        externalTrafficPolicy: "Local",
        internalTrafficPolicy: "Local",
        healthCheckNodePort: 32000,
      }),
    );
    assert.deepEqual(problems, []);
    assert.equal(model?.externalTrafficLocal, true);
    assert.equal(model?.internalTrafficLocal, true);
    assert.equal(model?.healthCheckNodePort, 32000);
  });

  it("reports an unknown traffic policy and falls back to Cluster", () => {
    const { model, problems } = parseService(svc({ internalTrafficPolicy: "Nearby" }));
    assert.equal(model?.internalTrafficLocal, false);
    assert.deepEqual(fields(problems), ["spec.internalTrafficPolicy"]);
  });

  it("leaves out an ingress IP with ipMode Proxy, and reports an unknown ipMode", () => {
    const { model, problems } = parseService(
      svc(
        { type: "LoadBalancer", allocateLoadBalancerNodePorts: false },
        {
          loadBalancer: {
            ingress: [
              { ip: "192.168.201.10", ipMode: "Proxy" },
              { ip: "192.168.201.11", ipMode: "VIP" },
              { ip: "192.168.201.12" },
              { ip: "192.168.201.13", ipMode: "Tunnel" },
            ],
          },
        },
      ),
      ranges,
    );
    assert.deepEqual(ips(model?.loadBalancerIPs), ["192.168.201.11", "192.168.201.12"]);
    assert.deepEqual(fields(problems), ["status.loadBalancer.ingress[3].ipMode"]);
  });

  it("parses loadBalancerSourceRanges as typed CIDRs: spaces and host bits tolerated, nested ranges merged", () => {
    const { model, problems } = parseService(
      svc({
        type: "LoadBalancer",
        allocateLoadBalancerNodePorts: false,
        loadBalancerSourceRanges: [
          " 192.168.200.100/32",
          "10.1.2.3/8",
          "10.9.0.0/16",
          "2001:db8::/32",
          "10.0.0.0/8",
        ],
      }),
      ranges,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(model?.loadBalancerSourceRanges.map(formatCidr), [
      "192.168.200.100/32",
      "10.0.0.0/8",
      "2001:db8::/32",
    ]);
    assert.ok(model && sourceFiltered(model, 4) && sourceFiltered(model, 6));
  });

  it("reports each bad loadBalancerSourceRanges entry by its field and keeps the others", () => {
    const { model, problems } = parseService(
      svc({
        type: "LoadBalancer",
        allocateLoadBalancerNodePorts: false,
        loadBalancerSourceRanges: ["10.0.0.0/33", "not-a-cidr", "192.168.1.0/24", "1.2.3.4", 7],
      }),
      ranges,
    );
    assert.deepEqual(fields(problems), [
      "spec.loadBalancerSourceRanges[0]",
      "spec.loadBalancerSourceRanges[1]",
      "spec.loadBalancerSourceRanges[3]",
      "spec.loadBalancerSourceRanges[4]",
    ]);
    assert.match(problems[1]?.message ?? "", /"not-a-cidr" is not a CIDR; this entry is ignored/);
    assert.deepEqual(model?.loadBalancerSourceRanges.map(formatCidr), ["192.168.1.0/24"]);
    assert.ok(model && sourceFiltered(model, 4) && !sourceFiltered(model, 6));
  });

  it("ignores loadBalancerSourceRanges of a Service that is not a LoadBalancer", () => {
    const { model } = parseService(svc({ loadBalancerSourceRanges: ["10.0.0.0/8"] }), ranges);
    assert.deepEqual(model?.loadBalancerSourceRanges, []);
  });
});
