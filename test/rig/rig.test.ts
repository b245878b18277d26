import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { test } from "node:test";
import { connect as tlsConnect } from "node:tls";
import { fileURLToPath } from "node:url";
import {
  createPki,
  livePids,
  type OvsdbServer,
  parseClusterStatus,
  parseJsonDump,
  SCHEMAS,
  useOvsdbServer,
  useRaftCluster,
} from "./ovsdb-server.ts";
import { runTool } from "./process.ts";

/** A zombie counts as dead: it runs no code and holds no socket, it only waits for its parent to reap it. */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** SIGKILL from another process is delivered asynchronously, so give it a moment. */
async function isGoneSoon(pid: number): Promise<boolean> {
  for (let i = 0; i < 40 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
  return !isAlive(pid);
}

async function listDbs(remote: string, tls: string[] = []): Promise<string[]> {
  const out = await runTool("ovsdb-client", ["--timeout=5", ...tls, "list-dbs", remote]);
  return out.trim().split("\n");
}

/** One JSON-RPC echo over node:tls with full verification, the way the client under test connects. */
function echoOverNodeTls(port: number, creds: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, ...creds }, () => {
      socket.write(JSON.stringify({ id: "tls-echo", method: "echo", params: ["hi"] }));
    });
    let text = "";
    socket.setTimeout(5000, () => socket.destroy(new Error("no echo reply within 5 s")));
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      try {
        const reply: unknown = JSON.parse(text);
        socket.end();
        resolve(reply);
      } catch {
        // reply not complete yet
      }
    });
    socket.once("error", reject);
  });
}

test("parseJsonDump keys every table's rows by _uuid and keeps wire values", () => {
  const text = [
    JSON.stringify({ caption: "ACL table", data: [], headings: ["_uuid", "action"] }),
    JSON.stringify({
      caption: "Logical_Switch table",
      data: [[["uuid", "u-1"], ["map", [["k", "v"]]], "a\nb", ["uuid", "v-1"]]],
      headings: ["_uuid", "external_ids", "name", "_version"],
    }),
    "",
  ].join("\n");
  assert.deepEqual(parseJsonDump(text), {
    ACL: {},
    Logical_Switch: { "u-1": { _uuid: ["uuid", "u-1"], external_ids: ["map", [["k", "v"]]], name: "a\nb" } },
  });
});

test("parseClusterStatus reads role, status, term and leader", () => {
  const text = [
    "b76d",
    "Name: OVN_Northbound",
    "Server ID: b76d (b76d1e15-487b-4524-a234-63c08d18a495)",
    "Address: tcp:127.0.0.1:46002",
    "Status: cluster member",
    "Role: follower",
    "Term: 3",
    "Leader: be66",
    "Vote: unknown",
  ].join("\n");
  assert.deepEqual(parseClusterStatus(text), {
    serverId: "b76d1e15-487b-4524-a234-63c08d18a495",
    status: "cluster member",
    role: "follower",
    term: 3,
    leader: "be66",
  });
});

test("NB server answers over unix, tcp and ssl, keeps data and ports across restarts, and leaves nothing after stop", async (t) => {
  const pkiDir = await mkdtemp("/tmp/zo-pki-");
  t.after(() => rm(pkiDir, { recursive: true, force: true }));
  const pki = await createPki(pkiDir);
  const server = await useOvsdbServer(t, { schemas: [SCHEMAS.nb], tcp: true, ssl: pki });

  assert.deepEqual(server.dbNames, ["OVN_Northbound"]);
  assert.match(server.unix, /^unix:\/tmp\/zo-.*\/db\.sock$/);
  assert.match(server.tcp ?? "", /^tcp:127\.0\.0\.1:\d+$/);
  assert.match(server.ssl ?? "", /^ssl:127\.0\.0\.1:\d+$/);
  const clientTls = ["-p", pki.clientKey, "-c", pki.clientCert, "-C", pki.caCert];
  assert.ok((await listDbs(server.unix)).includes("OVN_Northbound"));
  assert.ok((await listDbs(server.tcp!)).includes("OVN_Northbound"));
  assert.ok((await listDbs(server.ssl!, clientTls)).includes("OVN_Northbound"));
  const otherTls = ["-p", pki.otherClientKey, "-c", pki.otherClientCert, "-C", pki.caCert];
  await assert.rejects(listDbs(server.ssl!, otherTls), "a client certificate of another CA is refused");

  const echo = await echoOverNodeTls(server.sslPort!, {
    ca: await readFile(pki.caCert),
    cert: await readFile(pki.clientCert),
    key: await readFile(pki.clientKey),
  });
  assert.deepEqual(echo, { id: "tls-echo", result: ["hi"], error: null });

  const result = await server.transactRaw("OVN_Northbound", [
    { op: "insert", table: "Logical_Switch", row: { name: "ls0", external_ids: ["map", [["k", "v"]]] } },
  ]);
  const uuid = (result as Array<{ uuid: [string, string] }>)[0]!.uuid[1];
  const nbSchema = JSON.parse(await readFile(SCHEMAS.nb, "utf8")) as { tables: Record<string, unknown> };
  const nbTables = Object.keys(nbSchema.tables).sort();
  const expectRow = async (s: OvsdbServer): Promise<void> => {
    const dump = await s.dump("OVN_Northbound");
    assert.deepEqual(dump.ACL, {});
    assert.deepEqual(Object.keys(dump).sort(), nbTables);
    const row = dump.Logical_Switch?.[uuid];
    assert.ok(row, "inserted row is in the dump");
    assert.deepEqual(row._uuid, ["uuid", uuid]);
    assert.equal(row.name, "ls0");
    assert.deepEqual(row.external_ids, ["map", [["k", "v"]]]);
    assert.deepEqual(row.ports, ["set", []]);
  };
  await expectRow(server);
  assert.match(await server.appctl("ovsdb-server/list-dbs"), /OVN_Northbound/);

  const { pid, tcp, ssl } = server;
  server.kill("SIGKILL");
  await server.waitForExit();
  assert.equal(server.running, false);
  await server.restart();
  assert.notEqual(server.pid, pid);
  assert.equal(server.tcp, tcp);
  assert.equal(server.ssl, ssl);
  assert.ok((await listDbs(server.tcp!)).includes("OVN_Northbound"));
  assert.ok((await listDbs(server.ssl!, clientTls)).includes("OVN_Northbound"));
  await expectRow(server);

  const lastPid = server.pid;
  await server.stop();
  await server.stop();
  assert.equal(isAlive(lastPid), false);
  assert.equal(existsSync(server.dir), false);
});

