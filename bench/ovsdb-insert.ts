// make bench-ovsdb-insert: the pod insert path of our client alone, for profiling. A real ovsdb-server (test/rig),
// one client with its cache of every table (as the controller runs it), N single-port transactions into one
// switch: first into a warm-up switch that is then dropped, then the measured ones into a fresh switch.
//   node --import tsx bench/ovsdb-insert.ts [--ports=N] [--no-monitor] [--cpu-profile=FILE] [--heap-profile=FILE]
//     [--perf-ctl=FIFO]
// Prints the client's CPU per port, split by thread (main thread, GC and other helpers), and the server's.
// --heap-profile writes a sampling heap profile of the measured part that counts collected objects too, so its
// total is what the transactions allocated (open in Chrome DevTools, or sum selfSize per function).
// --perf-ctl writes "enable" and "disable" around the measured part to a `perf record --control=fifo:FIFO -D -1`
// started with node's --perf-basic-prof, so the native profile holds only the measured transactions:
//   mkfifo /tmp/ctl && perf record -g -D -1 --control=fifo:/tmp/ctl -o perf.data -- \
//     node --perf-basic-prof --import tsx bench/ovsdb-insert.ts --perf-ctl=/tmp/ctl

import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { loadavg } from "node:os";
import { OvsdbClient } from "../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../src/ovsdb/transaction.ts";
import { SCHEMAS, startOvsdbServer } from "../test/rig/ovsdb-server.ts";

const argv = process.argv.slice(2);
const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const N = Number(flag("ports") ?? "2000");
const noMonitor = argv.includes("--no-monitor");
const cpuProfile = flag("cpu-profile");
const heapProfile = flag("heap-profile");
const perfCtl = flag("perf-ctl");

/** CPU ticks (10 ms) of each thread of a process, by thread id. */
function threadTicks(pid: number | "self"): Map<string, { name: string; ticks: number }> {
  const out = new Map<string, { name: string; ticks: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      const name = st.slice(st.indexOf("(") + 1, st.lastIndexOf(")"));
      out.set(tid, { name, ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return out;
}
const sumTicks = (m: Map<string, { ticks: number }>) => [...m.values()].reduce((a, t) => a + t.ticks, 0);

const srv = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
const c = new OvsdbClient<NbTables>({
  remotes: srv.unix,
  model: nbModel,
  // No inactivity probe: a loaded machine can leave the server silent for longer than 5 s (see bench/ovsdb.ts).
  probeIntervalMs: 0,
  ...(noMonitor ? { monitor: {} } : {}),
});
await c.connect();
const h = (n: number) => n.toString(16).padStart(2, "0");
let next = 0;
async function fill(name: string): Promise<void> {
  const r = await c.transact((t) => {
    t.insert("Logical_Switch", { name }, "ls");
  });
  const ls = r.uuids.get("ls") as string;
  for (let i = 0; i < N; i++) {
    const j = next++;
    await c.transact((t) => {
      const ref = t.insert("Logical_Switch_Port", {
        name: `p-${j}`,
        addresses: [
          `0a:58:0a:${h((j >> 16) & 255)}:${h((j >> 8) & 255)}:${h(j & 255)} 10.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`,
        ],
        external_ids: { pod: `ns/p-${j}` },
      });
      t.mutate("Logical_Switch", byUuid(ls), [["ports", "insert", [ref]]]);
    });
  }
  await c.transact((t) => {
    t.delete("Logical_Switch", byUuid(ls));
  });
}

try {
  await fill("warm-up");
  const session = new Session();
  session.connect();
  if (cpuProfile) {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 100 });
    await session.post("Profiler.start");
  }
  if (heapProfile) {
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const self0 = threadTicks("self");
  const srv0 = sumTicks(threadTicks(srv.pid));
  if (perfCtl) writeFileSync(perfCtl, "enable\n");
  const t0 = performance.now();
  await fill("measured");
  const ms = performance.now() - t0;
  if (perfCtl) writeFileSync(perfCtl, "disable\n");
  const self1 = threadTicks("self");
  const srv1 = sumTicks(threadTicks(srv.pid));
  const us = (ticks: number) => `${((ticks * 10_000) / N).toFixed(0)} us/port`;
  let main = 0;
  let helpers = 0;
  for (const [tid, t] of self1) {
    const d = t.ticks - (self0.get(tid)?.ticks ?? 0);
    if (tid === String(process.pid)) main += d;
    else helpers += d;
  }
  console.log(
    `${N} single-port transactions, ${noMonitor ? "monitoring nothing" : "cache of every table"}, load ${loadavg()[0]?.toFixed(1)}: ` +
      `wall ${((ms / N) * 1000).toFixed(0)} us/port; client CPU ${us(main + helpers)} (main thread ${us(main)}, ` +
      `GC and other threads ${us(helpers)}); server CPU ${us(srv1 - srv0)}`,
  );
  if (cpuProfile) writeFileSync(cpuProfile, JSON.stringify((await session.post("Profiler.stop")).profile));
  if (heapProfile) {
    const { profile } = await session.post("HeapProfiler.stopSampling");
    let bytes = 0;
    const walk = (n: { selfSize: number; children: (typeof n)[] }) => {
      bytes += n.selfSize;
      for (const ch of n.children) walk(ch);
    };
    walk(profile.head as never);
    console.log(
      `allocated (sampled, collected objects included): ${(bytes / N / 1024).toFixed(1)} KiB per port`,
    );
    writeFileSync(heapProfile, JSON.stringify(profile));
  }
  session.disconnect();
} finally {
  await c.close();
  await srv.stop();
}
