// Per-node provider mappings from the Node's labels, end to end on real components: a real apiserver holds the Node,
// the agent's Node informer feeds NodeProviders (src/agent/node-providers.ts, as zstack-ovnkube-node wires it), and
// NodeSetup applies the result to a real Open_vSwitch (userspace datapath, in a netns the rig creates and removes).
// Labelling the Node adds a provider with its uplink (the bridge created), overrides node.bridgeMappings' entry,
// and unlabelling takes it back; labels that cannot be used are Warning Events on the Node naming the label and the
// fix, and change nothing. Labels that would cut the node off (an uplink holding the node's address) or misplace a
// provider network (the underlay bridge, a bridge with another uplink) are refused the same way, checked against
// the node's own kernel and OVS: the NIC stays off every bridge and the node's address answers.

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { NodeProviders } from "../../../src/agent/node-providers.ts";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { Informer } from "../../../src/k8s/informer.ts";
import type { KubeObject } from "../../../src/k8s/object-key.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { parseBridgeMappings } from "../../../src/node/provider-bridges.ts";
import { providerGuardFrom, readHostInterfaces } from "../../../src/node/provider-guard.ts";
import { PROVIDER_BRIDGE_LABEL as B, PROVIDER_UPLINK_LABEL as U } from "../../../src/node/provider-labels.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { useKubeApiserver } from "../../rig/kube-apiserver.ts";
import { useOvsNode } from "../../rig/ovs-node.ts";
import { teardownFor } from "../../rig/teardown.ts";

const NODE = "w1";

interface NodeObject extends KubeObject {
  metadata: { name: string; labels?: Record<string, string> };
}

