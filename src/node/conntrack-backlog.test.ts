import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { parseIp } from "../ipam/address.ts";
import { ConntrackBacklog } from "./conntrack-backlog.ts";
import {
  type ConntrackDeletion,
  conntrackDeletionArgs,
  groupUdpFlows,
  type UdpServiceFlow,
  udpFlowKey,
} from "./service-conntrack.ts";
import { type UnnatedUdpTarget, unnatedTargetKey } from "./udp-first-endpoint.ts";

const ip = (t: string) => parseIp(t);

const flowArb: fc.Arbitrary<UdpServiceFlow> = fc.record({
  vip: fc.option(fc.constantFrom("10.96.0.10", "10.96.0.11", "192.168.251.10").map(ip), { nil: undefined }),
  port: fc.constantFrom(53, 54, 30053),
  endpoint: fc.record({
    ip: fc.integer({ min: 1, max: 5 }).map((i) => ip(`10.244.0.${i}`)),
    port: fc.constantFrom(5353, 5354),
  }),
});

const byKey = (flows: readonly UdpServiceFlow[]) => new Map(flows.map((f) => [udpFlowKey(f), f]));
const same = (a: { family: number; value: unknown }, b: { family: number; value: unknown }) =>
  a.family === b.family && a.value === b.value;

/** What the conntrack filter of a deletion matches, on the flows the Service table makes. */
function matches(d: ConntrackDeletion, f: UdpServiceFlow): boolean {
  switch (d.kind) {
    case "endpoint":
      return same(d.endpoint, f.endpoint.ip);
    case "pair":
      return f.vip !== undefined && same(d.vip, f.vip) && same(d.endpoint, f.endpoint.ip);
    case "flow":
      return udpFlowKey(d.flow) === udpFlowKey(f);
  }
}

describe("grouping stale UDP flows into conntrack deletions", () => {
  test("property: every stale flow is covered by exactly one deletion whose filter matches it, and no filter matches a live flow", () => {
    fc.assert(
      fc.property(fc.array(flowArb, { maxLength: 30 }), fc.array(flowArb, { maxLength: 30 }), (s, l) => {
        const live = byKey(l);
        const stale = byKey(s);
        const groups = groupUdpFlows(stale, live);
        const covered = groups.flatMap((g) => g.covers);
        assert.equal(new Set(covered).size, covered.length, "no flow in two deletions");
        assert.deepEqual(
          new Set(covered),
          new Set([...stale.keys()].filter((k) => !live.has(k))),
          "every stale flow not live again",
        );
        for (const g of groups) {
          for (const k of g.covers) assert.ok(matches(g.deletion, stale.get(k) as UdpServiceFlow), k);
          for (const f of live.values())
            assert.ok(!matches(g.deletion, f), `${g.key} matches live ${udpFlowKey(f)}`);
        }
        assert.ok(groups.length <= Math.max(stale.size, 0));
      }),
    );
  });

  test("a Service emptied of every endpoint costs one deletion per endpoint address, whatever its ports and addresses", () => {
    const flows: UdpServiceFlow[] = [];
    for (let e = 1; e <= 10; e++)
      for (let p = 0; p < 8; p++) {
        const endpoint = { ip: ip(`10.244.3.${e}`), port: 2000 + p };
        flows.push({ vip: ip("10.96.0.10"), port: 1000 + p, endpoint });
        flows.push({ vip: ip("192.168.251.10"), port: 1000 + p, endpoint });
        flows.push({ vip: undefined, port: 30000 + p, endpoint });
      }
    const groups = groupUdpFlows(byKey(flows), new Map());
    assert.equal(groups.length, 10);
    assert.ok(groups.every((g) => g.deletion.kind === "endpoint" && g.covers.length === 24));
  });

  test("an endpoint address still DNATed to by another Service address: one deletion per gone pair; on the same pair by another port: per flow", () => {
    const ep = (port: number) => ({ ip: ip("10.244.0.5"), port });
    const stale = [
      { vip: ip("10.96.0.10"), port: 53, endpoint: ep(5353) },
      { vip: ip("10.96.0.10"), port: 54, endpoint: ep(5354) },
      { vip: ip("10.96.0.11"), port: 53, endpoint: ep(5353) },
      { vip: undefined, port: 30053, endpoint: ep(5353) },
    ];
    const live = byKey([{ vip: ip("10.96.0.11"), port: 53, endpoint: ep(5355) }]);
    assert.deepEqual(
      groupUdpFlows(byKey(stale), live).map((g) => [
        conntrackDeletionArgs(g.deletion).join(" "),
        g.covers.length,
      ]),
      [
        ["-D -f ipv4 -p udp --orig-dst 10.96.0.10 --dst-nat 10.244.0.5", 2],
        [
          "-D -f ipv4 -p udp --orig-dst 10.96.0.11 --orig-port-dst 53 --reply-src 10.244.0.5 --reply-port-src 5353",
          1,
        ],
        ["-D -f ipv4 -p udp --orig-port-dst 30053 --reply-src 10.244.0.5 --reply-port-src 5353", 1],
      ],
    );
  });
});

