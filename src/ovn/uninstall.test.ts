import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cache } from "../ovsdb/cache.ts";
import { nbModel } from "../ovsdb/models/nb.generated.ts";
import { Transaction } from "../ovsdb/transaction.ts";
import { CONTROLLER, ID_KEY, OWNER_KEY } from "./ownership.ts";
import { CLUSTER_IP_LB_GROUP, CLUSTER_LB_GROUP } from "./topology.ts";
import { applyUninstall, describePlan, planUninstall } from "./uninstall.ts";

const schema = nbModel.schema;
const u = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const ref = (n: number) => ["uuid", u(n)];
const refs = (...ns: number[]) => ["set", ns.map(ref)];
const map = (m: Record<string, string>) => ["map", Object.entries(m)];
const owned = (id: string) => map({ [OWNER_KEY]: CONTROLLER, [ID_KEY]: id });

/** A cache holding the given rows: table -> uuid number -> wire columns. */
function cacheOf(rows: Record<string, Record<number, Record<string, unknown>>>): Cache {
  const cache = new Cache(schema);
  const updates: Record<string, Record<string, unknown>> = {};
  for (const [table, byN] of Object.entries(rows)) {
    updates[table] = {};
    for (const [n, row] of Object.entries(byN)) updates[table][u(Number(n))] = { initial: row };
  }
  cache.apply(updates, 2);
  return cache;
}

const txnOf = () => new Transaction(schema, () => Promise.reject(new Error("not sent in unit tests")));

