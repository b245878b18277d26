import assert from "node:assert/strict";
import { test } from "node:test";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { parsePodNetworksAnnotation, podNetworksAnnotation, podPortRow } from "../../../src/ovn/pod-port.ts";
import { desiredTopology, nodePodsAddressSet, topologyScope } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { writeRecords } from "../../rig/db-log.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};

test("a pod's port, its switch membership and its node address-set entry commit in one NB transaction", async (t) => {
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
  const before = await writeRecords(srv, "OVN_Northbound");

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
  const set = c.cache.table("Address_Set").findOne((r) => r.name === nodePodsAddressSet("node1", 4));
  txn.mutate(
    "Address_Set",
    [["_uuid", "==", set?._uuid as string]],
    [["addresses", "insert", ["10.244.0.5"]]],
  );
  assert.deepEqual(s.inserted, ["Logical_Switch_Port/pod/ns1/web-0"]);
  await txn.commit();
  await c.echo();
  assert.equal(
    (await writeRecords(srv, "OVN_Northbound")) - before,
    1,
    "exactly one NB write transaction per pod",
  );

  const lsp = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "ns1_web-0");
  assert.deepEqual(lsp?.addresses, ["0a:58:0a:f4:00:05 10.244.0.5"]);
  assert.equal(lsp?.external_ids["zstack.io/pod-uid"], "uid-1");
  assert.equal(lsp?.options["requested-chassis"], "node1");
  const ls = c.cache.table("Logical_Switch").findOne((r) => r.name === "subnet-default");
  assert.ok(ls?.ports.includes(lsp?._uuid as string));
  assert.deepEqual(c.cache.table("Address_Set").get(set?._uuid as string)?.addresses, ["10.244.0.5"]);

  const ann = parsePodNetworksAnnotation(podNetworksAnnotation(addressing));
  assert.deepEqual(ann, {
    ip_addresses: ["10.244.0.5/16"],
    mac_address: "0a:58:0a:f4:00:05",
    gateway_ips: ["10.244.0.1"],
    routes: [],
    logical_switch: "subnet-default",
  });
});