describe("the conntrack backlog", () => {
  test("property: never more than the cap, the newest kept, every drop counted", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(flowArb, { maxLength: 20 }), { maxLength: 6 }),
        fc.integer({ min: 1, max: 12 }),
        (batches, cap) => {
          const b = new ConntrackBacklog(cap);
          // The model: a list of keys, oldest first.
          let model: string[] = [];
          let dropped = 0;
          for (const batch of batches) {
            b.add(batch);
            for (const f of batch) if (!model.includes(udpFlowKey(f))) model.push(udpFlowKey(f));
            dropped += Math.max(0, model.length - cap);
            model = model.slice(Math.max(0, model.length - cap));
            assert.ok(b.size <= cap);
          }
          assert.equal(b.dropped, dropped);
          assert.deepEqual(new Set(b.round(new Map(), 1_000).flatMap((g) => g.covers)), new Set(model));
        },
      ),
    );
  });

  test("property: rounds take at most the cap, a deleted flow is never taken again, failures are carried over until done", () => {
    fc.assert(
      fc.property(
        fc.array(flowArb, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 30 }),
        (flows, max, outcomes) => {
          const b = new ConntrackBacklog();
          b.add(flows);
          const all = new Set(flows.map(udpFlowKey));
          const deleted = new Set<string>();
          let i = 0;
          for (let rounds = 0; b.size > 0; rounds++) {
            assert.ok(rounds < 1_000, "the backlog drains");
            const round = b.round(new Map(), max);
            assert.ok(round.length >= 1 && round.length <= max);
            for (const g of round) {
              // Fail by the script, then always succeed: the carried-over flows are done in the end.
              const ok = i < outcomes.length ? (outcomes[i] as boolean) : true;
              i++;
              for (const k of g.covers) assert.ok(!deleted.has(k), `${k} deleted twice`);
              if (ok) {
                for (const k of g.covers) deleted.add(k);
                b.done(g);
              } else b.failed(g);
            }
          }
          assert.deepEqual(deleted, all);
        },
      ),
    );
  });

  test("adding more than the cap drops the oldest and counts them; a flow already queued keeps its place", () => {
    const f = (i: number): UdpServiceFlow => ({
      vip: ip("10.96.0.10"),
      port: 53,
      endpoint: { ip: ip(`10.244.0.${i}`), port: 5353 },
    });
    const b = new ConntrackBacklog(3);
    assert.equal(b.add([f(1), f(2), f(3)]), 0);
    assert.equal(b.add([f(1), f(4), f(5)]), 2);
    assert.equal(b.dropped, 2);
    assert.deepEqual(
      b.round(new Map()).map((g) => g.covers[0]),
      [f(3), f(4), f(5)].map(udpFlowKey),
    );
  });

  test("a flow the rules DNAT again leaves the backlog without a deletion", () => {
    const flow: UdpServiceFlow = {
      vip: ip("10.96.0.10"),
      port: 53,
      endpoint: { ip: ip("10.244.0.5"), port: 5353 },
    };
    const b = new ConntrackBacklog();
    b.add([flow]);
    assert.deepEqual(b.round(byKey([flow])), []);
    assert.equal(b.size, 0);
  });
});

describe("first-endpoint deletions shared among namespaces", () => {
  const target = (owner: string, n: number): UnnatedUdpTarget => ({
    tracker: "kernel",
    ip: parseIp(`10.${owner === "a" ? 1 : 2}.${Math.floor(n / 250)}.${(n % 250) + 1}`),
    port: 53,
    owner,
  });
  test("one namespace's 5,000 queued targets do not hold back another's: it is in the next round", () => {
    const now = 1_000_000;
    const b = new ConntrackBacklog(16_384, { clock: () => now, perSecond: 20, burst: 32 });
    b.addUnnated(Array.from({ length: 5_000 }, (_, i) => target("a", i)));
    b.addUnnated([target("b", 0)]);
    const round = b.unnatedRound(32);
    assert.equal(round.length, 32);
    assert.ok(
      round.some((t) => t.owner === "b"),
      "namespace b's target is taken in the first round",
    );
  });
  test("beyond the cap the namespace with the most queued loses its own oldest, never another's", () => {
    const b = new ConntrackBacklog(100, { clock: () => 0 });
    b.addUnnated([target("b", 0)]);
    const dropped = b.addUnnated(Array.from({ length: 150 }, (_, i) => target("a", i)));
    assert.equal(dropped, 51);
    assert.equal(b.size, 100);
    const all = b.unnatedRound(1_000);
    assert.ok(
      all.some((t) => t.owner === "b"),
      "b's single target is kept",
    );
    assert.ok(
      !all.some((t) => unnatedTargetKey(t) === unnatedTargetKey(target("a", 0))),
      "a's oldest dropped",
    );
  });
});
