// A list+watch cache of one resource (`/api/v1/pods`, `/apis/network.zstack.io/v1/subnets`, ...), keyed by
// namespace/name, that tells handlers what changed. Handlers should only enqueue keys: the store is the
// state controllers read when they reconcile.
//
// Recovery follows the watch protocol: a watch the server ends is resumed from the last resourceVersion; a
// 410 Gone or any watch error leads to a relist (after backoff), which is diffed against the store so that
// handlers see synthetic deletes for objects that vanished and updates for objects that changed meanwhile.
// A watchdog restarts a watch that has been silent for too long: bookmarks are requested, so a healthy idle
// watch still hears from the server about once a minute, and silence means the stream has stalled.

import { type Logger, silentLogger } from "../observability/log.ts";
import type { WatchArrival } from "../observability/watch-trace.ts";
import { type ApiClient, isGone, type Query, statusError } from "./api-client.ts";
import { type KubeObject, objectKey } from "./object-key.ts";

export interface DeleteInfo {
  /** The object vanished while no watch was running; `obj` is the last state this informer saw. */
  finalStateUnknown: boolean;
}

export interface InformerHandlers<T> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T, info: DeleteInfo): void;
}

export interface InformerOptions<T extends KubeObject> {
  client: ApiClient;
  /** Collection path: /api/v1/pods, /api/v1/namespaces/NS/pods, /apis/GROUP/VERSION/PLURAL. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Restart a watch that delivered nothing (not even a bookmark) for this long. Default 5 min. */
  watchdogMs?: number;
  /** List page size. Default 500. */
  pageSize?: number;
  /**
   * Shapes each object before it is stored (drop fields the controller never reads to save memory). The
   * default drops metadata.managedFields, which is often the largest part of an object.
   */
  transform?: (obj: KubeObject) => T;
  /** Named secondary indexes: each function returns the index values of an object. */
  indexers?: Record<string, (obj: T) => string[]>;
  /** Delay after a failed list or watch: from initialMs (200) doubling up to maxMs (30 s), with jitter. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Server-side watch timeout. Default: random in [300, 600) s, so many informers do not renew in step. */
  watchTimeoutSeconds?: number;
  listTimeoutMs?: number;
  logger?: Logger;
  /**
   * Told of each watch event (bookmarks excluded) as it arrives, before the transform and the handlers: a latency
   * trace (observability/watch-trace.ts). Unset, the informer does nothing more per event.
   */
  onWatchEvent?: WatchArrival;
}

export interface InformerStats {
  /** Successful lists (the initial one included). */
  lists: number;
  /** Watches opened. */
  watches: number;
  /** Watches ended by the watchdog. */
  watchdogRestarts: number;
  /** Watches that answered 410 Gone. */
  gone: number;
  /** Failed lists and watches. */
  errors: number;
  /** Watch events applied (bookmarks excluded). */
  events: number;
}

interface ListResponse {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: KubeObject[];
}

interface WatchEvent {
  type?: string;
  object?: KubeObject;
}

class WatchdogTimeout extends Error {
  constructor(ms: number) {
    super(`watch delivered nothing for ${ms} ms`);
    this.name = "WatchdogTimeout";
  }
}

class Stopped extends Error {
  constructor() {
    super("informer stopped");
    this.name = "Stopped";
  }
}

type WatchEnd = "closed" | "gone" | "watchdog";

export function dropManagedFields(obj: KubeObject): KubeObject {
  if (obj.metadata?.managedFields) delete obj.metadata.managedFields;
  return obj;
}

const NO_VALUES: readonly string[] = Object.freeze([]);

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function resourceVersionOf(obj: KubeObject): string | undefined {
  return obj.metadata?.resourceVersion;
}

