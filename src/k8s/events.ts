// Recording core/v1 Events about objects ("why is my pod not getting an address?"). Repeats of one event
// (same object, type, reason and message) are folded into one Event whose count and lastTimestamp grow,
// and writes are rate-limited per object with a token bucket, so a reconcile loop failing in a hot loop
// costs the apiserver a handful of writes, not one per failure. Recording never throws and never blocks.

import { type Logger, silentLogger } from "../observability/log.ts";
import { type ApiClient, isNotFound } from "./api-client.ts";

export type EventType = "Normal" | "Warning";

export interface InvolvedObject {
  apiVersion?: string;
  kind?: string;
  name: string;
  /** Empty for cluster-scoped objects; their Events go to the "default" namespace. */
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventRecorderOptions {
  client: ApiClient;
  /** source.component and reportingComponent, e.g. "zstack-ovnkube-controller". */
  component: string;
  /** source.host and reportingInstance, e.g. the pod or node name. */
  host?: string;
  /** Writes an object may get at once. Default 25. */
  burst?: number;
  /** One more write per object per this interval once the burst is spent. Default 5 min. */
  refillMs?: number;
  /** Distinct events remembered for aggregation; the least recently seen are forgotten. Default 4096. */
  maxTracked?: number;
  logger?: Logger;
}

export interface EventRecorderStats {
  /** Events created. */
  created: number;
  /** Count updates written to existing Events. */
  updated: number;
  /** Occurrences folded into an existing Event instead of written on their own. */
  aggregated: number;
  /** Occurrences lost: forgotten before they could be written, or a write failed. */
  dropped: number;
}

interface Entry {
  objectKey: string;
  involved: InvolvedObject;
  type: EventType;
  reason: string;
  message: string;
  namespace: string;
  /** Event name once created. */
  name?: string;
  first: string;
  last: string;
  count: number;
  written: number;
  inFlight?: Promise<void>;
  timer?: NodeJS.Timeout;
}

const MAX_MESSAGE = 1024;

export class EventRecorder {
  private readonly entries = new Map<string, Entry>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly log: Logger;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxTracked: number;
  private closed = false;
  private seq = 0;
  /** The recorders of terms not ended yet (see fenced). */
  private readonly views = new Set<EventRecorder>();
  readonly stats: EventRecorderStats = { created: 0, updated: 0, aggregated: 0, dropped: 0 };

  constructor(private readonly opts: EventRecorderOptions) {
    this.log = (opts.logger ?? silentLogger).child({ recorder: opts.component });
    this.burst = opts.burst ?? 25;
    this.refillMs = opts.refillMs ?? 300_000;
    this.maxTracked = opts.maxTracked ?? 4096;
  }

  /**
   * A recorder for one writer's term (a controller's leadership): it posts through the client's view fenced
   * on `fence` (ApiClient.fenced), so once the term ends no Event of it reaches the apiserver, not even one
   * built or rate-limited before; and it stops recording then, dropping what still waits for tokens. It keeps
   * its own aggregation and rate limits: each term starts afresh, as each term's controller does.
   */
  fenced(fence: AbortSignal): EventRecorder {
    const rec = new EventRecorder({ ...this.opts, client: this.opts.client.fenced(fence) });
    if (fence.aborted || this.closed) {
      rec.closed = true;
      return rec;
    }
    // Held until its term ends, so that flush() and close() here cover the terms' recorders too.
    this.views.add(rec);
    fence.addEventListener(
      "abort",
      () => {
        this.views.delete(rec);
        void rec.close();
      },
      { once: true },
    );
    return rec;
  }

  normal(obj: InvolvedObject, reason: string, message: string): void {
    this.event(obj, "Normal", reason, message);
  }

  warning(obj: InvolvedObject, reason: string, message: string): void {
    this.event(obj, "Warning", reason, message);
  }

  event(obj: InvolvedObject, type: EventType, reason: string, message: string): void {
    if (this.closed) return;
    const msg = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const objectKey = `${obj.kind ?? ""}/${obj.namespace ?? ""}/${obj.name}/${obj.uid ?? ""}`;
    const key = `${objectKey}\u0000${type}\u0000${reason}\u0000${msg}`;
    const now = new Date().toISOString();
    let entry = this.entries.get(key);
    if (entry) {
      // Re-inserting keeps the map ordered by last use, so eviction drops the stalest entry.
      this.entries.delete(key);
      this.stats.aggregated++;
    } else {
      entry = {
        objectKey,
        involved: obj,
        type,
        reason,
        message: msg,
        namespace: obj.namespace || "default",
        first: now,
        last: now,
        count: 0,
        written: 0,
      };
    }
    entry.count++;
    entry.last = now;
    this.entries.set(key, entry);
    this.evict();
    this.schedule(entry);
  }

