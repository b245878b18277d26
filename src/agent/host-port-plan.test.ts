import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp } from "../ipam/address.ts";
import { hostPortRuleset } from "../node/host-port-nat.ts";
import { parseInterfaceName } from "../node/interface-name.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import { type HostPortPod, planHostPorts } from "./host-port-plan.ts";

type Port = { hostPort?: unknown; containerPort?: unknown; protocol?: unknown; hostIP?: unknown };

let seq = 0;
function pod(
  name: string,
  ports: Port[],
  o: { created?: string; ips?: string[]; hostNetwork?: boolean; phase?: string; annotated?: boolean } = {},
): HostPortPod {
  const n = ++seq;
  const ips = o.ips ?? [`10.244.0.${n % 250}/16`];
  return {
    metadata: {
      name,
      namespace: "ns",
      uid: `uid-${name}`,
      creationTimestamp: o.created ?? "2026-01-01T00:00:00Z",
      ...(o.annotated === false
        ? {}
        : {
            annotations: {
              [POD_NETWORKS_ANNOTATION]: JSON.stringify({
                default: {
                  ip_addresses: ips,
                  mac_address: "0a:58:0a:f4:00:05",
                  gateway_ips: ips.map((a) => (a.includes(":") ? "fd00::1" : "10.244.0.1")),
                  routes: [],
                  logical_switch: "subnet-default",
                },
              }),
            },
          }),
    },
    spec: { ...(o.hostNetwork ? { hostNetwork: true } : {}), containers: [{ ports }] },
    ...(o.phase ? { status: { phase: o.phase } } : {}),
  };
}

const shown = (p: ReturnType<typeof planHostPorts>) =>
  p.mappings.map(
    (m) =>
      `${m.hostIP ? formatIp(m.hostIP) : "*"}:${m.hostPort}/${m.protocol} -> ${formatIp(m.podIP)}:${m.containerPort}`,
  );

