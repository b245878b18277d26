// NetworkPolicies: each policy's port group (the pods it selects), its allow ACLs and its named-port address
// sets, in one transaction per reconcile, keyed by `<namespace>/<name>`. It also inserts the shared peer address
// sets its ACLs refer to when they are missing (their names are unique in NB, so a second insert is refused);
// keeping their contents is the peer reconciler's. The policy informer's events also fan out to the peer and
// isolation reconcilers, since this is where a policy's peers are known to change.

import { type Family, type IpAddress, tryParseIp } from "../ipam/address.ts";
import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import { type DesiredRow, findOwned, plan } from "../ovn/nb-diff.ts";
import { CONTROLLER, ID_KEY, KIND_KEY, type Kind, OWNER_KEY, POD_KEY, rowUuid } from "../ovn/ownership.ts";
import { mutateMembers } from "../ovn/set-members.ts";
import type { AnyRow, Cache } from "../ovsdb/cache.ts";
import type { Transaction } from "../ovsdb/transaction.ts";
import { POLICY_KEY, peerSetId, peerSetName, policyGroupId } from "../policy/nb-names.ts";
import { type PolicyInputs, policyRows } from "../policy/policy-acls.ts";
import type { IpBlockPeer, PolicyRule, Protocol } from "../policy/policy-model.ts";
import { blockContains, peerSelects, policySelects, resolveNamedPort } from "../policy/selection.ts";
import { type ControllerContext, type ControllerOptions, NETWORK_POLICIES } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import type { NetworkPolicyObject, NodeLite, PodLite } from "./informers.ts";
import {
  notRealizedMessage,
  type PolicyEntry,
  type PolicyIndex,
  peerSetRows,
  policyPod,
} from "./policy-index.ts";

const POLICY_TABLES = ["Address_Set", "Port_Group", "ACL"] as const;
/** Policies whose rows the start-up bulk write puts in one transaction. */
const BULK_POLICIES = 100;
/** Transactions of the start-up bulk write in flight at once. */
export const BULK_IN_FLIGHT = 16;
const POLICY_KINDS = new Set(["network-policy", "network-policy-acl", "network-policy-named"]);

/**
 * Guards the insert of each row not in NB yet, so a retry after a lost reply cannot add a second one. Where the
 * server takes chosen row UUIDs (`fixedUuids`, OvsdbClient.insertUuidSupported), the row is inserted with a
 * UUID derived from its kind and id, and a second insert is refused as "duplicate uuid" (a hash lookup on the
 * server); otherwise, or when a row that is not ours already holds that UUID, a wait that no row of ours carries
 * the id goes first (evaluated by a scan of the table, per row). Returns the rows to plan, with their UUIDs, and
 * the number of waits added.
 */
export function guardInserts(
  txn: Transaction,
  cache: never,
  rows: readonly DesiredRow[],
  fixedUuids = false,
): { rows: DesiredRow[]; waits: number } {
  const before = txn.size;
  const out = rows.map((d) => {
    if (findOwned(cache, d.table, d.id)) return d;
    const uuid = fixedUuids ? chosenUuid(cache, d.table, d.row, d.id) : undefined;
    if (uuid) return { ...d, uuid };
    txn.guardAbsent(d.table, [["external_ids", "includes", { [ID_KEY]: d.id }]]);
    return d;
  });
  return { rows: out, waits: txn.size - before };
}

/** The UUID a policy row is inserted with, unless a row that is not ours (ours is found by id) holds it. */
function chosenUuid(
  cache: never,
  table: string,
  row: Readonly<Record<string, unknown>>,
  id: string,
): string | undefined {
  const kind = (row.external_ids as Readonly<Record<string, string>> | undefined)?.[KIND_KEY];
  if (!kind) return undefined;
  const uuid = rowUuid(kind as Kind, id);
  return (cache as Cache).table(table).get(uuid) ? undefined : uuid;
}

