// zstack-ovnkube-controller with a bad configuration against a real ssl: NB (ovsdb-server with TLS, certificates of
// test/rig/pki.ts): a wrong address, a client certificate the NB does not trust, a CA that did not sign the NB's
// certificate, a certificate file that is not there, and ssl: remotes without TLS settings. Each time it stays up
// (alive on /healthz, retrying, no crash loop), not Ready, and /readyz names the setting and the fix; a database
// appearing at the address, or the right certificate put in place of the wrong one, makes it Ready without a restart.

import assert from "node:assert/strict";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { createPki, type Pki } from "../../rig/pki.ts";
import { freePort } from "../../rig/ports.ts";
import { SCHEMAS } from "../../rig/server.ts";
import { type ControllerProcess, spawnController, until, useApiserver } from "./harness.ts";

interface Probe {
  status: number;
  body: string;
}

async function probe(port: number, path: string): Promise<Probe | undefined> {
  return fetch(`http://127.0.0.1:${port}${path}`).then(
    async (r) => ({ status: r.status, body: await r.text() }),
    () => undefined,
  );
}

/** Waits for /readyz to answer `status` with a body matching `body`; fails at once if the controller exits. */
async function untilReadyz(c: ControllerProcess, status: number, body?: RegExp): Promise<Probe> {
  const start = Date.now();
  let last: Probe | undefined;
  const got = await until(
    `/readyz ${status}${body ? ` matching ${body}` : ""}`,
    async () => {
      assert.ok(!c.daemon.hasExited(), `the controller exited: ${JSON.stringify(c.logs().slice(-5))}`);
      last = await probe(c.port, "/readyz");
      return last && last.status === status && (!body || body.test(last.body)) ? last : undefined;
    },
    180_000,
    250,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; last answer: ${JSON.stringify(last)}`);
  });
  console.log(`# /readyz ${status} after ${Date.now() - start} ms: ${got.body.slice(0, 300)}`);
  return got;
}

/** Alive, and still alive after it has failed to connect `attempts` times: retrying, not exiting. */
async function assertAliveRetrying(c: ControllerProcess, attempts: number): Promise<void> {
  const health = await probe(c.port, "/healthz");
  assert.equal(health?.status, 200, "alive: the kubelet does not restart it");
  await until(
    `${attempts} failed connection attempts`,
    () => {
      assert.ok(!c.daemon.hasExited(), "the controller exited");
      return (
        c.logs().filter((l) => l.msg === "cannot reach the OVN northbound database yet").length >= attempts
      );
    },
    180_000,
    250,
  );
  assert.ok(!c.daemon.hasExited(), "still running");
}

const sslEnv = (nb: string, files: { ca: string; cert: string; key: string }) => ({
  ZSTACK_OVN_MODE: "external",
  ZSTACK_OVN_NBDB_ADDRESS: nb,
  ZSTACK_OVN_SBDB_ADDRESS: "ssl:127.0.0.1:6642",
  ZSTACK_OVN_SSL_ENABLED: "true",
  ZSTACK_OVN_SSL_CA: files.ca,
  ZSTACK_OVN_SSL_CERT: files.cert,
  ZSTACK_OVN_SSL_KEY: files.key,
});

test("zstack-ovnkube-controller with a bad NB configuration stays up, not Ready, naming the setting and the fix", async (t) => {
  const cluster = await useApiserver(t);
  const dir = await mkdtemp("/tmp/zo-badcfg-");
  t.after(() => rm(dir, { recursive: true, force: true }));
  const pki: Pki = await createPki(join(dir, "pki"));
  const good = { ca: pki.caCert, cert: pki.clientCert, key: pki.clientKey };
  let n = 0;
  const spawn = (env: Record<string, string>, leaderElect = false) =>
    spawnController(t, cluster, {
      identity: `bad-${n++}`,
      nbAddress: env.ZSTACK_OVN_NBDB_ADDRESS ?? "",
      env,
      leaderElect,
    });
  const leaseHolder = () =>
    cluster.api
      .request<{ spec?: { holderIdentity?: string } }>(
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/zstack-ovnkube-controller",
      )
      .then((l) => l.spec?.holderIdentity || undefined)
      .catch(() => undefined);

  await t.test(
    "a wrong address: retrying, /readyz names ovn.nbdbAddress, no Lease taken; Ready and leading once the NB answers there",
    async () => {
      const port = await freePort();
      const remote = `ssl:127.0.0.1:${port}`;
      const c = await spawn(sslEnv(remote, good), true);
      const r = await untilReadyz(c, 500, /ovn\.nbdbAddress/);
      assert.match(
        r.body,
        new RegExp(`${remote}.*ECONNREFUSED.*nothing answers there: check ovn\\.nbdbAddress`),
      );
      await assertAliveRetrying(c, 3);
      // A replica that never reached NB does not campaign: holding the Lease it would reconcile nothing.
      assert.equal(await leaseHolder(), undefined, "no Lease holder while NB is unreachable");
      // ZStack's NB comes up at that address (or the network is fixed): no restart needed.
      await useOvsdbServer(t, {
        schemas: [SCHEMAS.nb],
        ssl: pki,
        extraArgs: [`--remote=pssl:${port}:127.0.0.1`],
      });
      await untilReadyz(c, 200);
      assert.equal(await until("the Lease holder", leaseHolder), c.identity);
      await c.stop();
    },
  );

  const nb = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], ssl: pki });
  const remote = nb.ssl as string;

  await t.test(
    "a client certificate of a CA the NB does not trust: /readyz names ovn.ssl.clientCert; Ready once the right one is in the files",
    async () => {
      const files = { ca: join(dir, "a-ca.pem"), cert: join(dir, "a-cert.pem"), key: join(dir, "a-key.pem") };
      await copyFile(pki.caCert, files.ca);
      await copyFile(pki.otherClientCert, files.cert);
      await copyFile(pki.otherClientKey, files.key);
      const c = await spawn(sslEnv(remote, files));
      const r = await untilReadyz(c, 500, /refused our certificate/);
      assert.match(r.body, /set ovn\.ssl\.clientCert and ovn\.ssl\.clientKey to a client certificate/);
      assert.match(r.body, new RegExp(remote));
      await assertAliveRetrying(c, 3);
      // The Secret is fixed (the kubelet updates the mounted files): the next attempt reads them.
      await copyFile(pki.clientKey, `${files.key}.new`);
      await copyFile(pki.clientCert, `${files.cert}.new`);
      await copyFile(`${files.key}.new`, files.key);
      await copyFile(`${files.cert}.new`, files.cert);
      await untilReadyz(c, 200);
      await c.stop();
    },
  );

  await t.test("a CA that did not sign the NB's certificate: /readyz names ovn.ssl.caCert", async () => {
    const c = await spawn(sslEnv(remote, { ...good, ca: pki.otherCaCert }));
    const r = await untilReadyz(c, 500, /not signed by the configured CA/);
    assert.match(r.body, /set ovn\.ssl\.caCert to the CA that signed the database server's certificate/);
    await assertAliveRetrying(c, 2);
    await c.stop();
  });

  await t.test("a certificate file that is not there: /readyz names the setting and the path", async () => {
    const missing = join(dir, "absent", "client-cert.pem");
    const c = await spawn(sslEnv(remote, { ...good, cert: missing }));
    const r = await untilReadyz(c, 500, /cannot be read/);
    assert.match(
      r.body,
      new RegExp(`ovn\\.ssl\\.clientCert=${missing} cannot be read \\(ENOENT\\); mount the file there`),
    );
    await assertAliveRetrying(c, 2);
    // Mounted late (a Secret created after the Deployment): Ready without a restart.
    await mkdir(join(dir, "absent"));
    await copyFile(pki.clientCert, missing);
    await untilReadyz(c, 200);
    await c.stop();
  });

  await t.test(
    "ssl: remotes without the TLS settings: alive, not Ready naming the settings, exit code 2 when stopped",
    async () => {
      const c = await spawn({
        ZSTACK_OVN_MODE: "external",
        ZSTACK_OVN_NBDB_ADDRESS: remote,
        ZSTACK_OVN_SBDB_ADDRESS: "ssl:127.0.0.1:6642",
      });
      const r = await untilReadyz(c, 500, /bad configuration/);
      assert.match(r.body, /ssl: remotes need .*ovn\.ssl\.enabled.*=true/);
      assert.equal((await probe(c.port, "/healthz"))?.status, 200);
      await sleep(1000);
      assert.ok(!c.daemon.hasExited(), "still running");
      const exit = await c.daemon.terminate(30_000);
      assert.deepEqual(exit, { code: 2, signal: null });
    },
  );
});
