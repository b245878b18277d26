import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type IpAddress, parseIp } from "../ipam/address.ts";
import { ConntrackBacklog } from "./conntrack-backlog.ts";
import type { NatEndpoint, NatServicePort } from "./service-nat.ts";
import {
  kernelUnnatedArgs,
  newlyServedTargets,
  ovsUnnatedArgs,
  servedUdpDestinations,
  type UnnatedUdpTarget,
  unnatedTargetKey,
} from "./udp-first-endpoint.ts";

const ip = (t: string) => parseIp(t);
const NODE_IPS = [ip("192.168.200.11")];
const ep = (a: string, port = 5353): NatEndpoint => ({ ip: ip(a), port });

function udpPort(over: Partial<NatServicePort> = {}): NatServicePort {
  return {
    key: "default/dns/udp/53",
    protocol: "udp",
    port: 53,
    clusterIPs: [ip("10.96.0.10")],
    externalIPs: [],
    endpoints: [],
    localEndpoints: [],
    internalTrafficLocal: false,
    externalTrafficLocal: false,
    ...over,
  };
}

const keys = (ts: readonly UnnatedUdpTarget[]) => ts.map(unnatedTargetKey).sort();

describe("which UDP destinations have an endpoint", () => {
  test("a cluster IP with no endpoint serves nothing; with one, both trackers, every port of the address", () => {
    assert.equal(servedUdpDestinations([udpPort()], NODE_IPS).size, 0);
    const served = servedUdpDestinations([udpPort({ endpoints: [ep("10.244.1.5")] })], NODE_IPS);
    const vip = ip("10.96.0.10");
    assert.deepEqual(
      keys([...served.values()]),
      keys([
        { tracker: "kernel", ip: vip, port: undefined },
        { tracker: "ovs", ip: vip, port: undefined },
      ]),
    );
  });

  test("TCP and SCTP ports are never served here (a reject ends their flows)", () => {
    for (const protocol of ["tcp", "sctp"] as const)
      assert.equal(
        servedUdpDestinations(
          [udpPort({ protocol, endpoints: [ep("10.244.1.5")], nodePort: 30053 })],
          NODE_IPS,
        ).size,
        0,
      );
  });

  test("internalTrafficPolicy Local: the cluster IP is served only once this node has an endpoint", () => {
    const remote = udpPort({ internalTrafficLocal: true, endpoints: [ep("10.244.1.5")] });
    assert.equal(servedUdpDestinations([remote], NODE_IPS).size, 0);
    const local = { ...remote, localEndpoints: [ep("10.244.0.5")] };
    assert.equal(servedUdpDestinations([local], NODE_IPS).size, 2);
  });

  test("a NodePort is served on each node address in the kernel only, per port; an externalIP in both trackers", () => {
    const served = servedUdpDestinations(
      [
        udpPort({
          clusterIPs: [],
          externalIPs: [ip("192.168.251.10")],
          nodePort: 30053,
          endpoints: [ep("10.244.1.5")],
        }),
      ],
      NODE_IPS,
    );
    const targets = [...new Map([...served.values()].map((t) => [unnatedTargetKey(t), t])).values()];
    assert.deepEqual(
      targets.map((t) => [t.tracker, t.ip.value, t.port]),
      [
        ["ovs", ip("192.168.251.10").value, 53],
        ["kernel", ip("192.168.251.10").value, 53],
        ["kernel", ip("192.168.200.11").value, 30053],
      ],
    );
  });

  test("an endpoint of the other family does not serve an address", () => {
    assert.equal(servedUdpDestinations([udpPort({ endpoints: [ep("fd00::5")] })], NODE_IPS).size, 0);
  });
});

// A little world: two UDP ports of one Service (a cluster IP, an externalIP, a NodePort), each with or without a
// Cluster-policy and a local endpoint, under either traffic policy.
const stateArb = fc.record({
  a: fc.record({ cluster: fc.boolean(), local: fc.boolean() }),
  b: fc.record({ cluster: fc.boolean(), local: fc.boolean() }),
  itp: fc.boolean(),
  etp: fc.boolean(),
});
type State = typeof stateArb extends fc.Arbitrary<infer T> ? T : never;

function plan(s: State): NatServicePort[] {
  const port = (n: number, e: { cluster: boolean; local: boolean }): NatServicePort =>
    udpPort({
      key: `default/svc/udp/${n}`,
      port: n,
      nodePort: 30000 + n,
      externalIPs: [ip("192.168.251.10")],
      endpoints: e.cluster || e.local ? [ep("10.244.1.5", 9000 + n)] : [],
      localEndpoints: e.local ? [ep("10.244.0.5", 9000 + n)] : [],
      internalTrafficLocal: s.itp,
      externalTrafficLocal: s.etp,
    });
  return [port(53, s.a), port(54, s.b)];
}

/** What a client on this node reaches at (tracker, address, port), by the rules' choice: has it an endpoint? */
function reachable(s: State, tracker: string, addr: IpAddress, port: number): boolean {
  const e = port === 53 || port === 30053 ? s.a : port === 54 || port === 30054 ? s.b : undefined;
  if (!e) return false;
  const cluster = e.cluster || e.local;
  if (addr.value === ip("10.96.0.10").value) return s.itp ? e.local : cluster;
  if (port >= 30000 && tracker === "ovs") return false;
  return cluster || (s.etp && tracker === "kernel" && e.local);
}

const ADDRS: [string, IpAddress, number][] = [
  ["kernel", ip("10.96.0.10"), 53],
  ["kernel", ip("10.96.0.10"), 54],
  ["ovs", ip("10.96.0.10"), 53],
  ["ovs", ip("10.96.0.10"), 54],
  ["kernel", ip("192.168.251.10"), 53],
  ["kernel", ip("192.168.251.10"), 54],
  ["ovs", ip("192.168.251.10"), 53],
  ["ovs", ip("192.168.251.10"), 54],
  ["kernel", ip("192.168.200.11"), 30053],
  ["kernel", ip("192.168.200.11"), 30054],
];

