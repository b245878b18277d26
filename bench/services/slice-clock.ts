// The start of the controller's clock in part B of make bench-services: a change exists once the apiserver has
// committed it, and that is when a watcher sees the EndpointSlice event carrying it. This watcher has its own
// API client (its own connection), is opened by the bench before the churn, and notes when each new address
// first appears in a slice event; the bench stops the clock when its NB reader sees the new backend.
import { performance } from "node:perf_hooks";
import type { KubeConfig } from "@kubernetes/client-node";
import { ApiClient } from "../../src/k8s/api-client.ts";
import { BENCH_NAMESPACE } from "../controller/pod-load.ts";
import { watchFrom } from "../controller/watch.ts";

interface SliceObject {
  metadata: { resourceVersion?: string };
  endpoints?: Array<{ addresses?: string[] }>;
}

export class SliceClock {
  private readonly api: ApiClient;
  private readonly stop = new AbortController();
  private watching: Promise<void> | undefined;
  private readonly waiters = new Map<string, (t: number) => void>();

  constructor(kubeConfig: KubeConfig) {
    this.api = new ApiClient(kubeConfig, { userAgent: "bench-services-slice-clock" });
  }

  async start(): Promise<void> {
    const path = `/apis/discovery.k8s.io/v1/namespaces/${BENCH_NAMESPACE}/endpointslices`;
    const list = await this.api.request<{ metadata: { resourceVersion: string } }>(path, {
      query: { limit: 1 },
    });
    let started: () => void = () => {};
    const ready = new Promise<void>((r) => {
      started = r;
    });
    this.watching = watchFrom<SliceObject>(
      this.api,
      path,
      list.metadata.resourceVersion,
      (ev) => {
        if (ev.type !== "MODIFIED" && ev.type !== "ADDED") return;
        if (this.waiters.size === 0) return;
        const now = performance.now();
        for (const e of ev.object.endpoints ?? [])
          for (const a of e.addresses ?? []) {
            const w = this.waiters.get(a);
            if (w) {
              this.waiters.delete(a);
              w(now);
            }
          }
      },
      this.stop.signal,
      () => started(),
    );
    await ready;
  }

  /** Resolves with the time a slice event first carries `address` (register before making the change). */
  when(address: string): Promise<number> {
    return new Promise((resolve) => this.waiters.set(address, resolve));
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.watching;
    this.api.close();
  }
}
