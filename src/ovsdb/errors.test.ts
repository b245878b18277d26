import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ConnectionClosedError,
  ConstraintViolationError,
  certainlyNotApplied,
  NotLeaderTransactionError,
  OrphanRowError,
  TimeoutError,
  TransactionError,
  ValueError,
  WaitFailedError,
} from "./errors.ts";

test("a refusal by the server or a transaction never sent is known not applied; a lost connection or a timeout is not", () => {
  const refused = [
    new TransactionError("x", []),
    new ConstraintViolationError("constraint violation", []),
    new WaitFailedError("timed out", []),
    new NotLeaderTransactionError("not leader", []),
    new ValueError("bad value"),
    new OrphanRowError("Logical_Switch_Port", "row1"),
  ];
  for (const e of refused) assert.equal(certainlyNotApplied(e), true, e.name);
  const unknown = [new ConnectionClosedError("reset"), new TimeoutError("late"), new Error("other"), "text"];
  for (const e of unknown) assert.equal(certainlyNotApplied(e), false, String(e));
});

test("a unique-index refusal is recognised by its table and column, as ovsdb-server words it", () => {
  const e = new ConstraintViolationError("constraint violation", [
    {
      index: 2,
      error: "constraint violation",
      details:
        'Transaction causes multiple rows in "Logical_Switch_Port" table to have identical values (ns_p-1) for index on column "name".  First row, with UUID 9cb3f82f-a265-4ebe-b69c-cb7ac900a857, was inserted by this transaction.  Second row, with UUID 3d7f10da-c5ee-4d04-9416-f270c4c87368, existed in the database before this transaction and was not modified by the transaction.',
    },
  ]);
  assert.equal(e.violatesIndex("Logical_Switch_Port", "name"), true);
  assert.equal(e.violatesIndex("Port_Group", "name"), false);
  assert.equal(e.violatesIndex("Logical_Switch_Port", "tag"), false);
  assert.equal(
    new ConstraintViolationError("constraint violation", [{ index: 0, error: "x" }]).violatesIndex(
      "Logical_Switch_Port",
      "name",
    ),
    false,
  );
});
