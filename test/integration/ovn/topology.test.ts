import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { plan } from "../../../src/ovn/nb-diff.ts";
import {
  CLUSTER_ROUTER,
  type ClusterNetworks,
  desiredTopology,
  INSIDE_ADDRESS_SET_V4,
  mgmtPortName,
  type NodeTopology,
  nodeScope,
  type SubnetTopology,
  subnetRows,
  subnetScope,
  subnetSwitchName,
  topologyScope,
} from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { spawnDaemon } from "../../rig/process.ts";

const run = promisify(execFile);

const NET: ClusterNetworks = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};
const SUBNETS: SubnetTopology[] = [
  { name: "default", cidrs: ["10.244.0.0/16"], gateways: ["10.244.0.1"] },
  { name: "dual", cidrs: ["10.245.0.0/24", "fd00:245::/64"], gateways: ["10.245.0.1", "fd00:245::1"] },
];
const NODES: NodeTopology[] = [
  { name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: "0a:58:64:40:00:02" },
  { name: "node2", mgmtIP: "100.64.0.3/16", mgmtMAC: "0a:58:64:40:00:03" },
];

async function apply(c: OvsdbClient<NbTables>, subnets: SubnetTopology[], nodes: NodeTopology[]) {
  const txn = c.transaction();
  const s = plan(
    c.cache as never,
    c.schema,
    txn as never,
    desiredTopology(NET, subnets, nodes),
    topologyScope,
  );
  if (!s.empty) await txn.commit();
  await c.echo();
  return s;
}

