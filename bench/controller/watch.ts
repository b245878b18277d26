// The pod watch both sides of make bench-controller use: from a resourceVersion, resumed after the stream
// ends or fails (with a short pause), until the signal aborts. ERROR events are reported, not passed on.
import { setTimeout as sleep } from "node:timers/promises";
import type { ApiClient } from "../../src/k8s/api-client.ts";

export interface WatchedEvent<T> {
  type: string;
  object: T & { metadata: { resourceVersion?: string } };
}

export async function watchFrom<T>(
  api: ApiClient,
  path: string,
  resourceVersion: string,
  onEvent: (ev: WatchedEvent<T>) => void,
  signal: AbortSignal,
  onStarted?: () => void,
): Promise<void> {
  let rv = resourceVersion;
  let started = false;
  while (!signal.aborted) {
    try {
      const h = await api.stream(
        path,
        { watch: true, resourceVersion: rv, allowWatchBookmarks: true },
        (line) => {
          const ev = JSON.parse(line) as WatchedEvent<T>;
          if (ev.type === "ERROR") {
            process.stderr.write(`watch ${path}: ${JSON.stringify(ev.object)}\n`);
            return;
          }
          if (ev.object.metadata.resourceVersion) rv = ev.object.metadata.resourceVersion;
          onEvent(ev);
        },
        signal,
      );
      if (!started) {
        started = true;
        onStarted?.();
      }
      await h.done;
    } catch (e) {
      if (signal.aborted) return;
      process.stderr.write(`watch ${path}: ${(e as Error).message}; resuming\n`);
      await sleep(200);
    }
  }
}
