// Older servers: a proxy in front of a real ovsdb-server answers "unknown method" for the newer monitor methods,
// as an ovsdb-server before 2.12 (monitor_cond_since) or 2.7 (monitor_cond) would. The client must fall back and
// keep an exact cache. Also: monitor_cancel stops the cache from following the database.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { JsonStreamSplitter } from "../../../src/ovsdb/json-stream.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { diffCacheAndDump } from "./compare.ts";

async function refusingProxy(
  t: { after(fn: () => unknown): void },
  upstreamPath: string,
  refuse: (method: string, params: unknown[]) => boolean,
): Promise<string> {
  const dir = await mkdtemp("/tmp/zo-px-");
  const path = join(dir, "proxy.sock");
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPath);
    sockets.add(client).add(upstream);
    const splitter = new JsonStreamSplitter();
    client.on("data", (d: Buffer) => {
      for (const m of splitter.push(d) as { id: unknown; method?: string; params?: unknown[] }[]) {
        if (m.method && refuse(m.method, m.params ?? [])) {
          client.write(JSON.stringify({ id: m.id, result: null, error: "unknown method" }));
        } else {
          upstream.write(JSON.stringify(m));
        }
      }
    });
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((r) => server.listen(path, r));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });
  return `unix:${path}`;
}

async function exercise(c: OvsdbClient<NbTables>) {
  const r = await c.transact((txn) => {
    const p = txn.insert("Logical_Switch_Port", { name: "p1", addresses: ["0a:58:0a:00:00:05 10.0.0.5"] });
    txn.insert("Logical_Switch", { name: "ls1", ports: [p], other_config: { a: "1" } }, "ls");
  });
  const ls = r.uuids.get("ls") as string;
  await c.transact((txn) => {
    txn.mutate("Logical_Switch", byUuid(ls), [["other_config", "insert", { b: "2" }]]);
    txn.update("Logical_Switch_Port", [["name", "==", "p1"]], { tag_request: 12 });
  });
  await c.transact((txn) => {
    txn.insert("Logical_Switch", { name: "ls2" });
    txn.update("Logical_Switch", byUuid(ls), { name: "ls1-renamed" });
  });
  await c.echo();
}

describe("monitor fallbacks against older servers", () => {
  test("without monitor_cond_since the client uses monitor_cond (update2) and its cache stays exact", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const seen: string[] = [];
    // Method and database: the client also monitors _Server with monitor_cond, which says nothing about NB.
    const remote = await refusingProxy(t, srv.unix.slice(5), (m, params) => {
      seen.push(`${m} ${String(params[0])}`);
      return m === "monitor_cond_since";
    });
    const c = new OvsdbClient<NbTables>({ remotes: remote, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await exercise(c);
    assert.ok(seen.includes("monitor_cond_since OVN_Northbound"), "the newest method was tried first");
    assert.ok(seen.includes("monitor_cond OVN_Northbound"), "then NB was monitored with monitor_cond");
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump("OVN_Northbound")), []);
  });

  test("without monitor_cond_since and monitor_cond the client uses monitor (update) and list_dbs", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const seen: string[] = [];
    const remote = await refusingProxy(t, srv.unix.slice(5), (m, params) => {
      seen.push(`${m} ${String(params[0])}`);
      return m === "monitor_cond_since" || m === "monitor_cond";
    });
    const c = new OvsdbClient<NbTables>({ remotes: remote, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await exercise(c);
    assert.ok(seen.includes("monitor OVN_Northbound"), "NB was monitored with plain monitor");
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump("OVN_Northbound")), []);
  });
});

test("monitor_cancel: the cache keeps its content and stops following the database", async (t) => {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  t.after(() => c.close());
  await c.connect();
  await c.transact((txn) => {
    txn.insert("Logical_Switch", { name: "before" });
  });
  await c.echo();
  await c.cancelMonitor();
  await c.transact((txn) => {
    txn.insert("Logical_Switch", { name: "after" });
  });
  await c.echo();
  await delay(100);
  const names = [...c.cache.table("Logical_Switch").values()].map((r) => r.name);
  assert.deepEqual(names, ["before"]);
});
