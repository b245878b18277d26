// The start of the writer's clock in part B of make bench-services: when the change reaches the writer. The
// controller runs with ZSTACK_WATCH_TRACE_FILE and its informers note there when each EndpointSlice event
// arrives (src/observability/watch-trace.ts); the bare watcher notes the same in the bench's process. Both on the
// clock the bench's NB reader uses, performance.timeOrigin + performance.now(), joined per change by the slice's
// key and the resourceVersion its PUT answered.
import { readFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { parseWatchTrace } from "../../src/observability/watch-trace.ts";
import { eventually } from "../../test/rig/sandbox-handle.ts";

/** "namespace/name@resourceVersion": one change of one slice. */
export const changeId = (key: string, rv: string): string => `${key}@${rv}`;

/** Now, on the clock shared by the bench and the controller (ms since the Unix epoch). */
export const epochNow = (): number => performance.timeOrigin + performance.now();

/** A performance.now() reading of this process on that clock. */
export const toEpoch = (t: number): number => performance.timeOrigin + t;

/** Arrival times by change id, as the writer recorded them. */
export type Arrivals = Map<string, number>;

/**
 * The controller's EndpointSlice arrivals for `wanted` (change ids), read from its trace file; waits for the
 * trace's buffered lines to reach the file. A change the informer never received as a watch event (it relisted
 * instead) has no arrival: the caller reports how many are missing rather than failing the run.
 */
export async function tracedArrivals(file: string, wanted: readonly string[]): Promise<Arrivals> {
  let arrivals: Arrivals = new Map();
  await eventually("the controller's trace holds every change", 30_000, async () => {
    arrivals = new Map();
    for (const l of parseWatchTrace(await readFile(file, "utf8").catch(() => "")))
      if (l.resource === "endpointslices" && l.rv !== undefined) {
        const id = changeId(l.key, l.rv);
        if (!arrivals.has(id)) arrivals.set(id, l.t);
      }
    return wanted.every((w) => arrivals.has(w)) ? true : undefined;
  }).catch(() => undefined);
  return arrivals;
}
