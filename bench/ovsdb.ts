// make bench-ovsdb: our OVSDB client against ovn-nbctl (daemon mode) on the same real ovsdb-server, in one run.
//   (a) 10,000 logical switch ports in one switch, batches of 100 per transaction
//   (b) 2,000 ports, one transaction per port
//   (c) resident memory of the cache holding 100,000 NB rows
//   (d) resync after a reconnect to a clustered database holding 100,000 rows: found=true vs a forced full reload
// Context only: ovn-nbctl started once per port, sampled for 100 ports at switch sizes 0, 3,000 and 10,000.

import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { OvsdbClient } from "../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../src/ovsdb/models/nb.generated.ts";
import { byUuid, type Transaction } from "../src/ovsdb/transaction.ts";
import { NODE_FLAGS } from "../src/runtime-flags.ts";
import { type OvsdbServer, SCHEMAS, startOvsdbServer, startRaftCluster } from "../test/rig/ovsdb-server.ts";

const run = promisify(execFile);
const quick = process.argv.includes("--quick");
const N_A = quick ? 2000 : 10_000;
const N_B = quick ? 500 : 2000;
const N_ROWS = quick ? 20_000 : 100_000;

function mac(i: number): string {
  const h = (n: number) => n.toString(16).padStart(2, "0");
  return `0a:58:0a:${h((i >> 16) & 255)}:${h((i >> 8) & 255)}:${h(i & 255)}`;
}
function ip(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}
// Every port gets addresses of its own: ovn-nbctl refuses a duplicate IP on a switch.
let nextAddr = 1;
function port(prefix: string, i: number) {
  const a = nextAddr++;
  return {
    name: `${prefix}-${i}`,
    addresses: [`${mac(a)} ${ip(a)}`],
    external_ids: { pod: `ns/${prefix}-${i}` },
  };
}

async function nbctlDaemon(
  srv: OvsdbServer,
  dir: string,
): Promise<{ env: NodeJS.ProcessEnv; stop(): Promise<void> }> {
  const env = { ...process.env, OVN_RUNDIR: dir, OVS_RUNDIR: dir };
  const pidfile = join(dir, "nbctl.pid");
  const { stdout } = await run(
    "ovn-nbctl",
    [
      `--db=${srv.unix}`,
      "--detach",
      "--no-chdir",
      `--pidfile=${pidfile}`,
      `--log-file=${join(dir, "nbctl.log")}`,
    ],
    { env },
  );
  const ctl = stdout.trim();
  const pid = Number((await readFile(pidfile, "utf8")).trim());
  return {
    env: { ...env, OVN_NB_DAEMON: ctl },
    async stop() {
      try {
        process.kill(pid, "SIGTERM");
      } catch {}
    },
  };
}

function nbctlPortArgs(ls: string, p: ReturnType<typeof port>): string[] {
  return [
    "--",
    "lsp-add",
    ls,
    p.name,
    "--",
    "lsp-set-addresses",
    p.name,
    p.addresses[0] as string,
    "--",
    "set",
    "Logical_Switch_Port",
    p.name,
    `external_ids:pod=${p.external_ids.pod}`,
  ];
}

