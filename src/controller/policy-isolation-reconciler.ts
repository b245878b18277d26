// Isolation: the port group of each direction holds every pod a policy of that direction selects (with the
// default deny), and each node's own-node group holds that node's ingress-isolated pods (with the allow from the
// node's management IP). Keys `ingress`, `egress` and `node/<name>`; one transaction per reconcile.
// A policy isolates a pod only once its own rows (its group with its allow ACLs, written in one transaction) are
// in NB as the cache shows them: a policy whose write failed or is still on its way never cuts a pod off from
// the traffic it allows.

import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import { type DesiredRow, findOwned, plan } from "../ovn/nb-diff.ts";
import { CONTROLLER, ID_KEY, KIND_KEY, NODE_KEY, OWNER_KEY, POD_KEY } from "../ovn/ownership.ts";
import { mutateMembers } from "../ovn/set-members.ts";
import type { Transaction } from "../ovsdb/transaction.ts";
import { isolationRows, nodeRows } from "../policy/isolation-acls.ts";
import { isolationGroupId, nodeGroupId } from "../policy/nb-names.ts";
import type { Direction } from "../policy/policy-model.ts";
import { policySelects } from "../policy/selection.ts";
import { type ControllerContext, type ControllerOptions, POLICY_ISOLATION } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import { type NodeLite, PODS_BY_NODE, type PodLite } from "./informers.ts";
import { guardInserts } from "./network-policy-reconciler.ts";
import { type PolicyIndex, policyPod } from "./policy-index.ts";

const KIND = "network-policy-isolation";
/** The kind of a policy's own group (policy-acls.ts). */
const POLICY_GROUP_KIND = "network-policy";

