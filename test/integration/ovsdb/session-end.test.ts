// Ending a client, or a writer's term, while the session cannot reach its server: the server gone and the
// client reconnecting, a peer that accepts and never answers. Every wait must end, close() must settle, and
// nothing may keep running (and re-arming) afterwards, or a test process or a controller never exits.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { type ClientState, OvsdbClient } from "../../../src/ovsdb/client.ts";
import { ConnectionClosedError, TimeoutError, WriteFencedError } from "../../../src/ovsdb/errors.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

/** Polls until `ok()` holds; fails after timeoutMs. */
async function until(what: string, ok: () => boolean, timeoutMs = 30_000, pollMs = 50): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(pollMs);
  }
}

/** Records every state the client enters. */
function states(c: OvsdbClient<NbTables>): ClientState[] {
  const seen: ClientState[] = [];
  c.on("state", (s) => seen.push(s));
  return seen;
}

test("close() while the server is gone and the client keeps reconnecting settles, and the client stays quiet afterwards", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({
    // A second remote that never exists: each round has an immediate failure as well as the server's.
    remotes: [srv.unix, `unix:${srv.dir}/no-such.sock`],
    model: nbModel,
    shuffleRemotes: false,
    backoff: { initialMs: 100, maxMs: 100, jitter: 0 },
  });
  t.after(() => c.close());
  await c.connect();
  const seen = states(c);
  srv.kill("SIGKILL");
  await srv.waitForExit();
  await until(
    "several reconnect rounds",
    () => seen.filter((s) => s === "connecting").length >= 6,
    30_000,
    20,
  );
  await c.close();
  assert.equal(c.state, "closed");
  const after = seen.length;
  await delay(500);
  assert.deepEqual(seen.slice(after), [], "no state change after close()");
  // Each round ended in a wait: a loop that reconnected with no pause would have made thousands of rounds.
  const rounds = seen.filter((s) => s === "connecting").length;
  assert.ok(
    seen.filter((s) => s === "backoff").length >= rounds - 1,
    `every connection attempt but the last was followed by a pause: ${seen.join(",")}`,
  );
  await assert.rejects(c.whenReady(), ConnectionClosedError);
});

test("close() while a connection attempt waits on a peer that accepts and never answers settles, and connect() rejects", async (t) => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
    s.resume();
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        silent.close(() => resolve());
      }),
  );
  const { port } = silent.address() as net.AddressInfo;
  const c = new OvsdbClient<NbTables>({
    remotes: `tcp:127.0.0.1:${port}`,
    model: nbModel,
    probeIntervalMs: 0,
  });
  const connecting = c.connect({ retry: true });
  connecting.catch(() => {});
  await until("the client to wait in its first request", () => sockets.size === 1 && c.state === "syncing");
  await c.close();
  await assert.rejects(connecting, ConnectionClosedError);
  assert.equal(c.state, "closed");
  await until("the client's socket to be closed", () => [...sockets].every((s) => s.closed || s.destroyed));
});

test("while NB is unreachable, a fenced view's waits end with its fence, a bounded wait times out, and the client recovers once NB is back", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({
    remotes: srv.unix,
    model: nbModel,
    backoff: { initialMs: 50, maxMs: 200 },
  });
  t.after(() => c.close());
  await c.connect();
  srv.kill("SIGKILL");
  await srv.waitForExit();
  await until("the client to notice", () => c.state !== "ready");

  await assert.rejects(c.whenReady(100), TimeoutError);
  const fence = new AbortController();
  const view = c.fenced(fence.signal);
  const waiting = view.whenReady();
  const writing = view.transact((txn) => void txn.insert("Logical_Switch", { name: "deposed" }));
  const reading = c.whenReady();
  const ended = new Error("term over");
  fence.abort(ended);
  await assert.rejects(waiting, (e) => e === ended);
  await assert.rejects(writing, WriteFencedError);
  await assert.rejects(
    view.whenReady(),
    (e) => e === ended,
    "a wait begun after the fence closed ends at once",
  );

  await srv.restart();
  await reading;
  assert.equal(c.state, "ready");
  await c.transact((txn) => void txn.insert("Logical_Switch", { name: "after" }));
  await c.echo();
  assert.deepEqual(
    [...c.cache.table("Logical_Switch").values()].map((r) => r.name),
    ["after"],
    "the fenced write never reached NB",
  );
});
