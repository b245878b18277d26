// The HTTP endpoint kubelet probes and Prometheus scrapes: /healthz (liveness), /readyz (readiness),
// /leaderz (is this the replica that reconciles: leading and synced; not for probes, a standby answers 500)
// and /metrics. Checks are pluggable and answered the way the apiserver answers its own: "ok", or one line per
// check ("[+]informers ok", "[-]ovn-nb failed: ...") with status 500 when any fails.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type Logger, silentLogger } from "./log.ts";

export const CONTROLLER_HEALTH_PORT = 10660;
export const NODE_AGENT_HEALTH_PORT = 10665;

/** Passing: true or undefined. Failing: false, a string saying why, or a throw. */
export type HealthCheck = () => boolean | string | undefined | Promise<boolean | string | undefined>;

export interface MetricsSource {
  expose(): Promise<{ contentType: string; body: string }>;
}

export interface HealthServerOptions {
  port: number;
  /** Default 0.0.0.0, so kubelet and Prometheus reach it on the pod IP. */
  host?: string;
  metrics?: MetricsSource;
  /** A check that has not answered by then fails. Default 5 s. */
  checkTimeoutMs?: number;
  logger?: Logger;
}

interface Outcome {
  name: string;
  ok: boolean;
  detail: string;
}

export class HealthServer {
  private readonly liveness = new Map<string, HealthCheck>();
  private readonly readiness = new Map<string, HealthCheck>();
  private readonly leadership = new Map<string, HealthCheck>();
  private server: Server | undefined;
  private readonly log: Logger;

  constructor(private readonly opts: HealthServerOptions) {
    this.log = opts.logger ?? silentLogger;
  }

  /** A failing liveness check gets the process restarted: only for states it cannot leave by itself. */
  addLivenessCheck(name: string, check: HealthCheck): void {
    this.liveness.set(name, check);
  }

  /** A failing readiness check takes the process out of service until the check passes again. */
  addReadinessCheck(name: string, check: HealthCheck): void {
    this.readiness.set(name, check);
  }

  /**
   * A check of /leaderz, which tells whether this replica is the one doing the work. Kept apart from
   * readiness: a standby replica is ready (so rollouts proceed) but not leading.
   */
  addLeaderCheck(name: string, check: HealthCheck): void {
    this.leadership.set(name, check);
  }

  removeCheck(name: string): void {
    this.liveness.delete(name);
    this.readiness.delete(name);
    this.leadership.delete(name);
  }

  /** Listens; resolves to the bound port (useful with port 0). */
  async start(): Promise<number> {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.log.error({ err }, "health server request failed");
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.port, this.opts.host ?? "0.0.0.0", () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    return (server.address() as AddressInfo).port;
  }

  get port(): number | undefined {
    const addr = this.server?.address();
    return addr && typeof addr === "object" ? addr.port : undefined;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://health");
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD" }).end();
      return;
    }
    switch (url.pathname) {
      case "/healthz":
      case "/livez":
        return this.answer(res, "healthz", this.liveness, url.searchParams.has("verbose"));
      case "/readyz":
        return this.answer(res, "readyz", this.readiness, url.searchParams.has("verbose"));
      case "/leaderz":
        return this.answer(res, "leaderz", this.leadership, url.searchParams.has("verbose"));
      case "/metrics": {
        if (!this.opts.metrics) {
          res.writeHead(404, { "Content-Type": "text/plain" }).end("no metrics\n");
          return;
        }
        const { contentType, body } = await this.opts.metrics.expose();
        res.writeHead(200, { "Content-Type": contentType }).end(body);
        return;
      }
      default:
        res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
    }
  }

  private async answer(
    res: ServerResponse,
    what: string,
    checks: Map<string, HealthCheck>,
    verbose: boolean,
  ): Promise<void> {
    const outcomes = await Promise.all([...checks].map(([name, check]) => this.run(name, check)));
    const failed = outcomes.some((o) => !o.ok);
    let body: string;
    if (!failed && !verbose) {
      body = "ok\n";
    } else {
      const lines = outcomes.map((o) => (o.ok ? `[+]${o.name} ok` : `[-]${o.name} failed: ${o.detail}`));
      lines.push(failed ? `${what} check failed` : `${what} check passed`);
      body = `${lines.join("\n")}\n`;
    }
    res.writeHead(failed ? 500 : 200, { "Content-Type": "text/plain; charset=utf-8" }).end(body);
  }

  private async run(name: string, check: HealthCheck): Promise<Outcome> {
    const timeoutMs = this.opts.checkTimeoutMs ?? 5000;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs);
      });
      const result = await Promise.race([Promise.resolve().then(check), timeout]);
      if (result === true || result === undefined) return { name, ok: true, detail: "" };
      return { name, ok: false, detail: result === false ? "not ok" : result };
    } catch (err) {
      return { name, ok: false, detail: (err as Error).message };
    } finally {
      clearTimeout(timer);
    }
  }
}
