// The load of make bench-controller, identical in both runs: N unscheduled pods created with a bounded number
// of requests in flight, and a watch that notes when each pod's pod-networks annotation first shows up.
// Latency runs from the driver's own create call (creationTimestamp has one-second resolution) to that watch
// event, so it includes the apiserver's watch delivery to the annotator and back to us.

import { performance } from "node:perf_hooks";
import type { ApiClient } from "../../src/k8s/api-client.ts";
import { POD_NETWORKS_ANNOTATION } from "../../src/ovn/pod-port.ts";
import { watchFrom } from "./watch.ts";

export const BENCH_NAMESPACE = "bench";

interface PodEvent {
  type: string;
  object: { metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string> } };
}

export interface LoadResult {
  pods: number;
  annotated: number;
  /** First create call to last annotation seen, ms. */
  wallMs: number;
  /** First create call to last create answered, ms. */
  createMs: number;
  /** Create call to annotation seen, ms, ascending; only annotated pods. */
  latenciesMs: number[];
}

/** The namespace and its `default` ServiceAccount, without which admission rejects pods (no token controller). */
export async function prepareNamespace(api: ApiClient): Promise<void> {
  await api.request("/api/v1/namespaces", { method: "POST", body: { metadata: { name: BENCH_NAMESPACE } } });
  await api.request(`/api/v1/namespaces/${BENCH_NAMESPACE}/serviceaccounts`, {
    method: "POST",
    body: { metadata: { name: "default" } },
  });
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export async function runLoad(
  api: ApiClient,
  opts: { pods: number; inFlight: number; timeoutMs: number; progress?: (line: string) => void },
): Promise<LoadResult> {
  const base = `/api/v1/namespaces/${BENCH_NAMESPACE}/pods`;
  const createdAt = new Map<string, number>();
  const seenAt = new Map<string, number>();
  let allSeen: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allSeen = resolve;
  });
  const onEvent = (ev: PodEvent) => {
    if (ev.type !== "ADDED" && ev.type !== "MODIFIED") return;
    const m = ev.object.metadata;
    if (!m.annotations?.[POD_NETWORKS_ANNOTATION] || seenAt.has(m.name)) return;
    seenAt.set(m.name, performance.now());
    if (seenAt.size === opts.pods) allSeen();
  };

  const stop = new AbortController();
  const list = await api.request<{ metadata: { resourceVersion: string } }>(base, { query: { limit: 1 } });
  const watching = watchFrom<PodEvent["object"]>(
    api,
    base,
    list.metadata.resourceVersion,
    onEvent,
    stop.signal,
  );

  const start = performance.now();
  let next = 0;
  let lastCreated = start;
  const creator = async () => {
    for (let i = next++; i < opts.pods; i = next++) {
      const name = `p${i}`;
      createdAt.set(name, performance.now());
      await api.request(base, {
        method: "POST",
        body: {
          metadata: { name, labels: { app: "bench" } },
          spec: {
            nodeSelector: { "bench.zstack.io/no-such-node": "true" },
            containers: [{ name: "c", image: "registry.invalid/pause:3.9" }],
          },
        },
      });
      lastCreated = performance.now();
    }
  };
  const ticker = setInterval(() => {
    opts.progress?.(`  ${createdAt.size} created, ${seenAt.size} annotated`);
  }, 5000);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.all(Array.from({ length: opts.inFlight }, creator));
    await Promise.race([
      done,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, opts.timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    clearInterval(ticker);
    stop.abort();
    await watching;
  }
  const latencies: number[] = [];
  let last = start;
  for (const [name, t] of seenAt) {
    latencies.push(t - (createdAt.get(name) as number));
    last = Math.max(last, t);
  }
  latencies.sort((a, b) => a - b);
  return {
    pods: opts.pods,
    annotated: seenAt.size,
    wallMs: last - start,
    createMs: lastCreated - start,
    latenciesMs: latencies,
  };
}
