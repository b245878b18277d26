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

  it("refuses a second reconciler of the same name and keys for one it does not know", () => {
    const m = new ReconcilerManager({ log: silentLogger, startWaitMs: 1000 });
    m.register(recorder("a", []));
    assert.throws(() => m.register(recorder("a", [])), /twice/);
    assert.throws(() => m.add("nope", "k"), /no reconciler nope/);
  });
});
