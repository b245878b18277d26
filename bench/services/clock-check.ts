// Part B joins times taken in two processes (the controller's watch trace, the bench's NB reader), each as
// performance.timeOrigin + performance.now(). This checks that another Node.js process started the same way reads
// the same clock: it answers pings with its own reading, and the offset is taken from the ping with the shortest
// round trip (offset = its reading - the midpoint of the round trip, within ± half that round trip).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { NODE_FLAGS } from "../../src/runtime-flags.ts";
import { epochNow } from "./arrivals.ts";

const ECHO =
  'const{performance:p}=require("node:perf_hooks");' +
  'require("node:readline").createInterface({input:process.stdin}).on("line",()=>' +
  'process.stdout.write(String(p.timeOrigin+p.now())+"\\n"));';

export interface ClockCheck {
  offsetMs: number;
  /** Half the shortest round trip: the offset is known to within this. */
  boundMs: number;
}

export async function checkClock(pings = 200): Promise<ClockCheck> {
  const child = spawn(process.execPath, [...NODE_FLAGS, "-e", ECHO], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  let best: ClockCheck = { offsetMs: Number.NaN, boundMs: Number.POSITIVE_INFINITY };
  try {
    for (let i = 0; i < pings; i++) {
      const t0 = epochNow();
      child.stdin.write("\n");
      const r = await lines.next();
      const t2 = epochNow();
      if (r.done) throw new Error("the clock-check process ended early");
      const t1 = Number(r.value);
      if ((t2 - t0) / 2 < best.boundMs) best = { offsetMs: t1 - (t0 + t2) / 2, boundMs: (t2 - t0) / 2 };
    }
  } finally {
    child.kill();
  }
  return best;
}
