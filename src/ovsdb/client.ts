// The OVSDB client session: connects to one of several remotes, insists on the Raft leader for clustered
// databases, keeps a monitored cache (resuming with monitor_cond_since), probes for dead peers, reconnects
// with backoff, and runs transactions.

import { EventEmitter } from "node:events";
import { Backoff, type BackoffOptions, sleep } from "./backoff.ts";
import { Cache, type RowEvent, type UpdateFormat } from "./cache.ts";
import {
  ConnectionClosedError,
  NotLeaderError,
  NotLeaderTransactionError,
  OvsdbError,
  ProtocolError,
  RpcError,
  TimeoutError,
  UnknownDatabaseError,
  WriteFencedError,
} from "./errors.ts";
import type { DatabaseModel, RowBase, TableMap } from "./model.ts";
import { RpcConnection } from "./rpc.ts";
import { type DatabaseSchema, intersectSchema, parseSchema } from "./schema.ts";
import { newServerCache, SERVER_MONITOR_COLUMNS, type ServerDatabaseRow } from "./server-db.ts";
import {
  insertUuidProbe,
  insertUuidProbeResult,
  Transaction,
  type TransactionResult,
  type TransactOptions,
} from "./transaction.ts";
import { classifyStreamError, connectRemote, parseRemote, type Remote, type TlsConfig } from "./transport.ts";

export const ZERO_TXN_ID = "00000000-0000-0000-0000-000000000000";

export type ClientState = "idle" | "connecting" | "syncing" | "ready" | "backoff" | "closed";

// The session is a state machine; only these transitions are legal.
const TRANSITIONS: Record<ClientState, readonly ClientState[]> = {
  idle: ["connecting", "closed"],
  connecting: ["syncing", "backoff", "connecting", "closed"],
  syncing: ["ready", "backoff", "connecting", "closed"],
  ready: ["backoff", "connecting", "closed"],
  backoff: ["connecting", "closed"],
  closed: [],
};

export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export interface MonitorTableOptions {
  columns?: readonly string[];
}

export interface ClientOptions<T extends TableMap> {
  /** One remote or several ("unix:/a,tcp:1.2.3.4:6641" or an array); several means a cluster or failover set. */
  remotes: string | readonly string[];
  /** Generated model; without one, `database` names the database and the server's schema is used as is. */
  model?: DatabaseModel<T>;
  database?: string;
  tls?: TlsConfig;
  /** For clustered databases, accept only the leader (the default, like the C IDL for writers). */
  leaderOnly?: boolean;
  /** Inactivity probe: send an echo after this long without traffic, and drop the connection if another interval passes. 0 disables. */
  probeIntervalMs?: number;
  backoff?: BackoffOptions;
  connectTimeoutMs?: number;
  /** Tables to monitor (all tables of the model by default; an empty object monitors nothing). */
  monitor?: Partial<Record<keyof T & string, MonitorTableOptions | true>>;
  /** Try remotes in random order, as OVS does (default true). */
  shuffleRemotes?: boolean;
  logger?: Logger;
  /**
   * Added as an OVSDB comment to every transaction that writes, as ovn-nbctl adds its command line: the server
   * stores it with the record, so `ovsdb-tool show-log` tells who wrote what (e.g. which controller replica).
   */
  comment?: string;
}

export interface ClientStats {
  connects: number;
  /** Initial monitor replies that carried the whole database (a full reload). */
  fullSnapshots: number;
  /** Reconnects resumed from the last transaction id (monitor_cond_since found=true): no reload. */
  resumes: number;
  probesSent: number;
  /** Connections refused because the member was not the leader, not connected, or stale. */
  rejectedMembers: number;
}

export interface ClientEvents {
  state: [state: ClientState];
  /** Ready on a connection; `resumed` tells whether the cache was kept (monitor_cond_since found=true). */
  ready: [info: { remote: string; resumed: boolean; fullSnapshot: boolean }];
  disconnected: [error: Error | undefined];
  /** A connection attempt failed before the session was ever ready (for logging; connect() reports the outcome). */
  connectFailed: [error: Error];
}

type MonitorMethod = "monitor_cond_since" | "monitor_cond" | "monitor";

