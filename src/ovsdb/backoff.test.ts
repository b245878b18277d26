import assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff } from "./backoff.ts";

test("backoff grows exponentially up to the maximum and restarts after reset", () => {
  const b = new Backoff({ initialMs: 100, maxMs: 1000, jitter: 0 });
  assert.deepEqual(
    [b.next(), b.next(), b.next(), b.next(), b.next(), b.next()],
    [100, 200, 400, 800, 1000, 1000],
  );
  b.reset();
  assert.equal(b.next(), 100);
});

test("backoff jitter keeps each delay within the jitter fraction below the base", () => {
  const b = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5 });
  for (let i = 0; i < 200; i++) {
    const d = b.next();
    assert.ok(d >= 500 && d <= 1000, `delay ${d}`);
  }
});
