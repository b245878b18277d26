// The agent side of the CNI socket: an HTTP/1.1 server on a root-only unix socket that turns each POST from
// the shim into a dispatch to the node agent's CniHandler. Bad input never takes it down; each request is
// logged with its duration and counted in a per-command latency histogram.

import { randomBytes } from "node:crypto";
import { chmod, lstat, mkdir, rename, stat, unlink } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { dirname, join } from "node:path";
import { Gauge, Histogram, Registry } from "prom-client";
import { type Logger, silentLogger } from "../observability/log.ts";
import { dispatch } from "./dispatch.ts";
import { CniError, CniErrorCode } from "./error.ts";
import type { CniHandler } from "./handler.ts";
import { CNI_REQUEST_PATH, MAX_REQUEST_BYTES, ProtocolError, parseAgentRequest } from "./protocol.ts";
import { CNI_COMMANDS, MAX_SOCKET_PATH_BYTES } from "./spec.ts";

export interface CniServerOptions {
  socketPath: string;
  handler: CniHandler;
  logger?: Logger;
  /** Where the metrics go; a private Registry when absent. */
  registry?: Registry;
  /** How long close() lets running requests finish after aborting them. Default 5 s. */
  closeGraceMs?: number;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const DURATION_METRIC = "zstack_ovn_cni_request_duration_seconds";
const IN_FLIGHT_METRIC = "zstack_ovn_cni_requests_in_flight";

/** Reuses the metric when another server (e.g. a restarted one) already registered it in this registry. */
function metrics(registry: Registry): {
  duration: Histogram<"command" | "code">;
  inFlight: Gauge<"command">;
} {
  const duration =
    (registry.getSingleMetric(DURATION_METRIC) as Histogram<"command" | "code"> | undefined) ??
    new Histogram({
      name: DURATION_METRIC,
      help: "Time from a CNI request reaching the agent to its reply, by command and CNI result code (0 = success).",
      labelNames: ["command", "code"],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
  const inFlight =
    (registry.getSingleMetric(IN_FLIGHT_METRIC) as Gauge<"command"> | undefined) ??
    new Gauge({
      name: IN_FLIGHT_METRIC,
      help: "CNI requests the agent is working on, by command.",
      labelNames: ["command"],
      registers: [registry],
    });
  return { duration, inFlight };
}

/** True when something accepts connections at `path`. */
function socketIsLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(path);
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
  });
}

export class CniServer {
  readonly socketPath: string;
  readonly registry: Registry;
  private readonly handler: CniHandler;
  private readonly log: Logger;
  private readonly closeGraceMs: number;
  private readonly duration: Histogram<"command" | "code">;
  private readonly inFlight: Gauge<"command">;
  private readonly running = new Set<AbortController>();
  private server: Server | undefined;
  private socketIno: number | undefined;
  private closing = false;

  constructor(opts: CniServerOptions) {
    this.socketPath = opts.socketPath;
    this.handler = opts.handler;
    this.log = (opts.logger ?? silentLogger).child({ cniServer: opts.socketPath });
    this.closeGraceMs = opts.closeGraceMs ?? 5000;
    this.registry = opts.registry ?? new Registry();
    ({ duration: this.duration, inFlight: this.inFlight } = metrics(this.registry));
  }

