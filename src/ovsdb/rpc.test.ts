// The JSON-RPC layer and the client against deliberately broken peers on a unix socket: behaviour that a
// well-behaved ovsdb-server never shows, so it cannot be provoked with the real one.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { OvsdbClient } from "./client.ts";
import { ConnectionClosedError, ProtocolError } from "./errors.ts";
import { RpcConnection } from "./rpc.ts";

async function brokenPeer(
  t: { after(fn: () => unknown): void },
  onConn: (s: net.Socket) => void,
): Promise<string> {
  const dir = await mkdtemp("/tmp/zo-rpc-");
  const path = join(dir, "peer.sock");
  const server = net.createServer(onConn);
  await new Promise<void>((r) => server.listen(path, r));
  t.after(async () => {
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });
  return path;
}

function rpcTo(path: string): Promise<RpcConnection> {
  return new Promise((resolve, reject) => {
    const s = net.connect(path, () => resolve(new RpcConnection(s, `unix:${path}`)));
    s.once("error", reject);
  });
}

test("a request in flight when the peer closes mid-message rejects with a retryable error", async (t) => {
  const path = await brokenPeer(t, (s) => {
    s.once("data", () => s.end('{"id":1,"result":[{"uuid":["uuid","'));
  });
  const rpc = await rpcTo(path);
  const err = await rpc.request("transact", ["db"]).catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError, String(err));
  assert.equal(err.retryable, true);
  assert.match(err.message, /middle of a message/);
});

test("garbage from the peer closes the connection with a ProtocolError and fails pending requests", async (t) => {
  const path = await brokenPeer(t, (s) => {
    s.once("data", () => s.write("HTTP/1.1 400 Bad Request\r\n\r\n"));
  });
  const rpc = await rpcTo(path);
  const closed = new Promise<Error | undefined>((r) => rpc.once("close", r));
  const err = await rpc.request("list_dbs", []).catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError);
  const why = await closed;
  assert.ok(why instanceof ProtocolError, String(why));
  assert.match(why.message, /garbage/);
});

test("the peer's echo requests are answered with their own params", async (t) => {
  let reply: unknown;
  const path = await brokenPeer(t, (s) => {
    s.write(JSON.stringify({ id: "e1", method: "echo", params: ["x", 1] }));
    s.on("data", (d) => {
      reply = JSON.parse(d.toString());
      s.end();
    });
  });
  const rpc = await rpcTo(path);
  await new Promise((r) => rpc.once("close", r));
  assert.deepEqual(reply, { id: "e1", result: ["x", 1], error: null });
});

test("a request timeout rejects with TimeoutError and a late reply is ignored", async (t) => {
  const path = await brokenPeer(t, (s) => {
    s.once("data", (d) => {
      const id = JSON.parse(d.toString()).id;
      setTimeout(() => s.write(JSON.stringify({ id, result: [], error: null })), 150);
    });
  });
  const rpc = await rpcTo(path);
  await assert.rejects(rpc.request("list_dbs", [], 50), /no reply within 50 ms/);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(rpc.isClosed, false);
  rpc.close();
});

test("connect() to a peer that sends garbage fails with a typed error instead of hanging", async (t) => {
  const path = await brokenPeer(t, (s) => s.on("data", () => s.write("\x00\x01garbage")));
  const c = new OvsdbClient({ remotes: `unix:${path}`, database: "OVN_Northbound" });
  const err = await c.connect().catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError || err instanceof ProtocolError, String(err));
  await c.close();
});

test("connect() to a peer that closes mid-message fails with a typed error instead of hanging", async (t) => {
  const path = await brokenPeer(t, (s) => s.once("data", () => s.end('{"id":1,"result":{"Data')));
  const c = new OvsdbClient({ remotes: `unix:${path}`, database: "OVN_Northbound" });
  const err = await c.connect().catch((e) => e);
  assert.ok(err instanceof ConnectionClosedError || err instanceof ProtocolError, String(err));
  await c.close();
});
