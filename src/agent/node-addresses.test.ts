import assert from "node:assert/strict";
import { test } from "node:test";
import { formatIp } from "../ipam/address.ts";
import { encapIpOf, NodeAddressError, nodeInternalIps, nodeReportedIps } from "./node-addresses.ts";

const node = (...addresses: { type: string; address: unknown }[]) => ({ status: { addresses } });

test("the encap IP is the configured one, else the Node's InternalIP, in canonical form", () => {
  const n = node({ type: "Hostname", address: "n1" }, { type: "InternalIP", address: "FD00::0:11" });
  assert.equal(formatIp(encapIpOf("", "n1", n)), "fd00::11");
  assert.equal(formatIp(encapIpOf("192.168.200.11", "n1", n)), "192.168.200.11");
});

test("an InternalIP that is not an address is refused with an error naming the node, never used", () => {
  for (const address of ["1.2.3.4\n}}\nflush ruleset", "1.2.3.4 ", "node1.example", 17, null]) {
    assert.throws(
      () => encapIpOf("", "n1", node({ type: "InternalIP", address })),
      (e: unknown) =>
        e instanceof NodeAddressError && /node n1 reports InternalIP .*ZSTACK_ENCAP_IP/s.test(e.message),
      String(address),
    );
  }
  assert.throws(() => encapIpOf("", "n1", node()), /reports no InternalIP/);
});

test("the Node's reported IPs leave out host names and junk and list each address once", () => {
  const n = node(
    { type: "InternalIP", address: "192.168.200.11" },
    { type: "ExternalIP", address: "192.168.200.011" },
    { type: "Hostname", address: "n1" },
    { type: "InternalIP", address: "1.2.3.4\nflush ruleset" },
    { type: "ExternalIP", address: "192.168.200.11" },
    { type: "InternalIP", address: "fd00::11" },
  );
  assert.deepEqual(nodeReportedIps(n).map(formatIp), ["192.168.200.11", "fd00::11"]);
});

test("NodePorts answer on the InternalIPs only, each once, junk left out", () => {
  const ips = nodeInternalIps({
    status: {
      addresses: [
        { type: "InternalIP", address: "192.168.200.11" },
        { type: "ExternalIP", address: "203.0.113.9" },
        { type: "InternalIP", address: "192.168.200.11" },
        { type: "InternalIP", address: "1.2.3.4\n}" },
        { type: "Hostname", address: "node1" },
        { type: "InternalIP", address: "fd00::11" },
      ],
    },
  });
  assert.deepEqual(ips.map(formatIp), ["192.168.200.11", "fd00::11"]);
});