  /**
   * Binds the socket (mode 0600, its directory created 0750 when missing). A stale socket file left by a
   * dead agent is removed; a live one, or a path that is not a socket, is refused.
   */
  async listen(): Promise<void> {
    if (this.server) throw new Error(`CNI server already listening on ${this.socketPath}`);
    const path = this.socketPath;
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES)
      throw new Error(`CNI socket path ${path} is longer than ${MAX_SOCKET_PATH_BYTES} bytes`);
    await mkdir(dirname(path), { recursive: true, mode: 0o750 });
    const existing = await lstat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (existing) {
      if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
      if (await socketIsLive(path))
        throw new Error(
          `another process is serving CNI requests on ${path}; stop it before starting this agent`,
        );
      this.log.info({ path }, "removing stale CNI socket");
      await unlink(path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "ENOENT") throw err;
      });
    }

    const server = createServer((req, res) => void this.serve(req, res));
    // Bind under a private name, restrict it, then rename into place: no moment where others may connect.
    const tmp = join(dirname(path), `.cni-${process.pid}-${randomBytes(4).toString("hex")}.sock`);
    const bindPath = Buffer.byteLength(tmp) <= MAX_SOCKET_PATH_BYTES ? tmp : path;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(bindPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
    try {
      await chmod(bindPath, 0o600);
      if (bindPath !== path) await rename(bindPath, path);
      this.socketIno = (await stat(path)).ino;
    } catch (err) {
      server.close();
      throw err;
    }
    server.on("error", (err) => this.log.error({ err }, "CNI server error"));
    this.server = server;
    this.closing = false;
    this.log.info({ path }, "CNI server listening");
  }

  /** Stops accepting, aborts running requests (their handlers see signal.reason, code 11) and removes the socket. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.closing = true;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const ac of this.running)
      ac.abort(new CniError(CniErrorCode.TryAgainLater, "the zstack-ovn node agent is shutting down; retry"));
    const grace = setTimeout(() => server.closeAllConnections(), this.closeGraceMs);
    grace.unref();
    await closed;
    clearTimeout(grace);
    // Remove the socket only when it is still ours: a newer agent may already have taken the path.
    const st = await stat(this.socketPath).catch(() => undefined);
    if (st && st.ino === this.socketIno) await unlink(this.socketPath).catch(() => {});
    this.log.info({ path: this.socketPath }, "CNI server closed");
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = process.hrtime.bigint();
    try {
      if (req.method !== "POST" || req.url !== CNI_REQUEST_PATH) {
        req.resume();
        this.reply(res, 404, {
          error: `no such endpoint ${req.method} ${req.url}; this agent serves POST ${CNI_REQUEST_PATH}`,
        });
        return;
      }
      if (this.closing) {
        req.resume();
        this.reply(res, 503, { error: "the agent is shutting down" });
        return;
      }
      const body = await readBody(req);
      if (body === undefined) {
        this.reply(res, 413, { error: `request body over ${MAX_REQUEST_BYTES} bytes` });
        return;
      }
      const inv = parseAgentRequest(body);
      const ac = new AbortController();
      res.on("close", () => {
        if (!res.writableFinished)
          ac.abort(new CniError(CniErrorCode.TryAgainLater, "the CNI shim went away before the reply"));
      });
      const command = inv.env.CNI_COMMAND ?? "";
      const label = (CNI_COMMANDS as readonly string[]).includes(command) ? command : "invalid";
      this.running.add(ac);
      this.inFlight.inc({ command: label });
      let reply: Awaited<ReturnType<typeof dispatch>>;
      try {
        reply = await dispatch(inv, this.handler, ac.signal);
      } finally {
        this.running.delete(ac);
        this.inFlight.dec({ command: label });
      }
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const { outcome } = reply;
      this.duration.observe({ command: outcome.command, code: String(outcome.code) }, seconds);
      const fields = { ...outcome, durationMs: Math.round(seconds * 1e4) / 10 };
      if (outcome.code === 0) this.log.info(fields, "CNI request served");
      else this.log.warn(fields, "CNI request failed");
      if (res.destroyed) return;
      this.reply(res, 200, { exitCode: reply.exitCode, stdout: reply.stdout });
    } catch (err) {
      const status = err instanceof ProtocolError ? 400 : 500;
      this.log.warn({ err, status }, "bad request on the CNI socket");
      if (!res.headersSent && !res.destroyed) this.reply(res, status, { error: (err as Error).message });
    }
  }
}

/** The body as text, or undefined when it is larger than MAX_REQUEST_BYTES. */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) tooBig = true;
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(tooBig ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
