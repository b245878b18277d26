// The zstack-ovn-central entrypoint's argument handling, through its --dry-run mode: which database it
// creates or joins from the StatefulSet's names, and that a hostile value never reaches a command line.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, test } from "node:test";

const SCRIPT = resolve(import.meta.dirname, "../../deploy/images/central/zstack-ovn-central.sh");
const work = mkdtempSync(join(tmpdir(), "zovn-central-"));
after(() => rmSync(work, { recursive: true, force: true }));

function dryRun(
  role: string,
  env: Record<string, string>,
): { code: number | null; lines: string[]; err: string } {
  const r = spawnSync("bash", [SCRIPT, role, "--dry-run"], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
  });
  return { code: r.status, lines: r.stdout.split("\n").filter((l) => l !== ""), err: r.stderr };
}

function freshDir(name: string): string {
  const d = join(work, name);
  mkdirSync(d, { recursive: true });
  return d;
}

const SERVER_FLAGS = (file: string, port: number) =>
  `--no-chdir --pidfile=/var/run/ovn/${file}.pid --unixctl=/var/run/ovn/${file}.ctl ` +
  `--remote=punix:/var/run/ovn/${file}.sock --remote=ptcp:${port} -vconsole:info -vsyslog:off -vfile:off`;

describe("zstack-ovn-central nb|sb", () => {
  test("with one replica it creates a standalone NB database and serves it", () => {
    const dir = freshDir("single");
    const r = dryRun("nb", { ZOVN_REPLICAS: "1", ZOVN_DB_DIR: dir });
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.lines, [
      `mkdir -p ${dir} /var/run/ovn`,
      `ovsdb-tool create ${dir}/ovnnb_db.db /usr/share/ovn/ovn-nb.ovsschema`,
      `exec ovsdb-server ${SERVER_FLAGS("ovnnb_db", 6641)} ${dir}/ovnnb_db.db`,
    ]);
  });

  test("pod ordinal 0 of three creates the SB Raft cluster under its stable name", () => {
    const dir = freshDir("sb0");
    const r = dryRun("sb", {
      ZOVN_REPLICAS: "3",
      ZOVN_DB_DIR: dir,
      POD_NAME: "ovn-sb-0",
      ZOVN_SERVICE: "ovn-sb",
      POD_NAMESPACE: "kube-system",
    });
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.lines, [
      `mkdir -p ${dir} /var/run/ovn`,
      `ovsdb-tool create-cluster ${dir}/ovnsb_db.db /usr/share/ovn/ovn-sb.ovsschema tcp:ovn-sb-0.ovn-sb.kube-system.svc:6644`,
      `exec ovsdb-server ${SERVER_FLAGS("ovnsb_db", 6642)} ${dir}/ovnsb_db.db`,
    ]);
  });

  test("another ordinal joins the cluster through <statefulset>-0.<service>", () => {
    const dir = freshDir("nb2");
    const r = dryRun("nb", {
      ZOVN_REPLICAS: "3",
      ZOVN_DB_DIR: dir,
      POD_NAME: "ovn-nb-2",
      ZOVN_SERVICE: "ovn-nb",
      ZOVN_RAFT_PORT: "7643",
    });
    assert.equal(r.code, 0, r.err);
    assert.equal(
      r.lines[1],
      `ovsdb-tool join-cluster ${dir}/ovnnb_db.db OVN_Northbound tcp:ovn-nb-2.ovn-nb:7643 tcp:ovn-nb-0.ovn-nb:7643`,
    );
    assert.equal(r.lines.length, 3);
  });

  test("a member whose database exists starts it as it is, without creating or joining", () => {
    const dir = freshDir("existing");
    writeFileSync(join(dir, "ovnnb_db.db"), "");
    const r = dryRun("nb", { ZOVN_REPLICAS: "5", ZOVN_DB_DIR: dir, POD_NAME: "nb-4", ZOVN_SERVICE: "nb" });
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.lines, [
      `mkdir -p ${dir} /var/run/ovn`,
      `exec ovsdb-server ${SERVER_FLAGS("ovnnb_db", 6641)} ${dir}/ovnnb_db.db`,
    ]);
  });

  const refused: [string, Record<string, string>, string][] = [
    ["a replica count Raft cannot use", { ZOVN_REPLICAS: "2" }, "ZOVN_REPLICAS"],
    [
      "a pod name with a shell metacharacter",
      { ZOVN_REPLICAS: "3", POD_NAME: "x-0;reboot", ZOVN_SERVICE: "s" },
      "POD_NAME",
    ],
    [
      "a pod name without an ordinal",
      { ZOVN_REPLICAS: "3", POD_NAME: "ovn-nb", ZOVN_SERVICE: "s" },
      "POD_NAME",
    ],
    [
      "a pod name of 64 characters",
      { ZOVN_REPLICAS: "3", POD_NAME: `${"a".repeat(62)}-0`, ZOVN_SERVICE: "s" },
      "POD_NAME",
    ],
    [
      "a service name with a dot",
      { ZOVN_REPLICAS: "3", POD_NAME: "nb-1", ZOVN_SERVICE: "nb.evil" },
      "ZOVN_SERVICE",
    ],
    ["a missing service", { ZOVN_REPLICAS: "3", POD_NAME: "nb-1" }, "ZOVN_SERVICE"],
    [
      "an upper-case namespace",
      { ZOVN_REPLICAS: "3", POD_NAME: "nb-1", ZOVN_SERVICE: "nb", POD_NAMESPACE: "Kube" },
      "POD_NAMESPACE",
    ],
    ["port 0", { ZOVN_DB_PORT: "0" }, "ZOVN_DB_PORT"],
    ["port 65536", { ZOVN_RAFT_PORT: "65536" }, "ZOVN_RAFT_PORT"],
    ["a port with a flag after it", { ZOVN_DB_PORT: "6641 --remote=ptcp:1" }, "ZOVN_DB_PORT"],
    ["the same client and Raft port", { ZOVN_DB_PORT: "7000", ZOVN_RAFT_PORT: "7000" }, "ZOVN_DB_PORT"],
    ["a relative database directory", { ZOVN_DB_DIR: "var/lib/ovn" }, "ZOVN_DB_DIR"],
    ["a database directory climbing out", { ZOVN_DB_DIR: "/var/lib/../../etc" }, "ZOVN_DB_DIR"],
  ];
  for (const [what, env, named] of refused) {
    test(`refuses ${what}, naming ${named}, and runs nothing`, () => {
      const r = dryRun("nb", { ZOVN_DB_DIR: freshDir("refused"), ...env });
      assert.equal(r.code, 2);
      assert.match(r.err, new RegExp(named));
      assert.deepEqual(r.lines, []);
    });
  }

  test("refuses an unknown role and an unknown flag", () => {
    assert.equal(dryRun("ic-nb", {}).code, 2);
    const r = spawnSync("bash", [SCRIPT, "nb", "--force"], { encoding: "utf8" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--dry-run/);
  });
});

