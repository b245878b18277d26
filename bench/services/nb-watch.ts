// The NB side of make bench-services, the same for the controller and the raw baseline: a separate client that
// monitors Load_Balancer rows and notes when each expected change first shows up on it, so both sides are timed
// to the moment NB holds the change as any other NB reader would see it. Its own work per update is kept small
// (an index of backends, no scan of all rows per change), so that its timestamps are not held up by itself.
import { performance } from "node:perf_hooks";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";

type LbRow = NbTables["Load_Balancer"];

/** Backends of every VIP of a row, as "ip:port" texts. */
export function backendsOf(row: LbRow): string[] {
  return Object.values(row.vips).flatMap((v) => v.split(",").filter(Boolean));
}

export class NbWatch {
  readonly client: OvsdbClient<NbTables>;
  private waiters = new Set<{ test: (row: LbRow) => boolean; resolve: (t: number) => void }>();
  /** How many rows carry each backend ("ip:port"). */
  private readonly backends = new Map<string, number>();
  private readonly backendWaiters = new Map<string, (t: number) => void>();

  constructor(remote: string) {
    this.client = new OvsdbClient<NbTables>({
      remotes: remote,
      model: nbModel,
      monitor: { Load_Balancer: true, Load_Balancer_Group: true },
    });
  }

  async start(): Promise<void> {
    this.client.cache.subscribe("Load_Balancer", (events) => {
      const now = performance.now();
      for (const ev of events) {
        if (ev.kind !== "add") this.count(ev.old as unknown as LbRow, -1);
        if (ev.kind !== "delete") {
          for (const b of this.count(ev.row as unknown as LbRow, 1)) {
            const w = this.backendWaiters.get(b);
            if (w) {
              this.backendWaiters.delete(b);
              w(now);
            }
          }
        }
      }
      if (this.waiters.size === 0) return;
      for (const ev of events) {
        if (ev.kind === "delete") continue;
        for (const w of this.waiters) {
          if (w.test(ev.row as unknown as LbRow)) {
            this.waiters.delete(w);
            w.resolve(now);
          }
        }
      }
    });
    await this.client.connect();
  }

  /** Adds `delta` to the count of each backend of `row`; returns those backends. */
  private count(row: LbRow, delta: number): string[] {
    const bs = backendsOf(row);
    for (const b of bs) {
      const n = (this.backends.get(b) ?? 0) + delta;
      if (n > 0) this.backends.set(b, n);
      else this.backends.delete(b);
    }
    return bs;
  }

  /** Resolves with the time some row first carries `backend` ("ip:port"; now, if one does already). */
  whenBackend(backend: string, timeoutMs: number): Promise<number> {
    if (this.backends.has(backend)) return Promise.resolve(performance.now());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.backendWaiters.delete(backend);
        reject(new Error(`timed out waiting for backend ${backend} in a Load_Balancer`));
      }, timeoutMs);
      this.backendWaiters.set(backend, (t) => {
        clearTimeout(timer);
        resolve(t);
      });
    });
  }

  rows(): LbRow[] {
    return this.client.cache.table("Load_Balancer").find(() => true) as LbRow[];
  }

  /** Resolves with the time a Load_Balancer row matching `test` is first seen (now, if one is already there). */
  when(test: (row: LbRow) => boolean, timeoutMs: number): Promise<number> {
    if (this.rows().some(test)) return Promise.resolve(performance.now());
    return new Promise((resolve, reject) => {
      const w = {
        test,
        resolve: (t: number) => {
          clearTimeout(timer);
          resolve(t);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error("timed out waiting for a Load_Balancer change"));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
