import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { OrphanRowError, TransactionError, ValueError } from "./errors.ts";
import { type NbTables, nbModel } from "./models/nb.generated.ts";
import { insertUuidProbe, insertUuidProbeResult, namedUuidMentions, Transaction } from "./transaction.ts";

const U = "1b4e28ba-2fa1-4d2c-883f-0016d3cca427";
const txn = () =>
  new Transaction<NbTables>(nbModel.schema, () => Promise.reject(new Error("not sent in unit tests")));
const duplicate = {
  error: "duplicate uuid",
  details:
    "This UUID would duplicate a UUID already present within the table or deleted within the same transaction.",
  syntax: `"${U}"`,
};

test("an insert with a chosen uuid carries it as the op's uuid member, next to its uuid-name", () => {
  const t = txn();
  const ref = t.insert("Load_Balancer", { name: "a" }, "lb", { uuid: U.toUpperCase() });
  assert.equal(ref.name, "lb");
  assert.deepEqual(t.ops[0], {
    op: "insert",
    table: "Load_Balancer",
    uuid: U,
    row: { name: "a" },
    "uuid-name": "lb",
  });
  const plain = txn();
  plain.insert("Load_Balancer", { name: "a" }, "lb");
  assert.equal("uuid" in (plain.ops[0] as object), false, "no uuid member unless asked for");
});

test("an insert with a malformed uuid is refused before anything is sent", () => {
  assert.throws(() => txn().insert("Load_Balancer", { name: "a" }, undefined, { uuid: "zz" }), ValueError);
});

test("a duplicate uuid on a chosen-uuid insert means the change was applied already", () => {
  const t = txn();
  t.insert("Load_Balancer", { name: "a" }, "lb", { uuid: U });
  t.mutate(
    "Load_Balancer_Group",
    [["_uuid", "==", "2b4e28ba-2fa1-4d2c-883f-0016d3cca427"]],
    [["load_balancer", "insert", [t.insert("Load_Balancer", { name: "b" }, "lb2")]]],
  );
  // The server's reply: the failing insert, then nothing for the operations it did not run.
  const r = t.interpret([duplicate, null, null]);
  assert.equal(r.alreadyApplied, true);
  assert.equal(r.uuids.size, 0);
});

test("a duplicate uuid on an insert without a chosen uuid is an error, as is any other failure", () => {
  const t = txn();
  t.insert("Load_Balancer", { name: "a" }, "lb");
  assert.throws(() => t.interpret([duplicate]), TransactionError);
  const c = txn();
  c.insert("Load_Balancer", { name: "a" }, "lb", { uuid: U });
  assert.throws(
    () => c.interpret([{ uuid: ["uuid", U] }, { error: "constraint violation", details: "x" }]),
    TransactionError,
  );
});

test("a committed chosen-uuid insert reports the uuid under its name", () => {
  const t = txn();
  const ref = t.insert("Load_Balancer", { name: "a" }, "lb", { uuid: U });
  const r = t.interpret([{ uuid: ["uuid", U] }]);
  assert.equal(r.alreadyApplied, false);
  assert.equal(r.uuid(ref), U);
});

test("the insert-uuid probe inserts with a fresh uuid and aborts, and reads the server's answer", () => {
  const ops = insertUuidProbe("Load_Balancer");
  assert.equal(ops.length, 2);
  assert.equal(ops[0]?.op, "insert");
  assert.match(String(ops[0]?.uuid), /^[0-9a-f-]{36}$/);
  assert.notEqual(insertUuidProbe("Load_Balancer")[0]?.uuid, ops[0]?.uuid);
  assert.deepEqual(ops[1], { op: "abort" });
  // ovsdb-server 3.1: the insert ran, the abort undid it.
  assert.equal(insertUuidProbeResult([{ uuid: ["uuid", U] }, { error: "aborted", details: "" }]), true);
  // An older server does not know the member.
  assert.equal(
    insertUuidProbeResult([
      {
        error: "syntax error",
        details: "Parsing ovsdb operation 1 of 2 failed: Member 'uuid' is present but not allowed here.",
      },
    ]),
    false,
  );
  assert.equal(insertUuidProbeResult(null), false);
});

test("the orphan check finds a uuid-name wherever the JSON text of an operation holds it", () => {
  // The old check matched ["named-uuid","name"] in JSON.stringify(op); the walk must find the same operations.
  const name = fc.constantFrom("row1", "row2", "_x", "bad-name", "");
  const pair = name.map((n) => ["named-uuid", n] as unknown);
  const leaf = fc.oneof(
    fc.string({ maxLength: 4 }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    pair,
    name,
  );
  const value = fc.letrec((tie) => ({
    v: fc.oneof(
      { depthSize: "small" },
      leaf,
      fc.array(tie("v"), { maxLength: 4 }),
      fc.dictionary(fc.constantFrom("row", "where", "named-uuid", "x"), tie("v"), { maxKeys: 3 }),
    ),
  })).v;
  fc.assert(
    fc.property(fc.array(value, { maxLength: 4 }), (ops) => {
      const walked = new Map<string, number[]>();
      ops.forEach((op, i) => {
        namedUuidMentions(op, i, walked);
      });
      const matched = new Map<string, number[]>();
      ops.forEach((op, i) => {
        for (const m of (JSON.stringify(op) ?? "").matchAll(/\["named-uuid","([A-Za-z_][A-Za-z0-9_]*)"\]/g)) {
          const list = matched.get(m[1] as string) ?? [];
          if (list[list.length - 1] !== i) list.push(i);
          matched.set(m[1] as string, list);
        }
      });
      assert.deepEqual(walked, matched);
    }),
  );
});

test("an inserted port that only a later mutate refers to is no orphan; one nothing refers to is", () => {
  const t = txn();
  const p = t.insert("Logical_Switch_Port", { name: "p" });
  t.mutate("Logical_Switch", [["name", "==", "ls"]], [["ports", "insert", [p]]]);
  t.checkReferences();
  const lone = txn();
  lone.insert("Logical_Switch_Port", { name: "q" });
  assert.throws(() => lone.checkReferences(), OrphanRowError);
});
