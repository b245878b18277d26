import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp, type IpAddress, parseIp } from "./address.ts";
import { parseCidr } from "./cidr.ts";
import {
  collectHoldings,
  describeForeignHolder,
  dhcpCidrIn,
  HoldingSet,
  readDhcpOptions,
  readExcludeIps,
  readNat,
  readRouterPort,
  readSwitchPort,
  subnetEdges,
} from "./foreign-holdings.ts";
import { formatLspAddress } from "./lsp-addresses.ts";

const ip = (t: string) => parseIp(t);
const texts = (r: { found: readonly { ip: IpAddress; source: string }[] }) =>
  r.found.map((f) => `${formatIp(f.ip)} ${f.source}`);
const port = (p: Partial<Parameters<typeof readSwitchPort>[0]>) => ({
  addresses: [],
  dynamic_addresses: null,
  port_security: [],
  options: {},
  ...p,
});

describe("readSwitchPort", () => {
  test("reads addresses, dynamic_addresses, port_security extras and the virtual IP", () => {
    const r = readSwitchPort(
      port({
        addresses: ["fa:16:3e:00:00:01 10.0.0.5 fd00::5", "dynamic"],
        dynamic_addresses: "fa:16:3e:00:00:02 10.0.0.6",
        port_security: ["fa:16:3e:00:00:01 10.0.0.5 10.0.0.7/24"],
        options: { "virtual-ip": "10.0.0.8", "virtual-parents": "vm1,vm2" },
      }),
    );
    assert.deepEqual(texts(r), [
      "10.0.0.5 addresses",
      "fd00::5 addresses",
      "10.0.0.6 dynamic_addresses",
      "10.0.0.5 port_security",
      "10.0.0.7 port_security",
      "10.0.0.8 options:virtual-ip",
    ]);
    assert.deepEqual(r.problems, []);
  });

  test("unknown, router, dynamic, MAC-only and empty entries hold nothing and are no problem", () => {
    const r = readSwitchPort(
      port({
        addresses: [
          "unknown",
          "router",
          "dynamic",
          "fa:16:3e:00:00:01",
          "",
          "  ",
          "0a:58:0a:00:00:01 dynamic",
        ],
      }),
    );
    assert.deepEqual(r.found, []);
    assert.deepEqual(r.problems, []);
  });

  test("a malformed word is skipped and counted, and the good words of the entry still count", () => {
    const r = readSwitchPort(
      port({
        addresses: ["fa:16:3e:00:00:01 10.0.0.5 bogus 010.0.0.9 10.0.0.300 10.0.0.4/99"],
        options: { "virtual-ip": "not-an-ip" },
      }),
    );
    assert.deepEqual(texts(r), ["10.0.0.5 addresses"]);
    assert.equal(r.problems.length, 5);
    assert.match(r.problems[0]?.message ?? "", /"bogus" is not a MAC, an address or a keyword/);
    assert.equal(r.problems[4]?.field, "options:virtual-ip");
  });
});

describe("other rows", () => {
  test("router port networks, NAT external addresses and DHCP server_id and router", () => {
    assert.deepEqual(texts(readRouterPort({ networks: ["10.0.0.1/24", "fd00::1/64"] })), [
      "10.0.0.1 networks",
      "fd00::1 networks",
    ]);
    assert.deepEqual(texts(readNat({ external_ip: "10.0.0.100" })), ["10.0.0.100 external_ip"]);
    assert.deepEqual(
      texts(readDhcpOptions({ options: { server_id: "10.0.0.2", router: "10.0.0.1", lease_time: "3600" } })),
      ["10.0.0.2 options:server_id", "10.0.0.1 options:router"],
    );
  });

  test("DHCPv6's server_id is a MAC and holds no address, without a problem", () => {
    const r = readDhcpOptions({ options: { server_id: "fa:16:3e:00:00:09" } });
    assert.deepEqual(r.found, []);
    assert.deepEqual(r.problems, []);
  });

  test("exclude_ips takes addresses and a..b ranges, and counts a bad entry", () => {
    const r = readExcludeIps("10.0.0.2  10.0.0.10..10.0.0.20 nonsense 10.0.0.9..10.0.0.3");
    assert.deepEqual(
      r.entries.map((e) => e.text),
      ["10.0.0.2", "10.0.0.10..10.0.0.20"],
    );
    assert.equal(r.problems.length, 2);
    assert.deepEqual(readExcludeIps(undefined), { entries: [], problems: [] });
  });

  test("DHCP options match the subnet by their parsed CIDR", () => {
    const cidrs = [parseCidr("10.0.0.0/24")];
    assert.equal(dhcpCidrIn("10.0.0.0/24", cidrs), true);
    assert.equal(dhcpCidrIn("10.0.0.1/24", cidrs), true);
    assert.equal(dhcpCidrIn("10.0.0.0/25", cidrs), false);
    assert.equal(dhcpCidrIn("garbage", cidrs), false);
  });

  test("the first and last address of a block; none for point-to-point blocks", () => {
    const e = subnetEdges(parseCidr("10.0.0.0/24"));
    assert.deepEqual(
      [e.first, e.last].map((a) => a && formatIp(a)),
      ["10.0.0.0", "10.0.0.255"],
    );
    const e6 = subnetEdges(parseCidr("fd00::/64"));
    assert.deepEqual(
      [e6.first, e6.last].map((a) => a && formatIp(a)),
      ["fd00::", "fd00::ffff:ffff:ffff:ffff"],
    );
    assert.deepEqual(subnetEdges(parseCidr("10.0.0.0/31")), {});
  });
});

