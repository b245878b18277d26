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
import { stableUuid } from "../src/ovsdb/stable-uuid.ts";
import { byUuid, type Transaction } from "../src/ovsdb/transaction.ts";
import { NODE_FLAGS } from "../src/runtime-flags.ts";
import { type OvsdbServer, SCHEMAS, startOvsdbServer, startRaftCluster } from "../test/rig/ovsdb-server.ts";
import { addPortsOps, RawPeer, transactText } from "./ovsdb-raw.ts";

const run = promisify(execFile);
// A machine loaded by other work can leave the server unanswered for longer than the 5 s inactivity probe;
// the probe is tested elsewhere (test/integration/ovsdb/probe.test.ts), here it would only end a run.
const BENCH_CLIENT = { probeIntervalMs: 0 } as const;
const quick = process.argv.includes("--quick");
// --no-nbctl leaves out the ovn-nbctl baseline and context (for profiling the rest).
const noNbctl = process.argv.includes("--no-nbctl");
// --warm runs each way of (a) and (b) once untimed, on its own switch and connection, before the timed run: the
// steady state of a long-running process, with the JIT's compilation of the client's code paths left out.
const warm = process.argv.includes("--warm");
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

/** Wall time of a run, with the CPU this process and the server spent in it (the server's in 10 ms ticks). */
interface Measure {
  ms: number;
  cpuMs: number;
  serverCpuMs: number;
}

async function serverCpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

async function measure(serverPid: number, fn: () => Promise<void>): Promise<Measure> {
  const s0 = await serverCpuMs(serverPid);
  const c0 = process.cpuUsage();
  const ms = await timeIt(fn);
  const c = process.cpuUsage(c0);
  const s1 = await serverCpuMs(serverPid);
  return { ms, cpuMs: (c.user + c.system) / 1000, serverCpuMs: s1 - s0 };
}

function fmt(ms: number): string {
  return `${ms.toFixed(0)} ms`;
}

