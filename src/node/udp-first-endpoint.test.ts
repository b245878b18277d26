import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type IpAddress, parseIp } from "../ipam/address.ts";
import {
  ConntrackBacklog,
  FORGET_PER_ROUND,
  UNNATED_MIN_INTERVAL_MS,
  UNNATED_PER_SECOND,
} from "./conntrack-backlog.ts";
import type { NatEndpoint, NatServicePort } from "./service-nat.ts";
import {
  kernelUnnatedArgs,
  newlyServedTargets,
  ovsRunDir,
  ovsUnnatedArgs,
  ovsUnnatedInvocation,
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

  test("oldest first within the cap; a repeat keeps its place; a failed one goes to the back after a backoff; a done one leaves", () => {
    let now = 0;
    const b = new ConntrackBacklog(3, { clock: () => now });
    b.addUnnated([t(1), t(2), t(1)]);
    assert.equal(b.size, 2);
    assert.deepEqual(keys(b.unnatedRound(1)), keys([t(1)]));
    assert.equal(b.unnatedFailed(t(1)), false);
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [unnatedTargetKey(t(2))], "t1 backs off");
    b.unnatedDone(t(2));
    assert.equal(b.nextUnnatedAt(), 5_000);
    now = 5_000;
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [unnatedTargetKey(t(1))]);
  });

  test("beyond the cap the oldest are dropped and counted", () => {
    const b = new ConntrackBacklog(2);
    assert.equal(b.addUnnated([t(1), t(2), t(3)]), 1);
    assert.equal(b.dropped, 1);
    assert.deepEqual(b.unnatedRound().map(unnatedTargetKey), [t(2), t(3)].map(unnatedTargetKey));
  });

  test("a target that keeps failing is retried with a doubling backoff and given up after a few failures", () => {
    let now = 0;
    const b = new ConntrackBacklog(10, { clock: () => now, maxFailures: 3 });
    b.addUnnated([t(1)]);
    const attempts: number[] = [];
    for (; now < 120_000; now += 100) {
      for (const x of b.unnatedRound()) {
        attempts.push(now);
        b.unnatedFailed(x);
      }
    }
    assert.deepEqual(attempts, [0, 5_000, 15_000]);
    assert.equal(b.givenUp, 1);
    assert.equal(b.size, 0);
  });

  test("queued again while its deletion runs: deleted once more after the interval, since the running one may have missed it", () => {
    let now = 0;
    const b = new ConntrackBacklog(10, { clock: () => now });
    b.addUnnated([t(1)]);
    const [x] = b.unnatedRound();
    now = 30;
    b.addUnnated([t(1)]);
    b.unnatedDone(x as UnnatedUdpTarget);
    assert.equal(b.size, 1);
    assert.equal(b.nextUnnatedAt(), 5_000);
  });

  // An EndpointSlice written by hand flaps between no endpoint and one every 100 ms for 10 s, on a Service with
  // 50 UDP externalIPs: each 0->1 makes 100 targets (kernel and OVS per address), OVS's queued again 5 s later.
  // The worker runs a round whenever one is due (every 10 ms of fake time here), as the agent's wake timer does.
  test("100 flaps in 10 s of a Service with 50 externalIPs: a bounded number of deletions, and each address is still deleted after its last first endpoint", (tc) => {
    let now = 0;
    const b = new ConntrackBacklog(undefined, { clock: () => now });
    const externalIPs = Array.from({ length: 50 }, (_, i) => ip(`192.168.251.${i + 1}`));
    const svc = (endpoints: NatEndpoint[]) =>
      udpPort({ clusterIPs: [], externalIPs, endpoints, key: "tenant/flap/udp/53" });
    let served: ReturnType<typeof servedUdpDestinations> | undefined = servedUdpDestinations(
      [svc([])],
      NODE_IPS,
    );
    const rechecks: { at: number; targets: UnnatedUdpTarget[] }[] = [];
    const deletions = new Map<string, number[]>();
    let total = 0;
    const lastGained = new Map<string, number>();
    const END = 10_000;
    for (; now <= END + 60_000; now += 10) {
      if (now < END && now % 100 === 0) {
        const up = (now / 100) % 2 === 0;
        const after = servedUdpDestinations([svc(up ? [ep("10.244.1.5")] : [])], NODE_IPS);
        const gained = newlyServedTargets(served, after);
        served = after;
        for (const g of gained) lastGained.set(unnatedTargetKey(g), now);
        b.addUnnated(gained);
        rechecks.push({ at: now + 5_000, targets: gained.filter((g) => g.tracker === "ovs") });
      }
      for (const r of rechecks.filter((r) => r.at === now)) {
        for (const g of r.targets) lastGained.set(unnatedTargetKey(g), now);
        b.addUnnated(r.targets);
      }
      for (const x of b.unnatedRound()) {
        total++;
        const k = unnatedTargetKey(x);
        deletions.set(k, [...(deletions.get(k) ?? []), now]);
        b.unnatedDone(x);
      }
    }
    assert.equal(lastGained.size, 100);
    // Without the limits: 50 transitions x 100 targets, and 50 x 50 rechecks, 7,500 invocations.
    // Spread over the time the deletions took (fake time: the requests end at 15 s, the last deferred ones later).
    const span = Math.max(...[...deletions.values()].map((d) => d.at(-1) as number));
    const perTarget = Math.floor(span / UNNATED_MIN_INTERVAL_MS) + 1;
    assert.ok(total <= 100 * perTarget, `${total} deletions, at most ${perTarget} per target`);
    assert.ok(total <= FORGET_PER_ROUND + (span * UNNATED_PER_SECOND) / 1000, `${total} over ${span} ms`);
    assert.ok(span < 30_000, `the last deferred deletion at ${span} ms`);
    const most = Math.max(...[...deletions.values()].map((d) => d.length));
    tc.diagnostic(`${total} deletions (7,500 unlimited), at most ${most} per target, the last at ${span} ms`);
    for (const [k, times] of deletions) {
      for (let i = 1; i < times.length; i++)
        assert.ok(
          (times[i] as number) - (times[i - 1] as number) >= UNNATED_MIN_INTERVAL_MS,
          `${k} at ${times.join(",")}`,
        );
      // The deferred deletion happened: after the last time the address was (re)queued, it was deleted again.
      assert.ok(
        (times.at(-1) as number) >= (lastGained.get(k) as number),
        `${k} last deleted before its last request`,
      );
    }
    assert.equal(deletions.size, 100);
    assert.equal(b.size, 0);
    assert.equal(b.nextUnnatedAt(), undefined);
  });

  test("with no flapping, a first endpoint's deletion is not delayed", () => {
    const now = 1_000;
    const b = new ConntrackBacklog(undefined, { clock: () => now });
    b.addUnnated([t(1), t(2)]);
    assert.equal(b.unnatedRound().length, 2);
  });
});

