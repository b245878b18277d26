// Child of bench/ovsdb.ts: loads the NB database into a fresh cache and reports memory over the process baseline.
import { OvsdbClient } from "../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../src/ovsdb/models/nb.generated.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --expose-gc");
const remote = process.argv[2] as string;
gc();
const base = process.memoryUsage();
// No inactivity probe: a loaded machine can leave the server silent for longer than 5 s (see bench/ovsdb.ts).
const c = new OvsdbClient<NbTables>({ remotes: remote, model: nbModel, probeIntervalMs: 0 });
await c.connect();
let rows = 0;
for (const t of c.cache.tableNames()) rows += c.cache.table(t as keyof NbTables & string).size;
// Measure the steady state a long-running process reaches: V8 returns the pages of the transient parse
// tree to the OS over a few seconds, so wait until RSS stops falling (at most 12 s).
let m = process.memoryUsage();
for (let i = 0; i < 12; i++) {
  gc();
  await new Promise((r) => setTimeout(r, 1000));
  const now = process.memoryUsage();
  const settled = now.rss > m.rss - 256 * 1024;
  m = now;
  if (settled && i >= 2) break;
}
process.stdout.write(
  JSON.stringify({ rows, baselineRss: base.rss, rss: m.rss, baseHeap: base.heapUsed, heapUsed: m.heapUsed }),
);
await c.close();
