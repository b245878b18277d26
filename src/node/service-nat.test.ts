import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { type Cidr, parseCidr } from "../ipam/cidr.ts";
import { type InterfaceName, parseInterfaceName } from "./interface-name.ts";
import {
  affinityFromNftJson,
  type NatServicePort,
  type ServiceNatSpec,
  serviceRuleset,
} from "./service-nat.ts";

const MGMT = parseInterfaceName("zovn-mgmt");
const ip = (t: string) => parseIp(t);
const ep = (a: string, port: number) => ({ ip: ip(a), port });
/**
 * The two rules that mark a connection for masquerade: the node's own (no input interface: the output hook), or
 * one that entered the node (whatever its source claims).
 */
const MARKS = [
  "meta iif 0 meta mark set meta mark | 0x4000",
  "meta iif != 0 meta mark set meta mark | 0x2000",
];

function svcPort(over: Partial<NatServicePort> = {}): NatServicePort {
  return {
    key: "default/web/http/tcp",
    protocol: "tcp",
    port: 80,
    clusterIPs: [ip("10.96.0.10")],
    externalIPs: [],
    endpoints: [ep("10.244.0.5", 8080), ep("10.244.1.5", 8080)],
    localEndpoints: [ep("10.244.0.5", 8080)],
    internalTrafficLocal: false,
    externalTrafficLocal: false,
    ...over,
  };
}

const spec = (...ports: NatServicePort[]): ServiceNatSpec => ({
  mgmtIfname: MGMT,
  nodeIps: [ip("192.168.200.11")],
  ports,
});

/** The body of a chain, by the verdict that jumps to it from a map element of `key`. */
function chainOf(text: string, name: string): string[] {
  const m = new RegExp(`\\n  chain ${name} \\{\\n([^}]*(?:\\{[^}]*\\}[^}]*)*)\\n  \\}`).exec(text);
  assert.ok(m, `chain ${name} in\n${text}`);
  return m[1]!.split("\n").map((l) => l.trim());
}

function target(text: string, element: string): string {
  const m = new RegExp(`${element.replaceAll(".", "\\.")} : goto (\\w+)`).exec(text);
  assert.ok(m, `element ${element} in\n${text}`);
  return m[1]!;
}

/** The filter chain an element of the `fw` map jumps to. */
function fwTarget(text: string, element: string): string {
  const m = new RegExp(`${element.replaceAll(".", "\\.")} : goto (s[0-9a-f]{16}_fw)`).exec(text);
  assert.ok(m, `fw element ${element} in\n${text}`);
  return m[1]!;
}

