import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { WorkQueue } from "./workqueue.ts";

interface Step {
  key: string;
  /** Pause before the add, letting workers make progress in between. */
  pauseMs: number;
}

it("never runs one key twice at once, and runs every key after its last add", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({ key: fc.constantFrom("a", "b", "c", "d"), pauseMs: fc.integer({ min: 0, max: 3 }) }),
        {
          minLength: 1,
          maxLength: 40,
        },
      ),
      fc.integer({ min: 1, max: 4 }),
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 }),
      async (steps: Step[], workers, durations) => {
        const running = new Set<string>();
        const lastAdd = new Map<string, number>();
        const lastStart = new Map<string, number>();
        let clock = 0;
        let runs = 0;
        let overlap = false;
        const q = new WorkQueue({
          name: "prop",
          workers,
          reconcile: async (key) => {
            if (running.has(key)) overlap = true;
            running.add(key);
            lastStart.set(key, ++clock);
            await sleep(durations[runs++ % durations.length] as number);
            running.delete(key);
          },
        });
        q.start();
        for (const s of steps) {
          if (s.pauseMs > 0) await sleep(s.pauseMs);
          lastAdd.set(s.key, ++clock);
          q.add(s.key);
        }
        while (q.depth > 0 || q.inFlight > 0) await sleep(1);
        await q.shutdown();
        assert.equal(overlap, false, "a key ran on two workers at once");
        for (const [key, added] of lastAdd) {
          assert.ok(
            (lastStart.get(key) ?? 0) > added,
            `${key} was added at ${added} but not reconciled after`,
          );
        }
      },
    ),
    { numRuns: 60 },
  );
});
