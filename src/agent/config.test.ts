import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { formatCidr } from "../ipam/cidr.ts";
import { loadNodeConfig, NodeConfigError } from "./config.ts";

const BASE = { ZSTACK_NODE_NAME: "node1", ZSTACK_OVN_SBDB_ADDRESS: "tcp:10.0.0.1:6642" };

function problemOf(env: Record<string, string>): string {
  try {
    loadNodeConfig({ ...BASE, ...env });
  } catch (e) {
    assert.ok(e instanceof NodeConfigError, String(e));
    return e.message;
  }
  assert.fail(`expected ${JSON.stringify(env)} to be refused`);
}

describe("node agent configuration", () => {
  test("CIDR variables become typed prefixes, dual-stack lists included", () => {
    const cfg = loadNodeConfig({
      ...BASE,
      ZSTACK_CLUSTER_CIDR: "10.244.0.0/16, fd00:10:244::/48",
      ZSTACK_SERVICE_CIDR: "10.96.0.0/12",
      ZSTACK_JOIN_CIDR: "100.64.0.0/16",
      ZSTACK_ENCAP_IP: "192.168.1.10",
    });
    assert.deepEqual(cfg.clusterCIDRs.map(formatCidr), ["10.244.0.0/16", "fd00:10:244::/48"]);
    assert.deepEqual(cfg.serviceCIDRs.map(formatCidr), ["10.96.0.0/12"]);
    assert.equal(formatCidr(cfg.joinCIDR), "100.64.0.0/16");
    assert.equal(cfg.encapIp, "192.168.1.10");
    const defaults = loadNodeConfig(BASE);
    assert.deepEqual(defaults.clusterCIDRs.map(formatCidr), ["10.244.0.0/16"]);
  });

  test("bridge mappings become typed provider bridges; a bad entry is refused naming the variable", () => {
    const cfg = loadNodeConfig({ ...BASE, ZSTACK_BRIDGE_MAPPINGS: "physnet1:br-phy, physnet2:br-p2:eth1" });
    assert.deepEqual(cfg.providers, [
      { provider: "physnet1", bridge: "br-phy" },
      { provider: "physnet2", bridge: "br-p2", uplink: "eth1" },
    ]);
    assert.deepEqual(loadNodeConfig(BASE).providers, []);
    assert.match(
      problemOf({ ZSTACK_BRIDGE_MAPPINGS: "physnet1:br-int" }),
      /node\.bridgeMappings \(ZSTACK_BRIDGE_MAPPINGS, --bridge-mappings\) entry 1 "physnet1:br-int": br-int is OVN's integration bridge/,
    );
  });

  test("a bad CIDR is refused with the variable named and what is wrong", () => {
    for (const [k, v, why] of [
      ["ZSTACK_CLUSTER_CIDR", "10.244.0.0/16 via 1.2.3.4", /ZSTACK_CLUSTER_CIDR.*prefix length/],
      ["ZSTACK_CLUSTER_CIDR", "10.244.0.5/16", /ZSTACK_CLUSTER_CIDR.*host bits set.*10\.244\.0\.0\/16/],
      ["ZSTACK_CLUSTER_CIDR", "10.244.0.0/16,10.245.0.0/16", /ZSTACK_CLUSTER_CIDR.*one IPv4 and one IPv6/],
      ["ZSTACK_SERVICE_CIDR", "10.96.0.0/16,\nnetns add x", /ZSTACK_SERVICE_CIDR/],
      ["ZSTACK_SERVICE_CIDR", "10.96.0.0", /ZSTACK_SERVICE_CIDR.*no prefix length/],
      ["ZSTACK_JOIN_CIDR", "100.64.0.0/33", /ZSTACK_JOIN_CIDR.*prefix/],
      ["ZSTACK_ENCAP_IP", "192.168.1.010", /ZSTACK_ENCAP_IP.*leading zero/],
    ] as const)
      assert.match(problemOf({ [k]: v }), why, `${k}=${JSON.stringify(v)}`);
  });

  test("reads the same keys, variables and flags as the controller, with flags first", () => {
    const cfg = loadNodeConfig({ ...BASE, ZSTACK_TUNNEL_TYPE: "vxlan", ZSTACK_CLUSTER_CIDR: "" }, [
      "--tunnel-type=geneve",
      "--node-name",
      "node7",
    ]);
    assert.equal(cfg.tunnel, "geneve");
    assert.equal(cfg.nodeName, "node7");
    assert.deepEqual(
      cfg.clusterCIDRs.map(formatCidr),
      ["10.244.0.0/16"],
      "an empty variable counts as unset, as for the controller",
    );
  });

  test("pod access sources: empty by default, a list of either family, /0 and overlaps refused", () => {
    assert.deepEqual(loadNodeConfig(BASE).podAccessFrom, []);
    const cfg = loadNodeConfig({
      ...BASE,
      ZSTACK_POD_ACCESS_FROM: " 192.168.200.2/32, 192.168.201.0/24 ,fd00::/64",
    });
    assert.deepEqual(cfg.podAccessFrom.map(formatCidr), [
      "192.168.200.2/32",
      "192.168.201.0/24",
      "fd00::/64",
    ]);
    const flag = loadNodeConfig(BASE, ["--pod-access-from=10.1.2.3/32"]);
    assert.deepEqual(flag.podAccessFrom.map(formatCidr), ["10.1.2.3/32"]);
    for (const [v, why] of [
      ["0.0.0.0/0", /ZSTACK_POD_ACCESS_FROM.*0\.0\.0\.0\/0 would admit every host/],
      ["192.168.200.0/24,192.168.200.2/32", /192\.168\.200\.2\/32 overlaps 192\.168\.200\.0\/24/],
      ["192.168.200.2", /ZSTACK_POD_ACCESS_FROM.*no prefix length/],
      ["192.168.200.2/32 }\nflush ruleset", /ZSTACK_POD_ACCESS_FROM/],
      [Array.from({ length: 33 }, (_, i) => `10.0.${i}.0/24`).join(","), /lists 33 CIDRs; at most 32/],
    ] as const)
      assert.match(problemOf({ ZSTACK_POD_ACCESS_FROM: v }), why, JSON.stringify(v));
  });

  test("refuses gateway.mode=shared, which is not built, and requires the southbound remotes", () => {
    assert.match(
      problemOf({ ZSTACK_GATEWAY_MODE: "shared" }),
      /gateway\.mode \(ZSTACK_GATEWAY_MODE, --gateway-mode\)=shared is not supported yet/,
    );
    assert.match(
      problemOf({ ZSTACK_OVN_SBDB_ADDRESS: "" }),
      /ovn\.sbdbAddress \(ZSTACK_OVN_SBDB_ADDRESS, --sbdb-address\) is required/,
    );
  });

  test("standalone: the chassis is the node name; external: node.chassisPrefix + the node name (default k8s-)", () => {
    assert.equal(loadNodeConfig(BASE).chassisName, "node1");
    assert.equal(loadNodeConfig(BASE).ovnMode, "standalone");
    const ext = loadNodeConfig({ ...BASE, ZSTACK_OVN_MODE: "external" });
    assert.equal(ext.ovnMode, "external");
    assert.equal(ext.chassisName, "k8s-node1");
    assert.equal(
      loadNodeConfig({ ...BASE, ZSTACK_OVN_MODE: "external", ZSTACK_CHASSIS_PREFIX: "pod-net." }).chassisName,
      "pod-net.node1",
    );
  });

  test("external: a chassis prefix that is empty, malformed or makes a ZStack-like name is refused naming the setting", () => {
    const ext = { ZSTACK_OVN_MODE: "external" };
    // An empty variable means "unset" (the default); an empty value can only come from a flag or the file.
    assert.throws(
      () => loadNodeConfig({ ...BASE, ...ext }, ["--chassis-prefix="]),
      /node\.chassisPrefix .*ZSTACK_CHASSIS_PREFIX.* is empty/,
    );
    assert.match(problemOf({ ...ext, ZSTACK_CHASSIS_PREFIX: "a b" }), /ZSTACK_CHASSIS_PREFIX.*"a b"/);
    assert.match(problemOf({ ...ext, ZSTACK_CHASSIS_PREFIX: "x".repeat(70) }), /at most 64/);
    assert.match(
      problemOf({ ...ext, ZSTACK_NODE_NAME: "200.11", ZSTACK_CHASSIS_PREFIX: "192.168." }),
      /"192\.168\.200\.11" .*looks like a ZStack host's/,
    );
  });

  test("external: ssl: SB remotes need ovn.ssl.enabled and the three certificate files", () => {
    const ext = {
      ZSTACK_OVN_MODE: "external",
      ZSTACK_OVN_SBDB_ADDRESS: "ssl:10.0.0.1:6642,ssl:10.0.0.2:6642",
    };
    assert.match(problemOf(ext), /ssl: remotes: set ovn\.ssl\.enabled/);
    const missing = problemOf({ ...ext, ZSTACK_OVN_SSL_ENABLED: "true", ZSTACK_OVN_SSL_CA: "/ca.crt" });
    assert.match(missing, /ZSTACK_OVN_SSL_CERT/);
    assert.match(missing, /ZSTACK_OVN_SSL_KEY/);
    assert.doesNotMatch(missing, /ZSTACK_OVN_SSL_CA,/);
    const cfg = loadNodeConfig({
      ...BASE,
      ...ext,
      ZSTACK_OVN_SSL_ENABLED: "true",
      ZSTACK_OVN_SSL_CA: "/ca.crt",
      ZSTACK_OVN_SSL_CERT: "/tls.crt",
      ZSTACK_OVN_SSL_KEY: "/tls.key",
    });
    assert.deepEqual(cfg.ssl, {
      enabled: true,
      verifyHostname: false,
      caCert: "/ca.crt",
      clientCert: "/tls.crt",
      clientKey: "/tls.key",
    });
    // Standalone keeps today's behaviour: the agent makes no SB connection of its own there.
    assert.equal(
      loadNodeConfig({ ...BASE, ZSTACK_OVN_SBDB_ADDRESS: "ssl:10.0.0.1:6642" }).ssl.enabled,
      false,
    );
  });
});
