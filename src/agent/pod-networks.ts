// The pods of this node and their network annotation, from a watch (not polling): an ADD waits here until the
// controller has written k8s.ovn.org/pod-networks for the pod, within a bounded budget.

import { InvalidInputError } from "../ipam/problem.ts";
import { type ApiClient, isNotFound } from "../k8s/api-client.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import type { Logger } from "../observability/log.ts";
import { POD_NETWORKS_ANNOTATION, type PodNetwork, parsePodNetwork } from "../ovn/pod-port.ts";

/** A container port as the API holds it: read only by the hostPort planner, which parses every field. */
export interface NodePodPort {
  hostPort?: unknown;
  containerPort?: unknown;
  protocol?: unknown;
  hostIP?: unknown;
}

export interface NodePod extends KubeObject {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    creationTimestamp?: string;
    annotations?: Record<string, string>;
  };
  /** Kept only for pods asking for a hostPort (src/agent/host-ports.ts). */
  spec?: { hostNetwork?: boolean; containers?: { ports?: NodePodPort[] }[] };
  status?: { phase?: string };
}

/** The pod's parsed network, or why its annotation was refused (nothing is configured from a refused one). */
export type PodNetworkInfo =
  | { readonly uid: string; readonly network: PodNetwork; readonly invalid?: undefined }
  | { readonly uid: string; readonly network?: undefined; readonly invalid: InvalidInputError };

/** What the pod's annotation says, parsed; undefined while it has none. */
export function podNetworkOf(pod: NodePod): PodNetworkInfo | undefined {
  const uid = pod.metadata.uid;
  try {
    const network = parsePodNetwork(pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
    return network ? { uid, network } : undefined;
  } catch (e) {
    if (e instanceof InvalidInputError) return { uid, invalid: e };
    throw e;
  }
}

/** The pod's container ports that ask for a hostPort, keeping the container and port indexes (field names). */
function hostPortsOf(pod: NodePod): NodePod["spec"] | undefined {
  const containers = Array.isArray(pod.spec?.containers) ? pod.spec.containers : [];
  const wanted = containers.some(
    (c) => Array.isArray(c?.ports) && c.ports.some((p) => p?.hostPort !== undefined && p?.hostPort !== 0),
  );
  if (!wanted) return undefined;
  return {
    ...(pod.spec?.hostNetwork === true ? { hostNetwork: true } : {}),
    containers: containers.map((c) => ({
      ports: (Array.isArray(c?.ports) ? c.ports : []).map((p) => ({
        hostPort: p?.hostPort,
        containerPort: p?.containerPort,
        protocol: p?.protocol,
        hostIP: p?.hostIP,
      })),
    })),
  };
}

function slim(o: KubeObject): NodePod {
  const pod = o as NodePod;
  const m = pod.metadata;
  const spec = hostPortsOf(pod);
  const phase = pod.status?.phase;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      ...(m.creationTimestamp ? { creationTimestamp: m.creationTimestamp } : {}),
      ...(m.annotations ? { annotations: m.annotations } : {}),
    },
    ...(spec ? { spec } : {}),
    ...(spec && typeof phase === "string" ? { status: { phase } } : {}),
  };
}

export class TimedOutError extends Error {}

export class NodePods {
  readonly informer: Informer<NodePod>;
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly api: ApiClient,
    node: string,
    log: Logger,
  ) {
    this.informer = new Informer<NodePod>({
      client: api,
      path: "/api/v1/pods",
      fieldSelector: `spec.nodeName=${node}`,
      transform: slim,
      logger: log.child({ informer: "node-pods" }),
    });
    const wake = (p: NodePod) => {
      for (const w of this.waiters.get(`${p.metadata.namespace}/${p.metadata.name}`) ?? []) w();
    };
    this.informer.addHandlers({ onAdd: wake, onUpdate: (_o, n) => wake(n), onDelete: wake });
  }

  start(): void {
    this.informer.start();
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }

  /**
   * The pod's network as the API server holds it now (not the watch's possibly older copy), with the pod's
   * uid; undefined when the pod is gone.
   */
  async fetch(
    namespace: string,
    name: string,
  ): Promise<{ uid: string; info: PodNetworkInfo | undefined } | undefined> {
    try {
      const pod = await this.api.request<NodePod>(
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`,
      );
      return { uid: pod.metadata.uid, info: podNetworkOf(pod) };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** The pod's network now, if its annotation is there (and, with `uid`, for that pod incarnation). */
  current(namespace: string, name: string, uid?: string): PodNetworkInfo | undefined {
    const p = this.informer.get(`${namespace}/${name}`);
    if (!p || (uid && p.metadata.uid !== uid)) return undefined;
    return podNetworkOf(p);
  }

  /**
   * Resolves when the pod's annotation exists, valid or not (an invalid one is an answer: waiting would only
   * delay the error); rejects with TimedOutError after `timeoutMs`.
   */
  waitFor(
    namespace: string,
    name: string,
    uid: string | undefined,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<PodNetworkInfo> {
    const now = this.current(namespace, name, uid);
    if (now) return Promise.resolve(now);
    // Abandoned before the wait began: no abort event will come (without this, the whole timeout was waited).
    if (signal?.aborted) return Promise.reject(signal.reason ?? new Error("the CNI request was abandoned"));
    const key = `${namespace}/${name}`;
    return new Promise((resolve, reject) => {
      let set = this.waiters.get(key);
      if (!set) {
        set = new Set();
        this.waiters.set(key, set);
      }
      const done = (err?: Error, v?: PodNetworkInfo) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        set?.delete(check);
        if (set?.size === 0) this.waiters.delete(key);
        if (err) reject(err);
        else resolve(v as PodNetworkInfo);
      };
      const check = () => {
        const v = this.current(namespace, name, uid);
        if (v) done(undefined, v);
      };
      // The signal's reason says why (the runtime gave up, or the agent is stopping: code 11), as PodAttacher
      // passes it on.
      const onAbort = () => done(signal?.reason ?? new Error("the CNI request was abandoned"));
      const timer = setTimeout(
        () =>
          done(
            new TimedOutError(
              `no ${POD_NETWORKS_ANNOTATION} annotation on pod ${key} after ${timeoutMs} ms: ` +
                "is zstack-ovnkube-controller running, and does the pod's subnet have free addresses? See the pod's events",
            ),
          ),
        timeoutMs,
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      set.add(check);
    });
  }
}