export class PolicyIsolationReconciler implements Reconciler {
  readonly name = POLICY_ISOLATION;
  readonly workers = 1;
  private readonly o: ControllerOptions;
  private readonly idx: PolicyIndex;
  private readonly pods: Informer<PodLite>;
  private readonly nodes: Informer<NodeLite>;

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    if (!ctx.policies) throw new Error("the policy index is not set");
    this.idx = ctx.policies;
    this.pods = ctx.informers.pods;
    this.nodes = ctx.informers.nodes;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    const podChanged = (a: PodLite | undefined, b: PodLite | undefined, force = false) => {
      // Pods of a namespace without policies are in no isolation group, before or after: checked first, so a
      // cluster without NetworkPolicies pays nothing per pod event.
      if (!this.idx.hasPoliciesIn((b ?? a)?.metadata.namespace ?? "")) return;
      const pa = policyPod(a);
      const pb = policyPod(b);
      if (
        !force &&
        a &&
        b &&
        JSON.stringify([pa?.labels, !pa, a.spec.nodeName]) ===
          JSON.stringify([pb?.labels, !pb, b.spec.nodeName])
      )
        return;
      ctx.requeueIsolation("ingress");
      ctx.requeueIsolation("egress");
      for (const n of new Set([a?.spec.nodeName, b?.spec.nodeName])) if (n) ctx.requeueIsolation(`node/${n}`);
    };
    return [
      this.pods.addHandlers({
        onAdd: (p) => podChanged(undefined, p),
        onUpdate: (a, b) => podChanged(a, b),
        onDelete: (p) => podChanged(p, undefined),
      }),
      this.nodes.addHandlers({
        onAdd: (n) => ctx.requeueIsolation(`node/${n.metadata.name}`),
        onDelete: (n) => ctx.requeueIsolation(`node/${n.metadata.name}`),
      }),
      this.o.nb.cache.subscribe("Logical_Switch_Port", (events) => {
        for (const e of events) {
          const row = e.kind === "add" ? e.row : e.old;
          const ids = row.external_ids as Readonly<Record<string, string>>;
          if (ids[OWNER_KEY] !== CONTROLLER) continue;
          // A node's management address changes its own-node ACL.
          if (ids[KIND_KEY] === "mgmt-port" && ids[NODE_KEY]) ctx.requeueIsolation(`node/${ids[NODE_KEY]}`);
          if (ids[KIND_KEY] === "pod-port") {
            const pod = this.pods.get(ids[POD_KEY] ?? "");
            if (pod) podChanged(pod, pod, true);
          }
        }
      }),
      ...(["Port_Group", "ACL"] as const).map((table) =>
        this.o.nb.cache.subscribe(table, (events) => {
          for (const e of events) {
            const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
            if (ids[OWNER_KEY] !== CONTROLLER) continue;
            // A policy's group came into NB or left it: the pods it selects are isolated by it from now on, or
            // no longer.
            if (table === "Port_Group" && ids[KIND_KEY] === POLICY_GROUP_KIND && e.kind !== "update") {
              ctx.requeueIsolation("ingress");
              ctx.requeueIsolation("egress");
              for (const n of this.nodes.keys()) ctx.requeueIsolation(`node/${n}`);
              continue;
            }
            if (ids[KIND_KEY] !== KIND) continue;
            const id = ids[ID_KEY] ?? "";
            const key = id.startsWith("np-isolation/")
              ? id.split("/")[1]
              : id.startsWith("np-node/")
                ? `node/${id.split("/")[1]}`
                : undefined;
            if (key) ctx.requeueIsolation(key);
          }
        }),
      ),
    ];
  }

  *startupKeys(): Iterable<string> {
    yield "ingress";
    yield "egress";
    // Own-node groups of nodes gone while we were not running.
    for (const r of this.o.nb.cache.table("Port_Group").values()) {
      const ids = r.external_ids;
      if (ids[OWNER_KEY] === CONTROLLER && ids[KIND_KEY] === KIND && ids[NODE_KEY])
        yield `node/${ids[NODE_KEY]}`;
    }
    for (const n of this.nodes.keys()) yield `node/${n}`;
  }

  /**
   * At start: the isolation and own-node groups built at once (before the policies' bulk write is sent) and
   * written as soon as it has ended, not behind the start-up reconciles of every policy, peer and pod queued
   * ahead of them, so NB holds the whole of the policies sooner; after it, so no pod is isolated before the
   * ACLs that allow its traffic are in. One transaction per key, as a reconcile; the queue runs the same keys
   * again and writes what changed meanwhile or failed here.
   */
  async bulkSync(previous: Promise<boolean>): Promise<boolean> {
    const writes = [...new Set(this.startupKeys())].flatMap((k) => {
      const txn = this.build(k, true);
      return txn ? [{ k, txn }] : [];
    });
    // Built as if every policy's bulk write had landed; sent only if it has. Otherwise the queue writes each key
    // counting the policies NB holds.
    if (!(await previous)) {
      if (writes.length > 0)
        this.o.log.warn(
          { keys: writes.length },
          "NetworkPolicy bulk write did not all land; isolation groups are left to their reconciles",
        );
      return false;
    }
    await Promise.all(
      writes.map(({ k, txn }) =>
        txn
          .commit()
          .catch((err: unknown) =>
            this.o.log.warn(
              { err, key: k },
              "start-up write of an isolation group failed; the queue retries it",
            ),
          ),
      ),
    );
    return true;
  }

  resyncKeys(): Iterable<string> {
    return ["ingress", "egress", ...this.nodes.keys().map((n) => `node/${n}`)];
  }

  /**
   * Whether some policy of the direction selects the pod, counting only policies whose group is in NB unless
   * `assumeLanded` (the start-up build, sent only once the policies' bulk write is known to have landed).
   */
  private isolated(p: PodLite, dir: Direction, assumeLanded: boolean): boolean {
    const pp = policyPod(p);
    if (!pp) return false;
    return this.idx
      .inNamespace(pp.namespace)
      .some(
        (e) =>
          e.model[dir] !== undefined &&
          policySelects(e.model, pp) &&
          (assumeLanded || this.idx.landed(e.model.key)),
      );
  }

  private portsOf(pods: Iterable<PodLite>, dir: Direction, assumeLanded: boolean): string[] {
    const out = new Set<string>();
    for (const p of pods) {
      if (!this.isolated(p, dir, assumeLanded)) continue;
      const port = this.idx.podPort(p);
      if (port) out.add(port.uuid);
    }
    return [...out].sort();
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const txn = this.build(key);
    // A policy not yet in NB isolates at its deadline if it never lands: look again then.
    const wait = this.idx.nextLandingDeadline();
    const later = wait === undefined ? undefined : { requeueAfterMs: wait + 10 };
    if (!txn) return later;
    const result = await txn.commit();
    if (result.alreadyApplied) return { requeueAfterMs: 100 };
    return later;
  }

  /** The transaction that brings the key's group and ACLs in line, or undefined when NB already is. */
  private build(key: string, assumeLanded = false): Transaction | undefined {
    let groupId: string;
    let rows: DesiredRow[];
    let ports: string[] = [];
    if (key === "ingress" || key === "egress") {
      groupId = isolationGroupId(key);
      const namespaces = new Set(
        [...this.idx.all()].filter(([, e]) => e.model[key]).map(([, e]) => e.model.namespace),
      );
      ports = this.portsOf(
        [...namespaces].flatMap((ns) => this.idx.podsIn(ns)),
        key,
        assumeLanded,
      );
      rows = isolationRows(key);
    } else if (key.startsWith("node/")) {
      const node = key.slice("node/".length);
      groupId = nodeGroupId(node);
      if (this.nodes.get(node)) {
        ports = this.portsOf(this.pods.byIndex(PODS_BY_NODE, node), "ingress", assumeLanded);
        rows = nodeRows(node, this.idx.mgmtIps(node));
      } else {
        rows = [];
      }
    } else {
      return undefined;
    }
    const { nb } = this.o;
    const cache = nb.cache as never;
    const existing = findOwned(cache, "Port_Group", groupId);
    const desired = rows.map((d) => (d.id === groupId && !existing ? { ...d, row: { ...d.row, ports } } : d));
    const txn = nb.transaction();
    const { waits: guards } = guardInserts(txn, cache, desired);
    plan(cache, nb.schema, txn as never, desired, {
      tables: ["Port_Group", "ACL"],
      groups: [groupId],
      owns: (id, row) =>
        (row.external_ids as Record<string, string>)[KIND_KEY] === KIND &&
        (id === groupId || id.startsWith(`${groupId}/`)),
    });
    if (existing && desired.length > 0)
      mutateMembers(txn, "Port_Group", existing._uuid, "ports", existing.ports as string[], ports);
    return txn.size === guards ? undefined : txn;
  }
}
