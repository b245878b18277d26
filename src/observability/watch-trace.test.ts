import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { silentLogger } from "./log.ts";
import { parseWatchTrace, WatchTrace } from "./watch-trace.ts";

const dir = mkdtempSync(join(tmpdir(), "zovn-watch-trace-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("watch trace", () => {
  it("appends one JSON line per arrival, stamped on the epoch clock, readable by parseWatchTrace", async () => {
    const path = join(dir, "a.jsonl");
    const trace = WatchTrace.open(path, silentLogger);
    const before = Date.now();
    trace.recorder("endpointslices")("MODIFIED", "ns/s-1", "42");
    trace.recorder("nodes")("DELETED", "n1", undefined);
    await trace.close();
    const after = Date.now();
    const lines = parseWatchTrace(readFileSync(path, "utf8"));
    assert.deepEqual(
      lines.map(({ t, ...rest }) => rest),
      [
        { resource: "endpointslices", type: "MODIFIED", key: "ns/s-1", rv: "42" },
        { resource: "nodes", type: "DELETED", key: "n1", rv: undefined },
      ],
    );
    for (const { t } of lines)
      assert.ok(t >= before - 1 && t <= after + 1, `${t} within [${before}, ${after}]`);
    assert.ok((lines[0]?.t ?? 0) <= (lines[1]?.t ?? 0), "in arrival order");
  });

  it("keeps what an earlier run wrote (appends) and writes names from the API only as JSON strings", async () => {
    const path = join(dir, "b.jsonl");
    for (const key of ['ns/"quoted"\nname', "ns/plain"]) {
      const trace = WatchTrace.open(path, silentLogger);
      trace.recorder("services")("ADDED", key, "7");
      await trace.close();
    }
    const text = readFileSync(path, "utf8");
    assert.equal(text.split("\n").filter(Boolean).length, 2, "a newline in a value cannot split a line");
    assert.deepEqual(
      parseWatchTrace(text).map((l) => l.key),
      ['ns/"quoted"\nname', "ns/plain"],
    );
  });

  it("writes waiting lines within a fraction of a second, without a close", async () => {
    const path = join(dir, "c.jsonl");
    const trace = WatchTrace.open(path, silentLogger);
    trace.recorder("endpointslices")("MODIFIED", "ns/s-2", "43");
    let lines: ReturnType<typeof parseWatchTrace> = [];
    for (let i = 0; i < 3000 && lines.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      lines = parseWatchTrace(readFileSync(path, "utf8"));
    }
    assert.deepEqual(
      lines.map((l) => l.rv),
      ["43"],
    );
    await trace.close();
  });

  it("skips lines that are not trace lines, such as a torn last line", () => {
    const good = JSON.stringify({ resource: "pods", type: "ADDED", key: "a/b", rv: "1", t: 5 });
    const text = [
      good,
      "not json",
      JSON.stringify({ resource: "pods", type: "BOOKMARK", key: "x", t: 1 }),
      '{"res',
    ].join("\n");
    assert.deepEqual(parseWatchTrace(text), [{ resource: "pods", type: "ADDED", key: "a/b", rv: "1", t: 5 }]);
  });

  it("refuses a file it cannot open at once, with the reason", () => {
    assert.throws(() => WatchTrace.open(join(dir, "missing", "x.jsonl"), silentLogger), /ENOENT/);
  });
});
