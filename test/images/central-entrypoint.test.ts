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
