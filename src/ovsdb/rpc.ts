// JSON-RPC 1.0 over a byte stream, as OVSDB uses it: request/response correlation, notifications,
// answering the peer's echo requests, and failing every pending request when the stream ends.

import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { ConnectionClosedError, ProtocolError, RpcError, TimeoutError } from "./errors.ts";
import { JsonStreamSplitter } from "./json-stream.ts";

interface Pending {
  method: string;
  resolve(v: unknown): void;
  reject(e: Error): void;
  timer?: NodeJS.Timeout;
}

export interface RpcMessage {
  id?: unknown;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: unknown;
}

export interface RpcConnectionEvents {
  /** A notification or a request other than echo, from the peer. */
  notification: [method: string, params: unknown];
  /** Any message arrived (used for inactivity probing). */
  activity: [];
  /** The connection ended; `error` says why when it was not a clean close. */
  close: [error: Error | undefined];
}

export class RpcConnection extends EventEmitter<RpcConnectionEvents> {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly splitter = new JsonStreamSplitter();
  private closed = false;
  private closeError: Error | undefined;
  private corked = false;

  constructor(
    private readonly stream: Duplex,
    readonly remote: string,
  ) {
    super();
    stream.on("data", (d: Buffer) => this.onData(d));
    stream.on("error", (e) => this.shutdown(e));
    stream.on("close", () => {
      const partial = this.splitter.pendingBytes > 0;
      this.shutdown(
        partial
          ? new ProtocolError(`${remote}: connection closed in the middle of a message`)
          : new ConnectionClosedError(`${remote}: connection closed by peer`),
      );
    });
    stream.on("end", () => stream.end());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  request(method: string, params: unknown[], timeoutMs?: number): Promise<unknown> {
    if (this.closed) {
      return Promise.reject(
        new ConnectionClosedError(`${this.remote}: ${method} on a closed connection`, {
          cause: this.closeError,
        }),
      );
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const p: Pending = { method, resolve, reject };
      if (timeoutMs !== undefined && timeoutMs > 0) {
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new TimeoutError(`${this.remote}: ${method} got no reply within ${timeoutMs} ms`));
        }, timeoutMs);
        p.timer.unref();
      }
      this.pending.set(id, p);
      this.send({ id, method, params });
    });
  }

  notify(method: string, params: unknown[]): void {
    if (!this.closed) this.send({ id: null, method, params });
  }

  close(error?: Error): void {
    this.shutdown(error ?? new ConnectionClosedError(`${this.remote}: connection closed by client`));
    this.stream.destroy();
  }

  private send(msg: RpcMessage): void {
    // Coalesce the writes of one tick into one syscall: bulk callers issue many small requests at once.
    if (!this.corked) {
      this.corked = true;
      this.stream.cork();
      process.nextTick(() => {
        this.corked = false;
        this.stream.uncork();
      });
    }
    this.stream.write(JSON.stringify(msg));
  }

  private onData(d: Buffer): void {
    if (this.closed) return;
    let msgs: unknown[];
    try {
      msgs = this.splitter.push(d);
    } catch (e) {
      this.close(e as Error);
      return;
    }
    this.emit("activity");
    for (const m of msgs) {
      if (this.closed) return;
      this.dispatch(m as RpcMessage);
    }
  }

  private dispatch(m: RpcMessage): void {
    if (typeof m !== "object" || m === null) {
      this.close(new ProtocolError(`${this.remote}: JSON-RPC message is not an object`));
      return;
    }
    if (typeof m.method === "string") {
      if (m.method === "echo" && m.id !== null && m.id !== undefined) {
        this.send({ id: m.id, result: m.params ?? [], error: null });
        return;
      }
      this.emit("notification", m.method, m.params);
      return;
    }
    if (typeof m.id !== "number") {
      // Replies to requests that timed out locally are dropped; anything else is a broken peer.
      if (m.id === null || m.id === undefined) {
        this.close(new ProtocolError(`${this.remote}: reply without an id`));
      }
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (p.timer) clearTimeout(p.timer);
    if (m.error !== null && m.error !== undefined) p.reject(new RpcError(p.method, m.error));
    else p.resolve(m.result);
  }

  private shutdown(error: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.closeError = error;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      if (p.timer) clearTimeout(p.timer);
      p.reject(
        error instanceof ConnectionClosedError
          ? error
          : new ConnectionClosedError(
              `${this.remote}: connection lost during ${p.method}: ${error.message}`,
              {
                cause: error,
              },
            ),
      );
    }
    this.emit("close", error instanceof ConnectionClosedError ? undefined : error);
  }
}
