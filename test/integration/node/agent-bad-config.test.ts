// zstack-ovnkube-node with a bad configuration stays up, not Ready, with the problem on /readyz (naming the
// setting and the fix), instead of exiting into a crash loop; it exits with code 2 when stopped.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { freePort } from "../../rig/ports.ts";

describe("zstack-ovnkube-node with a bad configuration", () => {
  test("External mode with ssl: SB remotes and no certificates: not Ready naming the settings, alive, exit 2 on SIGTERM", async (t) => {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(repoRoot, "src/cli/zstack-ovnkube-node.ts")],
      {
        cwd: repoRoot,
        env: {
          PATH: process.env.PATH,
          ZSTACK_HEALTH_PORT: String(port),
          ZSTACK_NODE_NAME: "node1",
          ZSTACK_OVN_MODE: "external",
          ZSTACK_OVN_SBDB_ADDRESS: "ssl:127.0.0.1:6642",
        },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    t.after(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    let ready: { status: number; body: string } | undefined;
    const start = Date.now();
    while (!ready) {
      ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        async (r) => ({ status: r.status, body: await r.text() }),
        () => undefined,
      );
      if (!ready) {
        assert.equal(child.exitCode, null, `the agent exited: ${stderr}`);
        assert.ok(Date.now() - start < 120_000, "no /readyz within 120 s");
        await sleep(200);
      }
    }
    console.log(`# /readyz answered after ${Date.now() - start} ms`);
    assert.equal(ready.status, 500);
    assert.match(ready.body, /ZSTACK_OVN_SBDB_ADDRESS.*has ssl: remotes: set ovn\.ssl\.enabled/);
    assert.match(stderr, /ZSTACK_OVN_SSL_CA/);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200, "alive: the kubelet does not restart it");
    await sleep(1000);
    assert.equal(child.exitCode, null, "still running");
    child.kill("SIGTERM");
    assert.equal(await exited, 2);
  });
});