  /** Waits until every write that may happen now has happened (not those waiting for rate-limit tokens). */
  async flush(): Promise<void> {
    await Promise.all([...this.views].map((v) => v.flush()));
    for (;;) {
      const pending = [...this.entries.values()].flatMap((e) => (e.inFlight ? [e.inFlight] : []));
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Stops recording; occurrences still waiting for tokens are dropped. */
  async close(): Promise<void> {
    this.closed = true;
    const views = [...this.views];
    this.views.clear();
    await Promise.all(views.map((v) => v.close()));
    for (const e of this.entries.values()) {
      if (e.timer) {
        clearTimeout(e.timer);
        e.timer = undefined;
        this.stats.dropped += e.count - e.written;
      }
    }
    await this.flush();
  }

  private evict(): void {
    for (const [key, e] of this.entries) {
      if (this.entries.size <= this.maxTracked) return;
      if (e.inFlight) continue;
      if (e.timer) clearTimeout(e.timer);
      this.stats.dropped += e.count - e.written;
      this.entries.delete(key);
    }
  }

  private takeToken(objectKey: string): number {
    const now = Date.now();
    const b = this.buckets.get(objectKey) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) / this.refillMs);
    b.at = now;
    this.buckets.set(objectKey, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    // Buckets are tiny, but one per object ever seen would still grow without bound.
    if (this.buckets.size > this.maxTracked) this.pruneBuckets(now);
    return Math.ceil((1 - b.tokens) * this.refillMs);
  }

  private pruneBuckets(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + (now - b.at) / this.refillMs >= this.burst) this.buckets.delete(k);
    }
  }

  private schedule(entry: Entry): void {
    if (entry.inFlight || entry.timer || entry.count === entry.written || this.closed) return;
    const wait = this.takeToken(entry.objectKey);
    if (wait > 0) {
      entry.timer = setTimeout(() => {
        entry.timer = undefined;
        this.schedule(entry);
      }, wait);
      entry.timer.unref();
      return;
    }
    entry.inFlight = this.write(entry).finally(() => {
      entry.inFlight = undefined;
      this.schedule(entry);
    });
  }

  private async write(entry: Entry): Promise<void> {
    const count = entry.count;
    try {
      if (entry.name) {
        try {
          await this.opts.client.request(this.path(entry.namespace, entry.name), {
            method: "PATCH",
            body: { count, lastTimestamp: entry.last, message: entry.message },
          });
          this.stats.updated++;
          entry.written = count;
          return;
        } catch (err) {
          // The Event expired (--event-ttl) or was deleted: start a new one.
          if (!isNotFound(err)) throw err;
          entry.name = undefined;
        }
      }
      // client-go's scheme: object name and creation time in hex, plus a sequence for one millisecond.
      const name = `${entry.involved.name}.${Date.now().toString(16)}${(this.seq++ % 4096).toString(16).padStart(3, "0")}`;
      await this.opts.client.request(this.path(entry.namespace), {
        method: "POST",
        body: this.manifest(entry, name, count),
      });
      entry.name = name;
      this.stats.created++;
      entry.written = count;
    } catch (err) {
      // Retrying here would turn an apiserver problem into more apiserver load; the next occurrence retries.
      this.stats.dropped += count - entry.written;
      entry.written = count;
      this.log.warn({ err, reason: entry.reason, object: entry.objectKey }, "could not record event");
    }
  }

  private path(namespace: string, name?: string): string {
    const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`;
    return name ? `${base}/${encodeURIComponent(name)}` : base;
  }

  private manifest(entry: Entry, name: string, count: number): object {
    const o = entry.involved;
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace: entry.namespace },
      involvedObject: {
        apiVersion: o.apiVersion,
        kind: o.kind,
        name: o.name,
        namespace: o.namespace,
        uid: o.uid,
        resourceVersion: o.resourceVersion,
      },
      type: entry.type,
      reason: entry.reason,
      message: entry.message,
      count,
      firstTimestamp: entry.first,
      lastTimestamp: entry.last,
      source: { component: this.opts.component, ...(this.opts.host ? { host: this.opts.host } : {}) },
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.host ?? "",
    };
  }
}
