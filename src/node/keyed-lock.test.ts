import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KeyedLock } from "./keyed-lock.ts";

describe("keyed lock", () => {
  test("runs operations on one key one after another, even when one fails", async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    const op = (name: string, ms: number, fail = false) =>
      lock.run("k", async () => {
        log.push(`${name}:start`);
        await sleep(ms);
        log.push(`${name}:end`);
        if (fail) throw new Error(name);
        return name;
      });
    const results = await Promise.allSettled([op("a", 20, true), op("b", 1), op("c", 1)]);
    assert.deepEqual(log, ["a:start", "a:end", "b:start", "b:end", "c:start", "c:end"]);
    assert.equal(results[0]?.status, "rejected");
    assert.equal(results[2]?.status === "fulfilled" && results[2].value, "c");
  });

  test("runs different keys in parallel and forgets a key once it is idle", async () => {
    const lock = new KeyedLock();
    let running = 0;
    let peak = 0;
    const op = (key: string) =>
      lock.run(key, async () => {
        peak = Math.max(peak, ++running);
        await sleep(10);
        running--;
      });
    const all = Promise.all([op("a"), op("b"), op("c")]);
    assert.deepEqual([...lock.busyKeys].sort(), ["a", "b", "c"]);
    await all;
    assert.equal(peak, 3);
    await sleep(0);
    assert.equal(lock.isBusy("a"), false);
  });
});
