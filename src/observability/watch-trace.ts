// An opt-in record of when each watch event reaches an informer (the controller's watchTraceFile setting), for
// benchmarks and latency debugging: one JSON line per event, {resource, type, key, rv, t}. `t` is milliseconds
// since the Unix epoch on the process's monotonic clock (performance.timeOrigin + performance.now()), the clock
// another process on the same machine reads the same way, so its own timestamps join these by (key, rv). Off by
// default: without the setting no trace exists and the informers take no timestamp.

import { closeSync, createWriteStream, openSync, type WriteStream } from "node:fs";
import { performance } from "node:perf_hooks";
import type { Logger } from "./log.ts";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

/** What an informer tells a trace about one watch event, before it does anything else with it. */
export type WatchArrival = (type: WatchEventType, key: string, resourceVersion: string | undefined) => void;

/** One line of the trace file, as written (JSON.stringify of this object). */
export interface WatchTraceLine {
  /** The informer: "endpointslices", "services", "pods", ... */
  resource: string;
  type: WatchEventType;
  /** "namespace/name", or "name" when cluster-scoped. */
  key: string;
  rv: string | undefined;
  /** Arrival, ms since the Unix epoch (performance.timeOrigin + performance.now()). */
  t: number;
}

/**
 * Lines wait this long, or until this many characters are waiting, and go to the file in one write: a write per
 * event cost the traced controller about 0.15 ms of CPU per event (make bench-services part B), a tenth of what
 * it spends on the event otherwise. `t` is taken at arrival either way.
 */
const FLUSH_MS = 50;
const FLUSH_CHARS = 64 * 1024;

export class WatchTrace {
  private failed = false;
  private pending = "";
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly out: WriteStream,
    log: Logger,
  ) {
    out.on("error", (err) => {
      if (!this.failed) log.error({ err }, "watch trace file failed; tracing stops");
      this.failed = true;
    });
  }

  /** Opens `path` for appending now, so that a bad path stops the program at start with the reason. */
  static open(path: string, log: Logger): WatchTrace {
    const fd = openSync(path, "a");
    try {
      return new WatchTrace(createWriteStream("", { fd, autoClose: true }), log);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  /** The arrival hook of one informer. */
  recorder(resource: string): WatchArrival {
    return (type, key, rv) => {
      const t = performance.timeOrigin + performance.now();
      if (this.failed) return;
      const line: WatchTraceLine = { resource, type, key, rv, t };
      this.pending += `${JSON.stringify(line)}\n`;
      if (this.pending.length >= FLUSH_CHARS) this.flush();
      else if (!this.timer) {
        this.timer = setTimeout(() => this.flush(), FLUSH_MS);
        this.timer.unref();
      }
    };
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending && !this.failed && !this.out.closed) this.out.write(this.pending);
    this.pending = "";
  }

  /** Flushes what is buffered and closes the file. */
  close(): Promise<void> {
    this.flush();
    return new Promise((resolve) => {
      if (this.out.closed || this.failed) resolve();
      else this.out.end(() => resolve());
    });
  }
}

/** Parses a trace file's text; lines that are not trace lines (a torn last line) are skipped. */
export function parseWatchTrace(text: string): WatchTraceLine[] {
  const out: WatchTraceLine[] = [];
  for (const line of text.split("\n")) {
    if (!line) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    const o = v as Partial<WatchTraceLine>;
    if (
      typeof o.resource === "string" &&
      (o.type === "ADDED" || o.type === "MODIFIED" || o.type === "DELETED") &&
      typeof o.key === "string" &&
      (o.rv === undefined || typeof o.rv === "string") &&
      typeof o.t === "number" &&
      Number.isFinite(o.t)
    )
      out.push({ resource: o.resource, type: o.type, key: o.key, rv: o.rv, t: o.t });
  }
  return out;
}
