import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp, parseIp } from "../ipam/address.ts";
import { formatCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import {
  formatInterfaceAddress,
  MAX_POD_NETWORKS_LENGTH,
  parsePodNetwork,
  parsePodNetworksAnnotation,
  podNetworksAnnotation,
} from "./pod-port.ts";

const GOOD = {
  ip_addresses: ["10.244.0.5/16", "fd00::5/64"],
  mac_address: "0a:58:0a:f4:00:05",
  gateway_ips: ["10.244.0.1", "fd00::1"],
  routes: [],
  logical_switch: "subnet-default",
};
const text = (d: Record<string, unknown>) => JSON.stringify({ default: { ...GOOD, ...d } });

function refused(t: string, field: RegExp | string): void {
  assert.throws(
    () => parsePodNetwork(t),
    (e: unknown) =>
      e instanceof InvalidInputError &&
      (typeof field === "string" ? e.problem.field === field : field.test(e.problem.field)),
    t.slice(0, 200),
  );
}

describe("the pod-networks annotation", () => {
  test("what the controller writes parses into typed values that print back the same", () => {
    const t = podNetworksAnnotation({
      subnet: "default",
      logicalSwitch: "subnet-default",
      mac: "0a:58:0a:f4:00:05",
      ipsWithPrefix: ["10.244.0.5/16", "fd00::5/64"],
      gateways: ["10.244.0.1", "fd00::1"],
    });
    const n = parsePodNetwork(t);
    assert.ok(n);
    assert.deepEqual(n.ips.map(formatInterfaceAddress), ["10.244.0.5/16", "fd00::5/64"]);
    assert.deepEqual(n.gateways.map(formatIp), ["10.244.0.1", "fd00::1"]);
    assert.equal(n.mac, "0a:58:0a:f4:00:05");
    assert.equal(n.logicalSwitch, "subnet-default");
    assert.deepEqual(parsePodNetworksAnnotation(t)?.ip_addresses, ["10.244.0.5/16", "fd00::5/64"]);
    assert.equal(parsePodNetwork(undefined), undefined);
    assert.equal(parsePodNetwork(""), undefined);
  });

  test("MACs and IPv6 come out in canonical form; absent or null routes are none", () => {
    const n = parsePodNetwork(
      text({
        mac_address: "0A-58-0A-F4-00-05",
        ip_addresses: ["fd00:0:0::5/64"],
        gateway_ips: ["FD00::1"],
      }),
    );
    assert.ok(n);
    assert.equal(n.mac, "0a:58:0a:f4:00:05");
    assert.equal(formatInterfaceAddress(n.ips[0]!), "fd00::5/64");
    assert.deepEqual(n.routes, []);
    assert.deepEqual(parsePodNetwork(text({ routes: null }))?.routes, []);
    assert.deepEqual(parsePodNetwork(text({ routes: undefined }))?.routes, []);
  });

  test("routes to the cluster's networks via an on-link next hop parse and print back the same", () => {
    const routes = [
      { dest: "100.64.0.0/16", nextHop: "10.244.0.2" },
      { dest: "10.96.0.0/16", nextHop: "10.244.0.2" },
      { dest: "fd98::/108", nextHop: "fd00::2" },
    ];
    const t = text({ ip_addresses: ["10.244.0.5/24", "fd00::5/64"], routes });
    assert.deepEqual(parsePodNetworksAnnotation(t)?.routes, routes);
    const written = podNetworksAnnotation({
      subnet: "zs",
      logicalSwitch: "subnet-default",
      mac: "0a:58:0a:f4:00:05",
      ipsWithPrefix: ["10.244.0.5/24", "fd00::5/64"],
      gateways: ["10.244.0.1", "fd00::1"],
      routes,
    });
    assert.deepEqual(parsePodNetworksAnnotation(written)?.routes, routes);
  });

  test("a route the controller would never write is refused: default, next hop off the pod's network, over its own network", () => {
    const own = { ip_addresses: ["10.244.0.5/24", "fd00::5/64"] };
    for (const [routes, field] of [
      [[{ dest: "0.0.0.0/0", nextHop: "10.244.0.2" }], "default.routes[0].dest"],
      [[{ dest: "::/0", nextHop: "fd00::2" }], "default.routes[0].dest"],
      [[{ dest: "10.96.0.0/16", nextHop: "10.99.0.1" }], "default.routes[0].nextHop"],
      [[{ dest: "fd98::/108", nextHop: "fd01::1" }], "default.routes[0].nextHop"],
      [[{ dest: "10.244.0.0/16", nextHop: "10.244.0.2" }], "default.routes[0].dest"],
      [[{ dest: "10.244.0.128/25", nextHop: "10.244.0.2" }], "default.routes[0].dest"],
      [
        [
          { dest: "100.64.0.0/16", nextHop: "10.244.0.2" },
          { dest: "0.0.0.0/1", nextHop: "192.168.0.1" },
        ],
        "default.routes[1].nextHop",
      ],
    ] as const)
      refused(text({ ...own, routes }), field);
  });

  test("every route that parses has an on-link next hop and leaves the pod's own network and default route alone", () => {
    const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((b) => b.join("."));
    fc.assert(
      fc.property(
        v4,
        fc.integer({ min: 1, max: 32 }),
        v4,
        fc.integer({ min: 8, max: 30 }),
        (dst, p, hop, ownP) => {
          const ownNet = `10.60.0.5/${ownP}`;
          let n: ReturnType<typeof parsePodNetwork>;
          try {
            n = parsePodNetwork(
              text({
                ip_addresses: [ownNet],
                gateway_ips: ["10.60.0.1"],
                routes: [{ dest: `${dst}/${p}`, nextHop: hop }],
              }),
            );
          } catch (e) {
            assert.ok(e instanceof InvalidInputError, String(e));
            return;
          }
          const r = n?.routes[0];
          assert.ok(r);
          assert.ok(r.dest.prefix > 0);
          const mask = (pre: number) =>
            (((1n << 32n) - 1n) ^ ((1n << BigInt(32 - pre)) - 1n)) & ((1n << 32n) - 1n);
          const own = parseIp("10.60.0.5").value;
          assert.equal(r.nextHop.value & mask(ownP), own & mask(ownP), "the next hop is on-link");
          const m = mask(Math.min(ownP, r.dest.prefix));
          assert.notEqual(r.dest.network & m, own & m, "the destination is off the pod's own network");
        },
      ),
      { numRuns: 3000 },
    );
  });

  test("each bad value is refused with the field that holds it", () => {
    refused(
      text({ routes: [{ dest: "10.0.0.0/8 via 10.244.0.1\nnetns add x", nextHop: "10.244.0.1" }] }),
      "default.routes[0].dest",
    );
    refused(
      text({ routes: [{ dest: "10.0.0.0/8", nextHop: "10.244.0.1\nnetns add x" }] }),
      "default.routes[0].nextHop",
    );
    refused(text({ routes: [{ dest: "10.0.0.0/8", nextHop: "fd00::1" }] }), "default.routes[0].nextHop");
    refused(text({ routes: [{ dest: "10.0.0.1/8", nextHop: "10.244.0.1" }] }), "default.routes[0].dest");
    refused(text({ routes: ["10.0.0.0/8"] }), "default.routes[0]");
    refused(
      text({ routes: new Array(17).fill({ dest: "10.0.0.0/8", nextHop: "10.244.0.1" }) }),
      "default.routes",
    );
    refused(text({ ip_addresses: ["10.244.0.5/16\nnetns add x"] }), "default.ip_addresses[0]");
    refused(text({ ip_addresses: ["10.244.0.5"] }), "default.ip_addresses[0]");
    refused(text({ ip_addresses: ["10.244.0.5/33"] }), "default.ip_addresses[0]");
    refused(text({ ip_addresses: ["::ffff:10.244.0.5/64"] }), "default.ip_addresses[0]");
    refused(text({ ip_addresses: ["224.0.0.1/4"] }), "default.ip_addresses[0]");
    refused(text({ ip_addresses: ["10.244.0.5/16", "10.244.0.6/16"] }), "default.ip_addresses");
    refused(text({ ip_addresses: ["10.244.0.5/16", "fd00::5/64", "fd00::6/64"] }), "default.ip_addresses");
    refused(text({ ip_addresses: [] }), "default.ip_addresses");
    refused(text({ ip_addresses: "10.244.0.5/16" }), "default.ip_addresses");
    refused(text({ ip_addresses: [["10.244.0.5/16"]] }), "default.ip_addresses[0]");
    refused(text({ gateway_ips: ["10.244.0.1 dev lo"] }), "default.gateway_ips[0]");
    refused(text({ gateway_ips: ["10.244.0.1", "10.244.0.2"] }), "default.gateway_ips");
    refused(text({ ip_addresses: ["10.244.0.5/16"], gateway_ips: ["fd00::1"] }), "default.gateway_ips[0]");
    refused(text({ mac_address: "0a:58:0a:f4:00:05\nnetns add x" }), "default.mac_address");
    refused(text({ mac_address: "01:00:5e:00:00:01" }), "default.mac_address");
    refused(text({ mac_address: 5 }), "default.mac_address");
    refused(text({ logical_switch: "subnet default" }), "default.logical_switch");
    refused(text({ logical_switch: "$(reboot)" }), "default.logical_switch");
    refused(JSON.stringify({ other: GOOD }), "default");
    refused(JSON.stringify([GOOD]), "k8s.ovn.org/pod-networks");
    refused("{", "k8s.ovn.org/pod-networks");
    refused(text({ logical_switch: "x".repeat(MAX_POD_NETWORKS_LENGTH) }), "k8s.ovn.org/pod-networks");
  });

  test("a pod on ZStack's switch carries the switch's UUID, which the agent takes; ZStack's display names it refuses", () => {
    const on = (logicalSwitch: string) =>
      podNetworksAnnotation({
        subnet: "zs",
        logicalSwitch,
        mac: "0a:58:0a:3c:00:05",
        ipsWithPrefix: ["10.60.0.5/24"],
        gateways: ["10.60.0.1"],
      });
    const uuid = "6b1f0000-0000-4000-8000-000000000001";
    assert.equal(parsePodNetwork(on(uuid))?.logicalSwitch, uuid);
    // Names ZStack allows: why the controller never writes them (docs/external-mode.md, "Addresses").
    for (const name of ["ZStack 网络 1", "网络", "l3 vpc"]) refused(on(name), "default.logical_switch");
  });

  test("any JSON value is either refused with an InvalidInputError or parsed into values without whitespace", () => {
    const hostileString = fc.oneof(
      fc.string(),
      fc.constantFrom(
        "\n",
        ";",
        "$(id)",
        "`id`",
        " netns add x",
        "\nnetns exec x sh -c 'touch /tmp/p'",
        "::ffff:1.2.3.4",
      ),
      fc
        .tuple(fc.constantFrom("10.0.0.0/8", "10.244.0.5/16", "10.244.0.1", "fd00::1"), fc.string())
        .map(([a, b]) => a + b),
    );
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        hostileString,
        fc.integer(),
        fc.constant(null),
        fc.array(tie("v"), { maxLength: 3 }),
        fc.dictionary(fc.constantFrom("dest", "nextHop", "x"), tie("v"), { maxKeys: 3 }),
      ),
    })).v;
    const entry = fc.record(
      {
        ip_addresses: fc.oneof(value, fc.array(hostileString, { maxLength: 3 })),
        mac_address: fc.oneof(value, fc.constant(GOOD.mac_address)),
        gateway_ips: fc.oneof(value, fc.constant(GOOD.gateway_ips)),
        routes: fc.oneof(
          value,
          fc.array(fc.record({ dest: hostileString, nextHop: hostileString }), { maxLength: 3 }),
        ),
        logical_switch: fc.oneof(value, fc.constant(GOOD.logical_switch)),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(entry, (d) => {
        let n: ReturnType<typeof parsePodNetwork>;
        try {
          n = parsePodNetwork(JSON.stringify({ default: { ...GOOD, ...d } }));
        } catch (e) {
          assert.ok(e instanceof InvalidInputError, String(e));
          return;
        }
        assert.ok(n);
        const words = [
          ...n.ips.map(formatInterfaceAddress),
          ...n.gateways.map(formatIp),
          ...n.routes.flatMap((r) => [formatCidr(r.dest), formatIp(r.nextHop)]),
          n.mac,
          n.logicalSwitch,
        ];
        for (const w of words) assert.match(w, /^[0-9A-Za-z_.:/-]+$/);
      }),
      { numRuns: 2000 },
    );
  });
});