describe("collectHoldings", () => {
  const cidrs = [parseCidr("10.0.0.0/24"), parseCidr("fd00::/64")];
  const set = collectHoldings(
    {
      switch: {
        _uuid: "ls",
        name: "zs-net",
        other_config: { exclude_ips: "10.0.0.200..10.0.1.20 10.9.9.9 x" },
      },
      ports: [
        { ...port({ addresses: ["fa:16:3e:00:00:01 10.0.0.5 192.168.1.5"] }), _uuid: "p1", name: "vnic1.0" },
        { ...port({ port_security: ["fa:16:3e:00:00:02 10.0.0.5"] }), _uuid: "p2", name: "vnic2.0" },
      ],
      routerPorts: [{ _uuid: "r1", name: "lrp-zs", networks: ["10.0.0.1/24", "fd00::1/64"] }],
      nats: [
        { _uuid: "n1", external_ip: "10.0.0.100" },
        { _uuid: "n2", external_ip: "172.16.0.1" },
      ],
      dhcpOptions: [{ _uuid: "d1", cidr: "10.0.0.0/24", options: { server_id: "10.0.0.2" } }],
    },
    cidrs,
  );

  test("an address is taken when any row shows it, and each holder is named", () => {
    assert.deepEqual(set.holdersOf(ip("10.0.0.5")).map(describeForeignHolder), [
      'Logical_Switch_Port "vnic1.0" (addresses)',
      'Logical_Switch_Port "vnic2.0" (port_security)',
    ]);
    for (const t of [
      "10.0.0.0",
      "10.0.0.255",
      "10.0.0.1",
      "fd00::1",
      "fd00::",
      "10.0.0.100",
      "10.0.0.2",
      "10.0.0.210",
    ])
      assert.equal(set.isTaken(ip(t)), true, t);
    for (const t of ["10.0.0.3", "10.0.0.199", "fd00::2"]) assert.equal(set.isTaken(ip(t)), false, t);
    assert.deepEqual(set.holdersOf(ip("10.0.0.210")).map(describeForeignHolder), [
      'Logical_Switch "zs-net" (other_config:exclude_ips 10.0.0.200..10.0.1.20)',
    ]);
  });

  test("addresses outside the subnet are not tracked, and exclude ranges are clipped to it", () => {
    assert.equal(set.isTaken(ip("192.168.1.5")), false);
    assert.equal(set.isTaken(ip("172.16.0.1")), false);
    assert.equal(set.isTaken(ip("10.0.1.5")), false);
    assert.equal(set.ranges().length, 1);
    assert.equal(set.problems.length, 1);
  });

  test("removeRow takes out exactly what a row recorded, its problems too, and keeps other holders", () => {
    const s = new HoldingSet(cidrs);
    const a = { table: "Logical_Switch_Port", uuid: "a", name: "a" } as const;
    const b = { table: "Logical_Switch_Port", uuid: "b", name: "b" } as const;
    s.addReading(readSwitchPort(port({ addresses: ["fa:16:3e:00:00:01 10.0.0.5 10.0.0.6 bogus"] })), a);
    s.addReading(readSwitchPort(port({ port_security: ["fa:16:3e:00:00:02 10.0.0.6"] })), b);
    assert.equal(s.problems.length, 1);
    assert.deepEqual(s.removeRow(a).map(formatIp), ["10.0.0.5", "10.0.0.6"]);
    assert.equal(s.isTaken(ip("10.0.0.5")), false);
    assert.deepEqual(
      s.holdersOf(ip("10.0.0.6")).map((h) => h.uuid),
      ["b"],
    );
    assert.equal(s.problems.length, 0);
    assert.deepEqual(s.removeRow(a), []);
  });

  test("changes lists the addresses whose holders differ and the ranges added or removed", () => {
    const before = new HoldingSet(cidrs);
    before.add(ip("10.0.0.5"), { table: "Logical_Switch_Port", uuid: "p1", name: "a", source: "addresses" });
    before.add(ip("10.0.0.6"), { table: "Logical_Switch_Port", uuid: "p1", name: "a", source: "addresses" });
    const after = new HoldingSet(cidrs);
    after.add(ip("10.0.0.6"), { table: "Logical_Switch_Port", uuid: "p1", name: "a", source: "addresses" });
    after.add(ip("10.0.0.7"), { table: "Logical_Switch_Port", uuid: "p2", name: "b", source: "addresses" });
    after.addRange(
      { family: 4, first: ip("10.0.0.20").value, last: ip("10.0.0.29").value },
      { table: "Logical_Switch", uuid: "ls", name: "n", source: "other_config:exclude_ips", entry: "x" },
    );
    const c = HoldingSet.changes(before, after);
    assert.deepEqual(c.addresses.map(formatIp), ["10.0.0.5", "10.0.0.7"]);
    assert.equal(c.ranges.length, 1);
    assert.deepEqual(HoldingSet.changes(after, after), { addresses: [], ranges: [] });
  });
});