describe("service NAT ruleset", () => {
  test("replaces the table atomically: declare, delete, define", () => {
    const text = serviceRuleset(spec(svcPort()));
    assert.deepEqual(text.split("\n").slice(0, 3), [
      "table inet zstack_ovn_svc",
      "delete table inet zstack_ovn_svc",
      "table inet zstack_ovn_svc {",
    ]);
    assert.ok(text.endsWith("}\n"));
  });

  test("a clusterIP spreads over every endpoint with numgen and masquerades node-originated traffic", () => {
    const text = serviceRuleset(spec(svcPort()));
    const all = chainOf(text, target(text, "10.96.0.10 . 6 . 80"));
    assert.deepEqual(all.slice(0, 2), MARKS);
    const vmap = /^numgen random mod 2 vmap \{ 0 : goto (\w+), 1 : goto (\w+) \}$/.exec(all[2] ?? "");
    assert.ok(vmap, all.join("\n"));
    assert.deepEqual(chainOf(text, vmap[1]!), ["meta l4proto 6 dnat ip to 10.244.0.5:8080"]);
    assert.deepEqual(chainOf(text, vmap[2]!), ["meta l4proto 6 dnat ip to 10.244.1.5:8080"]);
    assert.match(
      text,
      /type nat hook output priority -100;[^}]*ip daddr \. meta l4proto \. th dport vmap @vips_v4/,
    );
    assert.match(text, /type nat hook postrouting priority srcnat;[^}]*meta mark & 0x6000 != 0 meta l4proto/);
    assert.match(text, /\n {4}meta mark & 0x6000 != 0 masquerade\n {2}\}/);
  });

  test("connections that entered the node are SNATed to the service SNAT address, the node's own are masqueraded", () => {
    const text = serviceRuleset({
      ...spec(svcPort({ nodePort: 30080 })),
      serviceSnatIps: [ip("100.64.0.9")],
    });
    assert.deepEqual(chainOf(text, "nat_postrouting"), [
      "type nat hook postrouting priority srcnat; policy accept;",
      'meta nfproto ipv4 meta mark & 0x2000 != 0 oifname "zovn-mgmt" snat ip to 100.64.0.9',
      "meta mark & 0x6000 != 0 meta l4proto { tcp, udp, sctp } th sport >= 1024 masquerade to :1024-61439",
      "meta mark & 0x6000 != 0 masquerade",
    ]);
    // NodePort, externalIP and clusterIP share the chain that marks by source.
    assert.deepEqual(chainOf(text, target(text, "6 . 30080")).slice(0, 2), MARKS);
  });

  test("without a service SNAT address every marked connection is masqueraded", () => {
    const text = serviceRuleset(spec(svcPort({ nodePort: 30080 })));
    assert.deepEqual(chainOf(text, "nat_postrouting"), [
      "type nat hook postrouting priority srcnat; policy accept;",
      "meta mark & 0x6000 != 0 meta l4proto { tcp, udp, sctp } th sport >= 1024 masquerade to :1024-61439",
      "meta mark & 0x6000 != 0 masquerade",
    ]);
  });

  test("a service SNAT address that is not a parsed address is refused", () => {
    assert.throws(
      () =>
        serviceRuleset({
          ...spec(svcPort()),
          serviceSnatIps: ["100.64.0.9; flush ruleset" as unknown as IpAddress],
        }),
      /service NAT: .* is not a parsed IP address/,
    );
  });

  test("a port with no endpoint is rejected before NAT: TCP reset, else ICMP unreachable, on every address", () => {
    const text = serviceRuleset(
      spec(svcPort({ endpoints: [], localEndpoints: [], nodePort: 30080, externalIPs: [ip("192.0.2.7")] })),
    );
    assert.match(
      text,
      /set noep_v4 \{\n {4}type ipv4_addr \. inet_proto \. inet_service\n {4}elements = \{ 10\.96\.0\.10 \. 6 \. 80, 192\.0\.2\.7 \. 6 \. 80 \}/,
    );
    assert.match(text, /set noep_ports_v4 \{\n[^}]*elements = \{ 6 \. 30080 \}/);
    for (const hook of ["prerouting", "output"]) {
      const filter = chainOf(text, `filter_${hook}`);
      assert.equal(filter[0], `type filter hook ${hook} priority -110; policy accept;`);
      assert.ok(
        filter.includes("ip daddr . meta l4proto . th dport @noep_v4 meta l4proto tcp reject with tcp reset"),
      );
      assert.ok(filter.includes("ip daddr . meta l4proto . th dport @noep_v4 reject"));
      assert.ok(filter.includes("ip daddr @node_ips_v4 meta l4proto . th dport @noep_ports_v4 reject"));
    }
    assert.doesNotMatch(text, /dnat/);
  });

  test("externalTrafficPolicy Local: outside clients get local endpoints without masquerade, pods and the node get all", () => {
    const text = serviceRuleset(spec(svcPort({ nodePort: 30080, externalTrafficLocal: true })));
    const ext = target(text, "6 . 30080");
    assert.match(text, /ip daddr @node_ips_v4 meta l4proto \. th dport vmap @nodeports_v4/);
    const body = chainOf(text, ext);
    const all = target(text, "10.96.0.10 . 6 . 80");
    assert.deepEqual(body.slice(0, 2), [`iifname "zovn-mgmt" goto ${all}`, `meta iif 0 goto ${all}`]);
    const loc = /^goto (\w+)$/.exec(body[2] ?? "")?.[1];
    assert.ok(loc);
    const locBody = chainOf(text, loc);
    assert.equal(locBody.length, 1, "one local endpoint, no mark");
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(locBody[0]!)![1]!), [
      "meta l4proto 6 dnat ip to 10.244.0.5:8080",
    ]);
  });

  test("externalTrafficPolicy Local, the node's own connection from a reply address: every endpoint, the node's address kept towards pods elsewhere, masquerade towards its own", () => {
    const text = serviceRuleset({
      ...spec(svcPort({ nodePort: 30080, externalIPs: [ip("192.168.251.5")], externalTrafficLocal: true })),
      nodeReplyIps: [ip("192.168.200.11")],
    });
    assert.match(text, /set node_reply_v4 \{\n {4}type ipv4_addr\n {4}elements = \{ 192\.168\.200\.11 \}/);
    const ext = target(text, "6 . 30080");
    assert.equal(target(text, "192.168.251.5 . 6 . 80"), ext, "externalIPs take the same chain");
    const body = chainOf(text, ext);
    const all = target(text, "10.96.0.10 . 6 . 80");
    const sc = /^meta iif 0 ip saddr @node_reply_v4 goto (\w+_sc)$/.exec(body[1] ?? "")?.[1];
    assert.ok(sc, body.join("\n"));
    assert.deepEqual(body, [
      `iifname "zovn-mgmt" goto ${all}`,
      `meta iif 0 ip saddr @node_reply_v4 goto ${sc}`,
      `meta iif 0 goto ${all}`,
      body[3],
    ]);
    const scBody = chainOf(text, sc);
    assert.equal(scBody.length, 1, "no mark of its own: each endpoint's wrapper marks");
    const wrappers = /vmap \{ 0 : goto (\w+), 1 : goto (\w+) \}/.exec(scBody[0]!)!.slice(1);
    const [near, far] = wrappers.map((w) => chainOf(text, w!));
    // 10.244.0.5 is this node's endpoint: masqueraded (the management address, the own-node allow).
    assert.equal(near![0], "meta mark set meta mark | 0x4000");
    assert.equal(far![0], "meta mark set meta mark | 0x800");
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(far![1]!)![1]!), [
      "meta l4proto 6 dnat ip to 10.244.1.5:8080",
    ]);
    // Only the source port changes, into the range the reply policy matches, and only towards the pods.
    assert.match(
      text,
      /meta nfproto ipv4 meta mark & 0x800 != 0 oifname "zovn-mgmt" ip saddr 192\.168\.200\.11 meta l4proto \{ tcp, udp, sctp \} snat ip to 192\.168\.200\.11:61440-65535\n/,
    );
    const post = chainOf(text, "nat_postrouting");
    assert.ok(post.findIndex((l) => l.includes("0x800")) < post.findIndex((l) => l.includes("masquerade")));
    // ETP Cluster and the clusterIP are as before: the node's own connections are masqueraded.
    assert.deepEqual(chainOf(text, all).slice(0, 2), MARKS);
  });

  test("the node's address is kept only for reply addresses that are the node's own IPv4 addresses", () => {
    const port = svcPort({ nodePort: 30080, externalTrafficLocal: true });
    for (const replies of [[], [ip("192.168.200.99")], [ip("fd00:200::11")]]) {
      const text = serviceRuleset({
        ...spec(port),
        nodeIps: [ip("192.168.200.11"), ip("fd00:200::11")],
        nodeReplyIps: replies,
      });
      assert.doesNotMatch(text, /node_reply|_sc\b|0x800/, replies.map(formatIp).join(","));
      assert.equal(
        text,
        serviceRuleset({ ...spec(port), nodeIps: [ip("192.168.200.11"), ip("fd00:200::11")] }),
      );
    }
    // ETP Cluster only: the set is there, no Service uses it.
    const cluster = serviceRuleset({
      ...spec(svcPort({ nodePort: 30080 })),
      nodeReplyIps: [ip("192.168.200.11")],
    });
    assert.doesNotMatch(cluster, /goto \w+_sc\b/);
  });

  test("externalTrafficPolicy Local with no local endpoint drops outside clients (endpoints exist elsewhere)", () => {
    const text = serviceRuleset(
      spec(svcPort({ nodePort: 30080, externalTrafficLocal: true, localEndpoints: [] })),
    );
    const body = chainOf(text, target(text, "6 . 30080"));
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(body[2]!)![1]!), ["drop"]);
  });

  test("internalTrafficPolicy Local: the clusterIP goes to this node's endpoints only", () => {
    const text = serviceRuleset(spec(svcPort({ internalTrafficLocal: true })));
    const body = chainOf(text, target(text, "10.96.0.10 . 6 . 80"));
    assert.equal(body.length, 3);
    assert.deepEqual(body.slice(0, 2), MARKS);
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(body[2]!)![1]!), [
      "meta l4proto 6 dnat ip to 10.244.0.5:8080",
    ]);
  });

  test("session affinity: a dynamic set with the timeout per endpoint, consulted before numgen", () => {
    const text = serviceRuleset(spec(svcPort({ affinityTimeoutSeconds: 600 })));
    const all = chainOf(text, target(text, "10.96.0.10 . 6 . 80"));
    const sticky = all.filter((l) => /^ip saddr @\w+_a[0-9a-f]{12} goto \w+_e\d$/.test(l));
    assert.equal(sticky.length, 2);
    assert.match(all[4]!, /^numgen random/);
    const set = /^ip saddr @(\w+) goto (\w+)$/.exec(sticky[0]!)!;
    assert.match(
      text,
      new RegExp(`set ${set[1]} \\{\\n {4}type ipv4_addr\\n {4}flags dynamic,timeout\\n {4}timeout 600s`),
    );
    assert.equal(chainOf(text, set[2]!)[0], `update @${set[1]} { ip saddr }`);
  });

  test("affinity entries read back from the old table are carried into the new one with their time left", () => {
    const first = serviceRuleset(spec(svcPort({ affinityTimeoutSeconds: 600 })));
    const set = /set (\w+_a[0-9a-f]{12}) \{/.exec(first)![1]!;
    const text = serviceRuleset({
      ...spec(svcPort({ affinityTimeoutSeconds: 600 })),
      affinity: new Map([
        [
          set,
          [
            { ip: ip("192.0.2.1"), expiresSeconds: 120 },
            { ip: ip("192.0.2.2"), expiresSeconds: 9999 },
            { ip: ip("fd00::1"), expiresSeconds: 60 },
          ],
        ],
      ]),
    });
    assert.match(
      text,
      new RegExp(
        `set ${set} \\{\\n[^}]*timeout 600s\\n {4}elements = \\{ 192\\.0\\.2\\.1 expires 120s \\}\\n  \\}`,
      ),
    );
    assert.equal(
      text.replace(/\n {4}elements = \{ 192\.0\.2\.1 expires 120s \}/, ""),
      first,
      "only the carried elements differ",
    );
  });

  test("an endpoint keeps its affinity set name when other endpoints come and go", () => {
    const one = serviceRuleset(
      spec(svcPort({ affinityTimeoutSeconds: 60, endpoints: [ep("10.244.1.5", 8080)] })),
    );
    const two = serviceRuleset(spec(svcPort({ affinityTimeoutSeconds: 60 })));
    const setOf = (t: string) =>
      /update @(\w+) \{ ip saddr \}\n {4}meta l4proto 6 dnat ip to 10\.244\.1\.5:8080/.exec(t)?.[1];
    assert.ok(setOf(one));
    assert.equal(setOf(one), setOf(two));
  });

  test("the affinity state is read from nft's JSON: our sets only, typed addresses, whole seconds left", () => {
    const json = JSON.stringify({
      nftables: [
        { metainfo: { version: "1.0.6" } },
        {
          set: {
            family: "inet",
            table: "zstack_ovn_svc",
            name: "s0123456789abcdef_a0123456789ab",
            type: "ipv4_addr",
            elem: [
              { elem: { val: "192.0.2.1", expires: 499 } },
              { elem: { val: "192.0.2.2 }\nflush ruleset", expires: 10 } },
              { elem: { val: "fd00::1", expires: 10 } },
              { elem: { val: "192.0.2.3", expires: 1.5 } },
            ],
          },
        },
        {
          set: {
            family: "inet",
            table: "zstack_ovn_svc",
            name: "node_ips_v4",
            type: "ipv4_addr",
            elem: ["1.2.3.4"],
          },
        },
        {
          set: {
            family: "inet",
            table: "other",
            name: "s0123456789abcdef_a0123456789ab",
            type: "ipv4_addr",
            elem: [],
          },
        },
      ],
    });
    const got = affinityFromNftJson(json);
    assert.deepEqual([...got.keys()], ["s0123456789abcdef_a0123456789ab"]);
    assert.deepEqual(
      got.get("s0123456789abcdef_a0123456789ab")?.map((e) => `${formatIp(e.ip)} ${e.expiresSeconds}`),
      ["192.0.2.1 499"],
    );
    assert.deepEqual([...affinityFromNftJson("not json").keys()], []);
  });

  test("IPv6 addresses get their own maps and bracketed DNAT targets; families never mix", () => {
    const text = serviceRuleset({
      mgmtIfname: MGMT,
      nodeIps: [ip("192.168.200.11"), ip("fd00::11")],
      ports: [
        svcPort({
          clusterIPs: [ip("10.96.0.10"), ip("fd00:96::10")],
          endpoints: [ep("10.244.0.5", 8080), ep("fd00:244::5", 8080)],
          nodePort: 30080,
        }),
      ],
    });
    const v6 = chainOf(text, target(text, "fd00:96::10 . 6 . 80"));
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(v6[2]!)![1]!), [
      "meta l4proto 6 dnat ip6 to [fd00:244::5]:8080",
    ]);
    const v4 = chainOf(text, target(text, "10.96.0.10 . 6 . 80"));
    assert.deepEqual(chainOf(text, /^goto (\w+)$/.exec(v4[2]!)![1]!), [
      "meta l4proto 6 dnat ip to 10.244.0.5:8080",
    ]);
    assert.match(text, /set node_ips_v6 \{\n {4}type ipv6_addr\n {4}elements = \{ fd00::11 \}/);
  });

  test("loadBalancerSourceRanges: the LB IP's filter chain admits the ranges and drops the rest, before NAT", () => {
    const p = svcPort({
      externalIPs: [ip("192.168.201.10"), ip("192.168.202.10")],
      firewalledIPs: [ip("192.168.201.10")],
      sourceRanges: [parseCidr("203.0.113.0/24"), parseCidr("10.244.0.0/16"), parseCidr("2001:db8::/32")],
    });
    const text = serviceRuleset(spec(p));
    const fw = fwTarget(text, "192.168.201.10 . 6 . 80");
    assert.deepEqual(chainOf(text, fw), ["ip saddr { 203.0.113.0/24, 10.244.0.0/16 } return", "drop"]);
    // The externalIP is not filtered, nor is the cluster IP; the filter runs in both filter chains.
    assert.doesNotMatch(text, /192\.168\.202\.10 \. 6 \. 80 : goto s[0-9a-f]{16}_fw/);
    for (const chain of ["filter_prerouting", "filter_output"])
      assert.ok(chainOf(text, chain).includes("ip daddr . meta l4proto . th dport vmap @fw_v4"), chain);
    // The LB IP is still DNATed for the sources the filter lets through.
    assert.match(text, /192\.168\.201\.10 \. 6 \. 80 : goto s[0-9a-f]{16}_all/);
  });

  test("loadBalancerSourceRanges holding a node address also admit the LB IPs as sources (a local LB IP loops back)", () => {
    const p = svcPort({
      externalIPs: [ip("192.168.201.10")],
      firewalledIPs: [ip("192.168.201.10")],
      sourceRanges: [parseCidr("192.168.200.0/24")],
    });
    const text = serviceRuleset(spec(p));
    assert.deepEqual(chainOf(text, fwTarget(text, "192.168.201.10 . 6 . 80")), [
      "ip saddr { 192.168.200.0/24, 192.168.201.10 } return",
      "drop",
    ]);
  });

  test("an LB IP of a family with no source range is not filtered; a port with no endpoint is still filtered", () => {
    const v6only = svcPort({
      externalIPs: [ip("192.168.201.10")],
      firewalledIPs: [ip("192.168.201.10")],
      sourceRanges: [parseCidr("2001:db8::/32")],
    });
    assert.doesNotMatch(serviceRuleset(spec(v6only)), /@fw_v4/);
    const empty = svcPort({
      endpoints: [],
      localEndpoints: [],
      externalIPs: [ip("192.168.201.10")],
      firewalledIPs: [ip("192.168.201.10")],
      sourceRanges: [parseCidr("203.0.113.0/24")],
    });
    const text = serviceRuleset(spec(empty));
    const filter = chainOf(text, "filter_prerouting");
    assert.equal(filter[1], "ip daddr . meta l4proto . th dport vmap @fw_v4", filter.join("\n"));
  });

  test("a hostile source range throws and never yields a script", () => {
    for (const bad of [
      { family: 4, network: 10n, prefix: 24 },
      { family: 4, network: 0n, prefix: 33 },
      { family: 5, network: 0n, prefix: 8 },
      "10.0.0.0/8; flush ruleset",
    ])
      assert.throws(
        () =>
          serviceRuleset(
            spec(
              svcPort({
                externalIPs: [ip("192.168.201.10")],
                firewalledIPs: [ip("192.168.201.10")],
                sourceRanges: [bad as unknown as Cidr],
              }),
            ),
          ),
        TypeError,
      );
  });

  test("the same input gives the same text; chain names do not depend on the order of ports", () => {
    const a = svcPort();
    const b = svcPort({
      key: "default/dns/dns/udp",
      protocol: "udp",
      port: 53,
      clusterIPs: [ip("10.96.0.53")],
    });
    const t1 = serviceRuleset(spec(a, b));
    assert.equal(t1, serviceRuleset(spec(a, b)));
    const t2 = serviceRuleset(spec(b, a));
    assert.equal(target(t1, "10.96.0.53 . 17 . 53"), target(t2, "10.96.0.53 . 17 . 53"));
  });

  test("an empty spec still declares the hooks, with no rules", () => {
    const text = serviceRuleset(spec());
    assert.deepEqual(chainOf(text, "nat_output"), ["type nat hook output priority -100; policy accept;"]);
    assert.doesNotMatch(text, /map |set noep|dnat/);
  });

  test("an address and port claimed by two Services is programmed once, for the first in order", () => {
    const a = svcPort({ key: "a/web/tcp/80", externalIPs: [ip("192.0.2.7")], nodePort: 30080 });
    const b = svcPort({
      key: "b/web/tcp/80",
      clusterIPs: [ip("10.96.0.11")],
      externalIPs: [ip("192.0.2.7")],
      nodePort: 30080,
    });
    const c = svcPort({
      key: "c/web/tcp/80",
      clusterIPs: [ip("10.96.0.12")],
      externalIPs: [ip("192.0.2.7")],
      endpoints: [],
      localEndpoints: [],
    });
    const text = serviceRuleset(spec(a, b, c));
    assert.equal(text.match(/192\.0\.2\.7 \. 6 \. 80/g)?.length, 1, text);
    assert.equal(text.match(/6 \. 30080 : goto/g)?.length, 1);
    assert.equal(target(text, "192.0.2.7 . 6 . 80"), target(text, "10.96.0.10 . 6 . 80"));
  });

  test("refuses a key shared by two ports (their chains would collide)", () => {
    assert.throws(() => serviceRuleset(spec(svcPort(), svcPort())), /unique service port key/);
  });
});

