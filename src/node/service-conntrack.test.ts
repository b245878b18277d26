import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type IpAddress, parseIp } from "../ipam/address.ts";
import {
  conntrackDeleteArgs,
  conntrackDeletionArgs,
  staleUdpFlows,
  type UdpServiceFlow,
  udpServiceFlows,
} from "./service-conntrack.ts";
import type { NatEndpoint, NatServicePort } from "./service-nat.ts";

const ip = (t: string) => parseIp(t);
const ep = (a: string, port = 5353): NatEndpoint => ({ ip: ip(a), port });

function udp(over: Partial<NatServicePort>): NatServicePort {
  return {
    key: "ns/dns/udp/53",
    protocol: "udp",
    port: 53,
    nodePort: 30053,
    clusterIPs: [ip("10.96.0.10")],
    externalIPs: [],
    endpoints: [ep("10.244.0.5"), ep("10.244.1.5")],
    localEndpoints: [ep("10.244.0.5")],
    internalTrafficLocal: false,
    externalTrafficLocal: false,
    ...over,
  };
}

const shown = (flows: UdpServiceFlow[]) =>
  flows.map((f) => conntrackDeleteArgs(f).join(" ")).sort((a, b) => (a < b ? -1 : 1));

describe("stale UDP Service flows", () => {
  test("a removed endpoint: its flows to the cluster IP and to the NodePort are stale, the other endpoint's are not", () => {
    const before = [udp({})];
    const after = [udp({ endpoints: [ep("10.244.1.5")], localEndpoints: [] })];
    assert.deepEqual(shown(staleUdpFlows(before, after)), [
      "-D -f ipv4 -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.5 --reply-port-src 5353",
      "-D -f ipv4 -p udp --orig-port-dst 30053 --reply-src 10.244.0.5 --reply-port-src 5353",
    ]);
  });

  test("a changed target port makes the old port's flows stale, on the same endpoint address", () => {
    const before = [udp({ endpoints: [ep("10.244.1.5")], localEndpoints: [] })];
    const after = [udp({ endpoints: [ep("10.244.1.5", 5354)], localEndpoints: [] })];
    assert.deepEqual(shown(staleUdpFlows(before, after)), [
      "-D -f ipv4 -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.1.5 --reply-port-src 5353",
      "-D -f ipv4 -p udp --orig-port-dst 30053 --reply-src 10.244.1.5 --reply-port-src 5353",
    ]);
  });

  test("a deleted Service leaves every flow of it stale; externalIPs count, an address of the other family never pairs", () => {
    const v6 = ep("fd00:10:244::5");
    const before = [
      udp({
        nodePort: undefined,
        clusterIPs: [ip("10.96.0.10"), ip("fd00:10:96::10")],
        externalIPs: [ip("192.168.251.10")],
        endpoints: [ep("10.244.0.5"), v6],
        localEndpoints: [],
      }),
    ];
    assert.deepEqual(shown(staleUdpFlows(before, [])), [
      "-D -f ipv4 -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.5 --reply-port-src 5353",
      "-D -f ipv4 -p udp --orig-dst 192.168.251.10 --orig-port-dst 53 --reply-src 10.244.0.5 --reply-port-src 5353",
      "-D -f ipv6 -p udp --orig-dst fd00:10:96::10 --orig-port-dst 53 --reply-src fd00:10:244::5 --reply-port-src 5353",
    ]);
  });

  test("TCP and SCTP ports have no stale flows (a connection to a gone endpoint is reset)", () => {
    for (const protocol of ["tcp", "sctp"] as const)
      assert.deepEqual(staleUdpFlows([udp({ protocol })], []), []);
  });

  test("an endpoint moved from the Cluster to the Local choice is still DNATed to: not stale", () => {
    const before = [udp({ endpoints: [ep("10.244.0.5")], localEndpoints: [] })];
    const after = [udp({ endpoints: [], localEndpoints: [ep("10.244.0.5")] })];
    assert.deepEqual(staleUdpFlows(before, after), []);
  });

  test("property: nothing is stale between a plan and itself, and no stale flow is one the new plan DNATs", () => {
    const addr = fc.integer({ min: 1, max: 6 }).map((i) => ip(`10.244.0.${i}`));
    const endpoint = fc.record({ ip: addr, port: fc.integer({ min: 5353, max: 5355 }) });
    const port = fc.record({
      key: fc.constantFrom("a", "b"),
      protocol: fc.constantFrom("udp" as const, "tcp" as const),
      port: fc.constantFrom(53, 54),
      nodePort: fc.option(fc.constantFrom(30053, 30054), { nil: undefined }),
      clusterIPs: fc.subarray([ip("10.96.0.10"), ip("10.96.0.11")]),
      externalIPs: fc.subarray([ip("192.168.251.10")]),
      endpoints: fc.array(endpoint, { maxLength: 4 }),
      localEndpoints: fc.array(endpoint, { maxLength: 2 }),
      internalTrafficLocal: fc.boolean(),
      externalTrafficLocal: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(port, { maxLength: 3 }), fc.array(port, { maxLength: 3 }), (a, b) => {
        assert.deepEqual(staleUdpFlows(a, a), []);
        const live = new Set(shown([...udpServiceFlows(b).values()]));
        for (const f of shown(staleUdpFlows(a, b))) assert.ok(!live.has(f), f);
      }),
    );
  });
});

describe("conntrack arguments", () => {
  test("a value that is not a parsed address or a port number is refused, never printed", () => {
    const bad = "10.0.0.1 --dst 0.0.0.0" as unknown as IpAddress;
    assert.throws(() => conntrackDeleteArgs({ vip: bad, port: 53, endpoint: ep("10.244.0.5") }), TypeError);
    assert.throws(
      () => conntrackDeleteArgs({ vip: undefined, port: 53, endpoint: { ip: bad, port: 53 } }),
      TypeError,
    );
    assert.throws(
      () =>
        conntrackDeleteArgs({
          vip: undefined,
          port: "53 -F" as unknown as number,
          endpoint: ep("10.244.0.5"),
        }),
      TypeError,
    );
    assert.throws(
      () => conntrackDeleteArgs({ vip: ip("fd00::1"), port: 53, endpoint: ep("10.244.0.5") }),
      TypeError,
    );
  });

  test("a grouped deletion's values are re-checked too: a raw string is refused, two families never pair", () => {
    const bad = "10.0.0.1 -F" as unknown as IpAddress;
    assert.throws(() => conntrackDeletionArgs({ kind: "endpoint", endpoint: bad }), TypeError);
    assert.throws(
      () => conntrackDeletionArgs({ kind: "pair", vip: bad, endpoint: ip("10.244.0.5") }),
      TypeError,
    );
    assert.throws(
      () => conntrackDeletionArgs({ kind: "pair", vip: ip("fd00::1"), endpoint: ip("10.244.0.5") }),
      TypeError,
    );
    assert.deepEqual(conntrackDeletionArgs({ kind: "endpoint", endpoint: ip("fd00:10:244::5") }), [
      "-D",
      "-f",
      "ipv6",
      "-p",
      "udp",
      "--dst-nat",
      "fd00:10:244::5",
    ]);
  });
});
