// `zovn uninstall` against the ZStack simulator (real NB/SB/northd): a "plugin" writes its rows with our real
// row builders, links them into ZStack's rows (pod ports in ZStack's switch and security group, a load balancer
// and the cluster group on ZStack's switch, ACLs in ZStack's switch and port group, template variables in a
// Chassis_Template_Var row not ours). While they are there ZStack's rows differ only in those set insertions;
// --dry-run prints the plan and changes nothing; the uninstall (the CLI, as a process) leaves every ZStack row
// byte-identical to the snapshot taken before the plugin wrote, and nothing of ours. Rows that only look like
// ours (our names, our id key, another owner) are never touched, and a plan that would take a row not ours
// with it is refused whole.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { describe, test } from "node:test";
import { promisify } from "node:util";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { CONTROLLER, ID_KEY, OWNER_KEY, ownedIds, SERVICE_KEY } from "../../../src/ovn/ownership.ts";
import { podPortRow } from "../../../src/ovn/pod-port.ts";
import {
  CLUSTER_LB_GROUP,
  type ClusterNetworks,
  desiredTopology,
  JOIN_SWITCH,
  type SubnetTopology,
} from "../../../src/ovn/topology.ts";
import { describePlan, planUninstall } from "../../../src/ovn/uninstall.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import { createPki, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import {
  diffDumps,
  onlyDocumentedMutations,
  ownedRows,
  useZStackSim,
  type ZStackSim,
} from "../../rig/zstack-sim.ts";

const run = promisify(execFile);
const ROOT = new URL("../../../", import.meta.url).pathname;

const NET: ClusterNetworks = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};
const SUBNETS: SubnetTopology[] = [{ name: "default", cidrs: ["10.244.0.0/24"], gateways: ["10.244.0.1"] }];
const NODES = [{ name: "node1", mgmtIP: "100.64.0.2/16", mgmtMAC: "0a:58:64:40:00:02" }];

/** `zovn uninstall ...` as a process; its exit code, stdout and stderr. */
async function zovn(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const { stdout, stderr } = await run(
      "node",
      ["--import", "tsx", "src/cli/zovn.ts", "uninstall", ...args],
      {
        cwd: ROOT,
        timeout: 300_000,
      },
    );
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === "number" ? x.code : -1, out: x.stdout ?? "", err: x.stderr ?? "" };
  }
}

async function connect(t: { after(fn: () => unknown): void }, remotes: readonly string[]) {
  const nb = new OvsdbClient<NbTables>({ remotes, model: nbModel });
  t.after(() => nb.close());
  await nb.connect();
  return nb;
}

const owned = (id: string) => [
  "map",
  [
    [OWNER_KEY, CONTROLLER],
    [ID_KEY, id],
  ],
];

