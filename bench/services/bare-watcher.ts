// A second baseline for endpoint churn in make bench-services: the least a Kubernetes-driven writer must do. It
// watches the bench's EndpointSlices and, for each change, rewrites the one Load_Balancer row's `vips` with the
// slice's addresses, with no model, no endpoint rules, no queue and no ownership checks (rows found through a
// map of their ids). The gap between it and the controller is the controller's own cost; the gap between it and
// the raw NB update is the apiserver's.
import type { ApiClient } from "../../src/k8s/api-client.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../src/ovsdb/transaction.ts";
import { BENCH_NAMESPACE } from "../controller/pod-load.ts";
import { watchFrom } from "../controller/watch.ts";
import { TARGET_PORT } from "./api-load.ts";
import { type Arrivals, changeId, epochNow } from "./arrivals.ts";

interface SliceObject {
  metadata: { name?: string; labels?: Record<string, string>; resourceVersion?: string };
  endpoints?: Array<{ addresses?: string[] }>;
}

/** `arrivals` gets when each slice event reached the watcher, on the clock of arrivals.ts. */
export async function startBareWatcher(
  api: ApiClient,
  nbRemote: string,
  arrivals: Arrivals,
): Promise<() => Promise<void>> {
  const nb = new OvsdbClient<NbTables>({
    remotes: nbRemote,
    model: nbModel,
    monitor: { Load_Balancer: true },
  });
  await nb.connect();
  const path = `/apis/discovery.k8s.io/v1/namespaces/${BENCH_NAMESPACE}/endpointslices`;
  const list = await api.request<{ metadata: { resourceVersion: string } }>(path, { query: { limit: 1 } });
  const stop = new AbortController();
  // Each row's uuid by its id, so that an event costs a lookup, not a scan of every row.
  const rowById = new Map<string, string>();
  let started: () => void = () => {};
  const ready = new Promise<void>((r) => {
    started = r;
  });
  const watching = watchFrom<SliceObject>(
    api,
    path,
    list.metadata.resourceVersion,
    (ev) => {
      const at = epochNow();
      if (ev.type !== "MODIFIED") return;
      const { name, resourceVersion } = ev.object.metadata;
      if (name && resourceVersion) arrivals.set(changeId(`${BENCH_NAMESPACE}/${name}`, resourceVersion), at);
      const svc = ev.object.metadata.labels?.["kubernetes.io/service-name"];
      const lbs = nb.cache.table("Load_Balancer");
      const id = `${BENCH_NAMESPACE}/${svc}/tcp`;
      let uuid = rowById.get(id);
      if (uuid === undefined || !lbs.get(uuid)) {
        rowById.clear();
        for (const r of lbs.find(() => true)) {
          const rid = r.external_ids["zstack.io/id"];
          if (rid) rowById.set(rid, r._uuid);
        }
        uuid = rowById.get(id);
      }
      const row = uuid === undefined ? undefined : lbs.get(uuid);
      if (!row) return;
      const backends = (ev.object.endpoints ?? [])
        .flatMap((e) => e.addresses ?? [])
        .map((a) => `${a}:${TARGET_PORT}`)
        .join(",");
      const vips = Object.fromEntries(Object.keys(row.vips).map((vip) => [vip, backends]));
      // Fire and forget, as fast as a watcher can; a write still in flight when the bench closes the client is
      // refused with ConnectionClosedError, which is expected then and must not end the bench.
      nb.transact((t) => {
        t.update("Load_Balancer", byUuid(row._uuid), { vips });
      }).catch((e: unknown) => {
        if (!stop.signal.aborted) throw e;
      });
    },
    stop.signal,
    () => started(),
  );
  await ready;
  return async () => {
    stop.abort();
    await watching;
    await nb.close();
  };
}
