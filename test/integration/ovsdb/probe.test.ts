import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { freePort, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { diffCacheAndDump } from "./compare.ts";

function blockEventLoop(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // busy: nothing else runs, as with a long synchronous computation
  }
}

test("an event loop blocked past both sides' probe intervals ends in at most one reconnect and loses no data", async (t) => {
  const srv = await useOvsdbServer(t, {
    schemas: [SCHEMAS.nb],
    extraArgs: ["--remote=db:OVN_Northbound,NB_Global,connections"],
  });
  const port = await freePort();
  // The server probes its TCP clients every second (Connection.inactivity_probe) and drops silent ones.
  await srv.transactRaw("OVN_Northbound", [
    {
      op: "insert",
      table: "Connection",
      row: { target: `ptcp:${port}:127.0.0.1`, inactivity_probe: 1000 },
      "uuid-name": "c",
    },
    { op: "insert", table: "NB_Global", row: { connections: ["named-uuid", "c"] } },
  ]);
  await delay(300);
  const c = new OvsdbClient<NbTables>({
    remotes: `tcp:127.0.0.1:${port}`,
    model: nbModel,
    probeIntervalMs: 500,
    backoff: { initialMs: 100 },
  });
  t.after(() => c.close());
  await c.connect();
  await c.transact((txn) => {
    txn.insert("Logical_Switch", { name: "before" });
  });

  // Another writer commits while this process is frozen.
  const writer = spawn(
    "sh",
    [
      "-c",
      `sleep 0.5; ovsdb-client transact ${srv.unix} '["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"during"}}]'`,
    ],
    { stdio: "ignore" },
  );
  blockEventLoop(3500);
  await c.waitForRow("Logical_Switch", (r) => r.name === "during", { timeoutMs: 10_000 });
  // Watch for a reconnect storm for a while.
  await delay(2500);
  writer.kill();
  t.diagnostic(`connections after the freeze: ${c.stats.connects}, full snapshots: ${c.stats.fullSnapshots}`);
  assert.ok(c.stats.connects <= 2, `connections: ${c.stats.connects} (at most one reconnect)`);
  assert.equal(c.connected, true);
  assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump("OVN_Northbound")), []);
});

test("an idle connection is kept alive by answered probes", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], tcp: true });
  const c = new OvsdbClient<NbTables>({ remotes: srv.tcp as string, model: nbModel, probeIntervalMs: 200 });
  t.after(() => c.close());
  await c.connect();
  await delay(1500);
  assert.ok(c.stats.probesSent >= 2, `probes sent: ${c.stats.probesSent}`);
  assert.equal(c.stats.connects, 1);
});