async function until<T>(what: string, get: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const start = Date.now();
  let last: unknown;
  for (;;) {
    const v = await get().catch((e) => {
      last = e;
      return undefined;
    });
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${String(last ?? "")})`);
    await sleep(100);
  }
}

test("provider mappings follow the Node's labels on a real OVS; unusable labels are Warning Events naming the label and the fix", async (t) => {
  const kube = await useKubeApiserver(t);
  const api = new ApiClient(kube.kubeConfig);
  teardownFor(t).after(() => api.close());
  await api.request("/api/v1/nodes", {
    method: "POST",
    body: { apiVersion: "v1", kind: "Node", metadata: { name: NODE } },
  });
  const node = await useOvsNode(t);
  for (const up of ["up1", "up2"])
    await node.exec("ip", ["link", "add", up, "type", "veth", "peer", "name", `${up}-peer`]);
  await node.vsctl("add-br", "br-admin", "--", "set", "Bridge", "br-admin", "datapath_type=netdev");
  await node.vsctl("add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev");
  const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
  teardownFor(t).after(() => client.close());
  await client.connect();

  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-node", host: NODE });
  teardownFor(t).after(() => events.close());
  const nodeRef = { apiVersion: "v1", kind: "Node", name: NODE };
  // node.bridgeMappings of the DaemonSet: physnet1 on the admin's bridge.
  const providers = new NodeProviders({
    node: NODE,
    configured: parseBridgeMappings("physnet1:br-admin"),
    warn: (p) => events.warning(nodeRef, "ProviderLabelInvalid", p),
  });
  const chassis = () => ({
    ovnRemote: "unix:/nonexistent/sb.sock",
    encapType: "vxlan" as const,
    encapIp: "192.168.250.11",
    systemId: NODE,
    bridgeDatapathType: "netdev" as const,
    ...(providers.bridgeMappings === undefined ? {} : { bridgeMappings: providers.bridgeMappings }),
  });
  const setup = new NodeSetup({
    client,
    hostNetns: node.netns.path,
    bridge: { name: "br-int", datapathType: "netdev" },
    chassis: chassis(),
    providers: providers.mappings,
  });
  teardownFor(t).after(() => setup.stop());
  setup.start();
  const informer = new Informer<NodeObject>({
    client: api,
    path: "/api/v1/nodes",
    fieldSelector: `metadata.name=${NODE}`,
  });
  teardownFor(t).after(() => informer.stop());
  const onNode = (n: NodeObject) => {
    if (providers.update(n.metadata.labels))
      setup.update({ providers: providers.mappings, chassis: chassis() });
  };
  informer.addHandlers({ onAdd: onNode, onUpdate: (_o, n) => onNode(n) }, { replay: true });
  informer.start();

  const label = (labels: Record<string, string | null>) =>
    api.request(`/api/v1/nodes/${NODE}`, { method: "PATCH", body: { metadata: { labels } } });
  const mappings = async () =>
    (await node.vsctl("--if-exists", "get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings")).trim();
  const bridges = async () => (await node.vsctl("list-br")).trim().split("\n").sort().join(",");
  const untilState = (what: string, want: string, br: string) =>
    until(what, async () => ((await mappings()) === want && (await bridges()) === br ? true : undefined));
  const warnings = async () =>
    (
      await api.request<{ items: { reason: string; message: string; involvedObject: { name: string } }[] }>(
        "/api/v1/namespaces/default/events",
      )
    ).items.filter((e) => e.reason === "ProviderLabelInvalid" && e.involvedObject.name === NODE);

  await untilState("node.bridgeMappings alone", '"physnet1:br-admin"', "br-admin,br-int,br-other");

  // A provider of this node only, with its uplink: the agent creates its bridge.
  await label({ [`${B}vlan200`]: "br-v200", [`${U}vlan200`]: "up2" });
  await untilState(
    "vlan200 from the labels",
    '"physnet1:br-admin,vlan200:br-v200"',
    "br-admin,br-int,br-other,br-v200",
  );
  assert.equal((await node.vsctl("list-ports", "br-v200")).trim(), "up2");
  // This node carries physnet1 on another bridge than the DaemonSet's default.
  await label({ [`${B}physnet1`]: "br-other" });
  await untilState(
    "physnet1 overridden",
    '"physnet1:br-other,vlan200:br-v200"',
    "br-admin,br-int,br-other,br-v200",
  );

  // Labels that cannot be used: each a Warning Event naming the label and the fix; the mappings stay as they were.
  await label({
    [`${B}physnet3`]: "br-int",
    [`${U}physnet4`]: "up1",
    [`${B}physnet5`]: "a-much-too-long-bridge",
  });
  const bad = await until("three ProviderLabelInvalid Events", async () => {
    const w = await warnings();
    return w.length >= 3 ? w : undefined;
  });
  const text = bad.map((e) => e.message).join("\n");
  assert.match(
    text,
    /Node label provider\.network\.zstack\.io\/physnet3="br-int": br-int is OVN's integration bridge; set it as in kubectl label node w1 provider\.network\.zstack\.io\/physnet3=br-provider --overwrite/,
  );
  assert.match(
    text,
    /Node label uplink\.provider\.network\.zstack\.io\/physnet4="up1": names the uplink of provider physnet4, but no label provider\.network\.zstack\.io\/physnet4 names its bridge/,
  );
  assert.match(
    text,
    /provider\.network\.zstack\.io\/physnet5="a-much-too-long-bridge": the bridge name is 22 bytes long/,
  );
  assert.equal(await mappings(), '"physnet1:br-other,vlan200:br-v200"');

  // Labels together breaking a rule (one uplink on two bridges) are left out as a whole, naming the rule.
  await label({
    [`${B}physnet3`]: null,
    [`${U}physnet4`]: null,
    [`${B}physnet5`]: null,
    [`${B}vlan300`]: "br-v300",
    [`${U}vlan300`]: "up2",
  });
  await until("the uplink-twice Event", async () =>
    (await warnings()).some((e) =>
      /left out, node\.bridgeMappings alone applies: .*uplink up2 is named twice/.test(e.message),
    )
      ? true
      : undefined,
  );
  await untilState(
    "node.bridgeMappings alone while the labels conflict",
    '"physnet1:br-admin"',
    "br-admin,br-int,br-other",
  );

  // Labels removed: back to node.bridgeMappings; the bridge the agent made for vlan200 is gone.
  await label({
    [`${B}vlan300`]: null,
    [`${U}vlan300`]: null,
    [`${B}physnet1`]: null,
    [`${B}vlan200`]: null,
    [`${U}vlan200`]: null,
  });
  await untilState("labels removed", '"physnet1:br-admin"', "br-admin,br-int,br-other");
  assert.equal((await node.vsctl("list-ports", "br-admin")).trim(), "", "the admin's bridge untouched");
});

test("a provider label naming the node's own NIC, its underlay bridge or a second uplink is refused: a Warning Event, the NIC stays off every bridge, the node's address still answers", async (t) => {
  const kube = await useKubeApiserver(t);
  const api = new ApiClient(kube.kubeConfig);
  teardownFor(t).after(() => api.close());
  await api.request("/api/v1/nodes", {
    method: "POST",
    body: { apiVersion: "v1", kind: "Node", metadata: { name: NODE } },
  });
  const node = await useOvsNode(t);
  // The node's primary NIC eth0 (its address and default route), its peer in a neighbour namespace the rig removes.
  const peer = await node.addNetns("nb");
  await node.exec("ip", ["link", "add", "eth0", "type", "veth", "peer", "name", "nb0"]);
  await node.exec("ip", ["link", "set", "nb0", "netns", peer.path]);
  await node.exec("ip", ["address", "add", "192.168.77.11/24", "dev", "eth0"]);
  await node.exec("ip", ["link", "set", "eth0", "up"]);
  await node.exec("ip", ["route", "add", "default", "via", "192.168.77.1"]);
  await node.execIn(peer.path, "ip", ["address", "add", "192.168.77.1/24", "dev", "nb0"]);
  await node.execIn(peer.path, "ip", ["link", "set", "nb0", "up"]);
  const reachable = () => node.execIn(peer.path, "ping", ["-c", "1", "-W", "5", "192.168.77.11"]);
  await until("the node's address answers before", () => reachable().then(() => true));
  // The underlay bridge holding an address (as a ZStack host's br-phy), and an admin's bridge with its uplink.
  await node.vsctl("add-br", "br-under", "--", "set", "Bridge", "br-under", "datapath_type=netdev");
  await node.exec("ip", ["link", "set", "br-under", "up"]);
  await node.exec("ip", ["address", "add", "192.168.78.11/24", "dev", "br-under"]);
  for (const up of ["up1", "up2"])
    await node.exec("ip", ["link", "add", up, "type", "veth", "peer", "name", `${up}-peer`]);
  await node.vsctl("add-br", "br-admin", "--", "set", "Bridge", "br-admin", "datapath_type=netdev");
  await node.vsctl("add-port", "br-admin", "up1");
  const client = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
  teardownFor(t).after(() => client.close());
  await client.connect();

  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-node", host: NODE });
  teardownFor(t).after(() => events.close());
  const nodeRef = { apiVersion: "v1", kind: "Node", name: NODE };
  const providers = new NodeProviders({
    node: NODE,
    configured: parseBridgeMappings("physnet1:br-admin"),
    warn: (p) => events.warning(nodeRef, "ProviderLabelInvalid", p),
  });
  const chassis = () => ({
    ovnRemote: "unix:/nonexistent/sb.sock",
    encapType: "vxlan" as const,
    encapIp: "192.168.77.11",
    systemId: NODE,
    bridgeDatapathType: "netdev" as const,
    ...(providers.bridgeMappings === undefined ? {} : { bridgeMappings: providers.bridgeMappings }),
  });
  const setup = new NodeSetup({
    client,
    hostNetns: node.netns.path,
    bridge: { name: "br-int", datapathType: "netdev" },
    chassis: chassis(),
    providers: providers.mappings,
  });
  teardownFor(t).after(() => setup.stop());
  setup.start();
  const informer = new Informer<NodeObject>({
    client: api,
    path: "/api/v1/nodes",
    fieldSelector: `metadata.name=${NODE}`,
  });
  teardownFor(t).after(() => informer.stop());
  // As zstack-ovnkube-node does: the guard read afresh (kernel and OVS of the node) before each use of the labels.
  let latest: NodeObject | undefined;
  let pass = Promise.resolve();
  let passes = 0;
  const onNode = (n: NodeObject) => {
    latest = n;
    pass = pass.then(async () => {
      const guard = providerGuardFrom(client, await readHostInterfaces({ netns: node.netns.path }));
      if (providers.update(latest?.metadata.labels, guard))
        setup.update({ providers: providers.mappings, chassis: chassis() });
      passes++;
    });
  };
  informer.addHandlers({ onAdd: onNode, onUpdate: (_o, n) => onNode(n) }, { replay: true });
  informer.start();

  const label = (labels: Record<string, string | null>) =>
    api.request(`/api/v1/nodes/${NODE}`, { method: "PATCH", body: { metadata: { labels } } });
  const mappings = async () =>
    (await node.vsctl("--if-exists", "get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings")).trim();
  const warnings = async () =>
    (
      await api.request<{ items: { reason: string; message: string; involvedObject: { name: string } }[] }>(
        "/api/v1/namespaces/default/events",
      )
    ).items.filter((e) => e.reason === "ProviderLabelInvalid" && e.involvedObject.name === NODE);
  await until("node.bridgeMappings alone", async () =>
    (await mappings()) === '"physnet1:br-admin"' ? true : undefined,
  );

  await label({
    [`${B}physnet1`]: "br-eth0",
    [`${U}physnet1`]: "eth0",
    [`${B}under`]: "br-under",
    [`${B}second`]: "br-admin",
    [`${U}second`]: "up2",
  });
  const bad = await until("three ProviderLabelInvalid Events", async () => {
    const w = await warnings();
    return w.length >= 3 ? w : undefined;
  });
  const text = bad.map((e) => e.message).join("\n");
  assert.match(
    text,
    /Node label uplink\.provider\.network\.zstack\.io\/physnet1="eth0": eth0 (holds the node's address 192\.168\.77\.11\/24|carries the node's route [^;]*); as a port of an OVS bridge it would lose it and cut the node off; .*the labels of provider physnet1 are left out, node\.bridgeMappings' entry applies/,
  );
  assert.match(
    text,
    /Node label provider\.network\.zstack\.io\/under="br-under": br-under is the node's underlay bridge \(it holds the node's address 192\.168\.78\.11\/24\)/,
  );
  assert.match(
    text,
    /Node label uplink\.provider\.network\.zstack\.io\/second="up2": bridge br-admin already has the uplink up1; a second one would loop the network/,
  );
  // Every label pass has ended, and none of them changed anything.
  const seen = passes;
  await label({ "example.com/nudge": "1" });
  await until("the next label pass", async () => (passes > seen ? true : undefined));
  await pass;
  assert.equal(await mappings(), '"physnet1:br-admin"', "the configured mapping stays");
  assert.equal((await node.vsctl("list-br")).trim().split("\n").sort().join(","), "br-admin,br-int,br-under");
  assert.equal((await node.vsctl("port-to-br", "eth0").catch(() => "")).trim(), "", "eth0 on no bridge");
  assert.equal((await node.vsctl("list-ports", "br-admin")).trim(), "up1", "no second uplink");
  assert.match(await node.exec("ip", ["-o", "address", "show", "dev", "eth0"]), /192\.168\.77\.11\/24/);
  await reachable();

  // eth0 under another name (an altname, which the kernel and OVS resolve like its name): refused too.
  await node.exec("ip", ["link", "property", "add", "dev", "eth0", "altname", "upl0"]);
  const before = (await warnings()).length;
  await label({ [`${B}alt`]: "br-alt", [`${U}alt`]: "upl0" });
  const alt = await until("the altname's Event", async () => {
    const w = await warnings();
    return w.length > before ? w.slice(before) : undefined;
  });
  assert.match(
    alt.map((e) => e.message).join("\n"),
    /uplink\.provider\.network\.zstack\.io\/alt="upl0": upl0 /,
  );
  // A provider bridge the labels created, later given an address (host access to that network), stays.
  await node.exec("ip", ["link", "add", "up3", "type", "veth", "peer", "name", "up3-peer"]);
  const refused = (await warnings()).length;
  await label({ [`${B}alt`]: null, [`${U}alt`]: null, [`${B}good`]: "br-good", [`${U}good`]: "up3" });
  await until("br-good with its uplink", async () => {
    const about = (await warnings()).slice(refused).map((e) => e.message);
    assert.deepEqual(about, [], "no Event about these labels");
    const ports = (await node.vsctl("list-ports", "br-good").catch(() => "")).trim();
    return ports === "up3" ? true : undefined;
  });
  await node.exec("ip", ["link", "set", "br-good", "up"]);
  await node.exec("ip", ["address", "add", "192.168.79.11/24", "dev", "br-good"]);
  const seen2 = passes;
  await label({ "example.com/nudge": "2" });
  await until("the next label pass", async () => (passes > seen2 ? true : undefined));
  await pass;
  assert.equal(
    (await node.vsctl("list-ports", "br-good")).trim(),
    "up3",
    "the agent's bridge and uplink stay",
  );
  assert.match(await mappings(), /good:br-good/);
  assert.equal(
    (await node.vsctl("port-to-br", "eth0").catch(() => "")).trim(),
    "",
    "eth0 still on no bridge",
  );
  await reachable();
});
