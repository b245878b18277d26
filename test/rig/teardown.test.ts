import assert from "node:assert/strict";
import { test } from "node:test";
import { teardownFor, teardownStack } from "./teardown.ts";

function hookRecorder() {
  const hooks: (() => unknown)[] = [];
  return { hooks, after: (fn: () => unknown) => void hooks.push(fn) };
}

test("a teardown stack runs its steps last added first, from one after hook", async () => {
  const t = hookRecorder();
  const td = teardownStack(t);
  const order: string[] = [];
  td.after(() => order.push("apiserver"));
  td.after(async () => {
    await new Promise((r) => setTimeout(r, 5));
    order.push("client");
  });
  td.after(() => order.push("controller"));
  assert.equal(t.hooks.length, 1);
  await t.hooks[0]?.();
  assert.deepEqual(order, ["controller", "client", "apiserver"]);
});

test("a failing step does not keep the steps after it from running, and every failure is reported", async () => {
  const t = hookRecorder();
  const td = teardownStack(t);
  const ran: string[] = [];
  td.after(() => ran.push("server"));
  td.after(() => {
    throw new Error("proxy close failed");
  });
  td.after(() => Promise.reject(new Error("client close failed")));
  td.after(() => ran.push("watcher"));
  await assert.rejects(td.run(), (e: unknown) => {
    assert.ok(e instanceof AggregateError);
    assert.deepEqual(
      e.errors.map((x: Error) => x.message),
      ["client close failed", "proxy close failed"],
    );
    return true;
  });
  assert.deepEqual(ran, ["watcher", "server"]);
  // The test's own hook then reports the same outcome, and runs nothing twice.
  await assert.rejects(Promise.resolve(t.hooks[0]?.()), AggregateError);
  assert.deepEqual(ran, ["watcher", "server"]);
  assert.throws(() => td.after(() => {}), /already ran/);
});

test("rig helpers given the same test share its stack, and one given a stack joins it", async () => {
  const t = hookRecorder();
  const order: string[] = [];
  teardownFor(t).after(() => order.push("apiserver"));
  const stack = teardownFor(t);
  stack.after(() => order.push("proxy"));
  teardownFor(stack).after(() => order.push("controller"));
  assert.equal(t.hooks.length, 1, "one after hook for the whole test");
  await t.hooks[0]?.();
  assert.deepEqual(order, ["controller", "proxy", "apiserver"]);
});
