// What options:iface-id-ver on a pod's logical port does on a real OVN node: ovn-controller binds the port only
// to the OVS interface that carries the same pod UID, so an interface of an earlier pod incarnation with the same
// name (and so the same iface-id) never takes the new pod's port. Network namespaces are the rig's own.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StepTimeoutError } from "../../../src/node/errors.ts";
import { parseNetnsPath } from "../../../src/node/interface-name.ts";
import { interfaceWithAddress, podMtu } from "../../../src/node/mtu.ts";
import { NodeSetup } from "../../../src/node/node-setup.ts";
import { findPodPort } from "../../../src/node/ovs-port.ts";
import { type AddRequest, PodAttacher } from "../../../src/node/pod-attachment.ts";
import { ETH0, NODE, NODE_IP, podNetwork, startOneNodeCluster } from "../node/one-node-cluster.ts";

test("a pod's port binds only to the OVS interface of its own UID: a stale interface of the old incarnation never gets it", async (t) => {
  const cleanups: (() => unknown)[] = [];
  t.after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });
  const c = await startOneNodeCluster({ after: (fn) => cleanups.push(fn) });
  const setup = new NodeSetup({
    client: c.ovs,
    hostNetns: c.node.netns.path,
    bridge: { name: "br-int", datapathType: "netdev" },
    chassis: {
      ovnRemote: c.node.sb?.unix ?? "",
      encapType: "vxlan",
      encapIp: NODE_IP,
      systemId: NODE,
      bridgeDatapathType: "netdev",
    },
  });
  await setup.reconcile();
  const encap = await interfaceWithAddress(NODE_IP, { netns: c.node.netns.path });
  // A budget long enough for a real binding on a loaded machine: the stale ADD must fail by never binding.
  const attacher = new PodAttacher({
    client: c.ovs,
    mtu: podMtu({ encapMtu: encap.mtu, encapType: "vxlan" }),
    userspaceDatapath: true,
    hostNetns: c.node.netns.path,
    ovnInstalledBudgetMs: 20_000,
  });
  // The port is the new incarnation's (uid-new); the sandbox being wired is the old one's (uid-old).
  const { mac, ipWithPrefix } = await c.addPodLsp(
    { namespace: "default", name: "web", uid: "uid-new" },
    "10.244.0.40",
  );
  const request = async (uid: string, containerId: string): Promise<AddRequest> => ({
    containerId,
    ifname: ETH0,
    netns: parseNetnsPath((await c.node.addNetns(`web-${uid}`)).path),
    podNamespace: "default",
    podName: "web",
    podUid: uid,
    network: podNetwork([ipWithPrefix], mac),
  });
  const stale = await request("uid-old", "01d0000000000000000000000000000000000000000000000000000000000001");
  await assert.rejects(attacher.add(stale), (e: unknown) => {
    assert.ok(e instanceof StepTimeoutError, String(e));
    return true;
  });
  assert.equal(findPodPort(c.ovs, stale.containerId), undefined, "the failed ADD left no OVS port");

  const current = await request(
    "uid-new",
    "0e30000000000000000000000000000000000000000000000000000000000002",
  );
  const added = await attacher.add(current);
  assert.ok(added.portName, "the interface with the pod's own UID binds the port");
  await attacher.del(current);
});
