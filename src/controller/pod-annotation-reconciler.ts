// Pods, second stage: the k8s.ovn.org/pod-networks annotation says what the pod's port in NB holds, and an
// annotation that no port of ours stands behind is removed. A queue of its own, so one pod's NB commit
// overlaps another's PATCH instead of waiting for it.

import { isNotFound } from "../k8s/api-client.ts";
import type { Informer } from "../k8s/informer.ts";
import { KIND_KEY, POD_KEY, POD_UID_KEY } from "../ovn/ownership.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import { type ControllerContext, type ControllerOptions, POD_ANNOTATIONS } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import { type PodLite, podKey } from "./informers.ts";
import type { PodPortAllocator } from "./pod-port-allocator.ts";

export class PodAnnotationReconciler implements Reconciler {
  readonly name = POD_ANNOTATIONS;
  readonly workers: number;
  private readonly o: ControllerOptions;
  private readonly pods: Informer<PodLite>;
  private readonly podPorts: PodPortAllocator;

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    this.workers = ctx.o.workers ?? 8;
    this.pods = ctx.informers.pods;
    this.podPorts = ctx.podPorts;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    return [
      this.pods.addHandlers(
        {
          onAdd: (p) => {
            if (p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]) ctx.requeuePodAnnotation(podKey(p));
          },
          // Someone else changed or removed the annotation: put ours back.
          onUpdate: (a, b) => {
            const now = b.metadata.annotations?.[POD_NETWORKS_ANNOTATION];
            if (a.metadata.annotations?.[POD_NETWORKS_ANNOTATION] === now) return;
            // The echo of our own PATCH (or a value equal to it) leaves nothing to do: what the reconcile
            // would find, without a trip through the queue for every pod.
            const m = b.metadata;
            if (now !== undefined && now === this.podPorts.annotationFor(m.namespace, m.name, m.uid)) return;
            ctx.requeuePodAnnotation(podKey(b));
          },
        },
        { replay: true },
      ),
      // A pod port written or changed in NB (by us, or restored from the database) is what the annotation says.
      this.o.nb.cache.subscribe("Logical_Switch_Port", (events) => {
        for (const e of events) {
          if (e.kind === "delete") continue;
          const ids = e.row.external_ids as Readonly<Record<string, string>>;
          if (ids[KIND_KEY] === "pod-port" && ids[POD_KEY]) ctx.requeuePodAnnotation(ids[POD_KEY]);
        }
      }),
    ];
  }

  startupKeys(): Iterable<string> {
    return this.pods.keys();
  }

  resyncKeys(): Iterable<string> {
    return this.pods.keys();
  }

  /** Makes the pod's k8s.ovn.org/pod-networks annotation say what its port in NB holds. */
  async reconcile(key: string): Promise<undefined> {
    const pod = this.pods.get(key);
    if (!pod || pod.spec.hostNetwork) return undefined;
    if (pod.status.phase === "Succeeded" || pod.status.phase === "Failed") return undefined;
    const slash = key.indexOf("/");
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    // No port yet, or the port of an earlier pod with this name: the pod stage has work to do first, and
    // its port landing in the cache brings this key back.
    const have = pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION];
    let want: string | null | undefined = this.podPorts.annotationFor(ns, name, pod.metadata.uid);
    if (want === undefined) {
      // An annotation with no port of this pod behind it was not written by us (or is left from an earlier
      // pod with this name): nothing may act on it, so it goes. With a port whose subnet is still loading, wait.
      const port = this.podPorts.portOf(ns, name);
      if (have === undefined || (port && port.external_ids[POD_UID_KEY] === pod.metadata.uid))
        return undefined;
      want = null;
    }
    if (have === want) return undefined;
    try {
      await this.o.api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [POD_NETWORKS_ANNOTATION]: want } } },
        // The pod the PATCH answers with comes back through the watch; parsing it here would be wasted.
        discardResponse: true,
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      return undefined;
    }
    // Reported once the removal happened: a deposed term's refused PATCH reports nothing.
    if (want === null)
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        "ForeignPodNetworks",
        `removed a ${POD_NETWORKS_ANNOTATION} annotation that zstack-ovnkube-controller did not write; only the controller assigns pod networks`,
      );
    return undefined;
  }
}
