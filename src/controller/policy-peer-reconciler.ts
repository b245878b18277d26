// The shared peer address sets of NetworkPolicies, keyed by the peer's canonical key: one set per address family
// holding the addresses of the pods the peer covers, changed by mutate insert/delete of the addresses that
// differ (one pod's change is one small operation), and deleted once no policy refers to the peer any more.

import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import { CONTROLLER, KIND_KEY, OWNER_KEY, POD_KEY } from "../ovn/ownership.ts";
import { mutateMembers } from "../ovn/set-members.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { PEER_KEY, peerSetName } from "../policy/nb-names.ts";
import { peerSelects } from "../policy/selection.ts";
import { type ControllerContext, type ControllerOptions, POLICY_PEERS } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import type { PodLite } from "./informers.ts";
import { clusterFamilies } from "./network-policy-reconciler.ts";
import { type PolicyIndex, peerSetRows, policyPod } from "./policy-index.ts";

const KIND = "network-policy-peer";

export class PolicyPeerReconciler implements Reconciler {
  readonly name = POLICY_PEERS;
  readonly workers = 2;
  private readonly o: ControllerOptions;
  private readonly idx: PolicyIndex;
  private readonly pods: Informer<PodLite>;

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    if (!ctx.policies) throw new Error("the policy index is not set");
    this.idx = ctx.policies;
    this.pods = ctx.informers.pods;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    return [
      this.pods.addHandlers({
        onAdd: (p) => this.podChanged(undefined, p),
        onUpdate: (a, b) => this.podChanged(a, b),
        onDelete: (p) => this.podChanged(p, undefined),
      }),
      ctx.informers.namespaces.addHandlers({
        onAdd: (n) => this.namespaceChanged(undefined, n.metadata.labels ?? {}),
        onUpdate: (a, b) => this.namespaceChanged(a.metadata.labels ?? {}, b.metadata.labels ?? {}),
        onDelete: (n) => this.namespaceChanged(n.metadata.labels ?? {}, undefined),
      }),
      this.o.nb.cache.subscribe("Logical_Switch_Port", (events) => {
        for (const e of events) {
          const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
          const podKey = ids[POD_KEY];
          if (ids[OWNER_KEY] !== CONTROLLER || ids[KIND_KEY] !== "pod-port" || !podKey) continue;
          const pod = this.pods.get(podKey);
          if (pod) this.podChanged(pod, pod, true);
        }
      }),
      // Someone else changed or removed one of our sets: put it back.
      this.o.nb.cache.subscribe("Address_Set", (events) => {
        for (const e of events) {
          const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
          const k = ids[PEER_KEY];
          if (ids[OWNER_KEY] === CONTROLLER && ids[KIND_KEY] === KIND && k) ctx.requeuePolicyPeer(k);
        }
      }),
    ];
  }

  private podChanged(a: PodLite | undefined, b: PodLite | undefined, force = false): void {
    // No peer, none to requeue: a cluster without NetworkPolicies pays nothing per pod event.
    if (this.idx.peerCount === 0) return;
    const pa = policyPod(a);
    const pb = policyPod(b);
    if (!force && a && b && JSON.stringify(pa?.labels) === JSON.stringify(pb?.labels) && !pa === !pb) return;
    const ns = (b ?? a)?.metadata.namespace ?? "";
    const nsLabels = this.idx.namespaceLabels(ns);
    for (const [k, { peer }] of this.idx.peerEntries())
      if ((pa && peerSelects(peer, pa, nsLabels)) || (pb && peerSelects(peer, pb, nsLabels)))
        this.ctx.requeuePolicyPeer(k);
  }

  private namespaceChanged(
    a: Readonly<Record<string, string>> | undefined,
    b: Readonly<Record<string, string>> | undefined,
  ): void {
    if (a && b && JSON.stringify(a) === JSON.stringify(b)) return;
    // Only namespace-selector peers can change; which of them is cheap to tell apart by trying both label sets.
    for (const [k, { peer }] of this.idx.peerEntries())
      if (!("name" in peer.namespaces)) this.ctx.requeuePolicyPeer(k);
  }

  /** Sets of peers no policy refers to any more (policies deleted while we were not running). */
  *startupKeys(): Iterable<string> {
    const seen = new Set<string>();
    for (const r of this.o.nb.cache.table("Address_Set").values()) {
      const ids = r.external_ids;
      const k = ids[PEER_KEY];
      if (ids[OWNER_KEY] !== CONTROLLER || ids[KIND_KEY] !== KIND || !k || seen.has(k)) continue;
      seen.add(k);
      yield k;
    }
  }

  resyncKeys(): Iterable<string> {
    return [...this.idx.peerKeys()];
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { nb } = this.o;
    const table = nb.cache.table("Address_Set");
    // Looked up by name (both families): no scan of every address set.
    const owned = ([4, 6] as const)
      .map((f) => table.lookupOne("name", peerSetName(key, f)))
      .filter((r) => r !== undefined)
      .filter((r) => r.external_ids[OWNER_KEY] === CONTROLLER && r.external_ids[KIND_KEY] === KIND);
    const peer = this.idx.peer(key);
    const txn = nb.transaction();
    let guards = 0;
    if (!peer) {
      for (const r of owned) txn.delete("Address_Set", byUuid(r._uuid));
    } else {
      const want = peerSetRows(this.idx, key, peer, clusterFamilies(this.ctx.net.clusterCIDRs));
      const names = new Set(want.map((w) => w.name));
      for (const r of owned) if (!names.has(r.name)) txn.delete("Address_Set", byUuid(r._uuid));
      for (const w of want) {
        const row = table.lookupOne("name", w.name);
        if (!row) {
          txn.guardAbsent("Address_Set", [["name", "==", w.name]]);
          guards++;
          txn.insert("Address_Set", w as never);
        } else {
          mutateMembers(txn, "Address_Set", row._uuid, "addresses", row.addresses, w.addresses);
        }
      }
    }
    if (txn.size === guards) return undefined;
    const result = await txn.commit();
    if (result.alreadyApplied) return { requeueAfterMs: 100 };
    return undefined;
  }
}
