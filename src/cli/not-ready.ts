// A daemon with a configuration it cannot run with stays up, not Ready, with the problem on /readyz (and /healthz
// alive), instead of exiting into a crash loop; a fixed configuration takes effect when the pod is restarted.

import { HealthServer } from "../observability/health-server.ts";
import { Metrics } from "../observability/metrics.ts";

/** Serves /readyz (500, the problem) and /healthz until SIGTERM or SIGINT, then resolves with exit code 2. */
export async function notReadyUntilStopped(opts: {
  program: string;
  component: string;
  port: number;
  problem: string;
}): Promise<number> {
  const health = new HealthServer({
    port: opts.port,
    metrics: new Metrics({ defaultLabels: { component: opts.component } }),
  });
  health.addReadinessCheck("configuration", () => `bad configuration: ${opts.problem}`);
  try {
    await health.start();
  } catch (e) {
    process.stderr.write(`${opts.program}: cannot serve /readyz: ${(e as Error).message}\n`);
  }
  await new Promise<void>((resolve) => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => resolve());
  });
  await health.stop();
  return 2;
}
