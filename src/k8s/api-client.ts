// Raw JSON requests and watch streams against the apiserver, authenticated from a KubeConfig. The informer,
// leader election and event recorder use this instead of the generated clients because they need a deadline
// on every request, an abortable watch stream read line by line, and one keep-alive connection pool.

import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  query?: Query;
  body?: unknown;
  /** For PATCH: application/merge-patch+json (default), application/json-patch+json, ... */
  contentType?: string;
  /** Whole-request deadline; 30 s by default. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * A 2xx answer's body is read and dropped, not parsed, and the request resolves to undefined: for writes whose
   * caller needs only to know that they succeeded (a PATCH answers with the whole object). Errors are parsed as
   * usual.
   */
  discardResponse?: boolean;
}

/** A non-2xx answer; `reason` is the Status reason (NotFound, Conflict, Expired...) when the server sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export const isNotFound = (err: unknown): boolean => err instanceof ApiError && err.status === 404;
export const isConflict = (err: unknown): boolean => err instanceof ApiError && err.status === 409;
export const isAlreadyExists = (err: unknown): boolean =>
  err instanceof ApiError && err.status === 409 && err.reason === "AlreadyExists";
/** 410 Gone: the resourceVersion asked for has been compacted away. */
export const isGone = (err: unknown): boolean =>
  err instanceof ApiError && (err.status === 410 || err.reason === "Expired" || err.reason === "Gone");

/** A write refused before it was sent because the writer's fence (ApiClient.fenced) is closed. */
export class WriteFencedError extends Error {
  constructor(method: string, path: string, options?: ErrorOptions) {
    super(`${method} ${path} refused: the writer's fence is closed`, options);
    this.name = "WriteFencedError";
  }
}

/** Builds an ApiError from a metav1.Status object (a response body or a watch ERROR event). */
export function statusError(status: number, body: unknown): ApiError {
  const s = (body ?? {}) as { code?: number; reason?: string; message?: string; details?: unknown };
  const code = typeof s.code === "number" && s.code > 0 ? s.code : status;
  return new ApiError(code, s.reason ?? "", s.message ?? `HTTP ${code}`, s.details);
}

function encodeQuery(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const text = params.toString();
  return text ? `?${text}` : "";
}

export interface StreamHandle {
  /** Resolves when the server ends the stream; rejects on a transport error or when the signal aborts. */
  readonly done: Promise<void>;
}

/**
 * How long a connection pool replaced by a certificate rotation is kept for what still runs on it: longer than
 * the longest watch (informers ask for at most 600 s), so that a rotation ends no watch early.
 */
const RETIRED_POOL_MS = 11 * 60_000;

/** A digest of the TLS material a pool was built with, to notice when the files behind it change. */
function tlsFingerprint(o: https.RequestOptions): string {
  const h = createHash("sha256");
  for (const part of [o.ca, o.cert, o.key, o.pfx, o.passphrase, o.servername]) {
    const items = Array.isArray(part) ? part : [part];
    for (const item of items) {
      if (item === undefined || item === null) h.update("-");
      else if (Buffer.isBuffer(item)) h.update(item);
      else if (typeof item === "string") h.update(item);
      else h.update(JSON.stringify(item));
      h.update("\0");
    }
    h.update("\n");
  }
  return h.digest("hex");
}

export class ApiClient {
  private agent: http.Agent | undefined;
  /** The TLS material of `agent`: a rotated client certificate gets a new pool. */
  private agentTls = "";
  private readonly retired = new Set<http.Agent>();
  private readonly userAgent: string;

  constructor(
    readonly kubeConfig: KubeConfig,
    opts: { userAgent?: string } = {},
  ) {
    this.userAgent = opts.userAgent ?? "zstack-ovn-kubernetes";
  }

  /**
   * A view of this client for one writer's term (a controller's leadership), sharing its connections: once
   * `fence` aborts, its requests other than GET are refused with WriteFencedError, checked just before the
   * request is sent. Reads and watches go on.
   */
  fenced(fence: AbortSignal): ApiClient {
    const request = <T>(path: string, opts: RequestOptions = {}): Promise<T> =>
      this.send<T>(path, opts, fence);
    return new Proxy(this, {
      get: (target, prop, receiver) => (prop === "request" ? request : Reflect.get(target, prop, receiver)),
    });
  }

