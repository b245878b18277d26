import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { SCHEMAS, useOvsdbServer, useRaftCluster } from "../../rig/ovsdb-server.ts";
import { diffCacheAndDump } from "./compare.ts";

const NB = "OVN_Northbound";

function seqsIn(dump: Record<string, Record<string, Record<string, unknown>>>): number[] {
  const out: number[] = [];
  for (const row of Object.values(dump.Logical_Switch ?? {})) {
    const pairs = (row.external_ids as ["map", [string, string][]])[1];
    const seq = pairs.find(([k]) => k === "seq");
    if (seq) out.push(Number(seq[1]));
  }
  return out;
}

describe("OVSDB client with a 3-member Raft cluster", () => {
  test("killing the leader during a stream of inserts: the client moves to the new leader and every acknowledged write is present exactly once", async (t) => {
    const cluster = await useRaftCluster(t, { schema: SCHEMAS.nb });
    const c = new OvsdbClient<NbTables>({
      remotes: cluster.remotes,
      model: nbModel,
      probeIntervalMs: 1000,
      backoff: { initialMs: 50, maxMs: 500 },
    });
    t.after(() => c.close());
    await c.connect();
    const leader = await cluster.leader();
    assert.equal(c.currentRemote, leader.server.unix, "connected to the leader only");

    const acked = new Set<number>();
    let killed = false;
    const total = 400;
    let next = 0;
    const writer = async () => {
      while (next < total) {
        const seq = next++;
        if (seq === 120 && !killed) {
          killed = true;
          leader.server.kill("SIGKILL");
        }
        // Logical_Switch has no unique index: only the guard prevents a duplicate on retry.
        const r = await c.transactWithRetry(
          (txn) => {
            const where = [["external_ids", "includes", { seq: String(seq) }]] as const;
            txn.guardAbsent("Logical_Switch", [...where]);
            txn.insert("Logical_Switch", { name: `ls${seq}`, external_ids: { seq: String(seq) } });
          },
          { attempts: 20, timeoutMs: 15_000 },
        );
        assert.ok(r.uuids.size === 1 || r.alreadyApplied);
        acked.add(seq);
      }
    };
    await Promise.all([writer(), writer(), writer(), writer()]);
    assert.equal(acked.size, total);

    const newLeader = await cluster.leader();
    assert.notEqual(newLeader.name, leader.name);
    assert.equal(c.currentRemote, newLeader.server.unix, "the client reached the new leader");
    assert.equal(c.stats.fullSnapshots, 1, "the reconnect resumed from history, no full reload");
    assert.ok(c.stats.resumes >= 1, "monitor_cond_since found=true at least once");

    const dump = await newLeader.server.dump(NB);
    const seqs = seqsIn(dump).sort((a, b) => a - b);
    assert.deepEqual(
      seqs,
      [...acked].sort((a, b) => a - b),
      "each acknowledged write exactly once, nothing else",
    );
    // The cache converges on the server's content.
    await c.waitForRow("Logical_Switch", (r) => r.name === `ls${total - 1}`, { timeoutMs: 5000 });
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, dump), []);
  });

  test("a dropped connection to a clustered database resumes with found=true and receives no full snapshot", async (t) => {
    const cluster = await useRaftCluster(t, { schema: SCHEMAS.nb });
    const leader = await cluster.leader();
    const c = new OvsdbClient<NbTables>({
      remotes: [leader.server.unix],
      model: nbModel,
      backoff: { initialMs: 20 },
    });
    t.after(() => c.close());
    await c.connect();
    await c.transact((txn) => {
      for (let i = 0; i < 50; i++) txn.insert("Logical_Switch", { name: `a${i}` });
    });
    const readies: { resumed: boolean; fullSnapshot: boolean }[] = [];
    c.on("ready", (i) => readies.push(i));
    await leader.server.appctl("ovsdb-server/reconnect");
    // Written by another client while we are away: must arrive as part of the resumed diff.
    await leader.server.transactRaw(NB, [
      { op: "insert", table: "Logical_Switch", row: { name: "while-away" } },
    ]);
    await c.waitForRow("Logical_Switch", (r) => r.name === "while-away", { timeoutMs: 5000 });
    assert.ok(readies.length >= 1, "reconnected");
    assert.ok(
      readies.every((r) => r.resumed && !r.fullSnapshot),
      JSON.stringify(readies),
    );
    assert.equal(c.stats.fullSnapshots, 1);
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await leader.server.dump(NB)), []);
  });

  test("a client connecting to a leader while a write is still committing there loads a cache that holds the write", async (t) => {
    const cluster = await useRaftCluster(t, { schema: SCHEMAS.nb });
    const leader = await cluster.leader();
    const writer = new OvsdbClient<NbTables>({ remotes: [leader.server.unix], model: nbModel });
    t.after(() => writer.close());
    await writer.connect();
    // The leader stops talking Raft: it takes the write into its log but cannot commit it (what a lost reply
    // leaves behind while its commit is under way, or a new leader that has not applied its predecessor's).
    await leader.server.appctl("cluster/failure-test", "stop-raft-rpc");
    let cleared = false;
    const clear = async () => {
      if (cleared) return;
      cleared = true;
      await leader.server.appctl("cluster/failure-test", "clear");
    };
    t.after(clear);
    const committed = writer.transact((txn) => {
      txn.insert("Logical_Switch", { name: "committing" });
    });
    // The server read the transaction before this echo's reply.
    await writer.echo();

    const c = new OvsdbClient<NbTables>({ remotes: [leader.server.unix], model: nbModel });
    t.after(() => c.close());
    let atReady: boolean | undefined;
    c.once("ready", () => {
      atReady = c.cache.table("Logical_Switch").findOne((r) => r.name === "committing") !== undefined;
    });
    const connected = c.connect();
    // Give a client that does not wait for the log time to load its cache without the write (less than an
    // election timeout, so the leader keeps leading); then let the write commit.
    await Promise.race([connected, delay(300)]);
    await clear();
    await connected;
    await committed;
    assert.equal(atReady, true, "the cache the client was ready with holds the write");
  });

  test("a dropped connection to a standalone database reloads in full and still converges", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, backoff: { initialMs: 20 } });
    t.after(() => c.close());
    await c.connect();
    await c.transact((txn) => {
      txn.insert("Logical_Switch", { name: "before" });
    });
    const readies: { resumed: boolean }[] = [];
    c.on("ready", (i) => readies.push(i));
    await srv.appctl("ovsdb-server/reconnect");
    await srv.transactRaw(NB, [{ op: "insert", table: "Logical_Switch", row: { name: "while-away" } }]);
    await c.waitForRow("Logical_Switch", (r) => r.name === "while-away", { timeoutMs: 5000 });
    assert.equal(c.stats.fullSnapshots, 2);
    assert.ok(readies.every((r) => !r.resumed));
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump(NB)), []);
  });
});