test("useOvsdbServer stops the server and removes its dir when the test ends", async (t) => {
  let pid = 0;
  let dir = "";
  await t.test("a test using a server", async (inner) => {
    const server = await useOvsdbServer(inner, { schemas: [SCHEMAS.sb, SCHEMAS.vswitch] });
    assert.deepEqual(server.dbNames, ["OVN_Southbound", "Open_vSwitch"]);
    pid = server.pid;
    dir = server.dir;
    assert.ok(isAlive(pid));
  });
  assert.equal(isAlive(pid), false);
  assert.equal(existsSync(dir), false);
  assert.equal(livePids().includes(pid), false);
});

/** Runs a script that starts a server and then ends badly; returns what it started. */
async function runCrashingUser(ending: string): Promise<{ pid: number; dir: string }> {
  const rig = fileURLToPath(new URL("./ovsdb-server.ts", import.meta.url));
  const script = [
    `import { startOvsdbServer, SCHEMAS } from ${JSON.stringify(rig)};`,
    "const s = await startOvsdbServer({ schemas: [SCHEMAS.nb] });",
    "console.log(JSON.stringify({ pid: s.pid, dir: s.dir }));",
    ending,
  ].join("\n");
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once("exit", (c, s) => resolve([c, s])),
  );
  assert.ok(code !== 0 || signal !== null, "the script failed");
  return JSON.parse(stdout) as { pid: number; dir: string };
}

test("a test process that throws leaves no ovsdb-server and no dir behind", async () => {
  const { pid, dir } = await runCrashingUser('throw new Error("test file crashed");');
  try {
    assert.ok(await isGoneSoon(pid), `ovsdb-server ${pid} is still running`);
    assert.equal(existsSync(dir), false);
  } finally {
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
});

test("a test process killed by SIGKILL takes its ovsdb-server with it", async () => {
  const { pid, dir } = await runCrashingUser('process.kill(process.pid, "SIGKILL");');
  try {
    assert.ok(await isGoneSoon(pid), `ovsdb-server ${pid} is still running`);
  } finally {
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
    // No exit hook runs on SIGKILL, so the dir is left for us.
    await rm(dir, { recursive: true, force: true });
  }
});

test("a 3-member NB Raft cluster elects a new leader after its leader is killed", async (t) => {
  const cluster = await useRaftCluster(t, { schema: SCHEMAS.nb });
  assert.equal(cluster.members.length, 3);
  assert.deepEqual(
    cluster.remotes,
    cluster.members.map((m) => m.server.unix),
  );
  const first = await cluster.leader();

  first.server.kill("SIGKILL");
  await first.server.waitForExit();
  const second = await cluster.leader();
  assert.notEqual(second.name, first.name);

  const follower = cluster.members.find((m) => m !== first && m !== second)!;
  const result = await follower.server.transactRaw("OVN_Northbound", [
    { op: "insert", table: "Logical_Switch", row: { name: "after-failover" } },
  ]);
  const uuid = (result as Array<{ uuid: [string, string] }>)[0]!.uuid[1];

  await first.server.restart();
  await cluster.waitForQuorum();
  const status = await cluster.status(first);
  assert.equal(status.status, "cluster member");
  // The restarted member catches up from the log it missed.
  let caughtUp = false;
  for (let i = 0; i < 50 && !caughtUp; i++) {
    caughtUp = (await first.server.dump("OVN_Northbound")).Logical_Switch?.[uuid] !== undefined;
    if (!caughtUp) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(caughtUp, "restarted member has the row written while it was down");

  const pids = cluster.members.map((m) => m.server.pid);
  await cluster.stop();
  for (const pid of pids) assert.equal(isAlive(pid), false);
  assert.equal(existsSync(cluster.dir), false);
});
