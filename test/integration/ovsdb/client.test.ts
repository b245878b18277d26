import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import {
  ConstraintViolationError,
  OrphanRowError,
  ReferentialIntegrityError,
  TransactionError,
  UnknownDatabaseError,
  ValueError,
  WaitFailedError,
  WriteFencedError,
} from "../../../src/ovsdb/errors.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { stableUuid } from "../../../src/ovsdb/stable-uuid.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import { writeRecords, writeRecordsByComment } from "../../rig/db-log.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { diffCacheAndDump } from "./compare.ts";

describe("OVSDB client against a real ovsdb-server (NB)", () => {
  test("inserts a switch with ports in one transaction and the monitor cache equals the server dump", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    const res = await c.transact((txn) => {
      const p1 = txn.insert("Logical_Switch_Port", { name: "p1", addresses: ["0a:58:0a:00:00:05 10.0.0.5"] });
      const p2 = txn.insert("Logical_Switch_Port", {
        name: "p2",
        external_ids: { owner: "test" },
        tag_request: 7,
      });
      txn.insert("Logical_Switch", { name: "ls1", ports: [p1, p2], other_config: { subnet: "10.0.0.0/24" } });
    });
    assert.equal(res.uuids.size, 3);
    const ls = await c.waitForRow("Logical_Switch", (r) => r.name === "ls1", { timeoutMs: 2000 });
    assert.equal(ls.ports.length, 2);
    assert.deepEqual(ls.other_config, { subnet: "10.0.0.0/24" });
    const p2 = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "p2");
    assert.equal(p2?.tag_request, 7);
    assert.deepEqual(p2?.external_ids, { owner: "test" });
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump("OVN_Northbound")), []);

    // set and map mutations, update, delete
    await c.transact((txn) => {
      txn.mutate("Logical_Switch", byUuid(ls._uuid), [
        ["other_config", "insert", { mcast_snoop: "true" }],
        ["other_config", "delete", ["subnet"]],
      ]);
      txn.update("Logical_Switch_Port", [["name", "==", "p1"]], { enabled: false, addresses: ["dynamic"] });
    });
    await c.transact((txn) => {
      txn.mutate("Logical_Switch", byUuid(ls._uuid), [["ports", "delete", [p2?._uuid as string]]]);
    });
    await c.waitForRow("Logical_Switch", (r) => r.ports.length === 1, { timeoutMs: 2000 });
    assert.deepEqual(diffCacheAndDump(c.cache as never, c.schema, await srv.dump("OVN_Northbound")), []);
    // p2 was garbage-collected by the server once unreferenced
    assert.equal(c.cache.table("Logical_Switch_Port").size, 1);
  });

  test("a fenced view writes until its fence closes, then refuses writes without sending them and drops its subscriptions", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, comment: "fence-test" });
    t.after(() => c.close());
    await c.connect();
    const fence = new AbortController();
    const view = c.fenced(fence.signal);
    const seenByView: string[] = [];
    view.cache.subscribe("Logical_Switch", (events) => {
      for (const e of events) if (e.kind === "add") seenByView.push(e.row.name as string);
    });
    await view.transact((txn) => void txn.insert("Logical_Switch", { name: "before" }));
    await c.waitForRow("Logical_Switch", (r) => r.name === "before", { timeoutMs: 5000 });
    assert.deepEqual(seenByView, ["before"]);

    // A transaction built before the fence closes, committed after: refused, and nothing reaches the server.
    const built = view.transaction();
    built.insert("Logical_Switch", { name: "after" });
    fence.abort(new Error("leadership lost"));
    await assert.rejects(built.commit(), WriteFencedError);
    await assert.rejects(
      view.transact((txn) => void txn.insert("Logical_Switch", { name: "after-2" })),
      WriteFencedError,
    );
    // The client itself still writes; the view's subscription no longer hears about it.
    await c.transact((txn) => void txn.insert("Logical_Switch", { name: "by-client" }));
    await c.waitForRow("Logical_Switch", (r) => r.name === "by-client", { timeoutMs: 5000 });
    assert.deepEqual(seenByView, ["before"]);
    assert.deepEqual(
      Object.fromEntries(await writeRecordsByComment(srv, "OVN_Northbound")),
      { "fence-test": 2 },
      "the view's write and the client's; the refused ones never reached the server",
    );
    await view.echo();
    assert.equal(view.cache.table("Logical_Switch").size, 2, "reads through the view still work");
  });

  test("the client's comment goes with every write into the database file, and a read writes no record", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, comment: "writer-a" });
    t.after(() => c.close());
    await c.connect();
    await c.transact((txn) => txn.insert("Address_Set", { name: "s1" }));
    await c.transact((txn) => {
      txn.insert("Address_Set", { name: "s2" });
      txn.comment("own words");
    });
    await c.transact((txn) => txn.select("Address_Set", []));
    await c.transactWithRetry((txn) =>
      txn.mutate("Address_Set", [["name", "==", "s1"]], [["addresses", "insert", ["10.0.0.1"]]]),
    );
    assert.deepEqual(Object.fromEntries(await writeRecordsByComment(srv, "OVN_Northbound")), {
      "writer-a": 2,
      "own words": 1,
    });
  });

  test("a cache subscriber that throws is logged, and the other subscribers still run", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const errors: string[] = [];
    const logger = {
      debug() {},
      info() {},
      warn() {},
      error: (_o: object, msg?: string) => errors.push(msg ?? ""),
    };
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, logger });
    t.after(() => c.close());
    await c.connect();
    const seen: string[] = [];
    c.cache.subscribe("Address_Set", () => {
      throw new Error("subscriber bug");
    });
    c.cache.subscribe("Address_Set", (events) => {
      for (const e of events) if (e.kind === "add") seen.push(e.row.name as string);
    });
    await c.transact((txn) => txn.insert("Address_Set", { name: "s1" }));
    await c.echo();
    assert.deepEqual(seen, ["s1"]);
    assert.deepEqual(errors, ["ovsdb cache subscriber failed"]);
  });

  test("waitForRow: an abort before the wait, or during it, rejects at once with the abort's reason; a row that appears resolves", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    const absent = (r: { name: string }) => r.name === "never";
    // Aborted before the wait began (the CNI runtime gave up during an earlier step): no abort event follows.
    const early = new AbortController();
    const reason = new Error("the runtime went away");
    early.abort(reason);
    const started = performance.now();
    await assert.rejects(
      c.waitForRow("Logical_Switch", absent, { timeoutMs: 60_000, signal: early.signal }),
      (e: unknown) => e === reason,
    );
    t.diagnostic(`rejected after ${(performance.now() - started).toFixed(1)} ms (the timeout was 60 s)`);
    const late = new AbortController();
    const waiting = c.waitForRow("Logical_Switch", absent, { timeoutMs: 60_000, signal: late.signal });
    late.abort(reason);
    await assert.rejects(waiting, (e: unknown) => e === reason);
    const appears = c.waitForRow("Logical_Switch", (r) => r.name === "appears", { timeoutMs: 60_000 });
    await c.transact((txn) => {
      txn.insert("Logical_Switch", { name: "appears" });
    });
    assert.equal((await appears).name, "appears");
  });

  test("a guarded insert committed twice applies once; the second resolves as alreadyApplied", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    const insert = () =>
      c.transact((txn) => {
        txn.guardAbsent("Address_Set", [["name", "==", "once"]]);
        txn.insert("Address_Set", { name: "once" });
      });
    const first = await insert();
    assert.equal(first.alreadyApplied, false);
    const second = await insert();
    assert.equal(second.alreadyApplied, true);
    await c.echo();
    assert.equal(c.cache.table("Address_Set").find((r) => r.name === "once").length, 1);
  });

  test("an insert with a chosen uuid applies once, a retry is alreadyApplied, and after a delete it inserts again", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    // ovsdb-server 3.1 takes the member; the probe itself writes nothing.
    const before = await writeRecords(srv, "OVN_Northbound");
    assert.equal(await c.insertUuidSupported(), true);
    assert.equal(await c.insertUuidSupported(), true, "asked once per connection");
    assert.equal(await writeRecords(srv, "OVN_Northbound"), before, "the probe commits nothing");
    const uuid = stableUuid("test", "once");
    const insert = () =>
      c.transact((txn) => {
        txn.insert("Address_Set", { name: "once" }, undefined, { uuid });
      });
    const first = await insert();
    assert.equal(first.alreadyApplied, false);
    assert.equal((await insert()).alreadyApplied, true);
    await c.echo();
    assert.deepEqual(
      c.cache
        .table("Address_Set")
        .find((r) => r.name === "once")
        .map((r) => r._uuid),
      [uuid],
    );
    // Deleted, then inserted again with the same uuid in a later transaction.
    await c.transact((txn) => {
      txn.delete("Address_Set", byUuid(uuid));
    });
    assert.equal((await insert()).alreadyApplied, false);
    await c.echo();
    assert.deepEqual(
      c.cache
        .table("Address_Set")
        .find((r) => r.name === "once")
        .map((r) => r._uuid),
      [uuid],
    );
  });

  test("wait, abort and commitDurable do what RFC 7047 says, and failures come back typed", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    // commitDurable: the write is applied (and on disk when the reply comes).
    await c.transact((txn) => {
      txn.insert("Address_Set", { name: "d", addresses: ["10.0.0.1"] });
      txn.commitDurable();
    });
    // wait: holds while the rows are as stated, fails (typed) once they are not.
    await c.transact((txn) => {
      txn.wait("Address_Set", [["name", "==", "d"]], ["addresses"], "==", [{ addresses: ["10.0.0.1"] }]);
      txn.insert("Address_Set", { name: "after-wait" });
    });
    await assert.rejects(
      c.transact((txn) => {
        txn.wait("Address_Set", [["name", "==", "d"]], ["addresses"], "==", [{ addresses: ["10.9.9.9"] }]);
        txn.insert("Address_Set", { name: "never" });
      }),
      WaitFailedError,
    );
    // abort: nothing of the transaction is applied.
    await assert.rejects(
      c.transact((txn) => {
        txn.insert("Address_Set", { name: "aborted" });
        txn.abort();
      }),
      TransactionError,
    );
    // A row still referenced strongly cannot be deleted on its own.
    const ls = await c.transact((txn) => {
      const p = txn.insert("Logical_Switch_Port", { name: "held" });
      txn.insert("Logical_Switch", { name: "holder", ports: [p] });
    });
    assert.ok(ls.uuids.size === 2);
    await assert.rejects(
      c.transact((txn) => txn.delete("Logical_Switch_Port", [["name", "==", "held"]])),
      ReferentialIntegrityError,
    );
    await c.echo();
    const names = c.cache
      .table("Address_Set")
      .find(() => true)
      .map((r) => r.name)
      .sort();
    assert.deepEqual(names, ["after-wait", "d"]);
  });

  test("inserting into a non-root table without a reference is refused before sending", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await assert.rejects(
      c.transact((txn) => {
        txn.insert("Logical_Switch_Port", { name: "orphan" });
      }),
      (e: Error) =>
        e instanceof OrphanRowError &&
        /Logical_Switch_Port/.test(e.message) &&
        /garbage-collect/.test(e.message),
    );
    assert.equal(Object.keys((await srv.dump("OVN_Northbound")).Logical_Switch_Port ?? {}).length, 0);
  });

  test("a value that violates a column constraint gets a ValueError naming the column", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    await assert.rejects(
      c.transact((txn) => {
        const p = txn.insert("Logical_Switch_Port", { name: "p", tag_request: 5000 });
        txn.insert("Logical_Switch", { name: "ls", ports: [p] });
      }),
      (e: Error) =>
        e instanceof ValueError &&
        /Logical_Switch_Port\.tag_request/.test(e.message) &&
        /4095/.test(e.message),
    );
    // A unique-index clash is the server's constraint violation, typed.
    await c.transact((txn) => {
      txn.insert("Logical_Router", { name: "r1" });
    });
    await assert.rejects(
      c.transact((txn) => {
        txn.insert("Load_Balancer_Group", { name: "g" });
        txn.insert("Load_Balancer_Group", { name: "g" });
      }),
      ConstraintViolationError,
    );
  });

  test("a wrong database name is refused with an error that lists what the server serves", async (t) => {
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
    const c = new OvsdbClient({ remotes: srv.unix, database: "OVN_Nothing", backoff: { initialMs: 10 } });
    t.after(() => c.close());
    await assert.rejects(
      c.connect(),
      (e: Error) =>
        e instanceof UnknownDatabaseError &&
        /OVN_Nothing/.test(e.message) &&
        /OVN_Northbound/.test(e.message),
    );
  });
});
