// Services: each Service's OVN load balancers (members of the cluster load-balancer group every subnet switch
// refers to; those of cluster IPs also of the cluster-IP group ZStack's switches refer to in External mode) and, for internalTrafficPolicy Local, its template variables on each chassis. Keyed by
// `<namespace>/<name>`: a Service, its EndpointSlices and its load-balancer rows all lead to the same key, and
// one reconcile writes one transaction.

import type { Informer } from "../k8s/informer.ts";
import type { ReconcileResult } from "../k8s/workqueue.ts";
import {
  changedColumns,
  type DesiredRow,
  ensureIdIndex,
  findAllOwned,
  findOwned,
  plan,
  unlinkAndDelete,
} from "../ovn/nb-diff.ts";
import { CONTROLLER, ID_KEY, KIND_KEY, OWNER_KEY, ownedIds, rowUuid, SERVICE_KEY } from "../ovn/ownership.ts";
import { type ServiceLoadBalancers, serviceLoadBalancers, variablesOf } from "../ovn/service-lb.ts";
import { CLUSTER_IP_LB_GROUP, CLUSTER_LB_GROUP, OUR_LB_GROUPS } from "../ovn/topology.ts";
import type { AnyRow } from "../ovsdb/cache.ts";
import type { Transaction } from "../ovsdb/transaction.ts";
import { hasTopologyHints, ZONE_LABEL } from "../services/endpoints.ts";
import {
  API_SERVER_SERVICE,
  type ReservedAddresses,
  reservedAddresses,
} from "../services/reserved-addresses.ts";
import { type ClusterRanges, clusterRanges, parseService } from "../services/service-model.ts";
import { type ControllerContext, type ControllerOptions, SERVICES } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import {
  type EndpointSliceObject,
  type NodeLite,
  type ServiceObject,
  SLICES_BY_SERVICE,
  sliceServiceKey,
} from "./informers.ts";

const LB_BY_SERVICE = "zstack.io/service";
/** Services whose load balancers the start-up bulk write puts in one transaction. */
const BULK_SERVICES = 100;
const BULK_IN_FLIGHT = 4;
/** The Services queue's workers per controller.workers: a Service reconcile mostly waits for NB's answer. */
export const SERVICE_WORKERS_PER_WORKER = 4;

/**
 * What a guardAbsent looks for: a row of ours with this id, the row findOwned would find once the cache shows it
 * (a row that only carries the id, its owner changed by hand, would fail the guard on every retry).
 */
function ownedGuard(id: string): Record<string, string> {
  return { [OWNER_KEY]: CONTROLLER, [ID_KEY]: id };
}