export class OvsdbClient<T extends TableMap = TableMap> extends EventEmitter<ClientEvents> {
  readonly database: string;
  readonly stats: ClientStats = {
    connects: 0,
    fullSnapshots: 0,
    resumes: 0,
    probesSent: 0,
    rejectedMembers: 0,
  };
  private readonly remotes: Remote[];
  private readonly clientSchema: DatabaseSchema | undefined;
  private serverSchema: DatabaseSchema | undefined;
  private effective: DatabaseSchema | undefined;
  private cacheImpl: Cache<T> | undefined;
  private _state: ClientState = "idle";
  private conn: RpcConnection | undefined;
  private remoteIndex = 0;
  private triedSinceReady = 0;
  private lastTxnId = ZERO_TXN_ID;
  private lastIndex = 0;
  private monitorMethod: MonitorMethod = "monitor_cond_since";
  private readonly backoff: Backoff;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private readyWaiters: { resolve(): void; reject(e: Error): void }[] = [];
  private firstConnect: { resolve(): void; reject(e: Error): void } | undefined;
  private everReady = false;
  private retryInitial = false;
  private loop: Promise<void> | undefined;
  private readonly monitorId: string;
  // Notifications that arrive while a monitor reply is being applied wait here, so updates are applied in order.
  private held: [string, unknown][] | undefined;
  // The connection whose monitor was cancelled: its late updates are ignored.
  private monitorCancelled: RpcConnection | undefined;

  constructor(private readonly opts: ClientOptions<T>) {
    super();
    const list = typeof opts.remotes === "string" ? opts.remotes.split(",") : [...opts.remotes];
    this.remotes = list.map((r) => parseRemote(r.trim()));
    if (this.remotes.length === 0) throw new OvsdbError("no OVSDB remotes given");
    if (opts.shuffleRemotes !== false) {
      for (let i = this.remotes.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [this.remotes[i], this.remotes[j]] = [this.remotes[j] as Remote, this.remotes[i] as Remote];
      }
    }
    this.clientSchema = opts.model?.schema;
    const db = opts.database ?? opts.model?.name;
    if (!db) throw new OvsdbError("a database name or a model is required");
    this.database = db;
    this.monitorId = `zovn-${db}`;
    this.backoff = new Backoff(opts.backoff);
    this.log = opts.logger ?? silentLogger;
    if (this.clientSchema) this.cacheImpl = this.newCache(this.clientSchema);
  }

  get state(): ClientState {
    return this._state;
  }

  get connected(): boolean {
    return this._state === "ready";
  }

  /** The remote of the current connection. */
  get currentRemote(): string | undefined {
    return this.conn?.remote;
  }

  /** The cache of monitored tables. Available after connect() when no model was given. */
  get cache(): Cache<T> {
    if (!this.cacheImpl)
      throw new OvsdbError("the cache exists once the schema is known: await connect() first");
    return this.cacheImpl;
  }

  /** The schema in use: the model's tables and columns that the server also has. */
  get schema(): DatabaseSchema {
    if (!this.effective) throw new OvsdbError("not connected yet: the server's schema is unknown");
    return this.effective;
  }

  /**
   * Starts the session and resolves when the first connection is ready. Without `retry`, it rejects with the typed
   * error of the last remote once every remote has failed; with `retry`, it keeps trying (emitting "connectFailed" for each
   * failure) until it connects or close() is called. After the first success, the session always reconnects.
   */
  connect(opts: { retry?: boolean } = {}): Promise<void> {
    if (this._state === "closed") return Promise.reject(new ConnectionClosedError("client is closed"));
    if (this.loop) return this.whenReady();
    this.retryInitial = opts.retry === true;
    const p = new Promise<void>((resolve, reject) => {
      this.firstConnect = { resolve, reject };
    });
    this.loop = this.run();
    return p;
  }

  async close(): Promise<void> {
    if (this._state === "closed") return;
    this.setState("closed");
    this.abort.abort(new ConnectionClosedError("client closed"));
    this.conn?.close(new ConnectionClosedError("client closed"));
    const err = new ConnectionClosedError("client closed");
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
    this.firstConnect?.reject(err);
    await this.loop?.catch(() => {});
  }

