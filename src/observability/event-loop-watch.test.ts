import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventLoopWatch } from "./event-loop-watch.ts";

function clocked() {
  let t = 1_000_000;
  const watch = new EventLoopWatch({ intervalMs: 1000, maxLagMs: 5000, now: () => t });
  return {
    watch,
    advance(ms: number) {
      t += ms;
    },
  };
}

describe("EventLoopWatch", () => {
  it("passes while the timer ticks on time", () => {
    const { watch, advance } = clocked();
    for (let i = 0; i < 5; i++) {
      advance(1000);
      watch.tick();
      assert.equal(watch.check(), true);
    }
  });

  it("fails when no tick has run for longer than the allowed lag, naming how long", () => {
    const { watch, advance } = clocked();
    advance(1000);
    watch.tick();
    advance(1000 + 5001);
    const result = watch.check();
    assert.match(String(result), /has not run a timer for 5001 ms/);
  });

  it("fails after a tick that ran too late and recovers at the next on-time tick", () => {
    const { watch, advance } = clocked();
    advance(1000 + 7000);
    watch.tick();
    assert.match(String(watch.check()), /ran its last timer 7000 ms late/);
    advance(1000);
    watch.tick();
    assert.equal(watch.check(), true);
  });

  it("tolerates lag up to the limit", () => {
    const { watch, advance } = clocked();
    advance(1000 + 5000);
    watch.tick();
    assert.equal(watch.check(), true);
  });
});
