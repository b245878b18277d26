// The node agent's connection to ZStack's SB (src/node/external-sb.ts, as zstack-ovnkube-node makes it in External
// mode) against a real ssl: SB (ovsdb-server with TLS, certificates of test/rig/pki.ts): a wrong address, a client
// certificate of another CA, a CA that did not sign the server's certificate and a missing certificate file each give
// the agent's not-Ready reason naming the setting and the fix, while it keeps retrying; the right files put in place
// connect it without a restart, and it then reads SB's chassis.

import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type ExternalSb, externalSb } from "../../../src/node/external-sb.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type SbTables, sbModel } from "../../../src/ovsdb/models/sb.generated.ts";
import { useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { createPki } from "../../rig/pki.ts";
import { freePort } from "../../rig/ports.ts";
import { SCHEMAS } from "../../rig/server.ts";
import { teardownFor } from "../../rig/teardown.ts";

async function until<T>(what: string, get: () => T | undefined, timeoutMs = 120_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

test("the node agent's ssl: connection to ZStack's SB: bad address and certificates are not-Ready reasons naming the setting; fixed files connect it without a restart", async (t) => {
  const dir = await mkdtemp("/tmp/zo-sbtls-");
  t.after(() => rm(dir, { recursive: true, force: true }));
  const pki = await createPki(join(dir, "pki"));
  const sbServer = await useOvsdbServer(t, { schemas: [SCHEMAS.sb], ssl: pki });
  const remote = sbServer.ssl as string;
  // ZStack's hypervisor chassis, written by a client with a good certificate.
  const zstack = new OvsdbClient<SbTables>({
    remotes: remote,
    model: sbModel,
    leaderOnly: false,
    tls: { ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey },
  });
  teardownFor(t).after(() => zstack.close());
  await zstack.connect();
  const txn = zstack.transaction();
  const encap = txn.insert("Encap", { type: "geneve", ip: "192.168.200.11", chassis_name: "zstack-host-1" });
  txn.insert("Chassis", { name: "zstack-host-1", hostname: "192.168.200.11", encaps: [encap] });
  await txn.commit();

  const connect = (remotes: string, files: { ca: string; cert: string; key: string }): ExternalSb => {
    const sb = externalSb({
      remotes,
      ssl: { caCert: files.ca, clientCert: files.cert, clientKey: files.key, verifyHostname: false },
    });
    teardownFor(t).after(() => sb.client.close());
    void sb.client.connect({ retry: true }).catch(() => {});
    return sb;
  };
  /** The reason once it matches `want`, after at least two failed attempts (it keeps retrying). */
  const reason = async (sb: ExternalSb, want: RegExp) => {
    let failures = 0;
    sb.client.on("connectFailed", () => failures++);
    const got = await until(`a reason matching ${want}`, () => {
      const p = sb.problem();
      return p && want.test(p) && failures >= 2 ? p : undefined;
    });
    console.log(`# ${got}`);
    assert.equal(sb.client.connected, false);
    return got;
  };
  const good = { ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey };

  await t.test("a wrong address names ovn.sbdbAddress", async () => {
    const wrong = `ssl:127.0.0.1:${await freePort()}`;
    const sb = connect(wrong, good);
    const p = await reason(sb, /nothing answers there/);
    assert.match(
      p,
      new RegExp(
        `^not connected to ZStack's SB at ${wrong} \\(ovn\\.sbdbAddress \\(ZSTACK_OVN_SBDB_ADDRESS\\)\\)`,
      ),
    );
    assert.match(p, /check ovn\.sbdbAddress \(ZSTACK_OVN_SBDB_ADDRESS\)/);
    await sb.client.close();
  });

  await t.test("a CA that did not sign the SB's certificate names ovn.ssl.caCert", async () => {
    const sb = connect(remote, { ...good, ca: pki.otherCaCert });
    await reason(sb, /set ovn\.ssl\.caCert to the CA that signed the database server's certificate/);
    await sb.client.close();
  });

  await t.test(
    "a client certificate of another CA, then a missing file, name their settings; the right files connect it and it reads ZStack's chassis",
    async () => {
      const files = { ca: join(dir, "ca.pem"), cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
      await copyFile(pki.caCert, files.ca);
      await copyFile(pki.otherClientCert, files.cert);
      await copyFile(pki.otherClientKey, files.key);
      const sb = connect(remote, files);
      await reason(sb, /set ovn\.ssl\.clientCert and ovn\.ssl\.clientKey to a client certificate/);
      await rm(files.cert);
      await reason(
        sb,
        new RegExp(`ovn\\.ssl\\.clientCert=${files.cert} cannot be read \\(ENOENT\\); mount the file there`),
      );
      // The Secret is fixed: the next attempt reads the right pair.
      await copyFile(pki.clientKey, files.key);
      await copyFile(pki.clientCert, files.cert);
      await until("connected", () => (sb.client.connected ? true : undefined));
      assert.equal(sb.problem(), undefined);
      const host = await until("ZStack's chassis in the agent's cache", () =>
        sb.client.cache.table("Chassis").lookupOne("name", "zstack-host-1"),
      );
      assert.equal(host.hostname, "192.168.200.11");
    },
  );
});