describe("OVN topology on a real NB database", () => {
  test("creates router, join switch, subnet switches, management ports and egress policies in one transaction; a second plan is empty", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    let commits = 0;
    const s1 = await apply(c, SUBNETS, NODES);
    commits++;
    assert.ok(s1.inserted.length >= 15, JSON.stringify(s1));
    const lr = c.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
    assert.ok(lr);
    assert.equal(lr.ports.length, 3, "join + 2 subnet router ports");
    assert.equal(lr.policies.length, 2, "one egress policy per node");
    const route = c.cache.table("Logical_Router_Static_Route").get(lr.static_routes[0] as string);
    assert.deepEqual(
      [route?.ip_prefix, route?.nexthop],
      ["0.0.0.0/0", "100.64.255.254"],
      "default route to the reserved join address",
    );
    const dual = c.cache.table("Logical_Router_Port").findOne((r) => r.name === "zovn-rtos-dual");
    assert.deepEqual([...(dual?.networks ?? [])].sort(), ["10.245.0.1/24", "fd00:245::1/64"]);
    const pol = c.cache.table("Logical_Router_Policy").values().next().value;
    assert.match(
      pol?.match ?? "",
      /^ip4\.src == \$zovn_pods_node\d_[0-9a-f]{8}_v4 && ip4\.dst != \$zovn_inside_v4$/,
    );
    // Inside: the cluster, service and join CIDRs and every Subnet's IPv4 CIDR, also one outside the cluster CIDR.
    const inside = c.cache.table("Address_Set").findOne((r) => r.name === INSIDE_ADDRESS_SET_V4);
    assert.deepEqual([...(inside?.addresses ?? [])].sort(), [
      "10.244.0.0/16",
      "10.245.0.0/24",
      "10.96.0.0/16",
      "100.64.0.0/16",
    ]);
    const mgmt = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === mgmtPortName("node1"));
    assert.deepEqual(mgmt?.options, { "requested-chassis": "node1" });

    const s2 = await apply(c, SUBNETS, NODES);
    assert.equal(s2.empty, true, `second plan must be empty: ${JSON.stringify(s2)}`);

    // A fresh client (a restarted controller) also finds nothing to do.
    const c2 = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c2.close());
    await c2.connect();
    const s3 = await apply(c2, SUBNETS, NODES);
    assert.equal(s3.empty, true, `plan after restart must be empty: ${JSON.stringify(s3)}`);
    assert.equal(commits, 1);
  });

  test("removing a subnet and a node deletes exactly their rows and leaves foreign rows alone", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await apply(c, SUBNETS, NODES);
    // Rows of others: a ZStack switch with the same name as ours, and a policy on our router.
    const lr = c.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
    await c.transact((txn) => {
      const vmPort = txn.insert("Logical_Switch_Port", {
        name: "zstack-vm-1",
        addresses: ["fa:16:3e:00:00:01 10.9.0.5"],
      });
      txn.insert("Logical_Switch", {
        name: subnetSwitchName("dual"),
        ports: [vmPort],
        external_ids: { "zstack.io/vpc": "x" },
      });
      const p = txn.insert("Logical_Router_Policy", {
        priority: 2000,
        match: "ip4.dst == 1.1.1.1",
        action: "drop",
      });
      txn.mutate("Logical_Router", [["_uuid", "==", lr?._uuid as string]], [["policies", "insert", [p]]]);
    });
    const s = await apply(c, [SUBNETS[0] as SubnetTopology], [NODES[0] as NodeTopology]);
    assert.deepEqual(
      [...s.deleted].sort(),
      [
        "ACL/node/node2/source-guard",
        "Address_Set/node/node2/pods-v4",
        "Logical_Router_Policy/node/node2/egress-v4",
        "Logical_Router_Port/subnet/dual/rtos",
        "Logical_Switch/subnet/dual",
        "Logical_Switch_Port/node/node2/mgmt",
        "Logical_Switch_Port/subnet/dual/stor",
      ].sort(),
    );
    const lr2 = c.cache.table("Logical_Router").findOne((r) => r.name === CLUSTER_ROUTER);
    assert.equal(lr2?.policies.length, 2, "node1's policy and the foreign one remain");
    const foreign = c.cache.table("Logical_Switch").find((r) => r.name === subnetSwitchName("dual"));
    assert.equal(foreign.length, 1);
    assert.equal(foreign[0]?.external_ids["zstack.io/vpc"], "x");
    assert.equal(c.cache.table("Logical_Switch_Port").find((r) => r.name === "zstack-vm-1").length, 1);
  });

  test("one subnet's or one node's scope never reaches another whose name it prefixes", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    const subnets: SubnetTopology[] = [
      { name: "a", cidrs: ["10.1.0.0/24"], gateways: ["10.1.0.1"] },
      { name: "ab", cidrs: ["10.2.0.0/24"], gateways: ["10.2.0.1"] },
    ];
    const nodes: NodeTopology[] = [
      { name: "n", mgmtIP: "100.64.0.2/16", mgmtMAC: "0a:58:64:40:00:02" },
      { name: "n1", mgmtIP: "100.64.0.3/16", mgmtMAC: "0a:58:64:40:00:03" },
    ];
    await apply(c, subnets, nodes);
    const planOnly = async (rows: Parameters<typeof plan>[3], scope: Parameters<typeof plan>[4]) => {
      const txn = c.transaction();
      const s = plan(c.cache as never, c.schema, txn as never, rows, scope);
      if (!s.empty) await txn.commit();
      await c.echo();
      return s;
    };
    // Subnet a's own rows as desired: nothing to do, and ab's rows are not stale to it.
    assert.ok((await planOnly(subnetRows(subnets[0] as SubnetTopology), subnetScope("a"))).empty);
    // Subnet a deleted: exactly its three rows go.
    const gone = await planOnly([], subnetScope("a"));
    assert.deepEqual([...gone.deleted].sort(), [
      "Logical_Router_Port/subnet/a/rtos",
      "Logical_Switch/subnet/a",
      "Logical_Switch_Port/subnet/a/stor",
    ]);
    assert.ok(c.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("ab")));
    // Node n deleted: n1's rows stay.
    const nodeGone = await planOnly([], nodeScope("n"));
    assert.deepEqual([...nodeGone.deleted].sort(), [
      "ACL/node/n/source-guard",
      "Address_Set/node/n/pods-v4",
      "Logical_Router_Policy/node/n/egress-v4",
      "Logical_Switch_Port/node/n/mgmt",
    ]);
    assert.ok(c.cache.table("Logical_Switch_Port").findOne((r) => r.name === mgmtPortName("n1")));
  });

  test("ovn-northd accepts the topology: the egress reroute policy becomes a logical flow", async (t) => {
    const nb = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const sb = await useOvsdbServer(t, { schemas: [SCHEMAS.sb] });
    const northd = spawnDaemon(
      "ovn-northd",
      [`--ovnnb-db=${nb.unix}`, `--ovnsb-db=${sb.unix}`, `--unixctl=${nb.dir}/northd.ctl`, "--no-chdir"],
      { outputFile: `${nb.dir}/northd.out`, env: { ...process.env, OVN_RUNDIR: nb.dir } },
    );
    t.after(() => northd.terminate());
    const c = new OvsdbClient<NbTables>({ remotes: nb.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await apply(c, SUBNETS, NODES);
    let flows = "";
    for (let i = 0; i < 50 && !/reg0 = 100\.64\.0\.2/.test(flows); i++) {
      await delay(100);
      flows = (await run("ovn-sbctl", [`--db=${sb.unix}`, "lflow-list", CLUSTER_ROUTER])).stdout;
    }
    assert.match(
      flows,
      /lr_in_policy.*priority=1004.*ip4\.src == \$zovn_pods_node1_[0-9a-f]{8}_v4.*reg0 = 100\.64\.0\.2/,
    );
  });

  test("ovn-northd carries a provider subnet's localnet port to SB with its network name and VLAN tag", async (t) => {
    const nb = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const sb = await useOvsdbServer(t, { schemas: [SCHEMAS.sb] });
    const northd = spawnDaemon(
      "ovn-northd",
      [`--ovnnb-db=${nb.unix}`, `--ovnsb-db=${sb.unix}`, `--unixctl=${nb.dir}/northd.ctl`, "--no-chdir"],
      { outputFile: `${nb.dir}/northd.out`, env: { ...process.env, OVN_RUNDIR: nb.dir } },
    );
    t.after(() => northd.terminate());
    const c = new OvsdbClient<NbTables>({ remotes: nb.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    const vlan: SubnetTopology = {
      name: "vlan100",
      cidrs: ["172.30.100.0/24"],
      gateways: ["172.30.100.1"],
      provider: { name: "physnet1", vlanID: 100 },
    };
    const s1 = await apply(c, [...SUBNETS, vlan], NODES);
    assert.ok(s1.inserted.includes("Logical_Switch_Port/subnet/vlan100/localnet"));
    assert.ok(!s1.inserted.some((r) => r.startsWith("Logical_Router_Port/subnet/vlan100")));
    assert.ok((await apply(c, [...SUBNETS, vlan], NODES)).empty, "a second plan is empty");
    let binding = "";
    for (let i = 0; i < 50 && !/tag\s*:\s*100/.test(binding); i++) {
      await delay(100);
      binding = (
        await run("ovn-sbctl", [
          `--db=${sb.unix}`,
          "--columns=type,tag,options",
          "find",
          "Port_Binding",
          "logical_port=zovn-ln-vlan100",
        ])
      ).stdout;
    }
    assert.match(binding, /type\s*:\s*localnet/);
    assert.match(binding, /tag\s*:\s*100/);
    assert.match(binding, /network_name=physnet1/);
    // Untagged (a flat provider network): the same port, its tag cleared.
    const s3 = await apply(c, [...SUBNETS, { ...vlan, provider: { name: "physnet1" } }], NODES);
    assert.deepEqual(s3.updated, ["Logical_Switch_Port/subnet/vlan100/localnet:tag"]);
  });
});
