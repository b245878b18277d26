import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { parseIp } from "../ipam/address.ts";
import { parseCidr } from "../ipam/cidr.ts";
import type { MacAddress } from "../ovn/pod-port.ts";
import { parsePodNetwork } from "../ovn/pod-port.ts";
import { parseInterfaceName, parseNetnsPath } from "./interface-name.ts";
import { formatBatch, UnsafeIpTokenError } from "./ip-batch.ts";
import { hostVethName, isHostVethName, type PodInterfaceSpec, pairProblem, podSideLines } from "./veth.ts";

const annotation = (routes: unknown[]) =>
  JSON.stringify({
    default: {
      ip_addresses: ["10.244.0.5/16", "fd00::5/64"],
      mac_address: "0A:58:0A:F4:00:05",
      gateway_ips: ["10.244.0.1", "fd00::1"],
      routes,
      logical_switch: "subnet-default",
    },
  });

function spec(text: string): PodInterfaceSpec {
  const n = parsePodNetwork(text);
  assert.ok(n);
  return {
    containerId: "c",
    netns: parseNetnsPath("/run/netns/p"),
    ifname: parseInterfaceName("eth0"),
    ...n,
    mtu: 1450,
    txChecksumOff: true,
  };
}

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
    // Routes come from the annotation only for a pod on ZStack's switch; a route given to podSideLines is typed.
    const lines = podSideLines({
      ...spec(annotation([])),
      routes: [{ dest: parseCidr("10.96.0.0/16"), nextHop: parseIp("10.244.0.1") }],
    });
    assert.deepEqual(
      lines.map((l) => l.join(" ")),
      [
        "link set dev lo up",
        "link set dev eth0 address 0a:58:0a:f4:00:05 mtu 1450",
        "link set dev eth0 up",
        "addr replace 10.244.0.5/16 dev eth0",
        "addr replace fd00::5/64 dev eth0 nodad",
        "route replace 0.0.0.0/0 via 10.244.0.1 dev eth0",
        "route replace ::/0 via fd00::1 dev eth0",
        "route replace 10.96.0.0/16 via 10.244.0.1 dev eth0",
      ],
    );
  });

  test("a route dest with a newline and an ip command never reaches ip: the parse refuses it, and so would the batch", () => {
    // The exploit: ip's batch reader takes the newline as the end of a command, so the rest ran as root.
    const exploit = "10.0.0.0/8 via 10.244.0.1\nnetns add zovnpwn";
    assert.throws(
      () => parsePodNetwork(annotation([{ dest: exploit, nextHop: "10.244.0.1" }])),
      /default\.routes\[0\]\.dest: .*has prefix length/,
    );
    // The old path pasted the raw string into the line: ip would have read two commands.
    const oldLine = `route replace ${exploit} via 10.244.0.1 dev eth0`;
    assert.deepEqual(oldLine.split("\n")[1]?.split(" ").slice(0, 3), ["netns", "add", "zovnpwn"]);
    // The batch text refuses such a token even if a caller forgot to parse.
    assert.throws(
      () => formatBatch([["route", "replace", exploit, "via", "10.244.0.1", "dev", "eth0"]]),
      UnsafeIpTokenError,
    );
  });
});

describe("an existing pod interface is our pair only if", () => {
  const mac = "0a:58:0a:f4:00:05" as MacAddress;
  const pod = { ifindex: 2, link_index: 7, link_netnsid: 0, address: mac, linkinfo: { info_kind: "veth" } };
  const hostEnd = { ifindex: 7, link_index: 2 };
  test("it is a veth in another namespace than its peer, the two ends name each other and the MAC is ours", () => {
    assert.equal(pairProblem(pod, hostEnd, mac), undefined);
  });
  test("anything else is refused with the reason", () => {
    const cases: [Parameters<typeof pairProblem>[0], Parameters<typeof pairProblem>[1], RegExp][] = [
      [undefined, hostEnd, /missing/],
      [{ ...pod, linkinfo: { info_kind: "dummy" } }, hostEnd, /is dummy/],
      [{ ...pod, linkinfo: {} }, hostEnd, /not a veth/],
      [pod, undefined, /no host end/],
      [{ ...pod, link_netnsid: undefined }, hostEnd, /same namespace/],
      [{ ...pod, link_index: 8 }, hostEnd, /not paired/],
      [pod, { ifindex: 7, link_index: 3 }, /not paired/],
      [{ ...pod, address: "02:00:00:00:00:01" }, hostEnd, /has MAC 02:00:00:00:00:01/],
    ];
    for (const [p, h, why] of cases) assert.match(pairProblem(p, h, mac) ?? "", why);
  });
});
