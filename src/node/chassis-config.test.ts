import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chassisExternalIds } from "./chassis-config.ts";
import { chassisMac } from "./chassis-mac.ts";
import { changedKeys } from "./vswitch-db.ts";

describe("chassis config", () => {
  const config = {
    ovnRemote: "tcp:192.168.200.10:6642",
    encapType: "vxlan" as const,
    encapIp: "192.168.200.11",
    systemId: "node1",
    bridgeDatapathType: "netdev" as const,
  };

  test("owns exactly ovn-controller's connection, encap, name and datapath keys", () => {
    assert.deepEqual(chassisExternalIds(config), {
      "ovn-remote": "tcp:192.168.200.10:6642",
      "ovn-encap-type": "vxlan",
      "ovn-encap-ip": "192.168.200.11",
      "system-id": "node1",
      "ovn-bridge-datapath-type": "netdev",
    });
    assert.equal(chassisExternalIds({ ...config, hostname: "n1" }).hostname, "n1");
  });

  test("with provider networks, each gets this chassis's MAC in ovn-chassis-mac-mappings, following the mappings", () => {
    const ids = chassisExternalIds({ ...config, bridgeMappings: "flat:br-flat,vlan:br-vlan" });
    assert.equal(ids["ovn-bridge-mappings"], "flat:br-flat,vlan:br-vlan");
    assert.equal(ids["ovn-chassis-mac-mappings"], `flat:${chassisMac("node1")},vlan:${chassisMac("node1")}`);
    const none = chassisExternalIds({ ...config, bridgeMappings: "" });
    assert.equal(none["ovn-chassis-mac-mappings"], "", "a mapping removed takes its chassis MAC along");
    assert.notEqual(
      chassisExternalIds({ ...config, systemId: "node2", bridgeMappings: "flat:br-flat" })[
        "ovn-chassis-mac-mappings"
      ],
      chassisExternalIds({ ...config, bridgeMappings: "flat:br-flat" })["ovn-chassis-mac-mappings"],
    );
  });

  test("only keys whose value differs are changed; foreign keys are never considered", () => {
    const current = { "ovn-remote": "tcp:192.168.200.10:6642", "ovn-encap-type": "geneve", foo: "bar" };
    assert.deepEqual(changedKeys(current, chassisExternalIds(config)), [
      "ovn-encap-type",
      "ovn-encap-ip",
      "system-id",
      "ovn-bridge-datapath-type",
    ]);
  });
});
