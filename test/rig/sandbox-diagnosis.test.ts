import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { lastErrorLines } from "./sandbox-diagnosis.ts";

describe("lastErrorLines", () => {
  const warn = '{"level":"warn","msg":"a","err":{"message":"m","stack":"Error: m\\n  at x"}}';
  const info = '{"level":"info","msg":"b"}';
  const error = '{"level":"error","msg":"c","err":{"message":"n","stack":"S \\"quoted\\""}}';
  const ovsWarn = "2026-11-27T03:00:44.445Z|00002|chassis|WARN|w";
  const ovsErr = "2026-11-27T03:00:45.445Z|00003|rconn|ERR|e";

  it("prefers errors, JSON and OVS alike, and leaves their stacks out", () => {
    assert.deepEqual(lastErrorLines([warn, info, error, ovsWarn, ovsErr].join("\n"), 5), [
      '{"level":"error","msg":"c","err":{"message":"n"}}',
      ovsErr,
    ]);
  });

  it("falls back to the last warnings when there is no error, at most n", () => {
    assert.deepEqual(lastErrorLines([warn, info, ovsWarn].join("\n"), 1), [ovsWarn]);
    assert.deepEqual(lastErrorLines([warn, info].join("\n"), 3), [
      '{"level":"warn","msg":"a","err":{"message":"m"}}',
    ]);
  });

  it("says nothing of a log with neither", () => {
    assert.deepEqual(lastErrorLines(`${info}\n\n`, 3), []);
  });
});