describe("properties", () => {
  const v4 = fc
    .integer({ min: 0, max: 2 ** 32 - 1 })
    .map((n): IpAddress => ({ family: 4, value: BigInt(n) }));
  const v6 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value): IpAddress => ({ family: 6, value }));
  const mac = fc
    .array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 })
    .map((b) => b.map((x) => x.toString(16).padStart(2, "0")).join(":"));

  test("every address of a formatted addresses entry is recovered, from addresses and port_security", () => {
    fc.assert(
      fc.property(mac, fc.array(fc.oneof(v4, v6), { maxLength: 4 }), (m, ips) => {
        const entry = formatLspAddress(m, ips);
        for (const column of ["addresses", "port_security"] as const) {
          const r = readSwitchPort(port({ [column]: [entry] }));
          assert.deepEqual(r.problems, []);
          const got = new Set(r.found.map((f) => formatIp(f.ip)));
          assert.deepEqual(got, new Set(ips.map(formatIp)));
        }
      }),
    );
  });

  test("reading never throws on arbitrary strings", () => {
    const str = fc.oneof(
      fc.string(),
      fc.string({ unit: "binary" }),
      fc.constantFrom("dynamic 1.2.3.4 ::", "a..b", "1.2.3.4/"),
    );
    fc.assert(
      fc.property(
        fc.array(str, { maxLength: 3 }),
        fc.option(str, { nil: null }),
        str,
        str,
        (addrs, dyn, a, b) => {
          readSwitchPort({
            addresses: addrs,
            dynamic_addresses: dyn,
            port_security: addrs,
            options: { "virtual-ip": a },
          });
          readRouterPort({ networks: [a, b] });
          readNat({ external_ip: a });
          readDhcpOptions({ options: { server_id: a, router: b } });
          readExcludeIps(`${a} ${b}`);
          dhcpCidrIn(a, [parseCidr("10.0.0.0/8")]);
        },
      ),
    );
  });

  test("every exclude_ips range inside the subnet makes exactly its addresses taken", () => {
    const cidr = parseCidr("10.1.0.0/28");
    const off = fc.integer({ min: 0, max: 40 });
    fc.assert(
      fc.property(off, off, off, (x, y, probe) => {
        const [lo, hi] = x <= y ? [x, y] : [y, x];
        const at = (o: number) => formatIp({ family: 4, value: cidr.network - 8n + BigInt(o) });
        const set = collectHoldings(
          {
            switch: { _uuid: "s", name: "s", other_config: { exclude_ips: `${at(lo)}..${at(hi)}` } },
            ports: [],
            routerPorts: [],
            nats: [],
            dhcpOptions: [],
          },
          [cidr],
        );
        const p = ip(at(probe));
        const inSubnet = probe >= 8 && probe < 24;
        const edge = probe === 8 || probe === 23;
        assert.equal(set.isTaken(p), inSubnet && (edge || (probe >= lo && probe <= hi)));
      }),
    );
  });
});
