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