export class ServiceReconciler implements Reconciler {
  readonly name = SERVICES;
  /**
   * Each reconcile holds its worker until NB answers its transaction, so the workers bound how many Services'
   * changes are on their way to NB at once: with 2, then 4, a burst of endpoint changes waited in the queue for
   * round trips of other Services (make bench-services, part B: with 16, its p99 fell by a third).
   */
  readonly workers: number;
  private readonly o: ControllerOptions;
  private readonly services: Informer<ServiceObject>;
  private readonly slices: Informer<EndpointSliceObject>;
  private readonly nodes: Informer<NodeLite>;
  private readonly ranges: ClusterRanges;
  /**
   * The load-balancer columns each Service's last reconcile asked for, by Service key and row id: an NB update
   * that leaves one of our rows exactly so (our own write coming back) needs no reconcile to put it back.
   */
  private readonly lastDesired = new Map<string, Map<string, Readonly<Record<string, unknown>>>>();
  /** Node and API server addresses, recomputed after a Node or the API server's endpoints change. */
  private reserved: ReservedAddresses | undefined;
  private readonly parsedServices = new WeakMap<
    ServiceObject,
    { reserved: ReservedAddresses; result: ReturnType<typeof parseService> }
  >();

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    this.workers = (ctx.o.workers ?? 4) * SERVICE_WORKERS_PER_WORKER;
    this.services = ctx.informers.services;
    this.slices = ctx.informers.endpointSlices;
    this.nodes = ctx.informers.nodes;
    this.ranges = clusterRanges({
      clusterCIDRs: ctx.net.clusterCIDRs,
      serviceCIDRs: ctx.net.serviceCIDRs,
      joinCIDRs: [ctx.net.joinCIDR],
    });
  }

  private lbIndex() {
    const tc = ensureIdIndex(this.o.nb.cache as never, "Load_Balancer");
    if (!tc.hasIndex(LB_BY_SERVICE)) {
      tc.addIndex(LB_BY_SERVICE, (r) => {
        const ids = (r as AnyRow).external_ids as Readonly<Record<string, string>>;
        return ids[OWNER_KEY] === CONTROLLER && ids[KIND_KEY] === "service-lb" ? ids[SERVICE_KEY] : undefined;
      });
    }
    return tc;
  }

  /**
   * The uuid to insert this id's row with, unless NB already holds a row under it: that row is not ours (ours
   * would have been found by its id), e.g. our keys cleared by hand or a row someone else made with the same,
   * predictable uuid. Inserting over it would be refused as "duplicate uuid" forever, each time read as "applied
   * already"; the wait guard takes its place.
   */
  private chosenUuid(id: string): string | undefined {
    const uuid = rowUuid("service-lb", id);
    return this.o.nb.cache.table("Load_Balancer").get(uuid) ? undefined : uuid;
  }

  /** Our two Service groups (the controller's core step makes them). */
  private groups() {
    const t = this.o.nb.cache.table("Load_Balancer_Group");
    return {
      group: t.lookupOne("name", CLUSTER_LB_GROUP),
      ipGroup: t.lookupOne("name", CLUSTER_IP_LB_GROUP),
    };
  }

  /** Our load balancers of a Service, as NB holds them. */
  private ownedLbs(key: string): readonly AnyRow[] {
    return this.lbIndex().lookup(LB_BY_SERVICE, key) as readonly AnyRow[];
  }

  watch(): Disposer[] {
    const { ctx } = this;
    const enqueue = (key: string | undefined) => {
      if (key) ctx.requeueService(key);
    };
    const svcKey = (s: ServiceObject) => `${s.metadata?.namespace}/${s.metadata?.name}`;
    this.lbIndex();
    return [
      this.services.addHandlers(
        {
          onAdd: (s) => enqueue(svcKey(s)),
          onUpdate: (_, s) => enqueue(svcKey(s)),
          onDelete: (s) => enqueue(svcKey(s)),
        },
        { replay: true },
      ),
      this.slices.addHandlers({
        onAdd: (s) => {
          enqueue(sliceServiceKey(s));
          this.apiServerSliceChanged(s);
        },
        onUpdate: (a, b) => {
          enqueue(sliceServiceKey(a));
          if (sliceServiceKey(b) !== sliceServiceKey(a)) enqueue(sliceServiceKey(b));
          this.apiServerSliceChanged(b);
        },
        onDelete: (s) => {
          enqueue(sliceServiceKey(s));
          this.apiServerSliceChanged(s);
        },
      }),
      // A node added or gone changes the chassis internalTrafficPolicy Local and topology hints need variables
      // on, its zone which hinted endpoints it gets, and its addresses the externalIPs no Service may claim.
      this.nodes.addHandlers({
        onAdd: () => {
          this.requeueLocalServices();
          this.reservedChanged();
        },
        onUpdate: (a, b) => {
          if (JSON.stringify(a.status?.addresses) !== JSON.stringify(b.status?.addresses))
            this.reservedChanged();
          if (a.metadata.labels?.[ZONE_LABEL] !== b.metadata.labels?.[ZONE_LABEL])
            this.requeueLocalServices();
        },
        onDelete: () => {
          this.requeueLocalServices();
          this.reservedChanged();
        },
      }),
      // Someone else added, changed or removed one of our load balancers: put it back as the Service says. A
      // change that leaves the row as its Service's last reconcile wanted it (our own write, seen back) is not
      // one: that reconcile would find nothing to do.
      this.o.nb.cache.subscribe("Load_Balancer", (events) => {
        for (const e of events) {
          const ids = (e.kind === "add" ? e.row : e.old).external_ids as Readonly<Record<string, string>>;
          if (ids[OWNER_KEY] !== CONTROLLER || ids[KIND_KEY] !== "service-lb") continue;
          if (e.kind === "update" && this.asLastDesired(e.row)) continue;
          enqueue(ids[SERVICE_KEY]);
        }
      }),
    ];
  }

  /** The row is the one row of its id and holds what its Service's last reconcile wanted. */
  private asLastDesired(row: AnyRow): boolean {
    const ids = row.external_ids as Readonly<Record<string, string>>;
    const id = ids[ID_KEY];
    const want = id === undefined ? undefined : this.lastDesired.get(ids[SERVICE_KEY] ?? "")?.get(id);
    if (!want || id === undefined) return false;
    const { nb } = this.o;
    if (findAllOwned(nb.cache as never, "Load_Balancer", id).length !== 1) return false;
    return Object.keys(changedColumns(nb.schema, "Load_Balancer", row, want)).length === 0;
  }

  private apiServerSliceChanged(s: EndpointSliceObject): void {
    if (sliceServiceKey(s) === `${API_SERVER_SERVICE.namespace}/${API_SERVER_SERVICE.name}`)
      this.reservedChanged();
  }

  /** Services with addresses that may be reserved now, or no longer, are looked at again. */
  private reservedChanged(): void {
    this.reserved = undefined;
    for (const s of this.services.list())
      if (s.spec?.externalIPs?.length || s.status?.loadBalancer?.ingress?.length)
        this.ctx.requeueService(`${s.metadata?.namespace}/${s.metadata?.name}`);
  }

  private reservedAddresses(): ReservedAddresses {
    this.reserved ??= reservedAddresses(
      this.nodes.list(),
      this.slices.byIndex(SLICES_BY_SERVICE, `${API_SERVER_SERVICE.namespace}/${API_SERVER_SERVICE.name}`),
    );
    return this.reserved;
  }

  /** Services whose load balancers have per-chassis backends (internalTrafficPolicy Local, topology hints). */
  private requeueLocalServices(): void {
    for (const s of this.services.list()) {
      const key = `${s.metadata?.namespace}/${s.metadata?.name}`;
      if (
        s.spec?.internalTrafficPolicy === "Local" ||
        hasTopologyHints(this.slices.byIndex(SLICES_BY_SERVICE, key))
      )
        this.ctx.requeueService(key);
    }
  }

  /** Services deleted while we were not running still have load balancers in NB. */
  *startupKeys(): Iterable<string> {
    const seen = new Set<string>();
    for (const r of this.o.nb.cache.table("Load_Balancer").values()) {
      const ids = r.external_ids;
      const key = ids[SERVICE_KEY];
      if (ids[OWNER_KEY] !== CONTROLLER || ids[KIND_KEY] !== "service-lb" || !key || seen.has(key)) continue;
      seen.add(key);
      if (!this.services.get(key)) yield key;
    }
  }

  resyncKeys(): Iterable<string> {
    return this.services.keys();
  }

  /** What NB should hold for a Service (nothing for one that is gone), and what in it could not be realized. */
  /** The Service parsed, once per object and reserved set: an endpoint change leaves both as they were. */
  private parsed(svc: ServiceObject): ReturnType<typeof parseService> {
    const reserved = this.reservedAddresses();
    const known = this.parsedServices.get(svc);
    if (known?.reserved === reserved) return known.result;
    const result = parseService(svc, { ...this.ranges, reserved });
    this.parsedServices.set(svc, { reserved, result });
    return result;
  }

  private desiredOf(key: string) {
    const svc = this.services.get(key);
    const { model, problems } = svc ? this.parsed(svc) : { model: undefined, problems: [] };
    const slices = model ? this.slices.byIndex(SLICES_BY_SERVICE, key) : [];
    const desired = model
      ? serviceLoadBalancers(
          model,
          slices,
          this.nodes.list().map((n) => ({ node: n.metadata.name, zone: n.metadata.labels?.[ZONE_LABEL] })),
          this.ranges.serviceCIDRs,
        )
      : { rows: [], variables: new Map<string, Record<string, string>>() };
    return { svc, problems, desired };
  }

  /**
   * Adds to `txn` what brings the Service's load balancers to `rows`; returns how many of its ops are guards.
   * A retried insert whose first attempt landed unseen must not add a second row: with `fixedUuids` each new row
   * carries the UUID derived from its id, which the server refuses twice ("duplicate uuid", a hash lookup);
   * otherwise a guardAbsent on its id goes first (a `wait` that scans Load_Balancer, for servers before 2.17).
   */
  private planRows(txn: Transaction, key: string, rows: ServiceLoadBalancers["rows"], fixedUuids: boolean) {
    const { nb } = this.o;
    const { group, ipGroup } = this.groups();
    if (!(group && ipGroup) && rows.length > 0)
      throw new Error(`the load-balancer groups ${OUR_LB_GROUPS.join(", ")} are not in NB yet`);
    const before = txn.size;
    const uuids = new Map<string, string>();
    for (const d of rows) {
      // Guarded exactly where plan() inserts: no row of ours with the id (whichever Service it names).
      if (findOwned(nb.cache as never, "Load_Balancer", d.id)) continue;
      const uuid = fixedUuids ? this.chosenUuid(d.id) : undefined;
      if (uuid) uuids.set(d.id, uuid);
      else txn.guardAbsent("Load_Balancer", [["external_ids", "includes", ownedGuard(d.id)]]);
    }
    const guards = txn.size - before;
    const parent = group && { table: "Load_Balancer_Group", uuid: group._uuid, column: "load_balancer" };
    // Cluster IPs only: also in the group ZStack's switches refer to (External mode).
    const alsoParents = ipGroup && [
      { table: "Load_Balancer_Group", uuid: ipGroup._uuid, column: "load_balancer" },
    ];
    plan(
      nb.cache as never,
      nb.schema,
      txn as never,
      rows.map((d) => {
        const out: { -readonly [K in keyof DesiredRow]: DesiredRow[K] } = { ...d };
        const uuid = uuids.get(d.id);
        if (uuid !== undefined) out.uuid = uuid;
        if (parent) out.parent = parent;
        if (alsoParents && d.audience === "cluster") out.alsoParents = alsoParents;
        return out;
      }),
      {
        tables: ["Load_Balancer"],
        groups: [key],
        owns: (_id, row) => {
          const ids = row.external_ids as Readonly<Record<string, string>>;
          return ids[KIND_KEY] === "service-lb" && ids[SERVICE_KEY] === key;
        },
      },
    );
    return guards;
  }

  /**
   * At start, the load balancers of every Service that has none in NB yet, up to BULK_SERVICES Services per
   * transaction instead of one each (thousands of Services created while no controller ran). Services that need
   * chassis variables are left to their reconcile, as is every Service of a batch that fails; the reconciles
   * that follow find these rows and write nothing. Says whether every batch landed.
   */
  async bulkSync(): Promise<boolean> {
    const { nb, log } = this.o;
    const { group, ipGroup } = this.groups();
    if (!group || !ipGroup) return true;
    let landed = true;
    const fixedUuids = await nb.insertUuidSupported();
    const write = async (batch: ServiceLoadBalancers["rows"][]) => {
      const rows = batch.flat();
      const txn = nb.transaction();
      // A retried insert whose first attempt landed unseen is refused instead of adding a second row (planRows).
      const refs = rows.map((d) => {
        const uuid = fixedUuids ? this.chosenUuid(d.id) : undefined;
        if (!uuid) txn.guardAbsent("Load_Balancer", [["external_ids", "includes", ownedGuard(d.id)]]);
        return txn.insert("Load_Balancer", d.row as never, undefined, uuid ? { uuid } : {});
      });
      // One mutation of each group for the whole batch: a hundred of them cost the server more than the inserts.
      txn.mutate(
        "Load_Balancer_Group",
        [["_uuid", "==", group._uuid]] as never,
        [["load_balancer", "insert", refs]] as never,
      );
      const clusterRefs = refs.filter((_r, i) => rows[i]?.audience === "cluster");
      if (clusterRefs.length > 0)
        txn.mutate(
          "Load_Balancer_Group",
          [["_uuid", "==", ipGroup._uuid]] as never,
          [["load_balancer", "insert", clusterRefs]] as never,
        );
      try {
        await txn.commit();
      } catch (err) {
        landed = false;
        log.warn(
          { err, services: batch.length },
          "bulk write of Service load balancers failed; reconciling each",
        );
      }
    };
    const batches: ServiceLoadBalancers["rows"][][] = [[]];
    for (const key of this.services.keys()) {
      if (this.ownedLbs(key).length > 0) continue;
      const { desired } = this.desiredOf(key);
      // Every node has an entry in `variables`; only a Service that needs template values is left to its reconcile.
      const templated = [...desired.variables.values()].some((v) => Object.keys(v).length > 0);
      if (desired.rows.length === 0 || templated) continue;
      if ((batches[batches.length - 1] as unknown[]).length >= BULK_SERVICES) batches.push([]);
      const last = batches[batches.length - 1] as ServiceLoadBalancers["rows"][];
      last.push(desired.rows);
    }
    // The batches touch disjoint rows: a few in flight keep the server busy while replies travel.
    const pending = batches.filter((b) => b.length > 0);
    await Promise.all(
      Array.from({ length: BULK_IN_FLIGHT }, async () => {
        for (let b = pending.shift(); b; b = pending.shift()) await write(b);
      }),
    );
    return landed;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { nb } = this.o;
    const cache = nb.cache as never;
    const { svc, problems, desired } = this.desiredOf(key);
    const owned = this.ownedLbs(key);
    if (desired.rows.length === 0) this.lastDesired.delete(key);
    else this.lastDesired.set(key, new Map(desired.rows.map((d) => [d.id, d.row])));
    const txn = nb.transaction();
    // The server is asked (once per connection) only when a row is to be inserted.
    const present = new Set(owned.map((r) => (r.external_ids as Record<string, string>)[ID_KEY]));
    const inserts = desired.rows.some((d) => !present.has(d.id));
    const guards = this.planRows(txn, key, desired.rows, inserts && (await nb.insertUuidSupported()));
    // Two rows with one id (written twice by some earlier bug or by hand): the one plan kept stays.
    for (const d of desired.rows) {
      const kept = findOwned(cache, "Load_Balancer", d.id);
      for (const extra of findAllOwned(cache, "Load_Balancer", d.id))
        if (extra._uuid !== kept?._uuid)
          unlinkAndDelete(cache, nb.schema, txn as never, "Load_Balancer", extra._uuid);
    }
    this.planVariables(txn, owned, desired.variables);

    if (svc) {
      for (const p of problems)
        this.o.events?.warning(
          {
            apiVersion: "v1",
            kind: "Service",
            name: svc.metadata?.name ?? "",
            namespace: svc.metadata?.namespace ?? "",
            ...(svc.metadata?.uid ? { uid: svc.metadata.uid } : {}),
          },
          "ServiceNotRealized",
          `${p.field}: ${p.message}`,
        );
    }
    if (txn.size === guards) return undefined;
    const result = await txn.commit();
    // Landed by an earlier attempt whose reply was lost: look again once the cache shows it.
    if (result.alreadyApplied) return { requeueAfterMs: 100 };
    return undefined;
  }

  /**
   * Brings this Service's keys in each chassis' Chassis_Template_Var row to `desired`: keys it no longer needs
   * (those its current template load balancers refer to) go, changed values are replaced. Only our keys are
   * mutated; the rest of the map, and rows of chassis we never wrote to, are left alone.
   */
  private planVariables(
    txn: Transaction,
    owned: readonly AnyRow[],
    desired: ReadonlyMap<string, Record<string, string>>,
  ): void {
    const wanted = new Set<string>();
    for (const vars of desired.values()) for (const k of Object.keys(vars)) wanted.add(k);
    const stale = new Set<string>();
    for (const r of owned)
      for (const k of variablesOf(r.vips as Record<string, string>)) if (!wanted.has(k)) stale.add(k);
    if (wanted.size === 0 && stale.size === 0) return;
    const table = this.o.nb.cache.table("Chassis_Template_Var");
    const rows = new Map<string, AnyRow>();
    for (const r of table.values()) rows.set(r.chassis, r as unknown as AnyRow);
    for (const [chassis, row] of rows) {
      const have = row.variables as Readonly<Record<string, string>>;
      const want = desired.get(chassis) ?? {};
      const remove: Record<string, string> = {};
      const add: Record<string, string> = {};
      // A chassis that is no node any more keeps none of this Service's keys.
      const gone = desired.size > 0 && !desired.has(chassis) ? wanted : [];
      for (const k of [...stale, ...gone]) if (k in have && !(k in want)) remove[k] = have[k] as string;
      for (const [k, v] of Object.entries(want)) {
        if (have[k] === v) continue;
        if (k in have) remove[k] = have[k] as string;
        add[k] = v;
      }
      const where = [["_uuid", "==", row._uuid]] as const;
      if (Object.keys(remove).length > 0)
        txn.mutate("Chassis_Template_Var", where as never, [["variables", "delete", remove]]);
      if (Object.keys(add).length > 0)
        txn.mutate("Chassis_Template_Var", where as never, [["variables", "insert", add]]);
    }
    for (const [chassis, vars] of desired) {
      if (rows.has(chassis) || Object.keys(vars).length === 0) continue;
      // `chassis` is unique in the table: a second insert for it (a retry, another Service) is refused.
      txn.insert("Chassis_Template_Var", {
        chassis,
        variables: vars,
        external_ids: ownedIds("chassis-vars", `chassis/${chassis}`),
      } as never);
    }
  }
}
