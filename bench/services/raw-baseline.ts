// The raw baseline of make bench-services: the Load_Balancer rows the controller produced, written straight to a
// fresh NB by a bare client (in batches, into one Load_Balancer_Group), and the endpoint churn as single-row
// `vips` updates. Timed the same way as the controller: until a separate NB reader sees the result.
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../src/ovsdb/transaction.ts";
import { SCHEMAS, startOvsdbServer } from "../../test/rig/ovsdb-server.ts";
import { NbWatch } from "./nb-watch.ts";

type LbRow = NbTables["Load_Balancer"];

export interface ChurnChange {
  /** Index of the row (in the order given to `writeRows`) whose backend is replaced. */
  row: number;
  from: string;
  to: string;
}

export interface RawResult {
  /** First transaction sent to the reader seeing every row, ms. */
  writeMs: number;
  transactions: number;
  /** Each change: update sent to the reader seeing it, ms, ascending. */
  churnMs: number[];
  /** The bench's event-loop delay during the churn, p50 / p99 / max. */
  benchLag: string;
}

/** The columns a writer sets, from a row as the controller left it. */
function insertable(row: LbRow): Omit<LbRow, "_uuid"> {
  const { _uuid, ...rest } = row;
  return rest;
}

export async function rawBaseline(
  rows: readonly LbRow[],
  changes: readonly ChurnChange[],
  opts: { batch: number; inFlight: number },
): Promise<RawResult> {
  const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const watch = new NbWatch(nb.unix);
  const writer = new OvsdbClient<NbTables>({ remotes: nb.unix, model: nbModel, monitor: {} });
  try {
    await watch.start();
    await writer.connect();
    const group = (
      await writer.transact((t) => {
        t.insert("Load_Balancer_Group", { name: "zovn-cluster-lbs" }, "g");
      })
    ).uuids.get("g") as string;
    const uuids: string[] = [];
    const t0 = performance.now();
    let transactions = 0;
    const allSeen = watch.when(() => watch.rows().length >= rows.length, 600_000);
    for (let i = 0; i < rows.length; i += opts.batch) {
      const chunk = rows.slice(i, i + opts.batch);
      const res = await writer.transact((t) => {
        const refs = chunk.map((r, j) => t.insert("Load_Balancer", insertable(r), `lb${j}`));
        t.mutate("Load_Balancer_Group", byUuid(group), [["load_balancer", "insert", refs]]);
      });
      transactions++;
      chunk.forEach((_, j) => {
        uuids.push(res.uuids.get(`lb${j}`) as string);
      });
    }
    const writeMs = (await allSeen) - t0;

    // Churn: one row's vips rewritten per change, `inFlight` at a time, one worker per group of rows.
    const current = rows.map((r) => ({ ...r.vips }));
    const churnMs: number[] = [];
    const byWorker = new Map<number, ChurnChange[]>();
    for (const c of changes) {
      const w = c.row % opts.inFlight;
      byWorker.set(w, [...(byWorker.get(w) ?? []), c]);
    }
    const lag = monitorEventLoopDelay({ resolution: 1 });
    lag.enable();
    await Promise.all(
      [...byWorker.values()].map(async (list) => {
        for (const c of list) {
          const vips = current[c.row] as Record<string, string>;
          for (const [vip, backends] of Object.entries(vips))
            vips[vip] = backends
              .split(",")
              .map((b) => (b === c.from ? c.to : b))
              .join(",");
          const seen = watch.whenBackend(c.to, 60_000);
          const start = performance.now();
          await writer.transact((t) => {
            t.update("Load_Balancer", byUuid(uuids[c.row] as string), { vips: { ...vips } });
          });
          churnMs.push((await seen) - start);
        }
      }),
    );
    lag.disable();
    churnMs.sort((a, b) => a - b);
    const ms = (ns: number) => (ns / 1e6).toFixed(1);
    const benchLag = `${ms(lag.percentile(50))} / ${ms(lag.percentile(99))} / ${ms(lag.max)} ms`;
    return { writeMs, transactions, churnMs, benchLag };
  } finally {
    await writer.close();
    await watch.close();
    await nb.stop();
  }
}

/** The rows again on a fresh NB, one transaction per row (as a per-Service writer does): first sent → all seen. */
export async function rawOnePerTransaction(rows: readonly LbRow[], inFlight: number): Promise<number> {
  const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const watch = new NbWatch(nb.unix);
  const writer = new OvsdbClient<NbTables>({ remotes: nb.unix, model: nbModel, monitor: {} });
  try {
    await watch.start();
    await writer.connect();
    const group = (
      await writer.transact((t) => {
        t.insert("Load_Balancer_Group", { name: "zovn-cluster-lbs" }, "g");
      })
    ).uuids.get("g") as string;
    const allSeen = watch.when(() => watch.rows().length >= rows.length, 600_000);
    const t0 = performance.now();
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < rows.length; i = next++) {
        const row = rows[i] as LbRow;
        await writer.transact((t) => {
          const ref = t.insert("Load_Balancer", insertable(row));
          t.mutate("Load_Balancer_Group", byUuid(group), [["load_balancer", "insert", [ref]]]);
        });
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
    return (await allSeen) - t0;
  } finally {
    await writer.close();
    await watch.close();
    await nb.stop();
  }
}
