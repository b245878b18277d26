import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "../observability/log.ts";
import { type Disposer, type Reconciler, ReconcilerManager } from "./framework.ts";

function recorder(name: string, log: string[], startupKeys: string[] = []): Reconciler {
  return {
    name,
    workers: 1,
    async reconcile(key) {
      log.push(`${name} reconcile ${key}`);
      return undefined;
    },
    watch(): Disposer[] {
      log.push(`${name} watch`);
      return [() => log.push(`${name} unwatch`)];
    },
    startupKeys: () => startupKeys,
  };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), "condition not reached");
}

describe("ReconcilerManager", () => {
  it("watches and reconciles only after NB is ready and the startup steps are done, then undoes every watch when the run ends", async () => {
    const log: string[] = [];
    const m = new ReconcilerManager({
      log: silentLogger,
      startWaitMs: 1000,
      waitFor: async () => log.push("wait"),
      prepare: async () => {
        log.push("prepare");
      },
    });
    m.register(recorder("a", log, ["k1"]));
    m.register(recorder("b", log, ["k2"]));
    const end = new AbortController();
    let synced = false;
    const run = m.run(end.signal, () => {
      synced = true;
    });
    await until(() => log.includes("a reconcile k1") && log.includes("b reconcile k2"));
    assert.ok(synced && m.isSynced());
    assert.deepEqual(log.slice(0, 4), ["wait", "prepare", "a watch", "b watch"]);
    m.add("b", "k3");
    await until(() => log.includes("b reconcile k3"));
    end.abort();
    await run;
    assert.ok(m.term.aborted);
    assert.equal(m.isSynced(), false);
    assert.ok(log.includes("a unwatch") && log.includes("b unwatch"));
  });

  it("a failed startup step rejects the run, ends the term and starts no reconciler", async () => {
    const log: string[] = [];
    const m = new ReconcilerManager({
      log: silentLogger,
      startWaitMs: 1000,
      prepare: async () => {
        throw new Error("no NB");
      },
    });
    m.register(recorder("a", log, ["k1"]));
    await assert.rejects(m.run(new AbortController().signal), /no NB/);
    assert.ok(m.term.aborted);
    assert.deepEqual(log, []);
  });

  it("a run ended while waiting for NB settles at once, without a failure", async () => {
    const m = new ReconcilerManager({
      log: silentLogger,
      startWaitMs: 60_000,
      waitFor: () => new Promise(() => {}),
    });
    m.register(recorder("a", []));
    const end = new AbortController();
    const run = m.run(end.signal);
    end.abort();
    await run;
    assert.ok(m.term.aborted);
  });

  it("calls every bulkSync at once; each may wait for those registered before it (failed or not) and learns whether all landed, and the workers start after all", async () => {
    const log: string[] = [];
    let endA: (() => void) | undefined;
    const a: Reconciler = {
      ...recorder("a", log, ["k1"]),
      bulkSync: async () => {
        log.push("a bulk start");
        await new Promise<void>((r) => {
          endA = r;
        });
        log.push("a bulk end");
        return true;
      },
    };
    let failB: ((e: Error) => void) | undefined;
    const b: Reconciler = {
      ...recorder("b", log),
      bulkSync: async (previous) => {
        log.push("b built");
        log.push(`b after a: ${await previous}`);
        // b fails after a, which must not keep c from its turn.
        await new Promise<void>((_, reject) => {
          failB = reject;
        });
        return true;
      },
    };
    const c: Reconciler = {
      ...recorder("c", log),
      bulkSync: async (previous) => {
        log.push("c built");
        log.push(`c after a and b: ${await previous}`);
        return true;
      },
    };
    const m = new ReconcilerManager({ log: silentLogger, startWaitMs: 1000 });
    for (const r of [a, b, c]) m.register(r);
    const run = m.run(new AbortController().signal);
    await until(() => endA !== undefined && log.includes("c built"));
    assert.deepEqual(log.slice(-3), ["a bulk start", "b built", "c built"]);
    endA?.();
    await until(() => failB !== undefined);
    assert.ok(log.includes("b after a: true"), "a landed");
    assert.ok(!log.some((l) => l.startsWith("c after")), "c waits for b");
    failB?.(new Error("b's write refused"));
    // A bulkSync that fails fails the start, as before; c still had its turn.
    await assert.rejects(run, /b's write refused/);
    assert.ok(log.includes("c after a and b: false"), "c learns that b's writes did not land");
    assert.ok(!log.includes("a reconcile k1"), "no worker started");
  });

  it("a bulkSync that returns false tells every later one that not all landed, and the workers still start", async () => {
    const log: string[] = [];
    const a: Reconciler = { ...recorder("a", log), bulkSync: async () => false };
    const b: Reconciler = {
      ...recorder("b", log, ["k1"]),
      bulkSync: async (previous) => {
        log.push(`b: ${await previous}`);
        return true;
      },
    };
    const c: Reconciler = {
      ...recorder("c", log),
      bulkSync: async (previous) => {
        log.push(`c: ${await previous}`);
        return true;
      },
    };
    const m = new ReconcilerManager({ log: silentLogger, startWaitMs: 1000 });
    for (const r of [a, b, c]) m.register(r);
    const end = new AbortController();
    const run = m.run(end.signal);
    await until(() => log.includes("b reconcile k1"));
    assert.deepEqual(
      log.filter((l) => /^[bc]: /.test(l)),
      ["b: false", "c: false"],
    );
    end.abort();
    await run;
  });

  it("refuses a second reconciler of the same name and keys for one it does not know", () => {
    const m = new ReconcilerManager({ log: silentLogger, startWaitMs: 1000 });
    m.register(recorder("a", []));
    assert.throws(() => m.register(recorder("a", [])), /twice/);
    assert.throws(() => m.add("nope", "k"), /no reconciler nope/);
  });
});
