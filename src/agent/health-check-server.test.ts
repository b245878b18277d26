import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, test } from "node:test";
import { silentLogger } from "../observability/log.ts";
import { HealthCheckServers } from "./health-check-server.ts";

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

async function probe(port: number): Promise<{ status: number; body: unknown } | "refused"> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    return { status: r.status, body: await r.json() };
  } catch {
    return "refused";
  }
}

describe("healthCheckNodePort servers", () => {
  test("answer 200 with the Service and its local endpoint count, 503 at zero, and close when the Service goes", async (t) => {
    const servers = new HealthCheckServers(silentLogger, "127.0.0.1");
    t.after(() => servers.close());
    const port = await freePort();
    await servers.sync([{ port, namespace: "ns", name: "lb", localEndpoints: 2 }]);
    assert.deepEqual(await probe(port), {
      status: 200,
      body: { service: { namespace: "ns", name: "lb" }, localEndpoints: 2, serviceProxyHealthy: true },
    });
    await servers.sync([{ port, namespace: "ns", name: "lb", localEndpoints: 0 }]);
    const zero = await probe(port);
    assert.notEqual(zero, "refused");
    assert.equal(zero !== "refused" && zero.status, 503);
    assert.equal(zero !== "refused" && (zero.body as { localEndpoints: number }).localEndpoints, 0);
    await servers.sync([]);
    assert.equal(await probe(port), "refused");
    assert.deepEqual(servers.current(), []);
  });

  test("a port that is taken is logged and tried again on the next sync", async (t) => {
    const servers = new HealthCheckServers(silentLogger, "127.0.0.1");
    t.after(() => servers.close());
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const { port } = blocker.address() as { port: number };
    const plan = [{ port, namespace: "ns", name: "lb", localEndpoints: 1 }];
    await servers.sync(plan);
    assert.deepEqual(servers.current(), []);
    await new Promise((r) => blocker.close(r));
    await servers.sync(plan);
    const r = await probe(port);
    assert.equal(r !== "refused" && r.status, 200);
  });
});
