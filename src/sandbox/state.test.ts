import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { layoutFor } from "./layout.ts";
import { identify } from "./process-table.ts";
import { acquireLock } from "./state.ts";

const base = mkdtempSync(join(tmpdir(), "zo-lock-"));
after(() => rmSync(base, { recursive: true, force: true }));

test("the lock keeps a second command out while its holder lives, and is released", () => {
  const layout = layoutFor("one", base);
  const lock = acquireLock(layout);
  assert.throws(() => acquireLock(layout), /another sandbox command \(pid \d+\) is working on/);
  lock.release();
  acquireLock(layout).release();
});

test("a lock left by a process that is gone is taken over", async () => {
  const layout = layoutFor("two", base);
  // A short-lived child stands in for a killed `up`: its identity is recorded, then it exits.
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 50)"]);
  const holder = identify(child.pid as number);
  assert.ok(holder, "the child's identity was read while it ran");
  await new Promise((r) => child.once("exit", r));
  acquireLock(layout).release(); // creates the directory
  writeFileSync(layout.lockFile, JSON.stringify(holder));
  const lock = acquireLock(layout);
  lock.release();
});
