import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { CoalescedRunner } from "./coalesced-runner.ts";

test("nothing runs before enable(); calls in one window are one run; a call during a run makes one more after it", async () => {
  let runs = 0;
  let release: (() => void) | undefined;
  const r = new CoalescedRunner({
    run: async () => {
      runs++;
      if (runs === 2) await new Promise<void>((res) => (release = res));
    },
    onError: () => assert.fail("no error expected"),
    coalesceMs: 5,
  });
  r.schedule();
  await delay(20);
  assert.equal(runs, 0);
  r.enable();
  for (let i = 0; i < 5; i++) r.schedule();
  await r.settled();
  assert.equal(runs, 1);
  r.schedule();
  while (!release) await delay(1);
  assert.equal(r.running, true);
  r.schedule();
  r.schedule();
  release();
  await r.settled();
  assert.equal(runs, 3, "the calls during the second run became one third run");
  await r.stop();
  r.schedule(0);
  await delay(20);
  assert.equal(runs, 3, "nothing after stop()");
});

test("a failed run is reported and tried again until it succeeds", async () => {
  let runs = 0;
  const errors: string[] = [];
  const r = new CoalescedRunner({
    run: async () => {
      runs++;
      if (runs < 3) throw new Error(`fail ${runs}`);
    },
    onError: (e) => errors.push(e.message),
    coalesceMs: 1,
    retryMs: 5,
  });
  r.enable();
  r.schedule();
  while (runs < 3) await delay(5);
  await r.settled();
  assert.deepEqual(errors, ["fail 1", "fail 2"]);
  await r.stop();
});
