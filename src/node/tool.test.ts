import assert from "node:assert/strict";
import { test } from "node:test";
import { runTool } from "./tool.ts";

test("tools run in the C locale whatever the agent's own, so their error text can be classified", async () => {
  const saved = { LC_ALL: process.env.LC_ALL, LANG: process.env.LANG, LANGUAGE: process.env.LANGUAGE };
  process.env.LC_ALL = "de_DE.UTF-8";
  process.env.LANG = "fr_FR.UTF-8";
  process.env.LANGUAGE = "de";
  try {
    const r = await runTool("sh", [
      "-c",
      'printf "%s|%s|%s" "$LC_ALL" "$LANG" "$(env | grep -c ^LANGUAGE=)"',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "C|C|0");
    // The real thing: ip's netlink error for a missing device is the English text isNoSuchDevice expects.
    const ip = await runTool("ip", ["link", "show", "dev", "zovn-nonexistent"]);
    assert.notEqual(ip.code, 0);
    assert.match(ip.stderr, /does not exist|Cannot find device/);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test("a tool's stdin, exit status and output come back; one that cannot start or outlives its timeout is an error", async () => {
  const echoed = await runTool("sh", ["-c", "cat; echo err >&2; exit 3"], { input: "line\n" });
  assert.deepEqual(echoed, { code: 3, stdout: "line\n", stderr: "err\n" });
  await assert.rejects(
    runTool("zovn-no-such-tool", []),
    (e: Error) => e.name === "ToolError" && /ENOENT/.test(e.message),
  );
  await assert.rejects(runTool("sleep", ["10"], { timeoutMs: 200 }), /killed after 200 ms/);
});

test("many tools at once each get their own answer", async () => {
  const out = await Promise.all(Array.from({ length: 40 }, (_, i) => runTool("sh", ["-c", `echo ${i}`])));
  assert.deepEqual(
    out.map((r) => r.stdout.trim()),
    Array.from({ length: 40 }, (_, i) => String(i)),
  );
});

test("a call refused before its process starts fails alone; the others on its thread still get their answers", async () => {
  const slow = runTool("sh", ["-c", "sleep 0.3; echo done"]);
  await assert.rejects(runTool("echo", ["a\0b"]), (e: Error) => e.name === "ToolError");
  assert.equal((await slow).stdout, "done\n");
  assert.equal((await runTool("echo", ["after"])).stdout, "after\n");
});
