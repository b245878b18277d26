import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { IpAddress } from "../ipam/address.ts";
import { parseIp } from "../ipam/address.ts";
import { type Cidr, parseCidr } from "../ipam/cidr.ts";
import { NODE_REPLY_PORT_MIN } from "../ovn/topology.ts";
import { type InterfaceName, parseInterfaceName } from "./interface-name.ts";
import { EGRESS_PORTS, snatRuleset } from "./snat.ts";

const MGMT = parseInterfaceName("zovn-mgmt");
const cidrs = (...t: string[]) => t.map((c) => parseCidr(c));
const ips = (...t: string[]) => t.map((c) => parseIp(c));

describe("egress SNAT ruleset", () => {
  test("replaces the table atomically and SNATs only management-port traffic bound outside the cluster", () => {
    const text = snatRuleset({
      mgmtIfname: MGMT,
      insideCidrs: cidrs("10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16"),
      nodeIps: ips("192.168.200.11"),
    });
    assert.equal(
      text,
      [
        "table inet zstack_ovn",
        "delete table inet zstack_ovn",
        "table inet zstack_ovn {",
        "  set inside_v4 {",
        "    type ipv4_addr; flags interval;",
        "    elements = { 10.244.0.0/16, 10.96.0.0/16, 100.64.0.0/16 }",
        "  }",
        "  chain postrouting {",
        "    type nat hook postrouting priority srcnat; policy accept;",
        '    iifname "zovn-mgmt" oifname != "zovn-mgmt" meta nfproto ipv4 ip daddr != @inside_v4 meta l4proto { tcp, udp, sctp } th sport >= 1024 snat ip to 192.168.200.11:1024-61439',
        '    iifname "zovn-mgmt" oifname != "zovn-mgmt" meta nfproto ipv4 ip daddr != @inside_v4 snat ip to 192.168.200.11',
        "  }",
        "}",
        "",
      ].join("\n"),
    );
  });

  test("a translated TCP, UDP or SCTP source port from 1024 up stays below the reply policy's 61440, in every family and fallback", () => {
    const text = snatRuleset({
      mgmtIfname: MGMT,
      insideCidrs: cidrs("10.244.0.0/16", "fd00:10:244::/48"),
      nodeIps: ips("192.168.200.11", "fd00:200::11"),
    });
    assert.equal(EGRESS_PORTS, `1024-${NODE_REPLY_PORT_MIN - 1}`);
    assert.match(
      text,
      /meta nfproto ipv6 ip6 daddr != @inside_v6 meta l4proto \{ tcp, udp, sctp \} th sport >= 1024 snat ip6 to \[fd00:200::11\]:1024-61439\n/,
    );
    assert.match(text, /meta nfproto ipv6 ip6 daddr != @inside_v6 snat ip6 to fd00:200::11\n/);
    // Without a node IP the family is masqueraded, with the same port range.
    const masq = snatRuleset({ mgmtIfname: MGMT, insideCidrs: cidrs("10.244.0.0/16") });
    assert.match(
      masq,
      /meta nfproto ipv4 ip daddr != @inside_v4 meta l4proto \{ tcp, udp, sctp \} th sport >= 1024 masquerade to :1024-61439\n/,
    );
    // Every translating egress rule without a port range comes after one with it, so only what the ported
    // rule does not match (other protocols, ports under 1024) reaches it.
    for (const t of [text, masq]) {
      const rules = t.split("\n").filter((l) => l.includes("oifname != "));
      for (const [i, l] of rules.entries()) {
        if (l.includes("th sport")) assert.match(l, /:1024-61439$/);
        else
          assert.equal(
            rules[i - 1]?.replace(/ meta l4proto .*$/, ""),
            l.replace(/ (snat|masquerade).*$/, ""),
          );
      }
    }
  });

  test("handles IPv6 in its own set and masquerades a family without a node IP", () => {
    const text = snatRuleset({
      mgmtIfname: MGMT,
      insideCidrs: cidrs("10.244.0.0/16", "fd00:10:244::/48"),
      nodeIps: ips("192.168.200.11"),
    });
    assert.match(
      text,
      /set inside_v6 \{\n {4}type ipv6_addr; flags interval;\n {4}elements = \{ fd00:10:244::\/48 \}/,
    );
    assert.match(text, /meta nfproto ipv6 ip6 daddr != @inside_v6 masquerade/);
    assert.match(text, /meta nfproto ipv4 ip daddr != @inside_v4 snat ip to 192\.168\.200\.11/);
  });

  test("pod access: only listed sources entering the management port are SNATed, to the service SNAT address of their family", () => {
    const spec = {
      mgmtIfname: MGMT,
      insideCidrs: cidrs("10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16"),
      nodeIps: ips("192.168.200.11"),
      podAccessSources: cidrs("192.168.200.2/32", "192.168.201.0/24", "fd00:200::/64"),
    };
    // Before the controller gave the node a service SNAT address: nothing is translated (never to the
    // management address, which NetworkPolicy admits to every pod).
    assert.doesNotMatch(snatRuleset(spec), /access_v|saddr|masquerade\n.*access/);
    const text = snatRuleset({ ...spec, podAccessSnatIps: ips("100.64.0.5", "fd98::5") });
    assert.match(
      text,
      /set access_v4 \{\n {4}type ipv4_addr; flags interval;\n {4}elements = \{ 192\.168\.200\.2\/32, 192\.168\.201\.0\/24 \}/,
    );
    assert.match(text, /elements = \{ fd00:200::\/64 \}/);
    assert.match(
      text,
      /\n {4}iifname != "zovn-mgmt" oifname "zovn-mgmt" meta nfproto ipv4 ip saddr @access_v4 snat ip to 100\.64\.0\.5\n/,
    );
    assert.match(text, /oifname "zovn-mgmt" meta nfproto ipv6 ip6 saddr @access_v6 snat ip6 to fd98::5/);
    assert.doesNotMatch(text, /access_v\d masquerade/);
    // The egress rule is unchanged beside it.
    assert.match(text, /meta nfproto ipv4 ip daddr != @inside_v4 snat ip to 192\.168\.200\.11/);
    // Without sources, no set and no rule: nothing entering the node is translated.
    const none = snatRuleset({ mgmtIfname: MGMT, insideCidrs: cidrs("10.244.0.0/16"), podAccessSources: [] });
    assert.doesNotMatch(none, /access_v|saddr/);
  });

  test("a raw string passed where a parsed value belongs is refused, so it never becomes nft syntax", () => {
    const payload = "1.2.3.4\n}}\nflush ruleset";
    const good = { mgmtIfname: MGMT, insideCidrs: cidrs("10.244.0.0/16"), nodeIps: ips("192.168.200.11") };
    for (const spec of [
      { ...good, insideCidrs: [], nodeIps: [payload as unknown as IpAddress] },
      { ...good, insideCidrs: [], nodeIps: [{ family: 4, value: payload } as unknown as IpAddress] },
      { ...good, insideCidrs: [`10.0.0.0/8 }\nflush ruleset` as unknown as Cidr] },
      { ...good, insideCidrs: [{ family: 4, network: 0n, prefix: "8 }" } as unknown as Cidr] },
      { ...good, insideCidrs: [], mgmtIfname: 'zovn" }\nflush ruleset' as InterfaceName },
      { ...good, podAccessSources: [`192.168.200.2/32 }\nflush ruleset` as unknown as Cidr] },
    ])
      assert.throws(() => snatRuleset(spec), TypeError);
  });
});