/** Writes what the plugin would: its topology, pods on ZStack's switch, a Service, ACLs; links into ZStack's rows. */
async function pluginWrites(nb: OvsdbClient<NbTables>, sim: ZStackSim, foreignVars: string): Promise<void> {
  const cache = nb.cache as never;
  const overlay = sim.uuid("overlay-switch");
  const sg = sim.uuid("security-group");
  // Our own topology (cluster router, join switch, a subnet switch, a node's management port), and the group.
  let txn = nb.transaction();
  txn.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP });
  plan(cache, nb.schema, txn as never, desiredTopology(NET, SUBNETS, NODES));
  await txn.commit();

  // Pods on ZStack's overlay switch (their ports join the switch's `ports` by mutation).
  txn = nb.transaction();
  const pods = [1, 2, 3].map((i) =>
    podPortRow(
      { namespace: "default", name: `web-${i}`, uid: `00000000-0000-4000-8000-00000000000${i}` },
      {
        subnet: "zstack-overlay",
        logicalSwitch: "l3-vpc-network",
        mac: `0a:58:0a:3c:00:${(0x40 + i).toString(16)}`,
        ipsWithPrefix: [`10.60.0.${64 + i}/24`],
        gateways: ["10.60.0.1"],
        node: "node1",
      },
      { table: "Logical_Switch", column: "ports", uuid: overlay },
    ),
  );
  const group = nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
  assert.ok(group);
  const lbId = "default/web/tcp";
  const vipVar = "zsvc_vip_web";
  const beVar = "zsvc_be_web";
  plan(cache, nb.schema, txn as never, [
    ...pods,
    // A Service's template load balancer: in our group, and (as a per-switch link) on ZStack's switch.
    {
      table: "Load_Balancer",
      id: lbId,
      row: {
        name: "Service_default/web_tcp",
        protocol: "tcp",
        vips: { [`^${vipVar}:80`]: `^${beVar}` },
        options: { template: "true", "address-family": "ipv4" },
        external_ids: ownedIds("service-lb", lbId, { [SERVICE_KEY]: "default/web" }),
      },
      parent: { table: "Logical_Switch", column: "load_balancer", uuid: overlay },
    },
    // Our ACLs: one on ZStack's switch, one in ZStack's security group.
    {
      table: "ACL",
      id: "external/allow-pods-switch",
      row: {
        direction: "to-lport",
        priority: 1001,
        match: "ip4.src == 10.60.0.64/26",
        action: "allow-related",
        external_ids: ownedIds("network-policy-acl", "external/allow-pods-switch"),
      },
      parent: { table: "Logical_Switch", column: "acls", uuid: overlay },
    },
    {
      table: "ACL",
      id: "external/allow-pods-sg",
      row: {
        direction: "to-lport",
        priority: 1001,
        match: "ip4.src == 10.60.0.64/26 && tcp.dst == 22",
        action: "allow-related",
        external_ids: ownedIds("network-policy-acl", "external/allow-pods-sg"),
      },
      parent: { table: "Port_Group", column: "acls", uuid: sg },
    },
  ]);
  await txn.commit();

  txn = nb.transaction();
  const lb = nb.cache.table("Load_Balancer").find((r) => r.external_ids[ID_KEY] === lbId)[0];
  const pod1 = nb.cache.table("Logical_Switch_Port").lookupOne("name", "default_web-1");
  assert.ok(lb && pod1);
  txn.mutate("Load_Balancer_Group", byUuid(group._uuid), [["load_balancer", "insert", [lb._uuid]]]);
  txn.mutate("Logical_Switch", byUuid(overlay), [["load_balancer_group", "insert", [group._uuid]]]);
  // A pod in ZStack's security group (a weak reference).
  txn.mutate("Port_Group", byUuid(sg), [["ports", "insert", [pod1._uuid]]]);
  // The variables of our template, in a row not ours (ZStack's chassis), as the Service reconciler mutates it.
  txn.mutate("Chassis_Template_Var", byUuid(foreignVars), [
    ["variables", "insert", { [vipVar]: "10.96.0.10", [beVar]: "10.60.0.65:8080" }],
  ]);
  await txn.commit();
}

