import assert from "node:assert/strict";
import { test } from "node:test";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { parsePodNetworksAnnotation, podNetworksAnnotation, podPortRow } from "../../../src/ovn/pod-port.ts";
import { desiredTopology, topologyScope } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};

// The one-transaction-per-pod count is proven on the real path (PodPortAllocator.ensure) in
// test/integration/controller/pod-port-allocator.test.ts; this checks the row podPortRow describes.
test("a pod's port row: addresses, owner ids, requested-chassis and switch membership, accepted by a real NB", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const txn0 = c.transaction();
  plan(
    c.cache as never,
    c.schema,
    txn0 as never,
    desiredTopology(
      NET,
      [{ name: "default", cidrs: ["10.244.0.0/16"], gateways: ["10.244.0.1"] }],
      [{ name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: "0a:58:64:40:00:02" }],
    ),
    topologyScope,
  );
  await txn0.commit();

  const addressing = {
    subnet: "default",
    logicalSwitch: "subnet-default",
    mac: "0a:58:0a:f4:00:05",
    ipsWithPrefix: ["10.244.0.5/16"],
    gateways: ["10.244.0.1"],
    node: "node1",
  };
  const txn = c.transaction();
  const s = plan(c.cache as never, c.schema, txn as never, [
    podPortRow({ namespace: "ns1", name: "web-0", uid: "uid-1" }, addressing, {
      table: "Logical_Switch",
      id: "subnet/default",
      column: "ports",
    }),
  ]);
  assert.deepEqual(s.inserted, ["Logical_Switch_Port/pod/ns1/web-0"]);
  await txn.commit();
  await c.echo();

  const lsp = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "ns1_web-0");
  assert.deepEqual(lsp?.addresses, ["0a:58:0a:f4:00:05 10.244.0.5"]);
  assert.equal(lsp?.external_ids["zstack.io/pod-uid"], "uid-1");
  assert.equal(lsp?.options["requested-chassis"], "node1");
  // Only the OVS interface of this pod incarnation may claim the port.
  assert.equal(lsp?.options["iface-id-ver"], "uid-1");
  const ls = c.cache.table("Logical_Switch").findOne((r) => r.name === "subnet-default");
  assert.ok(ls?.ports.includes(lsp?._uuid as string));

  const ann = parsePodNetworksAnnotation(podNetworksAnnotation(addressing));
  assert.deepEqual(ann, {
    ip_addresses: ["10.244.0.5/16"],
    mac_address: "0a:58:0a:f4:00:05",
    gateway_ips: ["10.244.0.1"],
    routes: [],
    logical_switch: "subnet-default",
  });
});
