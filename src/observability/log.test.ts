import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createLogger, formatTextLine } from "./log.ts";

function capture(): { lines: string[]; destination: { write(s: string): void } } {
  const lines: string[] = [];
  return { lines, destination: { write: (s: string) => void lines.push(s) } };
}

describe("log", () => {
  it("writes one JSON object per record with level name, ISO time, component and fields", () => {
    const out = capture();
    const log = createLogger({ component: "controller", destination: out.destination });
    log.child({ controller: "pod" }).info({ key: "ns/a" }, "reconciled");
    assert.equal(out.lines.length, 1);
    const rec = JSON.parse(out.lines[0] as string) as Record<string, unknown>;
    assert.equal(rec.level, "info");
    assert.match(String(rec.time), /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(
      { component: rec.component, controller: rec.controller, key: rec.key, msg: rec.msg },
      { component: "controller", controller: "pod", key: "ns/a", msg: "reconciled" },
    );
  });

  it("filters records below the configured level", () => {
    const out = capture();
    const log = createLogger({ level: "warn", destination: out.destination });
    log.info({}, "hidden");
    log.debug({}, "hidden");
    log.warn({}, "shown");
    assert.equal(out.lines.length, 1);
  });

  it("text format puts time, level, component and message first, then key=value pairs", () => {
    const out = capture();
    const log = createLogger({ format: "text", component: "node", destination: out.destination });
    log.error({ err: new Error("boom"), node: "n1", note: "two words" }, "setup failed");
    assert.match(
      out.lines[0] as string,
      /^\d{4}-\d\d-\d\dT[\d:.]+Z ERROR node: setup failed err=boom node=n1 note="two words"\n$/,
    );
  });

  it("formatTextLine passes a line that is not JSON through unchanged", () => {
    assert.equal(formatTextLine("plain"), "plain\n");
  });
});
