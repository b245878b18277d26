import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CniError } from "./error.ts";
import { type CniResult, cidrFamily, encodeResult, parseResult } from "./result.ts";

const full: CniResult = {
  interfaces: [
    { name: "a1b2c3d4e5f6_h", mac: "0a:58:0a:f4:01:05", mtu: 1400 },
    {
      name: "eth0",
      mac: "0a:58:0a:f4:01:05",
      mtu: 1400,
      sandbox: "/run/netns/p",
      socketPath: "/s",
      pciID: "0000:00:01.0",
    },
  ],
  ips: [
    { address: "10.244.1.5/24", gateway: "10.244.1.1", interface: 1 },
    { address: "fd00::5/64", gateway: "fd00::1", interface: 1 },
  ],
  routes: [
    { dst: "0.0.0.0/0", gw: "10.244.1.1", mtu: 1400, advmss: 1360, priority: 10, table: 100, scope: 0 },
  ],
  dns: { nameservers: ["10.96.0.10"], search: ["default.svc.cluster.local"] },
};

describe("CNI result per version", () => {
  it("1.1.0 carries every field, without a version on IPs", () => {
    const out = encodeResult(full, "1.1.0");
    assert.equal(out.cniVersion, "1.1.0");
    assert.deepEqual(out.interfaces, full.interfaces);
    assert.deepEqual(out.ips, full.ips);
    assert.deepEqual(out.routes, full.routes);
    assert.deepEqual(out.dns, full.dns);
  });

  it("1.0.0 drops the interface and route fields 1.1.0 introduced", () => {
    const out = encodeResult(full, "1.0.0");
    assert.deepEqual(out.interfaces, [
      { name: "a1b2c3d4e5f6_h", mac: "0a:58:0a:f4:01:05" },
      { name: "eth0", mac: "0a:58:0a:f4:01:05", sandbox: "/run/netns/p" },
    ]);
    assert.deepEqual(out.routes, [{ dst: "0.0.0.0/0", gw: "10.244.1.1" }]);
    assert.deepEqual(out.ips, full.ips);
  });

  it("0.4.0 gives each IP its family as version and always writes routes", () => {
    const out = encodeResult(full, "0.4.0");
    assert.deepEqual(out.ips, [
      { version: "4", interface: 1, address: "10.244.1.5/24", gateway: "10.244.1.1" },
      { version: "6", interface: 1, address: "fd00::5/64", gateway: "fd00::1" },
    ]);
    assert.deepEqual(encodeResult({ ips: [{ address: "10.0.0.1/8" }] }, "0.4.0").routes, []);
    assert.equal(encodeResult({ ips: [{ address: "10.0.0.1/8" }] }, "1.0.0").routes, undefined);
  });

  it("omits empty lists and an empty dns", () => {
    assert.deepEqual(encodeResult({ interfaces: [], ips: [], dns: {} }, "1.1.0"), { cniVersion: "1.1.0" });
  });

  it("refuses to encode an IP that is not an address with a prefix length", () => {
    assert.throws(
      () => encodeResult({ ips: [{ address: "10.0.0.1" }] }, "1.0.0"),
      (e: unknown) => {
        return e instanceof CniError && e.code === 199;
      },
    );
  });

  it("reads a 0.4.0 prevResult, dropping the per-IP version", () => {
    const r = parseResult({
      cniVersion: "0.4.0",
      ips: [{ version: "4", address: "10.0.0.5/24", interface: 0 }],
      interfaces: [{ name: "eth0" }],
    });
    assert.deepEqual(r, { interfaces: [{ name: "eth0" }], ips: [{ address: "10.0.0.5/24", interface: 0 }] });
  });

  it("names the path of an invalid prevResult field", () => {
    const cases: Array<[unknown, RegExp]> = [
      ["x", /invalid prevResult: want an object/],
      [{ interfaces: [{}] }, /prevResult\.interfaces\[0\]\.name/],
      [
        { ips: [{ address: "10.0.0.5/24", interface: 0 }] },
        /prevResult\.ips\[0\]\.interface: index 0 is past the end/,
      ],
      [{ ips: [{ address: "10.0.0.5/24", gateway: "x" }] }, /prevResult\.ips\[0\]\.gateway/],
      [{ routes: [{ dst: "default" }] }, /prevResult\.routes\[0\]\.dst/],
      [{ routes: [{ dst: "0.0.0.0/0", mtu: -1 }] }, /prevResult\.routes\[0\]\.mtu/],
      [{ dns: { nameservers: "8.8.8.8" } }, /prevResult\.dns\.nameservers/],
    ];
    for (const [value, re] of cases) {
      assert.throws(
        () => parseResult(value),
        (e: unknown) => e instanceof CniError && e.code === 7 && re.test(e.message),
      );
    }
  });

  it("knows address families and prefix bounds", () => {
    assert.equal(cidrFamily("10.0.0.1/32"), 4);
    assert.equal(cidrFamily("10.0.0.1/33"), 0);
    assert.equal(cidrFamily("::1/128"), 6);
    assert.equal(cidrFamily("::1/"), 0);
    assert.equal(cidrFamily("10.0.0.1"), 0);
  });

  it("reads back every 1.1.0 result it writes unchanged (property)", () => {
    const uint = fc.integer({ min: 0, max: 100000 });
    const ipv4 = fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`);
    const ipv6 = fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`);
    const result = fc
      .record(
        {
          interfaces: fc.array(
            fc.record(
              {
                name: fc.string({ minLength: 1, maxLength: 15 }),
                mac: fc.string(),
                mtu: uint,
                sandbox: fc.string(),
              },
              { requiredKeys: ["name"] },
            ),
            { minLength: 1, maxLength: 3 },
          ),
          ips: fc.array(
            fc.record({ address: fc.oneof(ipv4, ipv6), gateway: fc.ipV4() }, { requiredKeys: ["address"] }),
            {
              minLength: 1,
              maxLength: 4,
            },
          ),
          routes: fc.array(
            fc.record(
              { dst: ipv4, gw: fc.ipV4(), mtu: uint, priority: uint, table: uint },
              { requiredKeys: ["dst"] },
            ),
            { minLength: 1, maxLength: 4 },
          ),
          dns: fc.record(
            { nameservers: fc.array(fc.ipV4(), { minLength: 1 }), domain: fc.string() },
            { requiredKeys: ["nameservers"] },
          ),
        },
        { requiredKeys: [] },
      )
      .map((r) => r as CniResult);
    fc.assert(
      fc.property(result, (r) => {
        // Through JSON on both sides: fast-check's records have null prototypes.
        const expected = JSON.parse(JSON.stringify(r)) as CniResult;
        assert.deepEqual(parseResult(JSON.parse(JSON.stringify(encodeResult(r, "1.1.0")))), expected);
      }),
    );
  });
});