describe("service NAT ruleset refuses hostile values cast as typed ones", () => {
  const hostile = fc.oneof(
    fc.string(),
    fc.constantFrom("1.2.3.4 }\nflush ruleset\n", "80; drop", "tcp\n", "-1", "1e3", ""),
    fc.double(),
    fc.integer({ min: -100_000, max: 200_000 }).filter((n) => n < 1 || n > 65535),
    fc.bigInt(),
    fc.constant(null),
    fc.constant(undefined),
    fc.object(),
  );
  const badIp = fc.oneof(
    hostile.map((v) => v as unknown as IpAddress),
    hostile
      .filter((v) => typeof v !== "bigint" || v < 0n || v >= 1n << 32n)
      .map((v) => ({ family: 4, value: v }) as unknown as IpAddress),
    fc.bigInt({ min: 1n << 32n, max: 1n << 40n }).map((v) => ({ family: 4, value: v }) as IpAddress),
    fc.bigInt({ min: -(1n << 40n), max: -1n }).map((v) => ({ family: 6, value: v }) as IpAddress),
    hostile.map((v) => ({ family: v, value: 1n }) as unknown as IpAddress),
  );
  const fields: [string, fc.Arbitrary<(p: NatServicePort) => NatServicePort>][] = [
    ["port", hostile.map((v) => (p) => ({ ...p, port: v as number }))],
    ["nodePort", hostile.filter((v) => v !== undefined).map((v) => (p) => ({ ...p, nodePort: v as number }))],
    ["protocol", hostile.map((v) => (p) => ({ ...p, protocol: v as "tcp" }))],
    ["clusterIP", badIp.map((v) => (p) => ({ ...p, clusterIPs: [v] }))],
    ["externalIP", badIp.map((v) => (p) => ({ ...p, externalIPs: [v] }))],
    ["endpoint ip", badIp.map((v) => (p) => ({ ...p, endpoints: [{ ip: v, port: 80 }] }))],
    [
      "endpoint port",
      hostile.map((v) => (p) => ({ ...p, endpoints: [{ ip: ip("10.244.0.9"), port: v as number }] })),
    ],
    ["local endpoint", badIp.map((v) => (p) => ({ ...p, localEndpoints: [{ ip: v, port: 80 }] }))],
    [
      "affinity timeout",
      hostile
        .filter(
          (v) => v !== undefined && !(typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= 86400),
        )
        .map((v) => (p) => ({ ...p, affinityTimeoutSeconds: v as number })),
    ],
  ];
  for (const [name, arb] of fields) {
    test(`a hostile ${name} throws and never yields a script`, () => {
      fc.assert(
        fc.property(arb, (mutate) => {
          assert.throws(() => serviceRuleset(spec(mutate(svcPort()))), TypeError);
        }),
        { numRuns: 300 },
      );
    });
  }

  test("a hostile carried affinity entry throws", () => {
    const set = /set (\w+_a[0-9a-f]{12}) \{/.exec(
      serviceRuleset(spec(svcPort({ affinityTimeoutSeconds: 60 }))),
    )![1]!;
    fc.assert(
      fc.property(
        fc.oneof(
          badIp.map((bad) => ({ ip: bad, expiresSeconds: 10 })),
          hostile
            .filter((v) => !(typeof v === "number" && Number.isInteger(v)))
            .map((v) => ({ ip: ip("192.0.2.1"), expiresSeconds: v as number })),
        ),
        (entry) => {
          assert.throws(
            () =>
              serviceRuleset({
                ...spec(svcPort({ affinityTimeoutSeconds: 60 })),
                affinity: new Map([[set, [entry]]]),
              }),
            TypeError,
          );
        },
      ),
    );
  });

  test("a hostile node IP, reply address or management interface throws", () => {
    fc.assert(
      fc.property(badIp, (bad) => {
        assert.throws(() => serviceRuleset({ ...spec(svcPort()), nodeIps: [bad] }), TypeError);
        assert.throws(() => serviceRuleset({ ...spec(svcPort()), nodeReplyIps: [bad] }), TypeError);
      }),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.constantFrom('zovn"; flush ruleset', "a b", "x\ny", "", "0123456789abcdef0"),
          fc.object(),
        ),
        (bad) => {
          assert.throws(
            () => serviceRuleset({ ...spec(svcPort()), mgmtIfname: bad as unknown as InterfaceName }),
            TypeError,
          );
        },
      ),
    );
  });

  test("a hostile key is only hashed: the script differs from any other key's only in chain names", () => {
    const norm = (t: string) => t.replaceAll(/\bs[0-9a-f]{16}_/g, "S_");
    const baseline = norm(serviceRuleset(spec(svcPort())));
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (key) => {
        const text = serviceRuleset(spec(svcPort({ key: `ns/${key}\n}flush ruleset` })));
        assert.equal(norm(text), baseline);
      }),
    );
  });
});
