import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "../observability/log.ts";
import { Metrics } from "../observability/metrics.ts";
import { ControllerSupervisor, type TermController } from "./supervisor.ts";

/** A controller whose run is steered by the test: it syncs, fails, or waits for the end of its term. */
class ScriptedController implements TermController {
  synced = false;
  private sync: (() => void) | undefined;
  private fail: ((e: Error) => void) | undefined;
  readonly started: Promise<void>;
  private markStarted: () => void = () => {};

  constructor() {
    this.started = new Promise((resolve) => {
      this.markStarted = resolve;
    });
  }

  run(signal: AbortSignal, onSynced?: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.sync = () => {
        this.synced = true;
        onSynced?.();
      };
      this.fail = (e) => {
        this.synced = false;
        reject(e);
      };
      signal.addEventListener("abort", () => {
        this.synced = false;
        resolve();
      });
      this.markStarted();
    });
  }

  isSynced(): boolean {
    return this.synced;
  }

  finishSync(): void {
    this.sync?.();
  }

  failRun(message: string): void {
    this.fail?.(new Error(message));
  }
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 5000 && !check(); i++) await sleep(2);
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

async function leaderGauge(m: Metrics): Promise<number> {
  return (await m.leader.get()).values[0]?.value ?? 0;
}

describe("ControllerSupervisor without leader election", () => {
  it("shows as leading (gauge 1) only once its controller synced, and starts a fresh controller after a failed term", async () => {
    const metrics = new Metrics({ processMetrics: false });
    const controllers: ScriptedController[] = [];
    const ended: string[] = [];
    const sup = new ControllerSupervisor({
      newController: () => {
        const c = new ScriptedController();
        controllers.push(c);
        return c;
      },
      restartBackoffMs: 1,
      metrics,
      log: silentLogger,
      hooks: { onTermEnded: (n, err) => ended.push(`${n}: ${err ? (err as Error).message : "ended"}`) },
    });
    sup.start();
    await until("term 1 started", () => controllers.length === 1);
    const first = controllers[0] as ScriptedController;
    await first.started;
    assert.equal(sup.leading(), false, "not leading before the initial sync");
    assert.equal(await leaderGauge(metrics), 0);
    first.finishSync();
    assert.equal(sup.leading(), true);
    assert.equal(await leaderGauge(metrics), 1);

    first.failRun("the default Subnet was refused");
    await until("term 2 started", () => controllers.length === 2);
    assert.deepEqual(ended, ["1: the default Subnet was refused"]);
    assert.equal(await leaderGauge(metrics), 0, "a failed term takes the gauge down");
    assert.equal(sup.leading(), false);
    assert.equal(sup.status().lastFailure, "the default Subnet was refused");
    const second = controllers[1] as ScriptedController;
    await second.started;
    assert.notEqual(second, first, "a fresh controller");
    second.finishSync();
    assert.equal(await leaderGauge(metrics), 1);

    await sup.stop();
    assert.deepEqual(ended, ["1: the default Subnet was refused", "2: ended"]);
    assert.equal(await leaderGauge(metrics), 0);
    assert.equal(controllers.length, 2, "no term after stop");
  });
});
