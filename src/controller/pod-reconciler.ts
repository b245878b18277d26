// Pods, first stage: the Subnet a pod's addresses come from, its addresses and its logical switch port in NB
// (one transaction), and their release when the pod finishes or goes, unless its StatefulSet keeps them for
// the pod's return. The annotation that tells the node is the second stage (pod-annotation-reconciler.ts).

import type { Subnet } from "../api/subnet.ts";
import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import { KIND_KEY, POD_KEY, STATEFULSET_KEY } from "../ovn/ownership.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import { type ControllerContext, type ControllerOptions, PODS } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import { type PodLite, podKey, type StatefulSetLite } from "./informers.ts";
import { ANNOTATION_SUBNET, type PodPortAllocator } from "./pod-port-allocator.ts";

export class PodReconciler implements Reconciler {
  readonly name = PODS;
  readonly workers: number;
  private readonly o: ControllerOptions;
  private readonly subnets: Informer<Subnet>;
  private readonly pods: Informer<PodLite>;
  private readonly statefulSets: Informer<StatefulSetLite>;
  private readonly podPorts: PodPortAllocator;

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    this.workers = ctx.o.workers ?? 8;
    this.subnets = ctx.informers.subnets;
    this.pods = ctx.informers.pods;
    this.statefulSets = ctx.informers.statefulSets;
    this.podPorts = ctx.podPorts;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    const nb = this.o.nb;
    // A StatefulSet scaled down or deleted releases the ports it was keeping for its missing pods.
    const stsChanged = (sts: StatefulSetLite) => {
      for (const p of nb.cache.table("Logical_Switch_Port").values()) {
        const ids = p.external_ids;
        if (
          ids[STATEFULSET_KEY] === sts.metadata.name &&
          ids[POD_KEY]?.startsWith(`${sts.metadata.namespace}/`)
        ) {
          ctx.requeuePod(ids[POD_KEY]);
        }
      }
    };
    return [
      this.pods.addHandlers(
        {
          onAdd: (p) => ctx.requeuePod(podKey(p)),
          onUpdate: (a, b) => {
            if (
              a.spec.nodeName !== b.spec.nodeName ||
              a.status.phase !== b.status.phase ||
              a.metadata.uid !== b.metadata.uid
            ) {
              ctx.requeuePod(podKey(b));
            }
          },
          onDelete: (p) => ctx.requeuePod(podKey(p)),
        },
        { replay: true },
      ),
      this.statefulSets.addHandlers({
        // Only fewer replicas or a deletion can free kept ports; status updates (replicas becoming ready) cannot.
        onUpdate: (o, n) => {
          // A new ordinals.start moves the kept range: ordinals below it are no longer wanted.
          const shrank =
            (n.spec.replicas ?? 1) < (o.spec.replicas ?? 1) ||
            (n.spec.ordinals?.start ?? 0) !== (o.spec.ordinals?.start ?? 0);
          if (shrank || (n.metadata.deletionTimestamp && !o.metadata.deletionTimestamp)) stsChanged(n);
        },
        onDelete: stsChanged,
      }),
    ];
  }

  /** Ports of pods deleted while we were not running: their keys are reconciled too, and removed. */
  *startupKeys(): Iterable<string> {
    for (const p of this.o.nb.cache.table("Logical_Switch_Port").values()) {
      if (p.external_ids[KIND_KEY] === "pod-port" && p.external_ids[POD_KEY]) yield p.external_ids[POD_KEY];
    }
  }

  resyncKeys(): Iterable<string> {
    return this.pods.keys();
  }

  /**
   * A StatefulSet pod keeps its address when recreated under the same name (as with Kube-OVN): its port stays
   * while the StatefulSet exists and still wants that ordinal.
   */
  private statefulSetKeeps(ns: string, name: string): boolean {
    const port = this.podPorts.portOf(ns, name);
    const stsName = port?.external_ids[STATEFULSET_KEY];
    if (!stsName) return false;
    const sts = this.statefulSets.get(`${ns}/${stsName}`);
    const m = /-(\d+)$/.exec(name);
    // A StatefulSet being deleted keeps nothing, even while its finalizers hold the object.
    if (!sts || sts.metadata.deletionTimestamp || !m || !name.startsWith(`${stsName}-`)) return false;
    // The StatefulSet wants ordinals start .. start+replicas-1 (spec.ordinals.start, default 0).
    const ordinal = Number(m[1]);
    const start = sts.spec.ordinals?.start ?? 0;
    return ordinal >= start && ordinal < start + (sts.spec.replicas ?? 1);
  }

  /**
   * Parks a pod until its subnet ("" for any) loads. A Subnet that exists but was refused, or one that does
   * not exist, gets a Warning Event on the pod; one still being set up does not.
   */
  private waitForSubnet(
    key: string,
    subnet: string,
    refusal?: { reason: string; message: string },
  ): undefined {
    this.ctx.waitForSubnet(subnet, key);
    const pod = this.pods.get(key);
    const verdict = subnet ? this.ctx.verdicts.get(subnet) : undefined;
    const sub = subnet ? this.subnets.get(subnet) : undefined;
    const problem =
      refusal?.message ??
      (subnet === ""
        ? "no Subnet applies to this pod: none lists its namespace and none is the default"
        : !sub
          ? `Subnet ${subnet} does not exist`
          : sub.metadata.deletionTimestamp
            ? `Subnet ${subnet} is being deleted and takes no new pods`
            : verdict && !verdict.definition
              ? `Subnet ${subnet} is ${verdict.phase}: ${verdict.message}`
              : undefined);
    if (pod && problem) {
      this.o.events?.warning(
        {
          apiVersion: "v1",
          kind: "Pod",
          namespace: pod.metadata.namespace,
          name: pod.metadata.name,
          uid: pod.metadata.uid,
        },
        refusal?.reason ?? "SubnetNotReady",
        refusal ? problem : `${problem}; the pod gets its address once the Subnet is ready`,
      );
    }
    return undefined;
  }

  /**
   * The Subnet the pod's addresses come from: the first that lists its namespace, else the default. A pod may
   * name another (annotation network.zstack.io/subnet) only among those that list its namespace, so a pod
   * cannot put itself on a Subnet meant for other namespaces.
   */
  private subnetFor(pod: PodLite): { subnet?: string; refused?: string } {
    const ns = pod.metadata.namespace;
    const all = this.subnets.list();
    const listing = all.filter((s) => s.spec.namespaces?.includes(ns)).map((s) => s.metadata.name);
    const fallback = listing[0] ?? all.find((s) => s.spec.default)?.metadata.name;
    const wanted = pod.metadata.annotations?.[ANNOTATION_SUBNET];
    if (wanted === undefined || wanted === fallback) return fallback ? { subnet: fallback } : {};
    if (listing.includes(wanted)) return { subnet: wanted };
    return {
      refused:
        `${ANNOTATION_SUBNET} asks for Subnet ${JSON.stringify(wanted)}, which does not list namespace ${ns} in spec.namespaces` +
        (listing.length > 0 ? ` (Subnets that do: ${listing.join(", ")})` : "") +
        "; add the namespace to that Subnet, or remove the annotation",
    };
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const slash = key.indexOf("/");
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const pod = this.pods.get(key);
    if (!pod) {
      if (this.statefulSetKeeps(ns, name)) return undefined;
      this.ctx.usageChanged(await this.podPorts.remove(ns, name));
      return undefined;
    }
    if (pod.spec.hostNetwork) return undefined;
    if (pod.status.phase === "Succeeded" || pod.status.phase === "Failed") {
      // Finished pods (Jobs) give their address back at once; nothing blocks their deletion.
      this.ctx.usageChanged(await this.podPorts.remove(ns, name, pod.metadata.uid));
      return undefined;
    }
    // A pod with a port stays on the port's subnet while the port exists: it waits for that subnet, never moves.
    const held = this.podPorts.subnetOfPort(ns, name);
    const choice = held !== undefined ? { subnet: held } : this.subnetFor(pod);
    if (choice.refused) {
      const wanted = pod.metadata.annotations?.[ANNOTATION_SUBNET] ?? "";
      return this.waitForSubnet(key, wanted, { reason: "SubnetNotAllowed", message: choice.refused });
    }
    const subnet = choice.subnet;
    if (!subnet) return this.waitForSubnet(key, "");
    const sub = this.subnets.get(subnet);
    // A Subnet being deleted serves the pods it has, and no new one.
    if (sub?.metadata.deletionTimestamp && !this.podPorts.portOf(ns, name))
      return this.waitForSubnet(key, subnet);
    if (sub?.spec.externalLogicalSwitch && this.o.ovnMode !== "external") {
      // Pods on a foreign switch need External mode: in Standalone mode NB is ours, and nobody else's VMs are there.
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        "ExternalModeNotSupported",
        `subnet ${subnet} uses externalLogicalSwitch ${sub.spec.externalLogicalSwitch}; attaching pods to an external switch needs ovn.mode=external (docs/external-mode.md)`,
      );
      return { requeueAfterMs: 60_000 };
    }
    // A Subnet on a foreign switch that stopped matching it (switch gone, renamed, CIDR changed in ZStack) takes
    // no new pod; pods with a port keep it.
    if (
      sub?.spec.externalLogicalSwitch &&
      !this.ctx.verdicts.get(subnet)?.definition &&
      !this.podPorts.portOf(ns, name)
    )
      return this.waitForSubnet(key, subnet);
    if (!this.ctx.loadedSpecs.has(subnet)) return this.waitForSubnet(key, subnet);
    const groups = this.ctx.policies?.portGroupsOf(pod);
    const res = await this.podPorts.ensure(
      {
        namespace: ns,
        name,
        uid: pod.metadata.uid,
        ...(pod.metadata.statefulSet ? { statefulSet: pod.metadata.statefulSet } : {}),
        ...(pod.spec.nodeName ? { node: pod.spec.nodeName } : {}),
        ...(pod.metadata.annotations ? { annotations: pod.metadata.annotations } : {}),
        // Its NetworkPolicy isolation lands with the port; the policy reconcilers keep it from then on.
        ...(this.ctx.policies && groups
          ? { portGroups: groups, portGroupRows: this.ctx.policies.portGroupRowsOf(pod, groups) }
          : {}),
      },
      subnet,
    );
    if (!res.ok) {
      if (res.reason === "AddressesExhausted" || res.reason === "PortCapacityExceeded")
        this.ctx.waitForAddress(subnet, key);
      this.o.log.warn({ pod: key, reason: res.reason, message: res.message }, "pod network not set up");
      this.o.events?.warning(
        { apiVersion: "v1", kind: "Pod", namespace: ns, name, uid: pod.metadata.uid },
        res.reason,
        res.message,
      );
      return { requeueAfterMs: res.reason === "SubnetNotReady" ? 1000 : 30_000 };
    }
    if (res.wrote) this.ctx.usageChanged(subnet);
    // The port change also reaches the annotation stage through the NB cache; this covers a port that was
    // already right while the annotation is not.
    if (pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION] !== res.annotation)
      this.ctx.requeuePodAnnotation(key);
    return undefined;
  }
}