  /**
   * Drops the current connection and reconnects. With `fullResync`, the cache is reloaded from a full snapshot
   * instead of resuming from the last transaction id (a repair tool; also used by benchmarks).
   */
  async reconnect(opts: { fullResync?: boolean } = {}): Promise<void> {
    if (opts.fullResync) this.lastTxnId = ZERO_TXN_ID;
    this.conn?.close(new ConnectionClosedError("reconnect requested"));
    // The loop notices the closed connection asynchronously; wait until it has left "ready".
    while (this._state === "ready") await new Promise((r) => setImmediate(r));
    await this.whenReady();
  }

  /**
   * Resolves when the session is ready, waiting through reconnects up to `timeoutMs`; rejects with the
   * signal's reason if `signal` aborts first.
   */
  whenReady(timeoutMs?: number, signal?: AbortSignal): Promise<void> {
    if (this._state === "ready") return Promise.resolve();
    if (this._state === "closed") return Promise.reject(new ConnectionClosedError("client is closed"));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const leave = (): boolean => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        const i = this.readyWaiters.indexOf(w);
        if (i < 0) return false;
        this.readyWaiters.splice(i, 1);
        return true;
      };
      const w = {
        resolve: () => {
          leave();
          resolve();
        },
        reject: (e: Error) => {
          leave();
          reject(e);
        },
      };
      const onAbort = () => {
        if (leave()) reject(signal?.reason);
      };
      this.readyWaiters.push(w);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          if (leave()) reject(new TimeoutError(`not connected to ${this.database} within ${timeoutMs} ms`));
        }, timeoutMs);
        timer.unref();
      }
    });
  }

  private setState(s: ClientState): void {
    if (s === this._state) return;
    if (!TRANSITIONS[this._state].includes(s)) {
      throw new OvsdbError(`internal: illegal client state transition ${this._state} -> ${s}`);
    }
    this._state = s;
    this.emit("state", s);
    if (s === "ready") for (const w of this.readyWaiters.splice(0)) w.resolve();
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const remote = this.remotes[this.remoteIndex % this.remotes.length] as Remote;
      this.setState("connecting");
      let error: Error | undefined;
      try {
        const closed = await this.attempt(remote);
        error = await closed;
        if (!signal.aborted) this.emit("disconnected", error);
        this.log.warn({ remote: remote.text, err: error?.message }, "ovsdb connection lost");
      } catch (e) {
        error = e as Error;
        if (signal.aborted) break;
        this.log.warn({ remote: remote.text, err: error.message }, "ovsdb connection attempt failed");
        if (!this.everReady) this.emit("connectFailed", error);
        // Before the first success, one failed round over all remotes ends connect() with the typed error,
        // unless the caller asked to keep trying (a daemon waiting for its database to come up).
        if (!this.everReady && !this.retryInitial && this.triedSinceReady + 1 >= this.remotes.length) {
          this.firstConnect?.reject(error);
          this.firstConnect = undefined;
          for (const w of this.readyWaiters.splice(0)) w.reject(error);
          this.setState("closed");
          this.abort.abort(error);
          return;
        }
      }
      this.conn = undefined;
      if (signal.aborted) break;
      // A member that refused us (not leader, stale) sends us on to the next remote at once; a failed round waits.
      this.remoteIndex++;
      this.triedSinceReady++;
      if (this.triedSinceReady >= this.remotes.length) {
        this.triedSinceReady = 0;
        this.setState("backoff");
        try {
          await sleep(this.backoff.next(), signal);
        } catch {
          break;
        }
      } else if (!(error instanceof NotLeaderError)) {
        this.setState("backoff");
        try {
          await sleep(50, signal);
        } catch {
          break;
        }
      }
    }
  }

  /** Connects and syncs; resolves with a promise that settles when this connection ends. */
  private async attempt(remote: Remote): Promise<Promise<Error | undefined>> {
    const sock = await connectRemote(remote, this.opts.tls, this.opts.connectTimeoutMs ?? 10_000);
    const conn = new RpcConnection(sock, remote.text);
    this.conn = conn;
    this.stats.connects++;
    const closed = new Promise<Error | undefined>((resolve) => {
      conn.once("close", (e) => resolve(e ? classifyStreamError(remote, e) : undefined));
    });
    conn.on("notification", (method, params) => this.onNotification(conn, method, params));
    const stopProbe = this.startProbe(conn);
    closed.finally(stopProbe);
    try {
      this.setState("syncing");
      await this.checkServer(conn);
      await this.loadSchema(conn);
      await conn.request("set_db_change_aware", [true]).catch(() => {});
      await this.catchUp(conn);
      await this.startMonitor(conn);
    } catch (e) {
      const err = e instanceof ConnectionClosedError ? ((await closed) ?? e) : (e as Error);
      conn.close(err instanceof Error ? err : undefined);
      throw err;
    }
    this.everReady = true;
    this.triedSinceReady = 0;
    this.backoff.reset();
    this.setState("ready");
    this.firstConnect?.resolve();
    this.firstConnect = undefined;
    return closed;
  }

  private startProbe(conn: RpcConnection): () => void {
    const interval = this.opts.probeIntervalMs ?? 5000;
    if (interval <= 0) return () => {};
    let lastRx = Date.now();
    let probeSentAt = 0;
    conn.on("activity", () => {
      lastRx = Date.now();
      probeSentAt = 0;
    });
    const timer = setInterval(
      () => {
        const now = Date.now();
        if (now - lastRx < interval) return;
        // The first late tick after a blocked event loop only sends a probe: the data that arrived meanwhile
        // is read right after the timers run, so a blocked loop never looks like a dead peer.
        if (probeSentAt === 0) {
          probeSentAt = now;
          this.stats.probesSent++;
          conn.request("echo", ["zovn-probe"]).catch(() => {});
          return;
        }
        if (now - probeSentAt >= interval) {
          conn.close(
            new ConnectionClosedError(
              `${conn.remote}: no reply to inactivity probe for ${now - probeSentAt} ms`,
            ),
          );
        }
      },
      Math.max(50, Math.floor(interval / 2)),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Reads _Server.Database and refuses members that are not fit to serve this client. */
  private async checkServer(conn: RpcConnection): Promise<void> {
    let reply: unknown;
    this.serverCache = newServerCache();
    this.held = [];
    try {
      reply = await conn.request("monitor_cond", [
        "_Server",
        ["zovn-server", this.database],
        { Database: [{ columns: SERVER_MONITOR_COLUMNS, where: [["name", "==", this.database]] }] },
      ]);
    } catch (e) {
      this.held = undefined;
      if (e instanceof RpcError) {
        // Servers before OVS 2.9 have no _Server database: fall back to list_dbs.
        const dbs = (await conn.request("list_dbs", [])) as string[];
        if (!dbs.includes(this.database)) throw this.unknownDb(conn, dbs);
        return;
      }
      throw e;
    }
    this.serverCache.replace(reply, 2);
    const row = this.serverDbRow();
    if (!row) {
      this.held = undefined;
      throw this.unknownDb(conn, (await conn.request("list_dbs", [])) as string[]);
    }
    this.judgeServerRow(conn.remote, row);
    this.releaseHeld(conn);
  }

  private serverCache = newServerCache();

  /**
   * On a Raft member, waits until the database has applied every entry of the member's log before the cache is
   * loaded from it. The monitor answers from what is applied, so without this the cache could miss a
   * transaction the member already holds: one of ours whose reply was lost and that is still committing, or,
   * on a newly elected leader, what its predecessor committed. A caller that reads the cache after a
   * reconnect would take such a write for one that never landed. Any transaction waits for that on the
   * server (its prerequisite is the log's last entry), so an empty one is the barrier.
   */
  private async catchUp(conn: RpcConnection): Promise<void> {
    if (this.serverDbRow()?.model !== "clustered") return;
    await conn.request("transact", [this.database], this.opts.connectTimeoutMs ?? 10_000);
  }

  private serverDbRow(): ServerDatabaseRow | undefined {
    return this.serverCache.table("Database").findOne((r) => r.name === this.database);
  }

  private unknownDb(conn: RpcConnection, dbs: string[]): UnknownDatabaseError {
    return new UnknownDatabaseError(
      `${conn.remote}: database "${this.database}" is not served here (it serves: ${dbs.filter((d) => d !== "_Server").join(", ") || "nothing"})`,
    );
  }

  /** Throws NotLeaderError when a clustered member must not be used. */
  private judgeServerRow(remote: string, row: ServerDatabaseRow): void {
    if (row.model !== "clustered") return;
    let why: string | undefined;
    if (!row.connected) why = "is not connected to its cluster";
    else if (this.opts.leaderOnly !== false && !row.leader) why = "is not the cluster leader";
    else if (row.index !== null && row.index < this.lastIndex) {
      why = `is stale (raft index ${row.index} is behind ${this.lastIndex} seen before)`;
    }
    if (why) {
      this.stats.rejectedMembers++;
      throw new NotLeaderError(`${remote}: ${this.database} ${why}`);
    }
    if (row.index !== null) this.lastIndex = Math.max(this.lastIndex, row.index);
  }

  private async loadSchema(conn: RpcConnection): Promise<void> {
    let raw: unknown;
    try {
      raw = await conn.request("get_schema", [this.database]);
    } catch (e) {
      if (e instanceof RpcError) throw this.unknownDb(conn, (await conn.request("list_dbs", [])) as string[]);
      throw e;
    }
    const server = parseSchema(raw);
    const changed =
      this.serverSchema !== undefined && JSON.stringify(this.serverSchema.raw) !== JSON.stringify(raw);
    this.serverSchema = server;
    this.effective = this.clientSchema ? intersectSchema(this.clientSchema, server) : server;
    if (!this.cacheImpl) this.cacheImpl = this.newCache(server);
    this.cacheImpl.setServerSchema(server);
    if (changed) {
      // History from before a schema change cannot be resumed.
      this.lastTxnId = ZERO_TXN_ID;
    }
  }

  private monitorRequests(v1: boolean): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const eff = this.effective as DatabaseSchema;
    const chosen = this.opts.monitor;
    for (const [name, t] of eff.tables) {
      const opt = chosen ? (chosen as Record<string, MonitorTableOptions | true | undefined>)[name] : true;
      if (opt === undefined) continue;
      const want =
        opt === true || !opt.columns ? [...t.columns.keys()] : opt.columns.filter((c) => t.columns.has(c));
      out[name] = v1 ? { columns: want } : [{ columns: want }];
    }
    return out;
  }

  private async startMonitor(conn: RpcConnection): Promise<void> {
    const cache = this.cacheImpl as Cache<T>;
    this.held = [];
    try {
      for (;;) {
        try {
          if (this.monitorMethod === "monitor_cond_since") {
            const r = (await conn.request("monitor_cond_since", [
              this.database,
              this.monitorId,
              this.monitorRequests(false),
              this.lastTxnId,
            ])) as [boolean, string, unknown];
            const [found, lastId, updates] = r;
            if (found) {
              this.stats.resumes++;
              cache.apply(updates, 2);
            } else {
              this.stats.fullSnapshots++;
              cache.replace(updates, 2);
            }
            this.lastTxnId = lastId;
            this.readyInfo = { remote: conn.remote, resumed: found, fullSnapshot: !found };
          } else {
            const v1 = this.monitorMethod === "monitor";
            const r = await conn.request(this.monitorMethod, [
              this.database,
              this.monitorId,
              this.monitorRequests(v1),
            ]);
            this.stats.fullSnapshots++;
            cache.replace(r, v1 ? 1 : 2);
            this.readyInfo = { remote: conn.remote, resumed: false, fullSnapshot: true };
          }
          break;
        } catch (e) {
          if (
            e instanceof RpcError &&
            /unknown method/i.test(e.message) &&
            this.monitorMethod !== "monitor"
          ) {
            this.monitorMethod = this.monitorMethod === "monitor_cond_since" ? "monitor_cond" : "monitor";
            this.log.info(
              { method: this.monitorMethod },
              "ovsdb server lacks the newer monitor; falling back",
            );
            continue;
          }
          throw e;
        }
      }
    } catch (e) {
      this.held = undefined;
      throw e;
    }
    this.releaseHeld(conn);
    this.emit("ready", this.readyInfo as { remote: string; resumed: boolean; fullSnapshot: boolean });
  }

  private readyInfo: { remote: string; resumed: boolean; fullSnapshot: boolean } | undefined;

  private releaseHeld(conn: RpcConnection): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const [m, p] of held) this.onNotification(conn, m, p);
  }

  private onNotification(conn: RpcConnection, method: string, params: unknown): void {
    if (conn !== this.conn) return;
    if (this.held) {
      this.held.push([method, params]);
      return;
    }
    const p = params as unknown[];
    // After monitor_cancel the cache keeps its content: updates already in flight are ignored.
    const cache = conn === this.monitorCancelled ? undefined : this.cacheImpl;
    try {
      switch (method) {
        case "update3":
          if (p[0] === this.monitorId && cache) {
            cache.apply(p[2], 2);
            this.lastTxnId = p[1] as string;
          }
          break;
        case "update2":
          if (Array.isArray(p[0]) && p[0][0] === "zovn-server") this.onServerUpdate(conn, p[1]);
          else if (p[0] === this.monitorId && cache) cache.apply(p[1], 2);
          break;
        case "update":
          if (p[0] === this.monitorId && cache) cache.apply(p[1], 1 as UpdateFormat);
          break;
        case "monitor_canceled":
          // The server dropped our monitor (e.g. a schema change): resync from scratch on a new connection.
          this.lastTxnId = ZERO_TXN_ID;
          conn.close(new ConnectionClosedError(`${conn.remote}: server canceled the monitor`));
          break;
        default:
          this.log.debug({ method }, "ovsdb notification ignored");
      }
    } catch (e) {
      conn.close(new ProtocolError(`${conn.remote}: bad ${method} notification: ${(e as Error).message}`));
    }
  }

  private onServerUpdate(conn: RpcConnection, updates: unknown): void {
    this.serverCache.apply(updates, 2);
    const row = this.serverDbRow();
    try {
      if (!row) throw new NotLeaderError(`${conn.remote}: database ${this.database} is no longer served`);
      this.judgeServerRow(conn.remote, row);
    } catch (e) {
      this.log.info({ remote: conn.remote, why: (e as Error).message }, "leaving cluster member");
      conn.close(e as Error);
    }
  }

  // ---- requests ------------------------------------------------------------------------------------------

  private async readyConn(timeoutMs?: number, signal?: AbortSignal): Promise<RpcConnection> {
    await this.whenReady(timeoutMs, signal);
    const c = this.conn;
    if (c && !c.isClosed) return c;
    // Ready but the connection just ended: the session loop has yet to see it. Wait for a later turn of the
    // event loop rather than a microtask, so this can never spin without letting the loop run.
    await new Promise((r) => setImmediate(r));
    return this.readyConn(timeoutMs, signal);
  }

  async listDbs(): Promise<string[]> {
    return (await (await this.readyConn()).request("list_dbs", [])) as string[];
  }

  async getSchema(db = this.database): Promise<unknown> {
    return (await this.readyConn()).request("get_schema", [db]);
  }

  async echo(timeoutMs?: number): Promise<unknown> {
    return (await this.readyConn(timeoutMs)).request("echo", ["zovn"], timeoutMs);
  }

  /**
   * Cancels the monitor (monitor_cancel): the cache stops following the database and keeps its last content.
   * A later reconnect monitors again.
   */
  async cancelMonitor(): Promise<void> {
    const conn = await this.readyConn();
    await conn.request("monitor_cancel", [this.monitorId]);
    this.monitorCancelled = conn;
  }

  /** The cache, with a subscriber's exception logged instead of lost (the other subscribers still run). */
  private newCache(schema: DatabaseSchema): Cache<T> {
    const cache = new Cache<T>(schema);
    cache.onListenerError = (e) =>
      this.log.error({ err: e instanceof Error ? e.message : String(e) }, "ovsdb cache subscriber failed");
    return cache;
  }

  private readonly insertUuid = new WeakMap<RpcConnection, Promise<boolean>>();

  /**
   * Whether the server this client is connected to takes an insert with a client-chosen uuid (InsertOptions.uuid;
   * ovsdb-server 2.17 and later), asked once per connection with a transaction that changes nothing
   * (insertUuidProbe). Callers fall back to a guardAbsent when it does not. A reconnect to another server asks
   * again; a write built for the old one that the new one refuses fails like any refused transaction.
   */
  async insertUuidSupported(timeoutMs?: number): Promise<boolean> {
    const conn = await this.readyConn(timeoutMs);
    let known = this.insertUuid.get(conn);
    if (!known) {
      const table = this.schema.tables.keys().next().value;
      known =
        table === undefined
          ? Promise.resolve(false)
          : conn
              .request("transact", [this.database, ...insertUuidProbe(table)], timeoutMs)
              .then(insertUuidProbeResult);
      // A probe that failed (connection lost) is asked again next time.
      known.catch(() => this.insertUuid.delete(conn));
      this.insertUuid.set(conn, known);
    }
    return known;
  }

  /** A new transaction on this database; nothing is sent until commit(). */
  transaction(): Transaction<T> {
    return new Transaction<T>(this.schema, (txn, opts) => this.commit(txn, opts));
  }

  /**
   * A view of this client for one writer's term (a controller's leadership), sharing its connection and
   * cache. Once `fence` aborts, the view's transactions are refused with WriteFencedError, checked when the
   * request is about to be sent (after waiting for a connection), so a deposed writer cannot send one it built
   * before; its whenReady() rejects with the fence's reason; and the cache subscriptions made through the view
   * are removed, so a term leaves no listener behind.
   */
  fenced(fence: AbortSignal): OvsdbClient<T> {
    const transaction = (): Transaction<T> =>
      new Transaction<T>(this.schema, (txn, opts) => this.commit(txn, opts, fence));
    const subscribe: Cache<T>["subscribe"] = (table, fn) => {
      if (fence.aborted) return () => {};
      const unsubscribe = this.cache.subscribe(table, fn);
      const onEnd = () => unsubscribe();
      fence.addEventListener("abort", onEnd, { once: true });
      return () => {
        fence.removeEventListener("abort", onEnd);
        unsubscribe();
      };
    };
    // One view per cache: a full reload may replace the client's cache.
    let view: { of: Cache<T>; proxy: Cache<T> } | undefined;
    const cacheView = (cache: Cache<T>): Cache<T> => {
      if (view?.of !== cache) {
        const proxy = new Proxy(cache, {
          get: (target, prop, receiver) =>
            prop === "subscribe" ? subscribe : Reflect.get(target, prop, receiver),
        });
        view = { of: cache, proxy };
      }
      return view.proxy;
    };
    // Waiting for a connection ends with the term too.
    const whenReady = (timeoutMs?: number, signal?: AbortSignal): Promise<void> =>
      this.whenReady(timeoutMs, signal ? AbortSignal.any([fence, signal]) : fence);
    return new Proxy(this, {
      get: (target, prop, receiver) => {
        if (prop === "transaction") return transaction;
        if (prop === "whenReady") return whenReady;
        if (prop === "cache") return cacheView(target.cache);
        return Reflect.get(target, prop, receiver);
      },
    });
  }

  /** Builds and commits one transaction. */
  async transact(
    build: (txn: Transaction<T>) => void,
    opts: TransactOptions = {},
  ): Promise<TransactionResult> {
    const txn = this.transaction();
    build(txn);
    return txn.commit(opts);
  }

  /** Sends raw operations (wire notation) and returns the raw reply. */
  async transactRaw(ops: readonly unknown[], timeoutMs?: number): Promise<unknown> {
    return (await this.readyConn(timeoutMs)).request("transact", [this.database, ...ops], timeoutMs);
  }

  private async commit(
    txn: Transaction<T>,
    opts: TransactOptions,
    fence?: AbortSignal,
  ): Promise<TransactionResult> {
    txn.checkReferences();
    if (txn.size === 0) return txn.interpret([]);
    const comment = this.opts.comment;
    if (comment && !txn.meta.some((m) => m.op === "comment") && !isReadOnly(txn)) txn.comment(comment);
    const started = Date.now();
    // A fenced write stops waiting for a connection when its writer's term ends.
    const conn = await this.readyConn(opts.timeoutMs, isReadOnly(txn) ? undefined : fence).catch((e) => {
      throw fence?.aborted && e === fence.reason
        ? new WriteFencedError("write refused: the writer's fence is closed", { cause: fence.reason })
        : e;
    });
    if (fence?.aborted && !isReadOnly(txn))
      throw new WriteFencedError("write refused: the writer's fence is closed", { cause: fence.reason });
    const left =
      opts.timeoutMs === undefined ? undefined : Math.max(1, opts.timeoutMs - (Date.now() - started));
    const reply = await conn.request("transact", [this.database, ...txn.ops], left);
    try {
      return txn.interpret(reply);
    } catch (e) {
      if (e instanceof NotLeaderTransactionError)
        conn.close(new NotLeaderError(`${conn.remote}: ${e.message}`));
      throw e;
    }
  }

  /**
   * Commits a transaction, rebuilding and resending it after a retryable failure (connection lost, leader change,
   * timeout). A write whose reply was lost may have committed, so it is retried only when the transaction carries
   * a guard (Transaction.guardAbsent) that makes a second application impossible, or when it writes nothing.
   */
  async transactWithRetry(
    build: (txn: Transaction<T>) => void,
    opts: TransactOptions & { attempts?: number } = {},
  ): Promise<TransactionResult> {
    const attempts = opts.attempts ?? 5;
    for (let i = 1; ; i++) {
      const txn = this.transaction();
      build(txn);
      try {
        return await txn.commit(opts);
      } catch (e) {
        const err = e as OvsdbError;
        const guarded = txn.meta.some((m) => m.guard);
        const readOnly = isReadOnly(txn);
        const notApplied = err instanceof NotLeaderTransactionError;
        if (!err.retryable || i >= attempts || !(guarded || readOnly || notApplied)) throw e;
        this.log.info({ attempt: i, err: err.message }, "retrying ovsdb transaction");
        await this.whenReady(opts.timeoutMs);
      }
    }
  }

  /**
   * Commits many transactions built from `items`, `batchSize` items each, keeping up to `inFlight` in flight.
   * Each batch is one transaction; results come back in order.
   */
  async bulk<I>(
    items: readonly I[],
    build: (txn: Transaction<T>, item: I) => void,
    opts: TransactOptions & { batchSize?: number; inFlight?: number } = {},
  ): Promise<TransactionResult[]> {
    const size = Math.max(1, opts.batchSize ?? 100);
    const batches: I[][] = [];
    for (let i = 0; i < items.length; i += size) batches.push(items.slice(i, i + size));
    const out: TransactionResult[] = new Array(batches.length);
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const n = next++;
        const txn = this.transaction();
        for (const it of batches[n] as I[]) build(txn, it);
        out[n] = await txn.commit(opts);
      }
    };
    await Promise.all(Array.from({ length: Math.min(opts.inFlight ?? 4, batches.length) }, worker));
    return out;
  }

  /** Resolves with the first cached row of `table` matching `pred`, now or when it appears. */
  waitForRow<K extends keyof T & string>(
    table: K,
    pred: (row: T[K]) => boolean,
    opts: { timeoutMs: number; signal?: AbortSignal; description?: string },
  ): Promise<T[K]> {
    const tc = this.cache.table(table);
    const now = tc.findOne(pred);
    if (now) return Promise.resolve(now);
    // An abort before the wait began fires no event any more: without this the wait ran its whole timeout.
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason ?? new OvsdbError("aborted"));
    return new Promise((resolve, reject) => {
      const finish = (err: Error | undefined, row?: T[K]) => {
        clearTimeout(timer);
        unsubscribe();
        opts.signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(row as T[K]);
      };
      const unsubscribe = this.cache.subscribe(table, (events: readonly RowEvent[]) => {
        for (const e of events) {
          if (e.kind !== "delete" && pred(e.row as unknown as T[K])) {
            finish(undefined, e.row as unknown as T[K]);
            return;
          }
        }
      });
      const timer = setTimeout(
        () =>
          finish(
            new TimeoutError(
              `no ${table} row ${opts.description ?? "matching the condition"} appeared within ${opts.timeoutMs} ms`,
            ),
          ),
        opts.timeoutMs,
      );
      timer.unref();
      const onAbort = () => finish(opts.signal?.reason ?? new OvsdbError("aborted"));
      opts.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

export type { RowBase };

/** A transaction of only reads, waits and comments writes nothing. */
function isReadOnly(txn: { readonly meta: readonly { op: string }[] }): boolean {
  return txn.meta.every((m) => m.op === "select" || m.op === "wait" || m.op === "comment");
}