async function timeIt(fn: () => Promise<void>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function newSwitch(c: OvsdbClient<NbTables>, name: string): Promise<string> {
  const r = await c.transact((t) => {
    t.insert("Logical_Switch", { name }, "ls");
  });
  return r.uuids.get("ls") as string;
}

async function dropSwitch(c: OvsdbClient<NbTables>, uuid: string): Promise<void> {
  await c.transact((t) => {
    t.delete("Logical_Switch", byUuid(uuid));
  });
}

function addPorts(t: Transaction<NbTables>, lsUuid: string, ports: ReturnType<typeof port>[]): void {
  const refs = ports.map((p) => t.insert("Logical_Switch_Port", p));
  t.mutate("Logical_Switch", byUuid(lsUuid), [["ports", "insert", refs]]);
}

function fmt(ms: number): string {
  return `${ms.toFixed(0)} ms`;
}

async function benchWrites(): Promise<void> {
  const dir = await mkdtemp("/tmp/zo-bench-");
  const srv = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const daemon = await nbctlDaemon(srv, dir);
  const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  await c.connect();
  try {
    // (a) batches of 100
    await run("ovn-nbctl", ["ls-add", "nbctl-a"], { env: daemon.env });
    const nbA = await timeIt(async () => {
      for (let b = 0; b < N_A / 100; b++) {
        const args: string[] = [];
        for (let i = b * 100; i < (b + 1) * 100; i++) args.push(...nbctlPortArgs("nbctl-a", port("na", i)));
        await run("ovn-nbctl", args, { env: daemon.env, maxBuffer: 1 << 24 });
      }
    });
    await run("ovn-nbctl", ["ls-del", "nbctl-a"], { env: daemon.env });
    const lsA = await newSwitch(c, "ours-a");
    const ourA = await timeIt(async () => {
      for (let b = 0; b < N_A / 100; b++) {
        const ports = Array.from({ length: 100 }, (_, k) => port("oa", b * 100 + k));
        await c.transact((t) => addPorts(t, lsA, ports));
      }
    });
    console.log(
      `(a) ${N_A} ports in one switch, 100 per transaction: ours ${fmt(ourA)}, ovn-nbctl daemon ${fmt(nbA)}, ratio ${(ourA / nbA).toFixed(2)}x (target <= 1.0x)`,
    );
    await dropSwitch(c, lsA);

    // (b) one transaction per port
    await run("ovn-nbctl", ["ls-add", "nbctl-b"], { env: daemon.env });
    const nbB = await timeIt(async () => {
      for (let i = 0; i < N_B; i++) {
        await run("ovn-nbctl", nbctlPortArgs("nbctl-b", port("nb", i)), { env: daemon.env });
      }
    });
    await run("ovn-nbctl", ["ls-del", "nbctl-b"], { env: daemon.env });
    const lsB = await newSwitch(c, "ours-b");
    const ourB = await timeIt(async () => {
      for (let i = 0; i < N_B; i++) {
        const p = port("ob", i);
        await c.transact((t) => addPorts(t, lsB, [p]));
      }
    });
    console.log(
      `(b) ${N_B} ports, one transaction each: ours ${fmt(ourB)} (${((ourB / N_B) * 1000).toFixed(0)} us/port), ovn-nbctl daemon ${fmt(nbB)} (${((nbB / N_B) * 1000).toFixed(0)} us/port), ratio ${(ourB / nbB).toFixed(2)}x (target <= 1.0x)`,
    );
    await dropSwitch(c, lsB);

    // Context: ovn-nbctl started once per port (no daemon), at growing switch sizes.
    const env = { ...process.env, OVN_RUNDIR: dir, OVS_RUNDIR: dir };
    const lsC = await newSwitch(c, "ctx");
    let filled = 0;
    for (const size of [0, 3000, 10_000]) {
      while (filled < size) {
        const n = Math.min(1000, size - filled);
        const ports = Array.from({ length: n }, (_, k) => port("fill", filled + k));
        await c.transact((t) => addPorts(t, lsC, ports));
        filled += n;
      }
      const ms = await timeIt(async () => {
        for (let i = 0; i < 100; i++) {
          await run("ovn-nbctl", [`--db=${srv.unix}`, ...nbctlPortArgs("ctx", port(`x${size}`, i))], { env });
        }
      });
      filled += 100;
      console.log(
        `    context: ovn-nbctl exec per port at switch size ${size}: ${((ms / 100) * 1000).toFixed(0)} us/port`,
      );
    }
  } finally {
    await c.close();
    await daemon.stop();
    await srv.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

async function fill(c: OvsdbClient<NbTables>, rows: number): Promise<void> {
  // rows = switches + ports; 100 switches, the rest ports spread over them.
  const switches: string[] = [];
  for (let s = 0; s < 100; s++) switches.push(await newSwitch(c, `fill-${s}`));
  const ports = rows - 100;
  const per = 1000;
  const batches: number[] = [];
  for (let i = 0; i < ports; i += per) batches.push(i);
  await c.bulk(
    batches,
    (t, start) => {
      const ls = switches[(start / per) % 100] as string;
      addPorts(
        t,
        ls,
        Array.from({ length: Math.min(per, ports - start) }, (_, k) => port("m", start + k)),
      );
    },
    { batchSize: 1, inFlight: 2 },
  );
}

async function benchMemory(): Promise<void> {
  const srv = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  try {
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, monitor: {} });
    await c.connect();
    await fill(c, N_ROWS);
    await c.close();
    // Measure in a fresh process so the baseline is only the runtime and our modules.
    const child = spawn(
      process.execPath,
      [
        ...NODE_FLAGS,
        "--expose-gc",
        "--import",
        "tsx",
        fileURLToPath(new URL("./ovsdb-cache-mem.ts", import.meta.url)),
        srv.unix,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    await new Promise((r) => child.on("exit", r));
    const m = JSON.parse(out) as {
      rows: number;
      baselineRss: number;
      rss: number;
      heapUsed: number;
      baseHeap: number;
    };
    const perRow = (m.rss - m.baselineRss) / m.rows;
    console.log(
      `(c) cache of ${m.rows} NB rows (node ${NODE_FLAGS.join(" ")}, steady state): RSS +${((m.rss - m.baselineRss) / 2 ** 20).toFixed(1)} MiB over baseline = ${perRow.toFixed(0)} B/row (target <= 1024 B/row, ratio ${(perRow / 1024).toFixed(2)}); V8 heap +${((m.heapUsed - m.baseHeap) / m.rows).toFixed(0)} B/row`,
    );
  } finally {
    await srv.stop();
  }
}

async function benchResync(): Promise<void> {
  const cluster = await startRaftCluster({ schema: SCHEMAS.nb });
  try {
    const c = new OvsdbClient<NbTables>({ remotes: cluster.remotes, model: nbModel });
    await c.connect();
    await fill(c, N_ROWS);
    await c.echo();
    const rows = c.cache.table("Logical_Switch_Port").size + c.cache.table("Logical_Switch").size;
    const resume = await timeIt(() => c.reconnect());
    const resumed = c.stats.resumes;
    const full = await timeIt(() => c.reconnect({ fullResync: true }));
    console.log(
      `(d) resync of ${rows} rows from a clustered database: resume (found=true) ${fmt(resume)} [resumes=${resumed}], forced full reload ${fmt(full)} [full snapshots=${c.stats.fullSnapshots}]`,
    );
    await c.close();
  } finally {
    await cluster.stop();
  }
}

console.log(`bench-ovsdb on ${new Date().toISOString()}, node ${process.version}${quick ? " (quick)" : ""}`);
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);
if (!only || only.includes("a") || only.includes("b")) await benchWrites();
if (!only || only.includes("c")) await benchMemory();
if (!only || only.includes("d")) await benchResync();