describe("reaching ovs-vswitchd", () => {
  test("OVS's run directory comes from the agent's OVS database address (dpdk.socketDir in the chart)", () => {
    assert.equal(ovsRunDir("unix:/var/run/openvswitch/db.sock"), "/var/run/openvswitch");
    assert.equal(ovsRunDir("unix:/run/ovs-dpdk/db.sock"), "/run/ovs-dpdk");
    assert.equal(ovsRunDir("tcp:127.0.0.1:6640,unix:/run/ovs-dpdk/db.sock"), "/run/ovs-dpdk");
    assert.equal(ovsRunDir("tcp:127.0.0.1:6640"), undefined);
    assert.equal(ovsRunDir("unix:db.sock"), undefined);
    assert.equal(ovsRunDir("unix:/run/../etc/db.sock"), undefined);
    assert.equal(ovsRunDir("unix:/run/a b/db.sock"), undefined);
  });

  test("the flush goes to ovs-vswitchd through OVS_RUNDIR, the target daemon named, never a path from input", () => {
    const target: UnnatedUdpTarget = { tracker: "ovs", ip: ip("10.96.0.10"), port: 53 };
    const inv = ovsUnnatedInvocation(target, { ovsRunDir: "/run/ovs-dpdk" });
    assert.deepEqual(inv.env, { OVS_RUNDIR: "/run/ovs-dpdk" });
    assert.deepEqual(inv.args.slice(0, 4), ["--timeout=10", "-t", "ovs-vswitchd", "dpctl/flush-conntrack"]);
    assert.deepEqual(ovsUnnatedInvocation(target).env, {});
  });
});
