// The NB side of make bench-policy, the same for the controller and the raw baseline: a separate client that
// monitors the tables policies are made of and notes when changes show up on it, so both sides are timed to the
// moment NB holds a change as any other NB reader would see it.
import { performance } from "node:perf_hooks";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";

export const POLICY_TABLES = ["Port_Group", "ACL", "Address_Set"] as const;
export type PolicyTable = (typeof POLICY_TABLES)[number];

export class PolicyWatch {
  readonly client: OvsdbClient<NbTables>;
  /** First and last time a policy table changed since `mark()`. */
  first: number | undefined;
  last: number | undefined;
  /** The same two moments on CLOCK_MONOTONIC in µs, the clock of V8's CPU profiles (to cut a profile to them). */
  firstMonoUs: bigint | undefined;
  lastMonoUs: bigint | undefined;
  /** The last change seen: kind, table and the row's name. */
  lastChange: string | undefined;
  private waiters = new Set<{ test: () => boolean; resolve: (t: number) => void }>();

  constructor(remote: string) {
    this.client = new OvsdbClient<NbTables>({
      remotes: remote,
      model: nbModel,
      monitor: { Logical_Switch_Port: true, Port_Group: true, ACL: true, Address_Set: true },
    });
  }

  async start(): Promise<void> {
    for (const table of POLICY_TABLES)
      this.client.cache.subscribe(table, (events) => {
        const now = performance.now();
        const e = events[events.length - 1];
        if (e)
          this.lastChange = `${e.kind} ${table} ${String((e.kind === "delete" ? e.old : e.row).name ?? "")}`;
        const mono = process.hrtime.bigint() / 1000n;
        this.first ??= now;
        this.last = now;
        this.firstMonoUs ??= mono;
        this.lastMonoUs = mono;
        for (const w of this.waiters) {
          if (w.test()) {
            this.waiters.delete(w);
            w.resolve(now);
          }
        }
      });
    await this.client.connect();
  }

  mark(): void {
    this.first = undefined;
    this.last = undefined;
    this.firstMonoUs = undefined;
    this.lastMonoUs = undefined;
  }

  count(table: PolicyTable): number {
    return this.client.cache.table(table).find(() => true).length;
  }

  /** Resolves with the time a policy-table change makes `test` true (now, if it already is). */
  when(what: string, test: () => boolean, timeoutMs: number): Promise<number> {
    if (test()) return Promise.resolve(performance.now());
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
        reject(new Error(`timed out waiting for NB: ${what}`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
