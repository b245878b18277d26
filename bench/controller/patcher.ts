// The baseline of make bench-controller: the least a pod annotator can do. It watches all pods and PATCHes
// a dummy k8s.ovn.org/pod-networks value onto each pod that lacks one, with BENCH_WORKERS requests in
// flight, like the controller's pod workers. No NB, no IPAM, no informer store: whatever the controller
// spends beyond this is the cost of its own work.
//   env: BENCH_KUBECONFIG (admin kubeconfig), BENCH_WORKERS (default 4)

import { KubeConfig } from "@kubernetes/client-node";
import { ApiClient, isNotFound } from "../../src/k8s/api-client.ts";
import { POD_NETWORKS_ANNOTATION } from "../../src/ovn/pod-port.ts";
import { watchFrom } from "./watch.ts";

interface PodEvent {
  type: string;
  object: {
    metadata: {
      name: string;
      namespace: string;
      resourceVersion?: string;
      annotations?: Record<string, string>;
    };
  };
}

const kc = new KubeConfig();
kc.loadFromFile(process.env.BENCH_KUBECONFIG ?? "");
const api = new ApiClient(kc, { userAgent: "bench-baseline-patcher" });
const workers = Number(process.env.BENCH_WORKERS ?? "4");
const stop = new AbortController();

// A deduplicating FIFO: a pod seen twice before a worker gets to it is patched once.
const queued = new Set<string>();
const fifo: string[] = [];
const idle: (() => void)[] = [];
let patched = 0;

function enqueue(key: string): void {
  if (queued.has(key)) return;
  queued.add(key);
  fifo.push(key);
  idle.shift()?.();
}

// Same shape and size as the controller's value, so the apiserver stores and sends as many bytes.
function dummyValue(n: number): string {
  const ip = `10.244.${(n >> 8) & 255}.${n & 255}`;
  const mac = `0a:58:0a:f4:${((n >> 8) & 255).toString(16).padStart(2, "0")}:${(n & 255).toString(16).padStart(2, "0")}`;
  return JSON.stringify({
    default: {
      ip_addresses: [`${ip}/16`],
      mac_address: mac,
      gateway_ips: ["10.244.0.1"],
      routes: [],
      ip_address: `${ip}/16`,
      gateway_ip: "10.244.0.1",
      logical_switch: "subnet-default",
    },
  });
}

async function worker(): Promise<void> {
  while (!stop.signal.aborted) {
    const key = fifo.shift();
    if (key === undefined) {
      await new Promise<void>((resolve) => idle.push(resolve));
      continue;
    }
    queued.delete(key);
    const [ns, name] = key.split("/") as [string, string];
    try {
      await api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [POD_NETWORKS_ANNOTATION]: dummyValue(patched++) } } },
      });
    } catch (e) {
      if (!isNotFound(e)) {
        process.stderr.write(`patch ${key}: ${(e as Error).message}\n`);
        setTimeout(() => enqueue(key), 200);
      }
    }
  }
}

function onEvent(ev: PodEvent): void {
  if (ev.type !== "ADDED" && ev.type !== "MODIFIED") return;
  const m = ev.object.metadata;
  if (!m.annotations?.[POD_NETWORKS_ANNOTATION]) enqueue(`${m.namespace}/${m.name}`);
}

async function watchPods(): Promise<void> {
  const list = await api.request<{ metadata: { resourceVersion: string }; items: PodEvent["object"][] }>(
    "/api/v1/pods",
  );
  for (const p of list.items) onEvent({ type: "ADDED", object: p });
  await watchFrom<PodEvent["object"]>(
    api,
    "/api/v1/pods",
    list.metadata.resourceVersion,
    onEvent,
    stop.signal,
    () => process.stdout.write("watching\n"),
  );
}

process.once("SIGTERM", () => {
  stop.abort();
  api.close();
  process.exit(0);
});
for (let i = 0; i < workers; i++) void worker();
watchPods().catch((e) => {
  process.stderr.write(`baseline patcher: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
