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
