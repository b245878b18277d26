import assert from "node:assert/strict";
import { test } from "node:test";
import { NodeNetworks } from "../../../src/controller/node-network.ts";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { CLUSTER_ROUTER, coreRows } from "../../../src/ovn/topology.ts";
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

test("each node gets its own management address, port, address set and egress policy; a restart changes nothing; removal cleans up", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  const txn = c.transaction();
  plan(c.cache as never, c.schema, txn as never, coreRows(NET));
  await txn.commit();
  await c.echo();
  const nn = new NodeNetworks(c, NET);
  const m1 = await nn.ensure("node1");
  const m2 = await nn.ensure("node2");
  assert.equal(m1.ip, "100.64.0.2/16");
  assert.equal(m2.ip, "100.64.0.3/16");
  assert.equal(m1.gateway, "100.64.0.1");
  await c.echo();
  const lr = c.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
  assert.equal(lr?.policies.length, 2);

  const c2 = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c2.close());
  await c2.connect();
  const nn2 = new NodeNetworks(c2, NET);
  const before = await writeRecords(srv, "OVN_Northbound");
  assert.deepEqual(await nn2.ensure("node2"), m2, "same address after a restart");
  assert.deepEqual(await nn2.ensure("node1"), m1);
  assert.equal(await writeRecords(srv, "OVN_Northbound"), before, "no write after a restart with no changes");
  assert.equal((await nn2.ensure("node3")).ip, "100.64.0.4/16");

  assert.equal(await nn2.remove("node1"), true);
  await c2.echo();
  const lr2 = c2.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
  assert.equal(lr2?.policies.length, 2, "node2 and node3 remain");
  assert.equal(
    c2.cache.table("Logical_Switch_Port").findOne((r) => r.name === "zovn-mgmt-node1"),
    undefined,
  );
  assert.equal((await nn2.ensure("node4")).ip, "100.64.0.2/16", "node1's address is free again");
});
