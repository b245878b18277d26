import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type ReconcileOutcome, TerminalError, WorkQueue, type WorkQueueOptions } from "./workqueue.ts";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

async function until(what: string, check: () => boolean, timeoutMs = 3000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

function queue(opts: Partial<WorkQueueOptions> & Pick<WorkQueueOptions, "reconcile">): WorkQueue {
  const q = new WorkQueue({ name: "test", ...opts });
  q.start();
  return q;
}

describe("WorkQueue", () => {
  it("reconciles a key added many times while queued only once", async () => {
    const runs: string[] = [];
    const gate = deferred();
    const q = queue({
      reconcile: async (key) => {
        runs.push(key);
        if (key === "block") await gate.promise;
      },
    });
    q.add("block"); // occupies the only worker, so the next adds pile up in the queue
    for (let i = 0; i < 100; i++) q.add("a");
    q.add("b");
    q.add("a");
    assert.equal(q.depth, 2);
    gate.resolve();
    await until("all reconciled", () => runs.length === 3);
    await q.shutdown();
    assert.deepEqual(runs, ["block", "a", "b"]);
  });

  it("never reconciles one key concurrently; a key added during its reconcile runs again afterwards", async () => {
    let running = 0;
    let maxConcurrent = 0;
    let runs = 0;
    const gate = deferred();
    const q = queue({
      workers: 4,
      reconcile: async () => {
        running++;
        maxConcurrent = Math.max(maxConcurrent, running);
        runs++;
        if (runs === 1) await gate.promise;
        running--;
      },
    });
    q.add("k");
    await until("first run started", () => runs === 1);
    q.add("k");
    q.add("k");
    await sleep(20);
    assert.equal(runs, 1, "re-added key waits for the running reconcile");
    gate.resolve();
    await until("second run", () => runs === 2);
    await sleep(20);
    await q.shutdown();
    assert.equal(runs, 2, "the adds during the run collapse into one more run");
    assert.equal(maxConcurrent, 1);
  });

  it("runs different keys in parallel up to the number of workers", async () => {
    let running = 0;
    let peak = 0;
    const gate = deferred();
    const q = queue({
      workers: 3,
      reconcile: async () => {
        running++;
        peak = Math.max(peak, running);
        await gate.promise;
        running--;
      },
    });
    for (const k of ["a", "b", "c", "d", "e"]) q.add(k);
    await until("three in flight", () => running === 3);
    await sleep(20);
    assert.equal(peak, 3);
    assert.equal(q.depth, 2);
    gate.resolve();
    await until("all done", () => running === 0 && q.depth === 0);
    await q.shutdown();
  });

  it("retries a failing key with exponentially growing delays, and success resets the backoff", async () => {
    const at: number[] = [];
    const q = queue({
      baseDelayMs: 20,
      reconcile: (key) => {
        at.push(Date.now());
        if (at.length <= 4) throw new Error(`transient failure of ${key}`);
      },
    });
    q.add("k");
    await until("fifth attempt succeeds", () => at.length === 5);
    const gaps = at.slice(1).map((t, i) => t - (at[i] as number));
    // 20, 40, 80, 160 ms; timers fire late, never early.
    for (const [i, expected] of [20, 40, 80, 160].entries()) {
      const gap = gaps[i] as number;
      assert.ok(gap >= expected - 2 && gap < expected + 60, `gap ${i} was ${gap} ms, expected ~${expected}`);
    }
    await sleep(10);
    assert.equal(q.numRequeues("k"), 0, "success forgets the failures");
    await q.shutdown();
  });

  it("caps the backoff at maxDelayMs", () => {
    const q = new WorkQueue({ name: "cap", baseDelayMs: 5, maxDelayMs: 1000, reconcile: () => {} });
    const delays = Array.from({ length: 15 }, () => q.addRateLimited("k"));
    assert.deepEqual(delays.slice(0, 4), [5, 10, 20, 40]);
    assert.equal(Math.max(...delays), 1000);
    assert.equal(delays.at(-1), 1000);
    q.forget("k");
    assert.equal(q.addRateLimited("k"), 5);
    return q.shutdown();
  });

  it("does not retry a TerminalError", async () => {
    let runs = 0;
    const outcomes: ReconcileOutcome[] = [];
    const q = queue({
      baseDelayMs: 1,
      reconcile: () => {
        runs++;
        throw new TerminalError("spec.cidr is invalid");
      },
      hooks: { onReconciled: (_k, _ms, outcome) => outcomes.push(outcome) },
    });
    q.add("bad");
    await until("ran", () => runs === 1);
    await sleep(50);
    assert.equal(runs, 1);
    assert.deepEqual(outcomes, ["terminal"]);
    assert.equal(q.delayedCount, 0);
    await q.shutdown();
  });

  it("requeueAfterMs runs the key again after the delay without counting a failure", async () => {
    const at: number[] = [];
    const q = queue({
      reconcile: () => {
        at.push(Date.now());
        return at.length < 3 ? { requeueAfterMs: 30 } : undefined;
      },
    });
    q.add("periodic");
    await until("three runs", () => at.length === 3);
    assert.ok((at[1] as number) - (at[0] as number) >= 28);
    assert.equal(q.numRequeues("periodic"), 0);
    await q.shutdown();
  });

  it("of several addAfter delays for one key the earliest wins, and only one run results", async () => {
    const runs: number[] = [];
    const start = Date.now();
    const q = queue({ reconcile: () => void runs.push(Date.now() - start) });
    q.addAfter("k", 300);
    q.addAfter("k", 40);
    q.addAfter("k", 200);
    await until("ran", () => runs.length === 1);
    await sleep(350);
    assert.equal(runs.length, 1);
    assert.ok((runs[0] as number) < 200);
    await q.shutdown();
  });

  it("shutdown waits for in-flight reconciles, drops queued and delayed keys, and ignores later adds", async () => {
    const finished: string[] = [];
    const gate = deferred();
    const q = queue({
      reconcile: async (key) => {
        if (key === "slow") await gate.promise;
        finished.push(key);
      },
    });
    q.add("slow");
    q.add("queued");
    q.addAfter("delayed", 10);
    await until("slow started", () => q.inFlight === 1);
    const done = q.shutdown();
    q.add("late");
    let shutDown = false;
    void done.then(() => {
      shutDown = true;
    });
    await sleep(30);
    assert.equal(shutDown, false, "shutdown waits for the in-flight reconcile");
    gate.resolve();
    await done;
    assert.deepEqual(finished, ["slow"]);
  });

  it("shutdown with drain reconciles what was queued first", async () => {
    const finished: string[] = [];
    const gate = deferred();
    const q = queue({
      workers: 2,
      reconcile: async (key) => {
        if (key === "slow") await gate.promise;
        finished.push(key);
      },
    });
    q.add("slow");
    await until("slow started", () => q.inFlight === 1);
    q.add("slow"); // re-added while running
    const done = q.shutdown({ drain: true });
    gate.resolve();
    await done;
    assert.deepEqual(finished, ["slow", "slow"]);
  });

  it("shutdown's timeout aborts the signal a long reconcile is given", async () => {
    let aborted = false;
    const q = queue({
      reconcile: (_key, signal) =>
        new Promise<void>((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
            resolve();
          });
        }),
    });
    q.add("forever");
    await until("started", () => q.inFlight === 1);
    const t0 = Date.now();
    await q.shutdown({ timeoutMs: 50 });
    assert.ok(aborted);
    assert.ok(Date.now() - t0 < 1000);
  });

  it("reports adds, depth, retries and durations to its hooks", async () => {
    const seen = {
      adds: 0,
      depths: [] as number[],
      retries: [] as number[],
      outcomes: [] as ReconcileOutcome[],
    };
    let fail = true;
    const gate = deferred();
    const q = queue({
      baseDelayMs: 1,
      reconcile: async (key) => {
        if (key === "block") await gate.promise;
        if (key === "flaky" && fail) {
          fail = false;
          throw new Error("once");
        }
      },
      hooks: {
        onAdd: () => seen.adds++,
        onDepth: (d) => seen.depths.push(d),
        onRetry: (_k, attempt) => seen.retries.push(attempt),
        onReconciled: (_k, ms, outcome) => {
          assert.ok(ms >= 0);
          seen.outcomes.push(outcome);
        },
      },
    });
    q.add("block");
    q.add("flaky");
    q.add("flaky");
    gate.resolve();
    await until("flaky succeeded", () => seen.outcomes.length === 3);
    await q.shutdown();
    assert.ok(seen.adds >= 4, "every add is counted, deduplicated or not (the retry is one more)");
    assert.ok(seen.depths.includes(1));
    assert.deepEqual(seen.retries, [1]);
    assert.deepEqual(seen.outcomes, ["success", "error", "success"]);
  });
});