// Three files standing in for the chart's Secret mount: the entrypoint checks only that they exist and can be
// read (ovsdb-server and ovn-northd load them; central-tls.test.ts runs them with real certificates).
const sslDir = freshDir("ssl");
const SSL: Record<string, string> = {
  ZOVN_SSL_KEY: join(sslDir, "tls.key"),
  ZOVN_SSL_CERT: join(sslDir, "tls.crt"),
  ZOVN_SSL_CA: join(sslDir, "ca.crt"),
};
for (const f of Object.values(SSL)) writeFileSync(f, "PEM\n");
const SSL_FLAGS = `--private-key=${SSL.ZOVN_SSL_KEY} --certificate=${SSL.ZOVN_SSL_CERT} --ca-cert=${SSL.ZOVN_SSL_CA}`;

describe("zstack-ovn-central with TLS (ZOVN_SSL_*)", () => {
  test("one replica serves pssl: only, with the three files", () => {
    const dir = freshDir("tls-single");
    const r = dryRun("sb", { ZOVN_REPLICAS: "1", ZOVN_DB_DIR: dir, ...SSL });
    assert.equal(r.code, 0, r.err);
    assert.equal(
      r.lines[2],
      "exec ovsdb-server --no-chdir --pidfile=/var/run/ovn/ovnsb_db.pid --unixctl=/var/run/ovn/ovnsb_db.ctl " +
        `--remote=punix:/var/run/ovn/ovnsb_db.sock --remote=pssl:6642 ${SSL_FLAGS} ` +
        `-vconsole:info -vsyslog:off -vfile:off ${dir}/ovnsb_db.db`,
    );
    assert.doesNotMatch(r.lines.join("\n"), /ptcp/);
  });

  test("Raft members create and join over ssl:", () => {
    const env = { ZOVN_REPLICAS: "3", ZOVN_SERVICE: "ovn-nb-db-peers", POD_NAMESPACE: "kube-system", ...SSL };
    const first = dryRun("nb", { ...env, ZOVN_DB_DIR: freshDir("tls-r0"), POD_NAME: "ovn-nb-db-0" });
    assert.equal(first.code, 0, first.err);
    assert.match(
      first.lines[1] ?? "",
      / ssl:ovn-nb-db-0\.ovn-nb-db-peers\.kube-system\.svc:6643$/,
      "create-cluster's local address",
    );
    const dir = freshDir("tls-r2");
    const other = dryRun("nb", { ...env, ZOVN_DB_DIR: dir, POD_NAME: "ovn-nb-db-2" });
    assert.equal(other.code, 0, other.err);
    assert.equal(
      other.lines[1],
      `ovsdb-tool join-cluster ${dir}/ovnnb_db.db OVN_Northbound ssl:ovn-nb-db-2.ovn-nb-db-peers.kube-system.svc:6643 ` +
        "ssl:ovn-nb-db-0.ovn-nb-db-peers.kube-system.svc:6643",
    );
    assert.match(other.lines[2] ?? "", new RegExp(`--remote=pssl:6641 ${SSL_FLAGS} `));
  });

  test("northd connects over ssl: with its certificate, by default to the local servers", () => {
    const r = dryRun("northd", SSL);
    assert.equal(r.code, 0, r.err);
    assert.equal(
      r.lines[1],
      "exec ovn-northd --no-chdir --ovnnb-db=ssl:127.0.0.1:6641 --ovnsb-db=ssl:127.0.0.1:6642 " +
        `${SSL_FLAGS} --pidfile=/var/run/ovn/ovn-northd.pid --unixctl=/var/run/ovn/ovn-northd.ctl ` +
        "-vconsole:info -vsyslog:off -vfile:off",
    );
    const listed = dryRun("northd", {
      ...SSL,
      ZOVN_NB_ADDRESS: "ssl:ovn-nb-0.ovn-nb:6641,ssl:[fd00::1]:6641",
      ZOVN_SB_ADDRESS: "ssl:10.0.0.5:6642",
    });
    assert.equal(listed.code, 0, listed.err);
  });

  test("a Raft member whose database was made over tcp: is not started with TLS (and the reverse)", () => {
    const dir = freshDir("tls-switch");
    const db = join(dir, "ovnnb_db.db");
    const made = spawnSync("ovsdb-tool", [
      "create-cluster",
      db,
      "/usr/share/ovn/ovn-nb.ovsschema",
      "tcp:nb-0.nb:6643",
    ]);
    assert.equal(made.status, 0, made.stderr?.toString());
    const env = { ZOVN_REPLICAS: "3", ZOVN_DB_DIR: dir, POD_NAME: "nb-0", ZOVN_SERVICE: "nb" };
    const r = dryRun("nb", { ...env, ...SSL });
    assert.equal(r.code, 2);
    assert.match(r.err, /Raft member at tcp:nb-0\.nb:6643, but this start wants ssl:/);
    assert.equal(dryRun("nb", env).code, 0, "without TLS it starts as before");
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    [
      "a certificate without its key and CA",
      { ZOVN_SSL_CERT: SSL.ZOVN_SSL_CERT as string },
      /ZOVN_SSL_CERT set but ZOVN_SSL_KEY ZOVN_SSL_CA missing/,
    ],
    [
      "a CA file that is not there",
      { ...SSL, ZOVN_SSL_CA: "/nonexistent/ca.crt" },
      /ZOVN_SSL_CA: no readable file \/nonexistent\/ca\.crt/,
    ],
    ["a directory as the key", { ...SSL, ZOVN_SSL_KEY: sslDir }, /ZOVN_SSL_KEY: no readable file/],
    [
      "a relative certificate path",
      { ...SSL, ZOVN_SSL_CERT: "tls.crt" },
      /ZOVN_SSL_CERT='tls\.crt' is not valid/,
    ],
    [
      "a key path with a flag after it",
      { ...SSL, ZOVN_SSL_KEY: `${SSL.ZOVN_SSL_KEY} --remote=ptcp:1` },
      /ZOVN_SSL_KEY=/,
    ],
  ];
  for (const [what, env, message] of refused) {
    for (const role of ["nb", "northd"]) {
      test(`${role} refuses ${what}, naming it, and runs nothing`, () => {
        const r = dryRun(role, { ZOVN_DB_DIR: freshDir("tls-refused"), ...env });
        assert.equal(r.code, 2);
        assert.match(r.err, message);
        assert.deepEqual(r.lines, []);
      });
    }
  }

  test("northd refuses tcp: remotes with TLS, and ssl: remotes without it", () => {
    const tcp = dryRun("northd", { ...SSL, ZOVN_SB_ADDRESS: "tcp:10.0.0.5:6642" });
    assert.equal(tcp.code, 2);
    assert.match(tcp.err, /ZOVN_SB_ADDRESS='tcp:10\.0\.0\.5:6642' is not valid \(want ssl:HOST:PORT/);
    const ssl = dryRun("northd", { ZOVN_NB_ADDRESS: "ssl:10.0.0.5:6641" });
    assert.equal(ssl.code, 2);
    assert.match(ssl.err, /ZOVN_NB_ADDRESS=.*ssl: needs ZOVN_SSL_KEY, ZOVN_SSL_CERT and ZOVN_SSL_CA/);
  });
});

describe("zstack-ovn-central northd", () => {
  test("connects to every listed NB and SB member", () => {
    const r = dryRun("northd", {
      ZOVN_NB_ADDRESS: "tcp:ovn-nb-0.ovn-nb:6641,tcp:ovn-nb-1.ovn-nb:6641,tcp:[fd00::1]:6641",
      ZOVN_SB_ADDRESS: "tcp:10.0.0.5:6642",
    });
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.lines, [
      "mkdir -p /var/run/ovn",
      "exec ovn-northd --no-chdir --ovnnb-db=tcp:ovn-nb-0.ovn-nb:6641,tcp:ovn-nb-1.ovn-nb:6641,tcp:[fd00::1]:6641 " +
        "--ovnsb-db=tcp:10.0.0.5:6642 --pidfile=/var/run/ovn/ovn-northd.pid --unixctl=/var/run/ovn/ovn-northd.ctl " +
        "-vconsole:info -vsyslog:off -vfile:off",
    ]);
  });

  for (const bad of [
    "unix:/tmp/x",
    "tcp:host:6641,",
    "tcp:ho st:6641",
    "tcp:host:99999",
    "tcp:host:1 -vfile:x",
    "tcp:300.1.1.1:1",
  ]) {
    test(`refuses the NB address ${JSON.stringify(bad)}`, () => {
      const r = dryRun("northd", { ZOVN_NB_ADDRESS: bad });
      assert.equal(r.code, 2);
      assert.match(r.err, /ZOVN_NB_ADDRESS/);
      assert.deepEqual(r.lines, []);
    });
  }
});
