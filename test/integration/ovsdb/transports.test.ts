import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { TlsError } from "../../../src/ovsdb/errors.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { sbModel } from "../../../src/ovsdb/models/sb.generated.ts";
import { vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import type { TlsConfig } from "../../../src/ovsdb/transport.ts";
import { createPki, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const MODELS = [
  { schema: SCHEMAS.nb, model: nbModel, table: "NB_Global" },
  { schema: SCHEMAS.sb, model: sbModel, table: "SB_Global" },
  { schema: SCHEMAS.vswitch, model: vswitchModel, table: "Open_vSwitch" },
] as const;

describe("transports: unix, tcp and ssl with NB, SB and Open_vSwitch", () => {
  for (const { schema, model, table } of MODELS) {
    test(`${model.name} works over unix, tcp and ssl`, async (t) => {
      const dir = (await import("node:fs/promises")).mkdtemp("/tmp/zo-pki-");
      const pki = await createPki(await dir);
      const srv = await useOvsdbServer(t, { schemas: [schema], tcp: true, ssl: pki });
      const tls: TlsConfig = { ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey };
      for (const remote of [srv.unix, srv.tcp as string, srv.ssl as string]) {
        const c = new OvsdbClient({ remotes: remote, model: model as typeof nbModel, tls });
        try {
          await c.connect();
          const tc = c.cache.table(table as "NB_Global");
          const kind = remote.slice(0, remote.indexOf(":"));
          await c.transact((txn) => {
            // The table holds at most one row: insert it once, then write to it over each transport.
            if (tc.size === 0) txn.insert(table as "NB_Global", { external_ids: { via: kind } });
            else txn.update(table as "NB_Global", [], { external_ids: { via: kind } });
          });
          await c.waitForRow(table as "NB_Global", (r) => r.external_ids.via === kind, { timeoutMs: 2000 });
          assert.deepEqual((await c.listDbs()).includes(model.name), true);
        } finally {
          await c.close();
        }
      }
    });
  }

  test("ssl: a wrong CA, a client without a certificate, and a client certificate from another CA are refused with clear errors", async (t) => {
    const pki = await createPki(await (await import("node:fs/promises")).mkdtemp("/tmp/zo-pki-"));
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], ssl: pki });
    const attempt = async (tls: TlsConfig) => {
      const c = new OvsdbClient<NbTables>({
        remotes: srv.ssl as string,
        model: nbModel,
        tls,
        backoff: { initialMs: 10 },
      });
      try {
        await c.connect();
        return undefined;
      } catch (e) {
        return e as Error;
      } finally {
        await c.close();
      }
    };
    const wrongCa = await attempt({ ca: pki.otherCaCert, cert: pki.clientCert, key: pki.clientKey });
    assert.ok(wrongCa instanceof TlsError, String(wrongCa));
    assert.match(wrongCa.message, /not signed by the configured CA/);

    const noCert = await attempt({ ca: pki.caCert });
    assert.ok(noCert instanceof TlsError, String(noCert));
    assert.match(noCert.message, /refused our certificate|certificate/);

    const otherClient = await attempt({ ca: pki.caCert, cert: pki.otherClientCert, key: pki.otherClientKey });
    assert.ok(otherClient instanceof TlsError, String(otherClient));
    assert.match(otherClient.message, /refused our certificate/);

    // The server is unharmed and still serves a correct client.
    const ok = await attempt({ ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey });
    assert.equal(ok, undefined);
  });

  test("host-name checking is off by default for ssl:IP remotes and can be turned on", async (t) => {
    const pki = await createPki(await (await import("node:fs/promises")).mkdtemp("/tmp/zo-pki-"));
    const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], ssl: pki });
    const base = { ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey };
    const c1 = new OvsdbClient<NbTables>({ remotes: srv.ssl as string, model: nbModel, tls: base });
    await c1.connect();
    await c1.close();
    const c2 = new OvsdbClient<NbTables>({
      remotes: srv.ssl as string,
      model: nbModel,
      tls: { ...base, verifyHostname: true, servername: "not-the-server.example" },
    });
    await assert.rejects(c2.connect(), TlsError);
    await c2.close();
  });
});

describe("schema tolerance", () => {
  test("a server schema with a column added and one removed: the client leaves out the missing column and ignores the unknown one", async (t) => {
    const dir = await (await import("node:fs/promises")).mkdtemp("/tmp/zo-sch-");
    const raw = JSON.parse(await readFile(SCHEMAS.nb, "utf8"));
    delete raw.tables.Logical_Switch_Port.columns.tag_request;
    raw.tables.Logical_Switch.columns.zz_added = { type: { key: "string", min: 0, max: 1 } };
    raw.version = "99.0.0";
    delete raw.cksum;
    const path = join(dir, "derived-nb.ovsschema");
    await writeFile(path, JSON.stringify(raw));
    const srv = await useOvsdbServer(t, { schemas: [path] });
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
    t.after(() => c.close());
    await c.connect();
    assert.equal(c.schema.tables.get("Logical_Switch_Port")?.columns.has("tag_request"), false);
    assert.equal(c.schema.tables.get("Logical_Switch")?.columns.has("zz_added"), false);
    await c.transact((txn) => {
      const p = txn.insert("Logical_Switch_Port", { name: "p1", tag_request: 10, addresses: ["router"] });
      txn.insert("Logical_Switch", { name: "ls1", ports: [p] });
    });
    await srv.transactRaw("OVN_Northbound", [
      { op: "update", table: "Logical_Switch", where: [["name", "==", "ls1"]], row: { zz_added: "x" } },
    ]);
    await c.transact((txn) => {
      txn.update("Logical_Switch", [["name", "==", "ls1"]], { other_config: { a: "b" } });
    });
    const ls = await c.waitForRow("Logical_Switch", (r) => r.other_config.a === "b", { timeoutMs: 2000 });
    assert.equal((ls as unknown as Record<string, unknown>).zz_added, undefined);
    const p1 = c.cache.table("Logical_Switch_Port").findOne((r) => r.name === "p1");
    assert.equal(p1?.tag_request, null, "missing column holds its default");
    assert.deepEqual(p1?.addresses, ["router"]);
  });
});
