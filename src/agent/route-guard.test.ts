import assert from "node:assert/strict";
import { test } from "node:test";
import { formatIp, parseIp } from "../ipam/address.ts";
import { formatCidr, parseCidr } from "../ipam/cidr.ts";
import { apiServerIp, routeGuardFor } from "./route-guard.ts";

test("the API server's address is taken from a kubeconfig server URL that names an IP, of either family", () => {
  assert.equal(formatIp(apiServerIp("https://172.16.0.100:6443") ?? parseIp("0.0.0.0")), "172.16.0.100");
  assert.equal(formatIp(apiServerIp("https://[fd00::100]:6443") ?? parseIp("0.0.0.0")), "fd00::100");
  assert.equal(apiServerIp("https://api.example:6443"), undefined);
  assert.equal(apiServerIp("not a url"), undefined);
  assert.equal(apiServerIp(undefined), undefined);
});

test("the guard holds the encap IP, the Node's IPs, the API server, the default gateways and the uplink networks", () => {
  const g = routeGuardFor({
    joinCidr: parseCidr("100.64.0.0/16"),
    serviceCidrs: [parseCidr("10.96.0.0/16")],
    encapIp: parseIp("192.168.1.10"),
    node: { status: { addresses: [{ type: "ExternalIP", address: "203.0.113.7" }] } },
    apiServer: parseIp("172.16.0.100"),
    host: { gateways: [parseIp("192.168.1.1")], uplinkCidrs: [parseCidr("192.168.1.0/24")] },
  });
  assert.deepEqual(g.nodeIps.map(formatIp), ["192.168.1.10", "203.0.113.7"]);
  assert.deepEqual(
    g.hostIps?.map((h) => `${h.what} ${formatIp(h.ip)}`),
    ["the API server's address 172.16.0.100", "the node's default gateway 192.168.1.1"],
  );
  assert.deepEqual(g.uplinkCidrs?.map(formatCidr), ["192.168.1.0/24"]);
});
