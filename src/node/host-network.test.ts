import assert from "node:assert/strict";
import { test } from "node:test";
import { formatIp, parseIp } from "../ipam/address.ts";
import { formatCidr } from "../ipam/cidr.ts";
import { defaultGateways, uplinkCidrs } from "./host-network.ts";

test("default gateways are read from single, multipath and via routes of both families, each once", () => {
  const gws = defaultGateways([
    { gateway: "192.168.1.1" },
    { nexthops: [{ gateway: "192.168.1.2" }, { gateway: "192.168.1.1" }] },
    { via: { host: "fe80::1" } },
    { gateway: "fd00::1" },
    { gateway: "junk\nflush" },
    {},
  ]);
  assert.deepEqual(gws.map(formatIp), ["192.168.1.1", "192.168.1.2", "fe80::1", "fd00::1"]);
});

test("the uplink's networks are those of the interface holding the uplink address, host bits cleared", () => {
  const links = [
    { addr_info: [{ local: "127.0.0.1", prefixlen: 8 }] },
    {
      addr_info: [
        { local: "192.168.1.10", prefixlen: 24 },
        { local: "fd00:1::10", prefixlen: 64 },
        { local: "10.0.0.1", prefixlen: 99 },
        { local: "x", prefixlen: 8 },
      ],
    },
    { addr_info: [{ local: "172.16.0.5", prefixlen: 16 }] },
  ];
  assert.deepEqual(uplinkCidrs(links, parseIp("192.168.1.10")).map(formatCidr), [
    "192.168.1.0/24",
    "fd00:1::/64",
  ]);
  assert.deepEqual(uplinkCidrs(links, parseIp("192.168.9.9")), []);
});