describe("planUninstall", () => {
  test("deletes rows ours by the owner key, unlinks them from rows not ours, leaves look-alikes alone", () => {
    const cache = cacheOf({
      Logical_Switch: {
        1: { name: "zstack-net", ports: refs(10, 11), acls: ref(20) },
        2: { name: "zovn-join" }, // our name, not ours
        3: { name: "zovn-subnet-a", external_ids: map({ [ID_KEY]: "subnet/a" }) }, // our id key, no owner
        4: { name: "zovn-subnet-b", external_ids: owned("subnet/b"), ports: ref(12) },
      },
      Logical_Switch_Port: {
        10: { name: "vnic1.0_aa" },
        11: { name: "default_web", external_ids: owned("pod/default/web") },
        12: { name: "b_pod", external_ids: owned("pod/b/pod") },
      },
      ACL: {
        20: { direction: "to-lport", priority: 1, match: "ip", action: "allow", external_ids: owned("acl") },
      },
      Address_Set: { 30: { name: "zovn_x", external_ids: map({ [OWNER_KEY]: `${CONTROLLER}-other` }) } },
    });
    const plan = planUninstall(cache, schema);
    assert.deepEqual(plan.refusals, []);
    assert.deepEqual(
      plan.deletes.map((d) => `${d.table} ${d.uuid}`),
      [
        `ACL ${u(20)}`,
        `Logical_Switch ${u(4)}`,
        `Logical_Switch_Port ${u(11)}`,
        `Logical_Switch_Port ${u(12)}`,
      ],
    );
    assert.deepEqual(describePlan(plan).slice(0, 2), [
      `unlink  Logical_Switch ${u(1)} "zstack-net" acls -= ${u(20)}`,
      `unlink  Logical_Switch ${u(1)} "zstack-net" ports -= ${u(11)}`,
    ]);
    assert.equal(plan.references.length, 2, "our own switch's reference to our port goes with the switch");
    const txn = txnOf();
    applyUninstall(txn, plan);
    const deletes = txn.ops.filter((o) => o.op === "delete");
    assert.equal(deletes.length, 4);
    for (const d of deletes)
      assert.deepEqual((d.where as unknown[])[1], [
        "external_ids",
        "includes",
        map({ [OWNER_KEY]: CONTROLLER }),
      ]);
    assert.deepEqual(
      txn.ops.filter((o) => o.op === "mutate").map((o) => o.mutations),
      [[["acls", "delete", ref(20)]], [["ports", "delete", ref(11)]]],
    );
  });

  test("the cluster load balancer group goes by name only while it holds nothing foreign", () => {
    const ours = planUninstall(
      cacheOf({
        Load_Balancer: { 1: { name: "svc", external_ids: owned("default/svc/tcp") } },
        Load_Balancer_Group: { 2: { name: CLUSTER_LB_GROUP, load_balancer: ref(1) } },
        Logical_Switch: { 3: { name: "zstack-net", load_balancer_group: ref(2), load_balancer: ref(1) } },
      }),
      schema,
    );
    assert.deepEqual(ours.refusals, []);
    assert.deepEqual(
      ours.deletes.map((d) => [d.table, d.by]),
      [
        ["Load_Balancer", "owner"],
        ["Load_Balancer_Group", "name"],
      ],
    );
    assert.deepEqual(
      ours.references.map((r) => r.column),
      ["load_balancer", "load_balancer_group"],
    );
    const txn = txnOf();
    applyUninstall(txn, ours);
    assert.deepEqual(txn.ops.at(-1)?.where, [
      ["_uuid", "==", ref(2)],
      ["name", "==", CLUSTER_LB_GROUP],
    ]);
    // The group goes only while it holds exactly what was planned: a load balancer someone else put in after the
    // plan keeps its group (the transaction fails instead).
    assert.deepEqual(txn.ops[0], {
      op: "wait",
      table: "Load_Balancer_Group",
      where: [["_uuid", "==", ref(2)]],
      columns: ["load_balancer"],
      until: "==",
      rows: [{ load_balancer: ref(1) }],
      timeout: 0,
    });

    const foreign = planUninstall(
      cacheOf({
        Load_Balancer: { 1: { name: "zs-lb" } },
        Load_Balancer_Group: { 2: { name: CLUSTER_LB_GROUP, load_balancer: ref(1) } },
      }),
      schema,
    );
    assert.equal(foreign.deletes.length, 0);
    assert.match(foreign.refusals[0] ?? "", /holds load balancers that are not ours/);
    assert.throws(() => applyUninstall(txnOf(), foreign), /uninstall refused/);
  });

  test("the cluster-IP group ZStack's switches refer to goes by its name too, and the switch's reference with it", () => {
    const plan = planUninstall(
      cacheOf({
        Load_Balancer: { 1: { name: "svc", external_ids: owned("default/svc/tcp") } },
        Load_Balancer_Group: {
          2: { name: CLUSTER_LB_GROUP, load_balancer: ref(1) },
          4: { name: CLUSTER_IP_LB_GROUP, load_balancer: ref(1) },
        },
        Logical_Switch: { 3: { name: "zstack-net", load_balancer_group: ref(4) } },
      }),
      schema,
    );
    assert.deepEqual(plan.refusals, []);
    assert.deepEqual(
      plan.deletes.map((d) => [d.table, d.uuid, d.by]).sort(),
      [
        ["Load_Balancer", u(1), "owner"],
        ["Load_Balancer_Group", u(2), "name"],
        ["Load_Balancer_Group", u(4), "name"],
      ].sort(),
    );
    assert.deepEqual(
      plan.references.map((r) => [r.table, r.column, r.uuids]),
      [["Logical_Switch", "load_balancer_group", [u(4)]]],
    );
    const txn = txnOf();
    applyUninstall(txn, plan);
    const groupDeletes = txn.ops.filter((o) => o.op === "delete" && o.table === "Load_Balancer_Group");
    assert.deepEqual(
      groupDeletes.map((o) => (o as { where: unknown[] }).where[1]).sort(),
      [
        ["name", "==", CLUSTER_IP_LB_GROUP],
        ["name", "==", CLUSTER_LB_GROUP],
      ].sort(),
    );
  });

  test("refuses when a row not ours is held only by ours; not when a row not ours holds it too", () => {
    const acl = { direction: "to-lport", priority: 1, match: "ip", action: "allow" };
    const only = planUninstall(
      cacheOf({
        ACL: { 1: acl },
        Port_Group: { 2: { name: "zovn_pg", acls: ref(1), external_ids: owned("np") } },
      }),
      schema,
    );
    assert.match(
      only.refusals[0] ?? "",
      new RegExp(`^ACL ${u(1)} "" is not ours, and only our rows refer to it`),
    );
    const shared = planUninstall(
      cacheOf({
        ACL: { 1: acl },
        Port_Group: {
          2: { name: "zovn_pg", acls: ref(1), external_ids: owned("np") },
          3: { name: "zs", acls: ref(1) },
        },
      }),
      schema,
    );
    assert.deepEqual(shared.refusals, []);
    assert.deepEqual(
      shared.deletes.map((d) => d.table),
      ["Port_Group"],
    );
  });

  test("removes the template variables our load balancers use from a row not ours, and only those", () => {
    const plan = planUninstall(
      cacheOf({
        Load_Balancer: {
          1: { name: "t", vips: map({ "^zsvc_vip:80": "^zsvc_be" }), external_ids: owned("default/t/tcp") },
          2: { name: "zs", vips: map({ "^zsvc_zs:80": "10.0.0.1:80" }) },
        },
        Chassis_Template_Var: {
          3: {
            chassis: "hv1",
            variables: map({ zsvc_vip: "10.96.0.1", zsvc_be: "10.0.0.2:80", zsvc_zs: "1", own: "x" }),
          },
        },
      }),
      schema,
    );
    assert.deepEqual(
      plan.entries.map((e) => e.entries),
      [{ zsvc_be: "10.0.0.2:80", zsvc_vip: "10.96.0.1" }],
    );
    assert.deepEqual(
      describePlan(plan)[0],
      `unset   Chassis_Template_Var ${u(3)} "hv1" variables -= "zsvc_be" "zsvc_vip"`,
    );
  });

  test("a Chassis_Template_Var row of ours that others added variables to is handed over, not deleted", () => {
    const plan = planUninstall(
      cacheOf({
        Load_Balancer: {
          1: { name: "t", vips: map({ "^zsvc_vip:80": "^zsvc_be" }), external_ids: owned("default/t/tcp") },
        },
        Chassis_Template_Var: {
          2: {
            chassis: "hv1",
            variables: map({ zsvc_vip: "10.96.0.1", zsvc_be: "10.0.0.2:80", zs_x: "1" }),
            external_ids: map({ [OWNER_KEY]: CONTROLLER, [ID_KEY]: "chassis/hv1", "zstack.sim/role": "x" }),
          },
          3: {
            chassis: "hv2",
            variables: map({ zsvc_vip: "10.96.0.1" }),
            external_ids: owned("chassis/hv2"),
          },
        },
      }),
      schema,
    );
    assert.deepEqual(plan.refusals, []);
    assert.deepEqual(
      plan.deletes.map((d) => `${d.table} ${d.uuid}`),
      [`Chassis_Template_Var ${u(3)}`, `Load_Balancer ${u(1)}`],
      "a row with only our variables goes; the shared one stays",
    );
    assert.deepEqual(
      plan.entries.map((e) => [e.uuid, e.column, e.entries]),
      [
        [u(2), "variables", { zsvc_be: "10.0.0.2:80", zsvc_vip: "10.96.0.1" }],
        [u(2), "external_ids", { [ID_KEY]: "chassis/hv1", [OWNER_KEY]: CONTROLLER }],
      ],
    );
    const txn = txnOf();
    applyUninstall(txn, plan);
    assert.ok(
      !txn.ops.some(
        (o) =>
          o.op === "delete" && o.table === "Chassis_Template_Var" && JSON.stringify(o.where).includes(u(2)),
      ),
    );
  });

  test("a database without rows of ours gives an empty plan", () => {
    const plan = planUninstall(cacheOf({ Logical_Switch: { 1: { name: "zstack-net" } } }), schema);
    assert.equal(plan.empty, true);
    assert.deepEqual(describePlan(plan), []);
  });
});