describe("planHostPorts", () => {
  test("maps a hostPort on any address (hostIP empty) to the pod's address and containerPort, TCP by default", () => {
    const p = planHostPorts([pod("a", [{ hostPort: 8080, containerPort: 80 }], { ips: ["10.244.1.5/16"] })]);
    assert.deepEqual(shown(p), ["*:8080/tcp -> 10.244.1.5:80"]);
    assert.deepEqual(p.problems, []);
  });

  test("the conformance case: same hostPort, different hostIP or protocol, each served", () => {
    const p = planHostPorts([
      pod("p1", [{ hostPort: 54321, containerPort: 8080, hostIP: "127.0.0.1" }], { ips: ["10.244.0.11/16"] }),
      pod("p2", [{ hostPort: 54321, containerPort: 8080, hostIP: "192.168.200.11" }], {
        ips: ["10.244.0.12/16"],
      }),
      pod("p3", [{ hostPort: 54321, containerPort: 8080, hostIP: "192.168.200.11", protocol: "UDP" }], {
        ips: ["10.244.0.13/16"],
      }),
    ]);
    assert.deepEqual(p.problems, []);
    assert.deepEqual(shown(p).sort(), [
      "127.0.0.1:54321/tcp -> 10.244.0.11:8080",
      "192.168.200.11:54321/tcp -> 10.244.0.12:8080",
      "192.168.200.11:54321/udp -> 10.244.0.13:8080",
    ]);
  });

  test("a dual-stack pod with an empty hostIP is served in both families; 0.0.0.0 in IPv4 only", () => {
    const ips = ["10.244.0.7/16", "fd00::7/64"];
    assert.deepEqual(shown(planHostPorts([pod("a", [{ hostPort: 80, containerPort: 8080 }], { ips })])), [
      "*:80/tcp -> 10.244.0.7:8080",
      "*:80/tcp -> fd00::7:8080",
    ]);
    assert.deepEqual(
      shown(planHostPorts([pod("b", [{ hostPort: 80, containerPort: 8080, hostIP: "0.0.0.0" }], { ips })])),
      ["*:80/tcp -> 10.244.0.7:8080"],
    );
  });

  test("the older pod keeps a contested port; the newer is reported naming its field and the holder", () => {
    const older = pod("old", [{ hostPort: 9000, containerPort: 80 }], { created: "2026-01-01T00:00:00Z" });
    const newer = pod(
      "new",
      [{ containerPort: 1 }, { hostPort: 9000, containerPort: 80, hostIP: "192.168.200.11" }],
      {
        created: "2026-01-02T00:00:00Z",
      },
    );
    for (const order of [
      [older, newer],
      [newer, older],
    ]) {
      const p = planHostPorts(order);
      assert.equal(p.mappings.length, 1);
      assert.equal(p.mappings[0]!.key.startsWith("uid-old"), true);
      assert.equal(p.problems.length, 1);
      const [problem] = p.problems;
      assert.equal(problem!.reason, "HostPortConflict");
      assert.equal(problem!.pod.name, "new");
      assert.equal(problem!.field, "spec.containers[0].ports[1].hostPort");
      assert.match(problem!.message, /held by pod ns\/old \(spec\.containers\[0\]\.ports\[0\]\.hostPort\)/);
    }
  });

  test("host-network pods, finished pods and pods without their network get no rules", () => {
    const ports = [{ hostPort: 80, containerPort: 80 }];
    const p = planHostPorts([
      pod("h", ports, { hostNetwork: true }),
      pod("s", ports, { phase: "Succeeded" }),
      pod("f", ports, { phase: "Failed" }),
      pod("u", ports, { annotated: false }),
    ]);
    assert.deepEqual(p, { mappings: [], problems: [] });
  });

  test("hostile values are refused with their field, and nothing is mapped from them", () => {
    const cases: [Port, string][] = [
      [{ hostPort: 70000, containerPort: 80 }, "hostPort"],
      [{ hostPort: "80", containerPort: 80 }, "hostPort"],
      [{ hostPort: 1.5, containerPort: 80 }, "hostPort"],
      [{ hostPort: 80, containerPort: 0 }, "containerPort"],
      [{ hostPort: 80, containerPort: 80, protocol: "tcp" }, "protocol"],
      [{ hostPort: 80, containerPort: 80, protocol: "ICMP" }, "protocol"],
      [{ hostPort: 80, containerPort: 80, hostIP: "1.2.3.4\n}" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: "169.254.169.254" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: "127.0.0.2" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: "::1" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: "224.0.0.1" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: "fd00::9" }, "hostIP"],
      [{ hostPort: 80, containerPort: 80, hostIP: 7 }, "hostIP"],
    ];
    for (const [port, field] of cases) {
      const p = planHostPorts([pod("x", [port], { ips: ["10.244.0.9/16"] })]);
      assert.deepEqual(p.mappings, [], JSON.stringify(port));
      assert.equal(p.problems.length, 1, JSON.stringify(port));
      assert.equal(p.problems[0]!.reason, "HostPortInvalid");
      assert.equal(p.problems[0]!.field, `spec.containers[0].ports[0].${field}`, JSON.stringify(port));
    }
  });

  test("the node's own ports (kubelet, tunnels, OVN databases, the agent, ssh) are refused, naming the field", () => {
    for (const [hostPort, protocol] of [
      [10250, "TCP"],
      [6081, "UDP"],
      [4789, "UDP"],
      [6641, "TCP"],
      [10665, "TCP"],
      [22, "TCP"],
    ] as const) {
      const p = planHostPorts([pod("x", [{ hostPort, containerPort: 80, protocol }])]);
      assert.deepEqual(p.mappings, [], `${hostPort}/${protocol}`);
      assert.equal(p.problems[0]?.field, "spec.containers[0].ports[0].hostPort");
      assert.match(p.problems[0]?.message ?? "", /one of the node's own ports/);
    }
    // The same numbers on another protocol are the pod's to take.
    assert.equal(planHostPorts([pod("y", [{ hostPort: 6081, containerPort: 80 }])]).mappings.length, 1);
  });

  test("a pod asking for thousands of hostPorts gets the first 128 served and the rest refused", () => {
    const ports = Array.from({ length: 20_000 }, (_, i) => ({ hostPort: 20_000 + i, containerPort: 80 }));
    const p = planHostPorts([pod("greedy", ports)]);
    assert.equal(p.mappings.length, 128);
    assert.equal(p.problems.length, 20_000 - 128);
    assert.match(p.problems[0]?.message ?? "", /more than 128 hostPorts/);
  });

  test("a pod address in a special range (a forged annotation) is never a DNAT target", () => {
    const p = planHostPorts([
      pod("meta", [{ hostPort: 8080, containerPort: 80 }], { ips: ["169.254.169.254/16"] }),
    ]);
    assert.deepEqual(p.mappings, []);
    assert.equal(p.problems[0]?.field, "spec.containers[0].ports[0].hostIP");
  });

  const portArb = fc.record({
    hostPort: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constant(0), fc.constant(70000), fc.string()),
    containerPort: fc.oneof(fc.integer({ min: 1, max: 65535 }), fc.constant(-1)),
    protocol: fc.constantFrom(undefined, "TCP", "UDP", "SCTP", "tcp", "ICMP", 6),
    hostIP: fc.constantFrom(
      undefined,
      "",
      "0.0.0.0",
      "::",
      "127.0.0.1",
      "192.168.200.11",
      "192.168.200.12",
      "fd00::11",
      "169.254.1.1",
      "x\n}",
    ),
  });
  const podsArb = fc.array(
    fc.record({
      ports: fc.array(portArb, { maxLength: 4 }),
      day: fc.integer({ min: 1, max: 9 }),
      dual: fc.boolean(),
    }),
    { maxLength: 8 },
  );
  const build = (specs: { ports: Port[]; day: number; dual: boolean }[]) =>
    specs.map((s, i) =>
      pod(`p${i}`, s.ports, {
        created: `2026-01-0${s.day}T00:00:00Z`,
        ips: s.dual ? [`10.244.0.${i + 1}/16`, `fd00::${i + 1}/64`] : [`10.244.0.${i + 1}/16`],
      }),
    );

  test("property: no two mappings claim one address (or the wildcard) for a port and protocol, and nft accepts the plan's keys", () => {
    fc.assert(
      fc.property(podsArb, (specs) => {
        const p = planHostPorts(build(specs));
        for (const [i, a] of p.mappings.entries())
          for (const b of p.mappings.slice(i + 1)) {
            if (a.podIP.family !== b.podIP.family || a.protocol !== b.protocol || a.hostPort !== b.hostPort)
              continue;
            assert.ok(
              a.hostIP && b.hostIP && a.hostIP.value !== b.hostIP.value,
              "two claims of one hostPort",
            );
          }
        // Every mapping becomes exactly one chain: none is dropped as a duplicate key.
        const script = hostPortRuleset({ mgmtIfname: parseInterfaceName("zovn-mgmt"), mappings: p.mappings });
        assert.equal(script.match(/ dnat ip6? to /g)?.length ?? 0, p.mappings.length);
      }),
    );
  });

  test("property: the plan does not depend on the order pods are listed in", () => {
    const arb = podsArb.chain((specs) =>
      fc.tuple(fc.constant(specs), fc.shuffledSubarray([...specs.keys()], { minLength: specs.length })),
    );
    fc.assert(
      fc.property(arb, ([specs, order]) => {
        const pods = build(specs);
        assert.deepEqual(planHostPorts(order.map((i) => pods[i]!)), planHostPorts(pods));
      }),
    );
  });
});
