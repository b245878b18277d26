import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { hostVethName, isHostVethName, podSideLines } from "./veth.ts";

describe("host veth names", () => {
  test("take the first 12 hex digits of a runtime's container id and fit in 15 characters", () => {
    const id = "3f2a9c01b7de44aa0011223344556677889900aabbccddeeff00112233445566";
    assert.equal(hostVethName(id), "3f2a9c01b7de_zv");
    assert.equal(hostVethName(id).length, 15);
  });

  test("are deterministic and always ours, whatever the container id", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 80 }), (id) => {
        const name = hostVethName(id);
        assert.equal(name, hostVethName(id));
        assert.ok(name.length <= 15);
        assert.ok(isHostVethName(name), name);
      }),
    );
  });

  test("differ for ids that differ in the first 12 characters, hex or not", () => {
    assert.notEqual(hostVethName("aaaaaaaaaaaa"), hostVethName("aaaaaaaaaaab"));
    assert.notEqual(hostVethName("pod-sandbox-1"), hostVethName("pod-sandbox-2"));
  });

  test("do not claim other interfaces", () => {
    for (const n of ["eth0", "zovn-mgmt", "br-int", "3f2a9c01b7de", "3F2A9C01B7DE_zv", "3f2a9c01b7de_zvx"])
      assert.equal(isHostVethName(n), false, n);
  });
});

describe("pod-side ip lines", () => {
  test("set MAC and MTU, bring the link up, add each address and one default route per family", () => {
    const lines = podSideLines({
      containerId: "c",
      netns: "/run/netns/p",
      ifname: "eth0",
      mac: "0a:58:0a:f4:00:05",
      ips: ["10.244.0.5/16", "fd00::5/64"],
      gateways: ["10.244.0.1", "fd00::1"],
      routes: [{ dest: "10.96.0.0/16", nextHop: "10.244.0.1" }],
      mtu: 1450,
      txChecksumOff: true,
    });
    assert.deepEqual(lines, [
      "link set dev lo up",
      "link set dev eth0 address 0a:58:0a:f4:00:05 mtu 1450",
      "link set dev eth0 up",
      "addr replace 10.244.0.5/16 dev eth0",
      "addr replace fd00::5/64 dev eth0 nodad",
      "route replace 0.0.0.0/0 via 10.244.0.1 dev eth0",
      "route replace ::/0 via fd00::1 dev eth0",
      "route replace 10.96.0.0/16 via 10.244.0.1 dev eth0",
    ]);
  });
});
