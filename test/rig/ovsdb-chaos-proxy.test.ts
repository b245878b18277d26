import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { JsonStreamSplitter } from "../../src/ovsdb/json-stream.ts";
import { type FaultPlan, startOvsdbChaosProxy } from "./ovsdb-chaos-proxy.ts";
import { SCHEMAS, useOvsdbServer } from "./ovsdb-server.ts";

const NONE: FaultPlan = { lostReply: 0, droppedReply: 0, cutRequest: 0, reset: 0 };
const NB = "OVN_Northbound";

/** A bare JSON-RPC peer: what it received, in order, and whether the connection ended. */
function rawPeer(port: number) {
  const sock = net.connect(port, "127.0.0.1");
  const splitter = new JsonStreamSplitter();
  const received: Array<{ id?: unknown; method?: unknown; result?: unknown }> = [];
  const ended = new Promise<void>((resolve) => sock.on("close", () => resolve()));
  sock.on("error", () => {});
  sock.on("data", (b: Buffer) => received.push(...(splitter.push(b) as typeof received)));
  return {
    received,
    ended,
    send: (m: unknown) => sock.write(JSON.stringify(m)),
    close: () => sock.destroy(),
  };
}

function insert(name: string, id: string) {
  return {
    id,
    method: "transact",
    params: [NB, { op: "insert", table: "Logical_Switch", row: { name } }],
  };
}

async function switchNames(srv: { dump(db: string): Promise<Record<string, Record<string, unknown>>> }) {
  const dump = await srv.dump(NB);
  return Object.values(dump.Logical_Switch ?? {}).map((r) => (r as { name: string }).name);
}

async function eventually(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(ok(), what);
}

for (const [rand, seesUpdate] of [
  [0.7, true],
  [0.3, false],
] as const) {
  test(`a lost transact reply${seesUpdate ? "" : " and the monitor update before it"}: the server commits, the client's connection is reset`, async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const proxy = await startOvsdbChaosProxy({
      upstream: { path: srv.socketPath },
      plan: { ...NONE, lostReply: 1 },
      rand: () => rand,
    });
    t.after(() => proxy.close());
    const peer = rawPeer(proxy.port);
    t.after(() => peer.close());
    peer.send({ id: "m1", method: "monitor", params: [NB, null, { Logical_Switch: { columns: ["name"] } }] });
    await eventually("the monitor reply", () => peer.received.some((m) => m.id === "m1"));
    peer.send(insert("landed", "t1"));
    await peer.ended;
    assert.deepEqual(
      peer.received.filter((m) => m.id === "t1"),
      [],
    );
    assert.equal(
      peer.received.some((m) => m.method === "update"),
      seesUpdate,
    );
    assert.deepEqual(await switchNames(srv), ["landed"]);
    assert.equal(proxy.counts.lostReplies, 1);
  });
}

test("a dropped transact reply: later replies still arrive, then the connection is reset", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const proxy = await startOvsdbChaosProxy({
    upstream: { path: srv.socketPath },
    plan: { ...NONE, droppedReply: 1 },
    rand: () => 0.5,
    droppedReplyResetMs: 2000,
  });
  t.after(() => proxy.close());
  const peer = rawPeer(proxy.port);
  t.after(() => peer.close());
  peer.send(insert("landed", "t1"));
  peer.send({ id: "e1", method: "echo", params: ["x"] });
  await eventually("the echo reply arrives", () => peer.received.some((m) => m.id === "e1"));
  assert.ok(!peer.received.some((m) => m.id === "t1"), "the transact reply was dropped");
  await peer.ended;
  assert.deepEqual(await switchNames(srv), ["landed"]);
  assert.equal(proxy.counts.droppedReplies, 1);
});

test("a transact request cut mid-message never commits", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const proxy = await startOvsdbChaosProxy({
    upstream: { path: srv.socketPath },
    plan: { ...NONE, cutRequest: 1 },
    rand: () => 0.5,
  });
  t.after(() => proxy.close());
  const peer = rawPeer(proxy.port);
  t.after(() => peer.close());
  peer.send(insert("never", "t1"));
  await peer.ended;
  assert.deepEqual(await switchNames(srv), []);
  assert.equal(proxy.counts.cutRequests, 1);
});

test("with faults off, requests, replies and notifications all pass; resets start only after the first transact", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const proxy = await startOvsdbChaosProxy({
    upstream: { path: srv.socketPath },
    plan: { ...NONE, reset: 1 },
    rand: Math.random,
  });
  t.after(() => proxy.close());
  const peer = rawPeer(proxy.port);
  t.after(() => peer.close());
  // Not armed yet: an echo and a monitor pass despite reset = 1.
  peer.send({ id: "e1", method: "echo", params: ["x"] });
  peer.send({ id: "m1", method: "monitor", params: [NB, null, { Logical_Switch: { columns: ["name"] } }] });
  await eventually(
    "echo and monitor replies",
    () => peer.received.filter((m) => m.id !== undefined).length === 2,
  );
  proxy.setFaults(false);
  peer.send(insert("a", "t1"));
  await eventually("the update and the transact reply", () => peer.received.some((m) => m.id === "t1"));
  assert.ok(peer.received.some((m) => m.method === "update"));
  proxy.setFaults(true);
  peer.send({ id: "e2", method: "echo", params: ["x"] });
  await peer.ended;
  assert.ok(!peer.received.some((m) => m.id === "e2"));
  assert.equal(proxy.counts.resets, 1);
  assert.equal(proxy.counts.transacts, 1);
});
