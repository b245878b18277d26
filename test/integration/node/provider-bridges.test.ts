// Provider network bridges against real OVS (userspace datapath) in a netns the rig creates and removes: the
// agent writes ovn-bridge-mappings, creates a bridge with its uplink when asked to, and removes only what it made.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chassisMac } from "../../../src/node/chassis-mac.ts";
import { NodeSetup, type NodeSetupConfig } from "../../../src/node/node-setup.ts";
import { parseBridgeMappings } from "../../../src/node/provider-bridges.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { useOvsNode } from "../../rig/ovs-node.ts";

const chassis = (bridgeMappings?: string): NodeSetupConfig["chassis"] => ({
  ovnRemote: "unix:/nonexistent/sb.sock",
  encapType: "vxlan",
  encapIp: "192.168.250.11",
  systemId: "node1",
  bridgeDatapathType: "netdev",
  ...(bridgeMappings === undefined ? {} : { bridgeMappings }),
});

describe("provider network bridges on a real Open_vSwitch database", () => {
  test("maps providers to bridges, creates a bridge with its uplink when asked, adds and removes only its own; a second pass writes nothing", async (t) => {
    const node = await useOvsNode(t);
    // The uplinks: interfaces of the node (veths in the rig's netns, gone with it).
    for (const up of ["up1", "up2"])
      await node.exec("ip", ["link", "add", up, "type", "veth", "peer", "name", `${up}-peer`]);
    // An admin's bridges: one used as a provider bridge, one nothing refers to.
    await node.vsctl("add-br", "br-admin", "--", "set", "Bridge", "br-admin", "datapath_type=netdev");
    await node.vsctl("add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev");
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const mappings = parseBridgeMappings("physnet1:br-admin,physnet2:br-p2:up2");
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("physnet1:br-admin,physnet2:br-p2"),
      providers: mappings,
    });
    const first = await setup.reconcile();
    assert.deepEqual(first.providers, ["created br-p2 with uplink up2"]);
    const get = async (...a: string[]) => (await node.vsctl("get", ...a)).trim();
    assert.equal(
      await get("Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"),
      '"physnet1:br-admin,physnet2:br-p2"',
    );
    assert.deepEqual((await node.vsctl("list-ports", "br-p2")).trim().split("\n"), ["up2"]);
    assert.equal(await get("Bridge", "br-p2", "datapath_type"), "netdev");
    assert.equal(await get("Bridge", "br-p2", "fail_mode"), "[]", "standalone: a learning switch");
    assert.equal(await get("Bridge", "br-p2", "external_ids:zstack.io/provider"), "physnet2");
    // ovs-vswitchd opened the uplink: it has an OpenFlow port number and no error.
    let ofport = "";
    for (let i = 0; i < 100 && !/^[1-9]/.test(ofport); i++) {
      await new Promise((r) => setTimeout(r, 50));
      ofport = await get("Interface", "up2", "ofport");
    }
    assert.match(ofport, /^[1-9]\d*$/);
    assert.equal(await get("Interface", "up2", "error"), "[]");
    assert.deepEqual((await node.vsctl("list-ports", "br-admin")).trim(), "", "the admin's bridge untouched");

    const second = await setup.reconcile();
    assert.deepEqual([second.bridge, second.providers, second.chassis], [[], [], []], "nothing to do");
    // The agent restarted (a new NodeSetup on the same database): nothing written, the chassis MAC mappings as
    // they were, byte for byte (ovn-controller sees no change, so nothing flaps on the provider network).
    const mac = chassisMac("node1");
    const macs = `"physnet1:${mac},physnet2:${mac}"`;
    assert.equal(await get("Open_vSwitch", ".", "external_ids:ovn-chassis-mac-mappings"), macs);
    const restarted = await new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("physnet1:br-admin,physnet2:br-p2"),
      providers: mappings,
    }).reconcile();
    assert.deepEqual(
      [restarted.bridge, restarted.providers, restarted.chassis],
      [[], [], []],
      "a restart writes nothing",
    );
    assert.equal(await get("Open_vSwitch", ".", "external_ids:ovn-chassis-mac-mappings"), macs);

    // The admin's bridge gets an uplink when the configuration names one, and loses only that one later.
    setup.update({
      providers: parseBridgeMappings("physnet1:br-admin:up1,physnet2:br-p2:up2"),
    });
    assert.deepEqual((await setup.reconcile()).providers, ["uplink up1 on br-admin"]);
    assert.deepEqual((await node.vsctl("list-ports", "br-admin")).trim(), "up1");

    // physnet2 goes: the bridge the agent created goes with it; the admin's bridges stay, minus the agent's uplink.
    setup.update({
      providers: parseBridgeMappings("physnet1:br-admin"),
      chassis: chassis("physnet1:br-admin"),
    });
    const third = await setup.reconcile();
    assert.deepEqual(third.providers.sort(), ["removed br-p2", "uplink up1 off br-admin"]);
    assert.deepEqual(third.chassis.sort(), ["ovn-bridge-mappings", "ovn-chassis-mac-mappings"]);
    const bridges = (await node.vsctl("list-br")).trim().split("\n").sort();
    assert.deepEqual(bridges, ["br-admin", "br-int", "br-other"]);
    assert.equal((await node.vsctl("list-ports", "br-admin")).trim(), "");
    assert.equal(await get("Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"), '"physnet1:br-admin"');
    // The chassis MAC mappings follow: physnet2's entry went with its mapping.
    assert.match(
      await get("Open_vSwitch", ".", "external_ids:ovn-chassis-mac-mappings"),
      /^"physnet1:0e(:[0-9a-f]{2}){5}"$/,
    );
  });

  test("a provider bridge that does not exist and has no uplink configured is reported, not created; its mapping is written", async (t) => {
    const node = await useOvsNode(t);
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const warnings: string[] = [];
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("physnet1:br-missing"),
      providers: parseBridgeMappings("physnet1:br-missing"),
      logger: { info() {}, warn: (o) => warnings.push(JSON.stringify(o)) },
    });
    t.after(() => setup.stop());
    const r = await setup.reconcile();
    assert.deepEqual(r.providers, []);
    assert.match(warnings.join("\n"), /bridge br-missing of provider physnet1 does not exist/);
    assert.deepEqual((await node.vsctl("list-br")).trim().split("\n"), ["br-int"]);
    assert.equal(
      (await node.vsctl("get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings")).trim(),
      '"physnet1:br-missing"',
    );
  });

  test("a changed uplink on the agent's bridge replaces the old one in one pass: the bridge never holds two", async (t) => {
    const node = await useOvsNode(t);
    for (const up of ["up1", "up2"])
      await node.exec("ip", ["link", "add", up, "type", "veth", "peer", "name", `${up}-peer`]);
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("physnet1:br-p"),
      providers: parseBridgeMappings("physnet1:br-p:up1"),
    });
    t.after(() => setup.stop());
    assert.deepEqual((await setup.reconcile()).providers, ["created br-p with uplink up1"]);
    setup.update({ providers: parseBridgeMappings("physnet1:br-p:up2") });
    const r = await setup.reconcile();
    assert.deepEqual(r.providers.sort(), ["uplink up1 off br-p", "uplink up2 on br-p"]);
    assert.deepEqual((await node.vsctl("list-ports", "br-p")).trim().split("\n"), ["up2"]);
    assert.equal(
      (await node.vsctl("--if-exists", "get", "Interface", "up1", "name")).trim(),
      "",
      "up1 is gone",
    );
    assert.deepEqual((await setup.reconcile()).providers, [], "a second pass writes nothing");
  });

  test("an uplink moved to another bridge lands there in the same pass that removes the old bridge", async (t) => {
    const node = await useOvsNode(t);
    await node.exec("ip", ["link", "add", "up1", "type", "veth", "peer", "name", "up1-peer"]);
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("p:br-a"),
      providers: parseBridgeMappings("p:br-a:up1"),
    });
    t.after(() => setup.stop());
    assert.deepEqual((await setup.reconcile()).providers, ["created br-a with uplink up1"]);
    setup.update({ providers: parseBridgeMappings("p:br-b:up1"), chassis: chassis("p:br-b") });
    const r = await setup.reconcile();
    assert.deepEqual(r.providers.sort(), ["created br-b with uplink up1", "removed br-a"]);
    assert.deepEqual(r.providerProblems, []);
    assert.deepEqual((await node.vsctl("list-br")).trim().split("\n").sort(), ["br-b", "br-int"]);
    assert.deepEqual((await node.vsctl("list-ports", "br-b")).trim().split("\n"), ["up1"]);
    assert.deepEqual((await setup.reconcile()).providers, [], "a second pass writes nothing");
  });

  test("a provider misconfiguration (an uplink inside a bond, a bridge named like a port) fails alone: the chassis settings are still written, and the problem names the fix", async (t) => {
    const node = await useOvsNode(t);
    for (const up of ["up1", "up3"])
      await node.exec("ip", ["link", "add", up, "type", "veth", "peer", "name", `${up}-peer`]);
    await node.vsctl("add-br", "br-admin", "--", "set", "Bridge", "br-admin", "datapath_type=netdev");
    await node.vsctl("add-bond", "br-admin", "bond0", "up1", "up3");
    const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
    t.after(() => client.close());
    await client.connect();
    const warnings: string[] = [];
    const reported: string[][] = [];
    const setup = new NodeSetup({
      client,
      hostNetns: node.netns.path,
      bridge: { name: "br-int", datapathType: "netdev" },
      chassis: chassis("physnet2:br-p2,physnet3:bond0"),
      providers: parseBridgeMappings("physnet2:br-p2:up1,physnet3:bond0:up9"),
      logger: { info() {}, warn: (o) => warnings.push(JSON.stringify(o)) },
      onProviderProblems: (p) => reported.push([...p]),
    });
    t.after(() => setup.stop());
    const r = await setup.reconcile();
    assert.deepEqual(r.providers, []);
    assert.equal(r.providerProblems.length, 2, r.providerProblems.join("\n"));
    assert.match(
      r.providerProblems[0] ?? "",
      /uplink up1 of provider physnet2 is an interface of port bond0 on bridge br-admin/,
    );
    assert.match(
      r.providerProblems[1] ?? "",
      /bridge bond0 of provider physnet3 cannot be created: a port or interface of that name exists on bridge br-admin/,
    );
    assert.deepEqual(setup.providerProblems, r.providerProblems);
    assert.deepEqual(reported, [r.providerProblems], "reported to the agent once");
    assert.deepEqual((await setup.reconcile()).providerProblems, r.providerProblems);
    assert.equal(reported.length, 1, "the same problems are not reported again");
    assert.match(warnings.join("\n"), /interface of port bond0/);
    const get = async (...a: string[]) => (await node.vsctl("get", ...a)).trim();
    assert.equal(
      await get("Open_vSwitch", ".", "external_ids:system-id"),
      "node1",
      "the chassis settings are written",
    );
    assert.equal(
      await get("Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"),
      '"physnet2:br-p2,physnet3:bond0"',
    );
    assert.deepEqual((await node.vsctl("list-br")).trim().split("\n").sort(), ["br-admin", "br-int"]);
    assert.deepEqual(
      (await node.vsctl("list-ports", "br-admin")).trim().split("\n"),
      ["bond0"],
      "the bond untouched",
    );
  });
});