describe("zovn uninstall", () => {
  for (const raft of [false, true])
    test(`on ZStack's NB${raft ? " (3-member Raft cluster)" : ""}: dry-run changes nothing; uninstall leaves ZStack's rows byte-identical and nothing of ours`, async (t) => {
      const sim = await useZStackSim(t, { raft });
      // A row not ours that the plugin will write template variables into (ZStack's chassis' variables).
      const [foreignVars] = await sim.writer.transact([
        {
          op: "insert",
          table: "Chassis_Template_Var",
          row: { chassis: "192.168.200.11", variables: ["map", [["zs_own", "1"]]] },
        },
      ]);
      // Rows that merely look like ours: our names, our id key, another owner.
      await sim.writer.transact([
        { op: "insert", table: "Logical_Switch", row: { name: JOIN_SWITCH } },
        {
          op: "insert",
          table: "Logical_Switch",
          row: { name: "zovn-subnet-default", external_ids: ["map", [[ID_KEY, "subnet/default"]]] },
        },
        {
          op: "insert",
          table: "Address_Set",
          row: { name: "zovn_lookalike", external_ids: ["map", [[OWNER_KEY, `${CONTROLLER}-not`]]] },
        },
      ]);
      const before = await sim.snapshot();
      assert.deepEqual(ownedRows(await sim.dump()), []);

      const nb = await connect(t, sim.nbRemotes);
      await pluginWrites(nb, sim, foreignVars as string);
      await sim.sync();
      const during = await sim.dump();
      const ours = new Set(ownedRows(during).map((r) => r.split(" ")[1] as string));
      const group = nb.cache.table("Load_Balancer_Group").lookupOne("name", CLUSTER_LB_GROUP);
      assert.ok(group);
      ours.add(group._uuid);
      t.diagnostic(
        `${ours.size} rows of ours, ${diffDumps(before, during).length} differences in ZStack's rows`,
      );
      assert.ok(ours.size >= 15);
      assert.deepEqual(onlyDocumentedMutations(before, during, ours), []);
      const changed = new Set(
        diffDumps(before, during)
          .filter((l) => !l.endsWith(": added"))
          .map((l) => l.split(":")[0]),
      );
      const overlay = sim.uuid("overlay-switch");
      const sg = sim.uuid("security-group");
      for (const col of ["ports", "load_balancer", "load_balancer_group", "acls"])
        assert.ok(changed.has(`Logical_Switch ${overlay} ${col}`), `ZStack's switch got our ${col}`);
      assert.ok(changed.has(`Port_Group ${sg} acls`) && changed.has(`Port_Group ${sg} ports`));
      assert.ok(changed.has(`Chassis_Template_Var ${foreignVars} variables`));

      // --dry-run: exactly the plan, and nothing changes.
      const dry = await zovn("--nb", sim.nbRemotes.join(","), "--dry-run");
      assert.equal(dry.code, 0, dry.err);
      const expected = describePlan(planUninstall(nb.cache as never, nb.schema));
      assert.deepEqual(dry.out.trim().split("\n").slice(0, expected.length), expected);
      assert.match(dry.out, /dry run: nothing was changed/);
      t.diagnostic(`dry run: ${dry.out.trim().split("\n").at(-2)}`);
      const lines = dry.out.split("\n");
      assert.equal(lines.filter((l) => l.startsWith("delete ")).length, ours.size);
      assert.ok(
        lines.some((l) => l.startsWith(`unlink  Logical_Switch ${overlay} "l3-vpc-network" ports -= `)),
      );
      assert.ok(lines.some((l) => l.startsWith(`unset   Chassis_Template_Var ${foreignVars}`)));
      assert.ok(lines.some((l) => l.includes(`delete  Load_Balancer_Group ${group._uuid}`)));
      assert.deepEqual(diffDumps(during, await sim.dump()), [], "dry-run changed nothing");

      const done = await zovn("--nb", sim.nbRemotes.join(","));
      assert.equal(done.code, 0, `${done.out}\n${done.err}`);
      assert.match(done.out, /removed; the database holds nothing of ours/);
      const after = await sim.snapshot();
      assert.deepEqual(diffDumps(before, after), [], "ZStack's rows are byte-identical to the snapshot");
      const full = await sim.dump();
      assert.deepEqual(ownedRows(full), [], "none of ours left");
      assert.deepEqual(full.Load_Balancer_Group, {}, "the cluster group is gone");
      assert.deepEqual(diffDumps(before, full), [], "and nothing else is left either");

      const again = await zovn("--nb", sim.nbRemotes.join(","));
      assert.equal(again.code, 0, again.err);
      assert.match(again.out, /nothing of ours in this database/);
    });

  test("the NB leader of a 3-member cluster is killed as the uninstall commits: it still leaves nothing of ours", async (t) => {
    const sim = await useZStackSim(t, { raft: true });
    const cluster = sim.nbCluster;
    assert.ok(cluster);
    const [foreignVars] = await sim.writer.transact([
      { op: "insert", table: "Chassis_Template_Var", row: { chassis: "192.168.200.11" } },
    ]);
    const before = await sim.snapshot();
    const nb = await connect(t, sim.nbRemotes);
    await pluginWrites(nb, sim, foreignVars as string);
    const leader = await cluster.leader();
    // The plan's summary is the last line before the commit: the leader dies then.
    const child = spawn(
      "node",
      ["--import", "tsx", "src/cli/zovn.ts", "uninstall", "--nb", sim.nbRemotes.join(",")],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    let killed = false;
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      if (!killed && / rows of ours in /.test(out)) {
        killed = true;
        leader.server.kill();
      }
    });
    child.stderr.on("data", (b: Buffer) => {
      err += b.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    assert.ok(killed, "the leader was killed during the run");
    t.diagnostic(`stderr: ${err.trim() || "(none)"}`);
    assert.equal(code, 0, `${out}\n${err}`);
    await leader.server.waitForExit();
    await leader.server.restart();
    await cluster.waitForQuorum(60_000);
    assert.deepEqual(diffDumps(before, await sim.snapshot()), [], "ZStack's rows are byte-identical");
    assert.deepEqual(ownedRows(await sim.dump()), []);
  });

  test("refuses, changing nothing, when a row not ours would go with ours or the group holds one not ours", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const nb = await connect(t, [srv.unix]);
    const txn = nb.transaction();
    // ZStack's ACL, held only by our port group: deleting the group would make the server delete it too.
    const acl = txn.insert("ACL", { direction: "to-lport", priority: 1, match: "ip", action: "allow" });
    txn.insert("Port_Group", {
      name: "zovn_pg",
      acls: [acl],
      external_ids: ownedIds("network-policy", "np/default/a"),
    });
    // A group with our group's name holding a load balancer not ours.
    const lb = txn.insert("Load_Balancer", { name: "zs-lb", vips: { "10.0.0.1:80": "10.0.0.2:80" } });
    txn.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP, load_balancer: [lb] });
    await txn.commit();
    const before = await srv.dump("OVN_Northbound");
    const res = await zovn("--nb", srv.unix);
    assert.equal(res.code, 3, `${res.out}\n${res.err}`);
    assert.match(res.out, /refuse {2}ACL .* is not ours, and only our rows refer to it/);
    assert.match(res.out, /refuse {2}Load_Balancer_Group .* holds load balancers that are not ours/);
    assert.deepEqual(diffDumps(before, await srv.dump("OVN_Northbound"), {}), []);
  });

  test("Standalone: the whole topology of ours goes, NB_Global stays", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    await srv.transactRaw("OVN_Northbound", [{ op: "insert", table: "NB_Global", row: {} }]);
    const nb = await connect(t, [srv.unix]);
    const txn = nb.transaction();
    txn.insert("Load_Balancer_Group", { name: CLUSTER_LB_GROUP });
    plan(nb.cache as never, nb.schema, txn as never, desiredTopology(NET, SUBNETS, NODES));
    await txn.commit();
    const before = await srv.dump("OVN_Northbound");
    const res = await zovn("--nb", srv.unix);
    assert.equal(res.code, 0, `${res.out}\n${res.err}`);
    const after = await srv.dump("OVN_Northbound");
    for (const [table, rows] of Object.entries(after))
      if (table !== "NB_Global") assert.deepEqual(rows, {}, `${table} is empty`);
    assert.deepEqual(after.NB_Global, before.NB_Global);
  });

  test("over ssl: with our client certificate it removes our rows; with another CA's it fails clearly, changing nothing", async (t) => {
    const dir = await mkdtemp("/tmp/zo-pki-");
    t.after(() => rm(dir, { recursive: true, force: true }));
    const pki = await createPki(dir);
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], ssl: pki });
    await srv.transactRaw("OVN_Northbound", [
      { op: "insert", table: "Address_Set", row: { name: "zovn_a", external_ids: owned("set/a") } },
    ]);
    const remote = srv.ssl as string;
    const other = await zovn(
      "--nb",
      remote,
      "--ovn-ssl-ca",
      pki.caCert,
      "--ovn-ssl-cert",
      pki.otherClientCert,
      "--ovn-ssl-key",
      pki.otherClientKey,
      "--timeout",
      "5",
    );
    assert.equal(other.code, 1, `${other.out}\n${other.err}`);
    assert.match(other.err, /^zovn: .*(certificate|TLS|ssl|alert)/im);
    t.diagnostic(`with another CA's certificate: ${other.err.trim()}`);
    assert.equal(
      Object.keys((await srv.dump("OVN_Northbound")).Address_Set ?? {}).length,
      1,
      "nothing changed",
    );
    const ok = await zovn(
      "--nb",
      remote,
      "--ovn-ssl-ca",
      pki.caCert,
      "--ovn-ssl-cert",
      pki.clientCert,
      "--ovn-ssl-key",
      pki.clientKey,
    );
    assert.equal(ok.code, 0, `${ok.out}\n${ok.err}`);
    assert.match(ok.out, /^delete {2}Address_Set \S+ "zovn_a"$/m);
    assert.deepEqual((await srv.dump("OVN_Northbound")).Address_Set, {});
  });

  test("bad arguments and an unreachable database: a clear error, no crash", async () => {
    const usage = await zovn();
    assert.equal(usage.code, 2);
    assert.match(usage.err, /--nb is required/);
    const bad = await zovn("--nb", "tcp:127.0.0.1");
    assert.equal(bad.code, 2);
    assert.match(bad.err, /invalid OVSDB remote "tcp:127.0.0.1"/);
    const ssl = await zovn("--nb", "ssl:127.0.0.1:6641");
    assert.equal(ssl.code, 2);
    assert.match(ssl.err, /ssl: remotes need --ovn-ssl-ca/);
    const gone = await zovn("--nb", "unix:/nonexistent/zovn-uninstall.sock", "--timeout", "5");
    assert.equal(gone.code, 1);
    assert.match(gone.err, /^zovn: /);
  });
});
