// healthCheckNodePort, as kube-proxy serves it: for each LoadBalancer Service with externalTrafficPolicy Local,
// an HTTP server on that port of the node answers 200 while the node has an endpoint of the Service (so an
// external load balancer sends traffic only to such nodes) and 503 otherwise. Servers open and close as
// Services come and go; the answer follows the endpoint count without reopening anything.

import { createServer, type Server } from "node:http";
import type { Logger } from "../observability/log.ts";
import type { HealthCheckPlan } from "./host-services.ts";

interface Served {
  plan: HealthCheckPlan;
  server: Server;
  /** Listening; false while the bind is in progress or after it failed. */
  listening: boolean;
}

export class HealthCheckServers {
  private readonly served = new Map<number, Served>();

  constructor(
    private readonly log: Logger,
    /** The address to listen on; default every address of the node ("::" also takes IPv4 where IPv6 is on). */
    private readonly host = "0.0.0.0",
  ) {}

  /** The ports served now, with what each answers. */
  current(): HealthCheckPlan[] {
    return [...this.served.values()].map((s) => s.plan);
  }

  /**
   * Makes the servers match the plan: closes those no longer wanted, opens the new ones, and updates what the
   * others answer. A port that cannot be bound is logged and tried again on the next call.
   */
  async sync(plans: readonly HealthCheckPlan[]): Promise<void> {
    const wanted = new Map(plans.map((p) => [p.port, p]));
    const closing: Promise<void>[] = [];
    for (const [port, s] of this.served) {
      const next = wanted.get(port);
      if (next && s.listening) s.plan = next;
      else {
        this.served.delete(port);
        closing.push(new Promise((resolve) => s.server.close(() => resolve())));
      }
    }
    await Promise.all(closing);
    const opening: Promise<void>[] = [];
    for (const plan of wanted.values()) {
      if (this.served.has(plan.port)) continue;
      opening.push(this.open(plan));
    }
    await Promise.all(opening);
  }

  async close(): Promise<void> {
    await this.sync([]);
  }

  private open(plan: HealthCheckPlan): Promise<void> {
    const entry: Served = { plan, server: createServer(), listening: false };
    entry.server.on("request", (req, res) => {
      const p = entry.plan;
      req.resume();
      const body = JSON.stringify({
        service: { namespace: p.namespace, name: p.name },
        localEndpoints: p.localEndpoints,
        serviceProxyHealthy: true,
      });
      res.writeHead(p.localEndpoints > 0 ? 200 : 503, {
        "Content-Type": "application/json",
        "X-Content-Type-Options": "nosniff",
      });
      res.end(body);
    });
    this.served.set(plan.port, entry);
    return new Promise((resolve) => {
      entry.server.once("error", (err) => {
        this.log.warn(
          { port: plan.port, service: `${plan.namespace}/${plan.name}`, err: err.message },
          "cannot serve healthCheckNodePort",
        );
        if (this.served.get(plan.port) === entry) this.served.delete(plan.port);
        entry.server.close();
        resolve();
      });
      entry.server.listen(plan.port, this.host, () => {
        entry.listening = true;
        resolve();
      });
    });
  }
}