  /** Sends one request and parses the JSON answer; a non-2xx answer rejects with ApiError. */
  request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
    return this.send<T>(path, opts);
  }

  private async send<T>(path: string, opts: RequestOptions, fence?: AbortSignal): Promise<T> {
    const method = opts.method ?? "GET";
    const { url, options } = await this.prepare(path, opts.query, method);
    if (fence?.aborted && method !== "GET") throw new WriteFencedError(method, path, { cause: fence.reason });
    let payload: string | undefined;
    if (opts.body !== undefined) {
      payload = JSON.stringify(opts.body);
      const type =
        opts.contentType ??
        (options.method === "PATCH" ? "application/merge-patch+json" : "application/json");
      options.headers = {
        ...options.headers,
        "Content-Type": type,
        "Content-Length": Buffer.byteLength(payload),
      };
    }
    const timeoutMs = opts.timeoutMs ?? 30_000;
    return new Promise<T>((resolve, reject) => {
      const req = this.transport(url).request(url, options, (res) => {
        res.on("error", fail);
        const ok = (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;
        if (ok && opts.discardResponse) {
          res.on("end", () => {
            cleanup();
            resolve(undefined as T);
          });
          res.resume();
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          cleanup();
          const text = Buffer.concat(chunks).toString("utf8");
          const status = res.statusCode ?? 0;
          let body: unknown;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = { message: text.slice(0, 500) };
          }
          if (status >= 200 && status < 300) resolve(body as T);
          else reject(statusError(status, body));
        });
      });
      const timer = setTimeout(() => {
        req.destroy(new Error(`${options.method} ${url.pathname}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      const onAbort = () => req.destroy(abortError(opts.signal));
      function cleanup() {
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
      }
      function fail(err: Error) {
        cleanup();
        reject(err);
      }
      if (opts.signal?.aborted) {
        cleanup();
        reject(abortError(opts.signal));
        return;
      }
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", fail);
      req.end(payload);
    });
  }

  /**
   * Opens a streaming GET (a watch) and calls onLine for each newline-terminated line. Resolves once the
   * response headers arrived with 200; any other status rejects with ApiError. Aborting `signal` ends the
   * request at any stage with the signal's reason. onLine must not throw.
   */
  async stream(
    path: string,
    query: Query,
    onLine: (line: string) => void,
    signal?: AbortSignal,
  ): Promise<StreamHandle> {
    const { url, options } = await this.prepare(path, query, "GET");
    return new Promise<StreamHandle>((resolveOpen, rejectOpenOnce) => {
      if (signal?.aborted) {
        rejectOpenOnce(abortError(signal));
        return;
      }
      const rejectOpen = (err: Error) => {
        signal?.removeEventListener("abort", onAbort);
        rejectOpenOnce(err);
      };
      let opened = false;
      let settled = false;
      let settle: (err?: Error) => void = () => {};
      const done = new Promise<void>((resolve, reject) => {
        settle = (err) => {
          if (settled) return;
          settled = true;
          if (err) reject(err);
          else resolve();
        };
      });
      // Nobody may be awaiting `done` yet when it rejects; callers observe it through their own await.
      done.catch(() => {});
      const req = this.transport(url).request(url, options, (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", rejectOpen);
          res.on("end", () => {
            let body: unknown;
            try {
              body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
            } catch {
              body = undefined;
            }
            rejectOpen(statusError(status, body));
          });
          return;
        }
        opened = true;
        res.setEncoding("utf8");
        // Pieces of a line not yet terminated: a large object arrives in many chunks, and scanning only
        // the new chunk for the newline keeps that linear.
        let parts: string[] = [];
        res.on("data", (chunk: string) => {
          let start = 0;
          let nl = chunk.indexOf("\n");
          while (nl >= 0 && !settled) {
            parts.push(chunk.slice(start, nl));
            const line = parts.join("");
            parts = [];
            if (line.trim()) onLine(line);
            start = nl + 1;
            nl = chunk.indexOf("\n", start);
          }
          if (start < chunk.length) parts.push(chunk.slice(start));
        });
        res.on("end", () => settle());
        res.on("error", (e) => settle(e));
        res.on("close", () =>
          settle(res.complete ? undefined : new Error("watch stream closed mid-response")),
        );
        resolveOpen({ done });
      });
      function onAbort() {
        const reason = abortError(signal);
        if (opened) settle(reason);
        else rejectOpen(reason);
        req.destroy();
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      done.finally(() => signal?.removeEventListener("abort", onAbort)).catch(() => {});
      req.on("error", (e) => {
        if (opened) settle(e);
        else rejectOpen(e);
      });
      req.end();
    });
  }

  private transport(url: URL): typeof https | typeof http {
    return url.protocol === "http:" ? http : https;
  }

  private async prepare(
    path: string,
    query: Query | undefined,
    method: string,
  ): Promise<{ url: URL; options: https.RequestOptions }> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster");
    const base = cluster.server.replace(/\/+$/, "");
    const url = new URL(`${base}${path}${encodeQuery(query)}`);
    // Called per request: token files, exec credentials and client certificate files may rotate. The
    // kubeconfig reads certificate files anew each time; a pool built with other material is replaced, so
    // new connections present the current certificate (kubelet-style rotation, cert-manager renewals).
    const auth: https.RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(auth);
    const tls = url.protocol === "http:" ? "" : tlsFingerprint(auth);
    if (this.agent && tls !== this.agentTls) this.retire(this.agent);
    if (!this.agent) {
      this.agentTls = tls;
      this.agent =
        url.protocol === "http:"
          ? new http.Agent({ keepAlive: true })
          : new https.Agent({
              keepAlive: true,
              ca: auth.ca,
              cert: auth.cert,
              key: auth.key,
              pfx: auth.pfx,
              passphrase: auth.passphrase,
              servername: auth.servername,
              ...(auth.rejectUnauthorized === undefined
                ? {}
                : { rejectUnauthorized: auth.rejectUnauthorized }),
            });
    }
    const options: https.RequestOptions = {
      method,
      agent: this.agent,
      headers: { ...(auth.headers ?? {}), Accept: "application/json", "User-Agent": this.userAgent },
      ...(auth.auth ? { auth: auth.auth } : {}),
    };
    return { url, options };
  }

  /** Closes every pooled connection, in-flight requests and watches included. */
  close(): void {
    this.agent?.destroy();
    this.agent = undefined;
    for (const old of this.retired) old.destroy();
    this.retired.clear();
  }

  /** Stops using a pool: idle connections close now, busy ones (watches) once they had time to end. */
  private retire(agent: http.Agent): void {
    this.agent = undefined;
    this.retired.add(agent);
    for (const sockets of Object.values(agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
    setTimeout(() => {
      agent.destroy();
      this.retired.delete(agent);
    }, RETIRED_POOL_MS).unref();
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error("request aborted");
}