export class NetworkPolicyReconciler implements Reconciler {
  readonly name = NETWORK_POLICIES;
  readonly workers = 2;
  private readonly o: ControllerOptions;
  private readonly idx: PolicyIndex;
  private readonly policies: Informer<NetworkPolicyObject>;
  private readonly pods: Informer<PodLite>;
  private readonly nodes: Informer<NodeLite>;
  private readonly families: Family[];

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    if (!ctx.policies) throw new Error("the policy index is not set");
    this.idx = ctx.policies;
    this.policies = ctx.informers.networkPolicies;
    this.pods = ctx.informers.pods;
    this.nodes = ctx.informers.nodes;
    this.families = clusterFamilies(ctx.net.clusterCIDRs);
  }

  watch(): Disposer[] {
    const { ctx, idx } = this;
    const key = (p: NetworkPolicyObject) => `${p.metadata?.namespace}/${p.metadata?.name}`;
    const policyChanged = (k: string) => {
      for (const peer of idx.refresh(k)) ctx.requeuePolicyPeer(peer);
      ctx.requeuePolicy(k);
      ctx.requeueIsolation("ingress");
      ctx.requeueIsolation("egress");
      for (const n of this.nodes.keys()) ctx.requeueIsolation(`node/${n}`);
    };
    const withBlocks = () => {
      for (const [k, e] of idx.all()) if (e.hasIngressBlocks) ctx.requeuePolicy(k);
    };
    return [
      this.policies.addHandlers(
        {
          onAdd: (p) => policyChanged(key(p)),
          onUpdate: (_, p) => policyChanged(key(p)),
          onDelete: (p) => policyChanged(key(p)),
        },
        { replay: true },
      ),
      this.pods.addHandlers({
        onAdd: (p) => this.podChanged(undefined, p),
        onUpdate: (a, b) => this.podChanged(a, b),
        onDelete: (p) => this.podChanged(p, undefined),
      }),
      // A namespace relabelled changes which pods the egress named-port sets (intersected with peers) hold.
      ctx.informers.namespaces.addHandlers({
        onUpdate: (a, b) => {
          if (JSON.stringify(a.metadata.labels ?? {}) === JSON.stringify(b.metadata.labels ?? {})) return;
          for (const [k, e] of idx.all()) if (e.egressPortNames.size > 0) ctx.requeuePolicy(k);
        },
      }),
      // Node addresses inside an ingress ipBlock bring that node's management IP into the match.
      this.nodes.addHandlers({
        onAdd: withBlocks,
        onDelete: withBlocks,
        onUpdate: (a, b) => {
          if (JSON.stringify(a.status?.addresses) !== JSON.stringify(b.status?.addresses)) withBlocks();
        },
      }),
      this.o.nb.cache.subscribe("Logical_Switch_Port", (events) => {
        for (const e of events) {
          const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
          if (ids[OWNER_KEY] !== CONTROLLER) continue;
          if (ids[KIND_KEY] === "mgmt-port") withBlocks();
          // A pod's port came, went or changed address: its policies follow.
          const podKey = ids[POD_KEY];
          if (ids[KIND_KEY] === "pod-port" && podKey) {
            const pod = this.pods.get(podKey);
            if (pod) this.podChanged(pod, pod, true);
          }
        }
      }),
      // Someone else changed or removed one of our rows: put it back as the policy says.
      ...POLICY_TABLES.map((table) =>
        this.o.nb.cache.subscribe(table, (events) => {
          for (const e of events) {
            const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
            const k = ids[POLICY_KEY];
            if (ids[OWNER_KEY] === CONTROLLER && POLICY_KINDS.has(ids[KIND_KEY] ?? "") && k)
              ctx.requeuePolicy(k);
          }
        }),
      ),
    ];
  }

  /** Requeues the policies a pod's change may affect: those selecting it, and those whose egress names its ports. */
  private podChanged(a: PodLite | undefined, b: PodLite | undefined, force = false): void {
    // No policy, none to requeue: a cluster without NetworkPolicies pays nothing per pod event.
    if (this.idx.size === 0) return;
    const pa = policyPod(a);
    const pb = policyPod(b);
    if (!force && a && b && JSON.stringify([pa, a.spec.nodeName]) === JSON.stringify([pb, b.spec.nodeName]))
      return;
    const ns = (b ?? a)?.metadata.namespace ?? "";
    for (const e of this.idx.inNamespace(ns))
      if ((pa && policySelects(e.model, pa)) || (pb && policySelects(e.model, pb)))
        this.ctx.requeuePolicy(e.model.key);
    const names = new Set([...(pa?.namedPorts ?? []), ...(pb?.namedPorts ?? [])].map((p) => p.name));
    if (names.size === 0) return;
    for (const [k, e] of this.idx.all())
      for (const n of e.egressPortNames)
        if (names.has(n)) {
          this.ctx.requeuePolicy(k);
          break;
        }
  }

  /** Rows of policies deleted while we were not running. */
  *startupKeys(): Iterable<string> {
    const seen = new Set<string>();
    for (const table of POLICY_TABLES)
      for (const r of this.o.nb.cache.table(table).values()) {
        const ids = r.external_ids;
        const k = ids[POLICY_KEY];
        if (ids[OWNER_KEY] !== CONTROLLER || !POLICY_KINDS.has(ids[KIND_KEY] ?? "") || !k || seen.has(k))
          continue;
        seen.add(k);
        if (!this.policies.get(k)) yield k;
      }
  }

  resyncKeys(): Iterable<string> {
    return this.policies.keys();
  }

  private inputs(selected: readonly PodLite[], rules: readonly PolicyRule[] | undefined): PolicyInputs {
    const { idx } = this;
    const ipsOf = (p: PodLite) => idx.podPort(p)?.ips ?? [];
    return {
      families: this.families,
      ingressNamed: (name, protocol) =>
        resolveNamedPort(
          selected.map((p) => ({ ...(policyPod(p) as NonNullable<ReturnType<typeof policyPod>>), pod: p })),
          (x) => ipsOf(x.pod),
          name,
          protocol,
        ),
      egressNamed: (rule: number, name: string, protocol: Protocol) => {
        const r = rules?.[rule];
        const candidates = [];
        for (const p of idx.allPods()) {
          const pp = policyPod(p);
          if (!pp?.namedPorts.some((x) => x.name === name && x.protocol === protocol)) continue;
          const ips = ipsOf(p);
          if (ips.length === 0) continue;
          const isPeer =
            !r ||
            r.peers === "all" ||
            r.peers.some((peer) =>
              peer.kind === "pods"
                ? peerSelects(peer, pp, idx.namespaceLabels(pp.namespace))
                : ips.some((ip) => blockContains(peer, ip)),
            );
          if (isPeer) candidates.push({ ...pp, ips });
        }
        return resolveNamedPort(candidates, (x) => x.ips, name, protocol);
      },
      nodeMgmtIps: (block: IpBlockPeer) => {
        const out: IpAddress[] = [];
        for (const n of this.nodes.list()) {
          const inside = (n.status?.addresses ?? []).some((a) => {
            const ip = tryParseIp(a.address);
            return ip !== undefined && blockContains(block, ip);
          });
          if (inside) out.push(...idx.mgmtIps(n.metadata.name));
        }
        return out;
      },
    };
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { nb } = this.o;
    const cache = nb.cache as never;
    const entry = this.idx.get(key);
    const obj = this.policies.get(key);
    if (entry?.problem && obj)
      this.o.events?.warning(
        {
          apiVersion: "networking.k8s.io/v1",
          kind: "NetworkPolicy",
          name: obj.metadata?.name ?? "",
          namespace: obj.metadata?.namespace ?? "",
          ...(obj.metadata?.uid ? { uid: obj.metadata.uid } : {}),
        },
        "NetworkPolicyNotRealized",
        notRealizedMessage(entry.problem),
      );
    const ns = key.slice(0, key.indexOf("/"));
    const want = () =>
      entry
        ? this.desiredOf(entry)
        : { desired: [] as DesiredRow[], groupId: undefined, ports: [] as string[] };
    let { desired, groupId, ports } = want();
    const peers = entry ? [...entry.peers.keys()] : [];
    // The server is asked (once per connection) only when a row is to be inserted; NB may have moved meanwhile,
    // so what is inserted is worked out again from the cache as it is now.
    const inserts =
      desired.some((d) => !findOwned(cache, d.table, d.id)) || this.missingPeerSets(peers).length > 0;
    const fixedUuids = inserts && (await nb.insertUuidSupported());
    if (inserts) ({ desired, groupId, ports } = want());
    const txn = nb.transaction();
    const guarded = guardInserts(txn, cache, desired, fixedUuids);
    const peerGuards = this.ensurePeerSets(txn, peers, fixedUuids);
    plan(cache, nb.schema, txn as never, guarded.rows, {
      tables: [...POLICY_TABLES],
      groups: [`np/${ns}`, `np-acl/${ns}`, `np-named/${ns}`],
      owns: (_id, row: AnyRow) => {
        const ids = row.external_ids as Readonly<Record<string, string>>;
        return POLICY_KINDS.has(ids[KIND_KEY] ?? "") && ids[POLICY_KEY] === key;
      },
    });
    if (groupId) {
      const pg = findOwned(cache, "Port_Group", groupId);
      if (pg) mutateMembers(txn, "Port_Group", pg._uuid, "ports", pg.ports as string[], ports);
    }
    if (txn.size === guarded.waits + peerGuards.waits) return undefined;
    const result = await txn.commit();
    if (result.alreadyApplied) return { requeueAfterMs: 100 };
    return undefined;
  }

  /** A policy's rows; its port group carries its ports when NB does not have it yet (else they are mutated). */
  private desiredOf(entry: PolicyEntry): { desired: DesiredRow[]; groupId: string; ports: string[] } {
    const cache = this.o.nb.cache as never;
    const selected: PodLite[] = [];
    const ports = new Set<string>();
    for (const p of this.idx.podsIn(entry.model.namespace)) {
      const pp = policyPod(p);
      if (!pp || !policySelects(entry.model, pp)) continue;
      const port = this.idx.podPort(p);
      if (!port) continue;
      selected.push(p);
      ports.add(port.uuid);
    }
    const sorted = [...ports].sort();
    const r = policyRows(entry.model, this.inputs(selected, entry.model.egress));
    const existing = findOwned(cache, "Port_Group", r.groupId);
    const desired = r.rows.map((d) =>
      d.id === r.groupId && !existing ? { ...d, row: { ...d.row, ports: sorted } } : d,
    );
    return { desired, groupId: r.groupId, ports: sorted };
  }

  /**
   * At start, the rows of every policy that has none in NB yet, BULK_POLICIES policies per transaction instead
   * of one each (many policies created while no controller ran). Every batch is built first, then they are
   * written BULK_IN_FLIGHT at a time: they touch disjoint rows (a peer set goes with the first batch that needs
   * it), and the server runs one connection's transactions in the order sent. Inserts are guarded by chosen
   * UUIDs where the server takes them (guardInserts). A batch that fails is left to the per-policy reconciles,
   * which find whatever landed and write the rest. Says whether every policy it meant to write is now in NB, as
   * the cache shows it (a batch refused by a guard, or committed with its reply lost, is judged there), so the
   * isolation groups are not written ahead of a policy's allow ACLs.
   */
  async bulkSync(): Promise<boolean> {
    const { nb, log } = this.o;
    const cache = nb.cache as never;
    const todo = [...this.idx.all()].filter(
      ([k, e]) => !e.problem && this.policies.get(k) && !findOwned(cache, "Port_Group", policyGroupId(k)),
    );
    if (todo.length === 0) return true;
    const fixedUuids = await nb.insertUuidSupported();
    const sets = new Set<string>();
    const pending: { txn: Transaction; policies: number }[] = [];
    for (let i = 0; i < todo.length; i += BULK_POLICIES) {
      const batch = todo.slice(i, i + BULK_POLICIES);
      const txn = nb.transaction();
      for (const [, entry] of batch) {
        const { desired } = this.desiredOf(entry);
        plan(cache, nb.schema, txn as never, guardInserts(txn, cache, desired, fixedUuids).rows);
        this.ensurePeerSets(txn, [...entry.peers.keys()], fixedUuids, sets);
      }
      pending.push({ txn, policies: batch.length });
    }
    await Promise.all(
      Array.from({ length: BULK_IN_FLIGHT }, async () => {
        for (let b = pending.shift(); b; b = pending.shift()) {
          try {
            await b.txn.commit();
          } catch (err) {
            log.warn({ err, policies: b.policies }, "bulk write of NetworkPolicies failed; reconciling each");
          }
        }
      }),
    );
    const missing = todo.filter(([k]) => !findOwned(cache, "Port_Group", policyGroupId(k))).length;
    if (missing > 0)
      log.warn({ missing }, "NetworkPolicies not in NB after the bulk write; their reconciles write them");
    return missing === 0;
  }

  /** The peers (of `peers`) with a set missing in NB. */
  private missingPeerSets(peers: readonly string[]): string[] {
    const table = this.o.nb.cache.table("Address_Set");
    return peers.filter(
      (k) => this.idx.peer(k) && this.families.some((f) => !table.lookupOne("name", peerSetName(k, f))),
    );
  }

  /**
   * Inserts the peer sets that are missing (with their current contents); the peer reconciler keeps them. A set
   * is guarded by its chosen UUID where the server takes them, else by a wait on its (unique) name.
   */
  private ensurePeerSets(
    txn: Transaction,
    peers: readonly string[],
    fixedUuids: boolean,
    inserted = new Set<string>(),
  ): { waits: number } {
    const cache = this.o.nb.cache;
    const table = cache.table("Address_Set");
    let waits = 0;
    for (const k of peers) {
      const peer = this.idx.peer(k);
      if (!peer) continue;
      // The common case: every set exists; computing a set's contents walks the pods it covers.
      const names = this.families.map((f) => peerSetName(k, f));
      if (names.every((n) => table.lookupOne("name", n) || inserted.has(n))) continue;
      for (const row of peerSetRows(this.idx, k, peer, this.families)) {
        if (table.lookupOne("name", row.name) || inserted.has(row.name)) continue;
        inserted.add(row.name);
        const uuid = fixedUuids
          ? chosenUuid(cache as never, "Address_Set", row, peerSetId(row.name))
          : undefined;
        if (!uuid) {
          txn.guardAbsent("Address_Set", [["name", "==", row.name]]);
          waits++;
        }
        txn.insert("Address_Set", row as never, undefined, uuid ? { uuid } : {});
      }
    }
    return { waits };
  }
}

export function clusterFamilies(cidrs: readonly string[]): Family[] {
  const fams = new Set<Family>();
  for (const c of cidrs) fams.add(c.includes(":") ? 6 : 4);
  return [...fams].sort();
}