async function benchWrites(): Promise<void> {
  const dir = await mkdtemp("/tmp/zo-bench-");
  const srv = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  // Setup and checks go through a client that monitors nothing, so no measured run pays for a bystander's monitor.
  const admin = new OvsdbClient<NbTables>({
    remotes: srv.unix,
    model: nbModel,
    monitor: {},
    ...BENCH_CLIENT,
  });
  await admin.connect();
  try {
    // Baseline kept from before: ovn-nbctl in daemon mode (its daemon is an IDL client: stopped before the rest).
    let nbA = Number.NaN;
    let nbB = Number.NaN;
    const daemon = noNbctl ? undefined : await nbctlDaemon(srv, dir);
    if (daemon)
      try {
        await run("ovn-nbctl", ["ls-add", "nbctl-a"], { env: daemon.env });
        nbA = await timeIt(async () => {
          for (let b = 0; b < N_A / 100; b++) {
            const args: string[] = [];
            for (let i = b * 100; i < (b + 1) * 100; i++)
              args.push(...nbctlPortArgs("nbctl-a", port("na", i)));
            await run("ovn-nbctl", args, { env: daemon.env, maxBuffer: 1 << 24 });
          }
        });
        await run("ovn-nbctl", ["ls-del", "nbctl-a"], { env: daemon.env });
        await run("ovn-nbctl", ["ls-add", "nbctl-b"], { env: daemon.env });
        nbB = await timeIt(async () => {
          for (let i = 0; i < N_B; i++) {
            await run("ovn-nbctl", nbctlPortArgs("nbctl-b", port("nb", i)), { env: daemon.env });
          }
        });
        await run("ovn-nbctl", ["ls-del", "nbctl-b"], { env: daemon.env });
      } finally {
        await daemon.stop();
      }

    const a = await compareWrites(srv, admin, "a", N_A / 100, 100);
    report("(a)", `${N_A} ports in one switch, 100 per transaction`, a, nbA, N_A);
    const b = await compareWrites(srv, admin, "b", N_B, 1);
    report("(b)", `${N_B} ports, one transaction each`, b, nbB, N_B);

    // Context: ovn-nbctl started once per port (no daemon), at growing switch sizes.
    if (noNbctl) return;
    const env = { ...process.env, OVN_RUNDIR: dir, OVS_RUNDIR: dir };
    const lsC = await newSwitch(admin, "ctx");
    let filled = 0;
    for (const size of [0, 3000, 10_000]) {
      while (filled < size) {
        const n = Math.min(1000, size - filled);
        const ports = Array.from({ length: n }, (_, k) => port("fill", filled + k));
        await admin.transact((t) => addPorts(t, lsC, ports));
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
    await admin.close();
    await srv.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

interface WriteFigures {
  /** Pre-built JSON-RPC text on a socket, no monitor anywhere: the server-bound limit. */
  raw: Measure;
  /** The same, with a second raw connection monitoring every table as our client does (it only counts bytes). */
  rawMonitored: Measure;
  /** Our client as the product runs it: monitoring every table into its cache. */
  ours: Measure;
  /** Our client monitoring nothing: what the client itself costs, apart from the server's monitor work. */
  oursNoMonitor: Measure;
}

/** Adds `batches` transactions of `size` ports each to a fresh switch, four ways, each on its own switch. */
async function compareWrites(
  srv: OvsdbServer,
  admin: OvsdbClient<NbTables>,
  tag: string,
  batches: number,
  size: number,
): Promise<WriteFigures> {
  const makePorts = (p: string) =>
    Array.from({ length: batches }, (_, bi) =>
      Array.from({ length: size }, (_, k) => port(p, bi * size + k)),
    );
  const expectPorts = async (ls: string) => {
    const r = await admin.transact((t) => {
      t.select("Logical_Switch", byUuid(ls), ["ports"]);
    });
    const ports = (r.results[0] as { rows: { ports: unknown }[] }).rows[0]?.ports;
    const n = Array.isArray(ports) && ports[0] === "set" ? (ports[1] as unknown[]).length : ports ? 1 : 0;
    if (n !== batches * size) throw new Error(`${tag}: the switch holds ${n} ports, not ${batches * size}`);
  };
  const rawRun = async (name: string, monitored: boolean): Promise<Measure> => {
    const ls = await newSwitch(admin, name);
    const texts = makePorts(name).map((ports, i) =>
      transactText(i + 1, "OVN_Northbound", addPortsOps(ls, ports, "p")),
    );
    const peer = await RawPeer.connect(srv.socketPath);
    const mon = monitored ? await RawPeer.connect(srv.socketPath) : undefined;
    await mon?.request(monitorText(1, "OVN_Northbound"));
    if (warm) {
      const wls = await newSwitch(admin, `${name}-warm`);
      const wtexts = makePorts(`${name}-warm`).map((ports, i) =>
        transactText(i + 1, "OVN_Northbound", addPortsOps(wls, ports, "p")),
      );
      for (const text of wtexts) await peer.request(text);
      await dropSwitch(admin, wls);
    }
    try {
      return await measure(srv.pid, async () => {
        for (const text of texts) await peer.request(text);
      });
    } finally {
      peer.close();
      mon?.close();
      await expectPorts(ls);
      await dropSwitch(admin, ls);
    }
  };
  const oursRun = async (name: string, c: OvsdbClient<NbTables>): Promise<Measure> => {
    if (warm) {
      const wls = await newSwitch(admin, `${name}-warm`);
      for (const ports of makePorts(`${name}-warm`)) await c.transact((t) => addPorts(t, wls, ports));
      await dropSwitch(admin, wls);
    }
    const ls = await newSwitch(admin, name);
    const all = makePorts(name);
    try {
      return await measure(srv.pid, async () => {
        for (const ports of all) await c.transact((t) => addPorts(t, ls, ports));
      });
    } finally {
      await expectPorts(ls);
      await dropSwitch(admin, ls);
    }
  };
  const raw = await rawRun(`raw-${tag}`, false);
  const full = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, ...BENCH_CLIENT });
  await full.connect();
  let ours: Measure;
  try {
    ours = await oursRun(`ours-${tag}`, full);
  } finally {
    await full.close();
  }
  const oursNoMonitor = await oursRun(`bare-${tag}`, admin);
  const rawMonitored = await rawRun(`rawmon-${tag}`, true);
  return { raw, rawMonitored, ours, oursNoMonitor };
}

function report(label: string, what: string, f: WriteFigures, nbctl: number, ports: number): void {
  const per = (ms: number) => `${((ms / ports) * 1000).toFixed(0)} us/port`;
  const x = (ms: number, base: number) => `${(ms / base).toFixed(2)}x`;
  const line = (name: string, m: Measure, rest = "") =>
    console.log(
      `    ${name.padEnd(34)} ${fmt(m.ms).padStart(8)} (${per(m.ms)}; cpu: bench ${per(m.cpuMs)}, server ${per(m.serverCpuMs)})${rest}`,
    );
  console.log(`${label} ${what}:`);
  line("raw JSON-RPC, no monitor (limit)", f.raw);
  line("raw JSON-RPC + raw monitor", f.rawMonitored, `, ${x(f.rawMonitored.ms, f.raw.ms)} raw`);
  line(
    "ours, cache of every table",
    f.ours,
    `, ${x(f.ours.ms, f.raw.ms)} raw (target <= 1.3x: ${f.ours.ms <= 1.3 * f.raw.ms ? "met" : "missed"}), ${x(f.ours.ms, f.rawMonitored.ms)} raw + monitor`,
  );
  line("ours, monitoring nothing", f.oursNoMonitor, `, ${x(f.oursNoMonitor.ms, f.raw.ms)} raw`);
  if (!Number.isNaN(nbctl))
    console.log(
      `    ${"baseline: ovn-nbctl daemon mode".padEnd(34)} ${fmt(nbctl).padStart(8)} (${per(nbctl)}); ours ${x(f.ours.ms, nbctl)} of it`,
    );
}

/** A monitor_cond request for every NB table and column the model knows, as our client asks for them. */
function monitorText(id: number, db: string): string {
  const req: Record<string, unknown> = {};
  for (const [name, t] of nbModel.schema.tables) req[name] = [{ columns: [...t.columns.keys()] }];
  return JSON.stringify({ id, method: "monitor_cond", params: [db, "raw", req] });
}

async function fill(c: OvsdbClient<NbTables>, rows: number): Promise<void> {
  // rows = switches + ports; 100 switches, the rest ports spread over them. Every row has a stable UUID, so a
  // write whose reply a leader change lost is retried safely (a loaded machine moves Raft leadership).
  const switches: string[] = [];
  for (let s = 0; s < 100; s++) {
    const uuid = stableUuid("bench-fill", `fill-${s}`);
    await c.transactWithRetry((t) => {
      t.insert("Logical_Switch", { name: `fill-${s}` }, "ls", { uuid });
    });
    switches.push(uuid);
  }
  const ports = rows - 100;
  const per = 1000;
  const batches: number[] = [];
  for (let i = 0; i < ports; i += per) batches.push(i);
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const start = batches[next++] as number;
      const ls = switches[(start / per) % 100] as string;
      const ps = Array.from({ length: Math.min(per, ports - start) }, (_, k) => port("m", start + k));
      await c.transactWithRetry(
        (t) => {
          const refs = ps.map((p) =>
            t.insert("Logical_Switch_Port", p, undefined, { uuid: stableUuid("bench-fill", p.name) }),
          );
          t.mutate("Logical_Switch", byUuid(ls), [["ports", "insert", refs]]);
        },
        { attempts: 20 },
      );
    }
  };
  await Promise.all([worker(), worker()]);
}