const covers = (t: UnnatedUdpTarget, tracker: string, addr: IpAddress, port: number) =>
  t.tracker === tracker && t.ip.value === addr.value && (t.port === undefined || t.port === port);

describe("deleting un-NATed entries when a UDP destination gets its first endpoint", () => {
  test("property: over any sequence of plans, each step's targets cover exactly the destinations that went from no endpoint to one, and a node address is never deleted beyond its port", () => {
    fc.assert(
      fc.property(fc.array(stateArb, { minLength: 1, maxLength: 8 }), (states) => {
        let before: ReturnType<typeof servedUdpDestinations> | undefined;
        let prev: State | undefined;
        for (const s of states) {
          const after = servedUdpDestinations(plan(s), NODE_IPS);
          const targets = newlyServedTargets(before, after);
          assert.equal(new Set(keys(targets)).size, targets.length, "one deletion per target");
          const gained = ADDRS.filter(
            ([tr, a, p]) => reachable(s, tr, a, p) && !(prev && reachable(prev, tr, a, p)),
          );
          for (const [tr, a, p] of gained)
            assert.ok(
              targets.some((t) => covers(t, tr, a, p)),
              `${tr} ${a.value}:${p} got its first endpoint`,
            );
          for (const t of targets) {
            assert.ok(
              gained.some(([tr, a, p]) => covers(t, tr, a, p)),
              `${unnatedTargetKey(t)} deleted with no destination gaining an endpoint`,
            );
            if (t.port === undefined)
              assert.equal(t.ip.value, ip("10.96.0.10").value, "only a cluster IP whole");
          }
          before = after;
          prev = s;
        }
      }),
    );
  });

  test("a plan unchanged deletes nothing; the first plan after a start deletes for every served destination", () => {
    const served = servedUdpDestinations([udpPort({ endpoints: [ep("10.244.1.5")] })], NODE_IPS);
    assert.deepEqual(newlyServedTargets(served, served), []);
    assert.deepEqual(keys(newlyServedTargets(undefined, served)), keys([...served.values()]));
  });
});

describe("the arguments of the deletions", () => {
  test("kernel: original destination and reply source the same address (never DNATed), the port when given", () => {
    assert.deepEqual(
      kernelUnnatedArgs({ tracker: "kernel", ip: ip("192.168.200.11"), port: 30053 }).join(" "),
      "-D -f ipv4 -p udp --orig-dst 192.168.200.11 --orig-port-dst 30053 --reply-src 192.168.200.11 --reply-port-src 30053",
    );
    assert.deepEqual(
      kernelUnnatedArgs({ tracker: "kernel", ip: ip("fd00:96::a"), port: undefined }).join(" "),
      "-D -f ipv6 -p udp --orig-dst fd00:96::a --reply-src fd00:96::a",
    );
  });

  test("OVS: a zone-less partial original tuple and reply tuple, IPv6 with ct_ipv6 fields", () => {
    assert.deepEqual(ovsUnnatedArgs({ tracker: "ovs", ip: ip("10.96.0.10"), port: undefined }), [
      "dpctl/flush-conntrack",
      "ct_nw_dst=10.96.0.10,ct_nw_proto=17",
      "ct_nw_src=10.96.0.10,ct_nw_proto=17",
    ]);
    assert.deepEqual(ovsUnnatedArgs({ tracker: "ovs", ip: ip("fd00:96::a"), port: 53 }), [
      "dpctl/flush-conntrack",
      "ct_ipv6_dst=fd00:96::a,ct_nw_proto=17,ct_tp_dst=53",
      "ct_ipv6_src=fd00:96::a,ct_nw_proto=17,ct_tp_src=53",
    ]);
  });

  test("a value that is not the typed value it claims is refused, never printed", () => {
    const forged = { family: 4, value: "1.2.3.4,ct_nw_src=0.0.0.0" } as unknown as IpAddress;
    for (const tracker of ["ovs", "kernel"] as const) {
      assert.throws(() => ovsUnnatedArgs({ tracker, ip: forged, port: 53 }), TypeError);
      assert.throws(() => kernelUnnatedArgs({ tracker, ip: forged, port: 53 }), TypeError);
      assert.throws(() => ovsUnnatedArgs({ tracker, ip: ip("10.96.0.10"), port: 70000 }), TypeError);
      assert.throws(
        () => kernelUnnatedArgs({ tracker, ip: ip("10.96.0.10"), port: "53 -F" as unknown as number }),
        TypeError,
      );
    }
  });
});

describe("the backlog of first-endpoint deletions", () => {
  const t = (n: number): UnnatedUdpTarget => ({ tracker: "kernel", ip: ip(`10.96.0.${n}`), port: undefined });

  test("oldest first within the cap; a repeat keeps its place; a failed one goes to the back; a done one leaves", () => {
    const b = new ConntrackBacklog(3);
    b.addUnnated([t(1), t(2), t(1)]);
    assert.equal(b.size, 2);
    assert.deepEqual(keys(b.unnatedRound(1)), keys([t(1)]));
    b.unnatedFailed(t(1));
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [t(2), t(1)].map(unnatedTargetKey));
    b.unnatedDone(t(2));
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [unnatedTargetKey(t(1))]);
  });

  test("beyond the cap the oldest are dropped and counted", () => {
    const b = new ConntrackBacklog(2);
    assert.equal(b.addUnnated([t(1), t(2), t(3)]), 1);
    assert.equal(b.dropped, 1);
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [t(2), t(3)].map(unnatedTargetKey));
  });
});
