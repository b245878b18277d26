import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { identify, isAlive, parseStat, terminate } from "./process-table.ts";

test("stat parsing survives a command name with spaces and parentheses", () => {
  const line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
  const info = parseStat(4242, line);
  assert.equal(info.comm, "a (b) c");
  assert.equal(info.state, "S");
  assert.equal(info.ppid, 1);
  assert.equal(info.startTime, 987654);
});

test("a process is identified by PID and start time, and terminate ends it", async () => {
  const child = spawn("sleep", ["60"], { stdio: "ignore" });
  const id = identify(child.pid as number);
  assert.ok(id && isAlive(id));
  assert.equal(isAlive({ pid: id.pid, startTime: id.startTime + 1 }), false, "same PID, other start time");
  const exited = new Promise((r) => child.once("exit", r));
  await terminate([id], 2000);
  await exited;
  assert.equal(isAlive(id), false);
});