export class Informer<T extends KubeObject = KubeObject> {
  private store = new Map<string, T>();
  /**
   * Each stored object's resourceVersion, read before the transform: a transform that slims objects may drop
   * it, and a relist must still tell which objects changed while it was not watching.
   */
  private versions = new Map<string, string | undefined>();
  private readonly indexes = new Map<string, Map<string, Set<string>>>();
  /** Each index with its function, as a list: walked on every event. */
  private readonly indexers: { idx: Map<string, Set<string>>; fn: (obj: T) => string[] }[] = [];
  private readonly handlers = new Set<InformerHandlers<T>>();
  private rv = "";
  private synced = false;
  private syncWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private running: Promise<void> | undefined;
  private stopped = false;
  private current: AbortController | undefined;
  private attempt = 0;
  private readonly log: Logger;
  private readonly transform: (obj: KubeObject) => T;
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    watchdogRestarts: 0,
    gone: 0,
    errors: 0,
    events: 0,
  };

  constructor(private readonly opts: InformerOptions<T>) {
    this.log = (opts.logger ?? silentLogger).child({ informer: opts.path });
    this.transform = opts.transform ?? ((o) => dropManagedFields(o) as T);
    for (const [name, fn] of Object.entries(opts.indexers ?? {})) {
      const idx = new Map<string, Set<string>>();
      this.indexes.set(name, idx);
      this.indexers.push({ idx, fn });
    }
  }

  /** Starts listing and watching in the background; returns at once. */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.run();
  }

  /** Ends the watch and the loop; the store keeps its last content. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.abort(new Stopped());
    for (const w of this.syncWaiters) w.reject(new Stopped());
    this.syncWaiters = [];
    await this.running;
  }

  /** True once the first list has been stored and announced to handlers. */
  hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(timeoutMs = 60_000): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (this.stopped) return Promise.reject(new Stopped());
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
        reject(new Error(`informer ${this.opts.path} not synced after ${timeoutMs} ms`));
      }, timeoutMs);
      this.syncWaiters.push(waiter);
    });
  }

  /**
   * Registers handlers; returns a function that removes them. With replay (the default) a handler added
   * after the first sync receives an add for every stored object, so late handlers miss nothing.
   */
  addHandlers(handlers: InformerHandlers<T>, opts: { replay?: boolean } = {}): () => void {
    this.handlers.add(handlers);
    if (this.synced && opts.replay !== false && handlers.onAdd) {
      for (const obj of this.store.values()) this.call(() => handlers.onAdd?.(obj));
    }
    return () => {
      this.handlers.delete(handlers);
    };
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  keys(): string[] {
    return [...this.store.keys()];
  }

  get size(): number {
    return this.store.size;
  }

  /** Objects whose indexer `index` returned `value`. */
  byIndex(index: string, value: string): T[] {
    const idx = this.indexes.get(index);
    if (!idx) throw new Error(`informer ${this.opts.path} has no index "${index}"`);
    const out: T[] = [];
    for (const key of idx.get(value) ?? []) {
      const obj = this.store.get(key);
      if (obj) out.push(obj);
    }
    return out;
  }

  /** The resourceVersion the store reflects. */
  get resourceVersion(): string {
    return this.rv;
  }

  private async run(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      try {
        if (needList) {
          await this.relist();
          needList = false;
        }
        const started = Date.now();
        const eventsBefore = this.stats.events;
        const end = await this.watch();
        if (end === "closed" && Date.now() - started < 1000 && this.stats.events === eventsBefore) {
          // A server (or proxy) that ends every watch at once would otherwise make this loop spin.
          await this.sleep(this.nextDelay());
          this.attempt++;
        }
        if (end === "gone") {
          needList = true;
          // Twice in a row without progress would otherwise spin: list and watch at full speed.
          if (this.attempt > 0) await this.sleep(this.nextDelay());
          this.attempt++;
        }
      } catch (err) {
        if (this.stopped || err instanceof Stopped) break;
        this.stats.errors++;
        needList = true;
        const delay = this.nextDelay();
        this.attempt++;
        this.log.warn({ err, retryInMs: delay }, "list/watch failed; relisting after backoff");
        try {
          await this.sleep(delay);
        } catch {
          break;
        }
      }
    }
  }

  private nextDelay(): number {
    const initial = this.opts.backoff?.initialMs ?? 200;
    const max = this.opts.backoff?.maxMs ?? 30_000;
    const base = Math.min(max, initial * 2 ** Math.min(this.attempt, 30));
    return Math.round(base * (0.5 + Math.random() * 0.5));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const ac = new AbortController();
      this.current = ac;
      const timer = setTimeout(resolve, ms);
      ac.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(new Stopped());
      });
    });
  }

  private query(): Query {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }

  private async relist(): Promise<void> {
    const ac = new AbortController();
    this.current = ac;
    const fresh = new Map<string, T>();
    const freshVersions = new Map<string, string | undefined>();
    let cont: string | undefined;
    let rv = "";
    do {
      const page = await this.opts.client.request<ListResponse>(this.opts.path, {
        query: { ...this.query(), limit: this.opts.pageSize ?? 500, continue: cont },
        timeoutMs: this.opts.listTimeoutMs ?? 60_000,
        signal: ac.signal,
      });
      // List items carry no kind; watch events do. Filling it in keeps the two indistinguishable.
      const kind = page.kind?.endsWith("List") ? page.kind.slice(0, -4) : undefined;
      for (const raw of page.items ?? []) {
        raw.kind ??= kind;
        raw.apiVersion ??= page.apiVersion;
        const obj = this.transform(raw);
        const key = objectKey(obj);
        fresh.set(key, obj);
        freshVersions.set(key, resourceVersionOf(raw));
      }
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);
    if (this.stopped) throw new Stopped();
    this.stats.lists++;
    const old = this.store;
    const oldVersions = this.versions;
    this.store = fresh;
    this.versions = freshVersions;
    this.rv = rv;
    this.rebuildIndexes();
    for (const [key, obj] of fresh) {
      const prev = old.get(key);
      if (!prev) this.emitAdd(obj);
      else if (oldVersions.get(key) !== freshVersions.get(key)) this.emitUpdate(prev, obj);
    }
    for (const [key, prev] of old) {
      if (!fresh.has(key)) this.emitDelete(prev, { finalStateUnknown: true });
    }
    this.log.debug({ objects: fresh.size, resourceVersion: rv }, "listed");
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters) w.resolve();
      this.syncWaiters = [];
    }
  }

  private async watch(): Promise<WatchEnd> {
    const ac = new AbortController();
    this.current = ac;
    const watchdogMs = this.opts.watchdogMs ?? 300_000;
    let lastActivity = Date.now();
    // One timer that re-arms itself for the remaining time, rather than a clearTimeout/setTimeout per event.
    let timer: NodeJS.Timeout | undefined;
    const arm = (ms: number) => {
      timer = setTimeout(() => {
        const idle = Date.now() - lastActivity;
        if (idle >= watchdogMs) ac.abort(new WatchdogTimeout(watchdogMs));
        else arm(watchdogMs - idle);
      }, ms);
    };
    arm(watchdogMs);
    const query: Query = {
      ...this.query(),
      watch: 1,
      resourceVersion: this.rv,
      allowWatchBookmarks: true,
      timeoutSeconds: this.opts.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300),
    };
    const onLine = (line: string) => {
      lastActivity = Date.now();
      try {
        this.apply(JSON.parse(line) as WatchEvent);
      } catch (err) {
        ac.abort(err instanceof Error ? err : new Error(String(err)));
      }
    };
    try {
      this.stats.watches++;
      const handle = await this.opts.client.stream(this.opts.path, query, onLine, ac.signal);
      await handle.done;
      return "closed";
    } catch (err) {
      if (err instanceof WatchdogTimeout) {
        this.stats.watchdogRestarts++;
        this.log.warn({ watchdogMs, resourceVersion: this.rv }, "watch silent too long; restarting it");
        return "watchdog";
      }
      if (isGone(err)) {
        this.stats.gone++;
        this.log.info({ resourceVersion: this.rv }, "resourceVersion too old; relisting");
        return "gone";
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private apply(ev: WatchEvent): void {
    const obj = ev.object;
    if (ev.type === "ERROR") throw statusError(0, obj);
    if (!obj) throw new Error(`watch event ${ev.type} without object`);
    const rv = resourceVersionOf(obj);
    if (ev.type === "BOOKMARK") {
      if (rv) this.rv = rv;
      this.attempt = 0;
      return;
    }
    if (this.opts.onWatchEvent && (ev.type === "ADDED" || ev.type === "MODIFIED" || ev.type === "DELETED"))
      this.opts.onWatchEvent(ev.type, objectKey(obj), rv);
    const stored = this.transform(obj);
    const key = objectKey(stored);
    const prev = this.store.get(key);
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED":
        this.store.set(key, stored);
        this.versions.set(key, rv);
        this.updateIndexes(key, prev, stored);
        if (prev) this.emitUpdate(prev, stored);
        else this.emitAdd(stored);
        break;
      case "DELETED":
        this.store.delete(key);
        this.versions.delete(key);
        this.updateIndexes(key, prev, undefined);
        this.emitDelete(prev ?? stored, { finalStateUnknown: false });
        break;
      default:
        throw new Error(`unknown watch event type ${String(ev.type)}`);
    }
    if (rv) this.rv = rv;
    this.stats.events++;
    this.attempt = 0;
  }

  private rebuildIndexes(): void {
    for (const idx of this.indexes.values()) idx.clear();
    for (const [key, obj] of this.store) this.updateIndexes(key, undefined, obj);
  }

  private updateIndexes(key: string, prev: T | undefined, next: T | undefined): void {
    for (const { idx, fn } of this.indexers) {
      const before = prev ? fn(prev) : NO_VALUES;
      const after = next ? fn(next) : NO_VALUES;
      // An update that keeps an object's index values (the usual case: a pod's namespace and node stay) leaves
      // the index as it is: the key is already filed under each of them.
      if (prev && sameValues(before, after)) continue;
      for (const v of before) {
        const keys = idx.get(v);
        keys?.delete(key);
        if (keys?.size === 0) idx.delete(v);
      }
      for (const v of after) {
        let keys = idx.get(v);
        if (!keys) {
          keys = new Set();
          idx.set(v, keys);
        }
        keys.add(key);
      }
    }
  }

  // Called for every handler of every event: no closure per call, unlike call().
  private emitAdd(obj: T): void {
    for (const h of this.handlers) {
      if (!h.onAdd) continue;
      try {
        h.onAdd(obj);
      } catch (err) {
        this.handlerThrew(err);
      }
    }
  }

  private emitUpdate(prev: T, obj: T): void {
    for (const h of this.handlers) {
      if (!h.onUpdate) continue;
      try {
        h.onUpdate(prev, obj);
      } catch (err) {
        this.handlerThrew(err);
      }
    }
  }

  private emitDelete(obj: T, info: DeleteInfo): void {
    for (const h of this.handlers) {
      if (!h.onDelete) continue;
      try {
        h.onDelete(obj, info);
      } catch (err) {
        this.handlerThrew(err);
      }
    }
  }

  private handlerThrew(err: unknown): void {
    this.log.error({ err }, "informer handler threw");
  }

  /** A throwing handler must not stop the informer or the other handlers. */
  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.handlerThrew(err);
    }
  }
}
