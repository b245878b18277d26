import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chassisExternalIds } from "./chassis-config.ts";
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
