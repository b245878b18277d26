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
    const events: string[] = [];
    let attempts = 0;
    const q = queue({
      baseDelayMs: 20,
      reconcile: (key) => {
        attempts++;
        events.push(`run ${attempts}`);
        if (attempts <= 4) throw new Error(`transient failure of ${key}`);
      },
      hooks: { onRetry: (_key, attempt, delayMs) => events.push(`retry ${attempt} after ${delayMs}`) },
    });
    q.add("k");
    await until("fifth attempt succeeds", () => attempts === 5 && q.inFlight === 0);
    // Each failure schedules the next attempt with twice the previous delay; the delays are the queue's
    // decisions, how late the timers actually fire does not matter here.
    assert.deepEqual(events, [
      "run 1",
      "retry 1 after 20",
      "run 2",
      "retry 2 after 40",
      "run 3",
      "retry 3 after 80",
      "run 4",
      "retry 4 after 160",
      "run 5",
    ]);
    assert.equal(q.numRequeues("k"), 0, "success forgets the failures");
    await q.shutdown();
  });

  it("reports a reconcile running longer than the limit as stalled, and forgets it once it ends", async () => {
    const gate = deferred();
    const q = queue({
      workers: 2,
      reconcile: async (key) => {
        if (key === "wedged") await gate.promise;
      },
    });
    q.add("wedged");
    q.add("quick");
    await until("wedged running alone", () => q.inFlight === 1);
    assert.deepEqual(q.stalled(60_000), [], "not stalled yet");
    const later = Date.now() + 120_000;
    assert.deepEqual(
      q.stalled(60_000, later).map((s) => s.key),
      ["wedged"],
    );
    assert.ok((q.stalled(60_000, later)[0]?.runningMs ?? 0) > 60_000);
    gate.resolve();
    await until("done", () => q.inFlight === 0);
    assert.deepEqual(q.stalled(60_000, later), []);
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
    let runs = 0;
    const waitingAfterRun: number[] = [];
    const q: WorkQueue = queue({
      reconcile: () => {
        runs++;
        return runs < 3 ? { requeueAfterMs: 30 } : undefined;
      },
      // Called once the run's outcome is applied: a requeued key waits for its delay, not in the queue.
      hooks: { onReconciled: () => waitingAfterRun.push(q.delayedCount + q.depth) },
    });
    q.add("periodic");
    await until("three runs", () => waitingAfterRun.length === 3);
    assert.deepEqual(waitingAfterRun, [1, 1, 0]);
    assert.equal(q.numRequeues("periodic"), 0);
    await q.shutdown();
  });

  it("of several addAfter delays for one key the earliest wins, and only one run results", async () => {
    const runs: string[] = [];
    const q = queue({ reconcile: (key) => void runs.push(key) });
    q.addAfter("k", 300);
    q.addAfter("k", 40);
    q.addAfter("k", 200);
    // Markers timed between the delays: the order of the runs shows which delay won, however late timers fire.
    q.addAfter("after-40", 120);
    q.addAfter("after-300", 400);
    await until("the last marker ran", () => runs.includes("after-300"), 10_000);
    assert.deepEqual(runs, ["k", "after-40", "after-300"]);
    assert.equal(q.delayedCount, 0);
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
    await q.shutdown({ timeoutMs: 50 });
    assert.ok(aborted, "shutdown returned because the reconcile saw the abort");
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