async function benchMemory(): Promise<void> {
  const srv = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  try {
    const c = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel, monitor: {}, ...BENCH_CLIENT });
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
    const c = new OvsdbClient<NbTables>({ remotes: cluster.remotes, model: nbModel, ...BENCH_CLIENT });
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

    // The same rows loaded from the leader three ways, alternating, three rounds; medians are compared.
    const text = monitorText(1, "OVN_Northbound");
    const rawBytes: number[] = [];
    const rawParsed: number[] = [];
    const ours: number[] = [];
    for (let round = 0; round < 3; round++) {
      // Asked each round: a loaded machine can move the leadership. Our client gets the leader first and the
      // others after it, so a change between the question and the connect costs a hop, not a failure.
      const leader = (await cluster.leader()).server;
      const others = cluster.remotes.filter((r) => r !== leader.unix);
      rawBytes.push(
        await timeIt(async () => {
          const peer = await RawPeer.connect(leader.socketPath);
          await peer.request(text);
          peer.close();
        }),
      );
      let counted = 0;
      rawParsed.push(
        await timeIt(async () => {
          const peer = await RawPeer.connect(leader.socketPath);
          const reply = JSON.parse(await peer.requestText(text)) as {
            result: Record<string, Record<string, unknown>>;
          };
          peer.close();
          for (const t of Object.values(reply.result)) counted += Object.keys(t).length;
        }),
      );
      if (counted !== rows) throw new Error(`raw monitor dump counted ${counted} rows, not ${rows}`);
      const fresh = new OvsdbClient<NbTables>({
        remotes: [leader.unix, ...others],
        model: nbModel,
        shuffleRemotes: false,
        ...BENCH_CLIENT,
      });
      ours.push(await timeIt(() => fresh.connect()));
      const got = fresh.cache.table("Logical_Switch_Port").size + fresh.cache.table("Logical_Switch").size;
      await fresh.close();
      if (got !== rows) throw new Error(`our cache holds ${got} rows, not ${rows}`);
    }
    const med = (xs: number[]) => [...xs].sort((p, q) => p - q)[1] as number;
    const [b, r, o] = [med(rawBytes), med(rawParsed), med(ours)];
    console.log(
      `(d) load of ${rows} rows from the Raft leader, median of 3: raw monitor_cond reply received ${fmt(b)}, received + JSON.parse + rows counted ${fmt(r)} (limit); ours, connect to ready cache ${fmt(o)}, ${(o / r).toFixed(2)}x raw (target <= 1.5x: ${o <= 1.5 * r ? "met" : "missed"}) [raw ${rawParsed.map(fmt).join(", ")}; ours ${ours.map(fmt).join(", ")}]`,
    );
  } finally {
    await cluster.stop();
  }
}

console.log(
  `bench-ovsdb on ${new Date().toISOString()}, node ${process.version}${quick ? " (quick)" : ""}${warm ? " (each way of (a) and (b) warmed up first)" : ""}`,
);
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);
if (!only || only.includes("a") || only.includes("b")) await benchWrites();
if (!only || only.includes("c")) await benchMemory();
if (!only || only.includes("d")) await benchResync();
