// Per-node provider mappings from the Node's labels, end to end on real components: a real apiserver holds the Node,
// the agent's Node informer feeds NodeProviders (src/agent/node-providers.ts, as zstack-ovnkube-node wires it), and
// NodeSetup applies the result to a real Open_vSwitch (userspace datapath, in a netns the rig creates and removes).
// Labelling the Node adds a provider with its uplink (the bridge created), overrides node.bridgeMappings' entry,
// and unlabelling takes it back; labels that cannot be used are Warning Events on the Node naming the label and the
// fix, and change nothing.

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
