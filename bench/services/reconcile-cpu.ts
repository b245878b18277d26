// The CPU of the Service reconcile of one endpoint change, without processes: the controller's
// ServiceReconciler over an NB cache holding N Services' load balancers, informers replaced by maps, and a
// commit that applies the transaction's update to the cache (as NB's update would, so the reconciler's own NB
// listener runs too). What part B of make bench-services pays per change on the reconcile side, measured alone.
//   node --import tsx bench/services/reconcile-cpu.ts [--services=2000] [--endpoints=10] [--changes=20000]
//   (run with the controller's flags, --max-semi-space-size=2, for its GC count; add --cpu-prof before --import
//   for a profile, which bench/services/profile-window.ts reads)

import { readFileSync } from "node:fs";
import { PerformanceObserver } from "node:perf_hooks";
import type { ControllerContext } from "../../src/controller/context.ts";
import type { EndpointSliceObject, ServiceObject } from "../../src/controller/informers.ts";
import { ServiceReconciler } from "../../src/controller/service-reconciler.ts";
import { serviceLoadBalancers } from "../../src/ovn/service-lb.ts";
import { CLUSTER_IP_LB_GROUP, CLUSTER_LB_GROUP } from "../../src/ovn/topology.ts";
import { type AnyRow, Cache } from "../../src/ovsdb/cache.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { encodeValue } from "../../src/ovsdb/datum.ts";
import { parseSchema } from "../../src/ovsdb/schema.ts";
import { Transaction } from "../../src/ovsdb/transaction.ts";
import { clusterRanges, parseService } from "../../src/services/service-model.ts";
import { SCHEMAS } from "../../test/rig/ovsdb-server.ts";
import { churnIp, endpointIp, SERVICE_PORT, serviceName, sliceBody, TARGET_PORT } from "./api-load.ts";

const argv = process.argv.slice(2);
const flag = (name: string, d: number) =>
  Number(argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? d);
const SERVICES = flag("services", 2000);
const ENDPOINTS = flag("endpoints", 10);
const CHANGES = flag("changes", 20_000);
const NS = "bench";
const NET = {
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/12"],
  joinCIDR: "100.64.0.0/16",
  joinGateway: "100.64.0.1",
};

const schema = parseSchema(JSON.parse(readFileSync(SCHEMAS.nb, "utf8")));
const cache = new Cache(schema);
const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;

const services = new Map<string, ServiceObject>();
const slices = new Map<string, EndpointSliceObject[]>();
const addresses: string[][] = [];
for (let s = 0; s < SERVICES; s++) {
  const name = serviceName(s);
  const n = 1 + s;
  services.set(`${NS}/${name}`, {
    metadata: { namespace: NS, name },
    spec: {
      clusterIP: `10.96.${(n >> 8) & 255}.${n & 255}`,
      ports: [{ name: "http", port: SERVICE_PORT, protocol: "TCP", targetPort: TARGET_PORT }],
    },
  } as ServiceObject);
  addresses.push(Array.from({ length: ENDPOINTS }, (_, k) => endpointIp(s, k)));
  setSlice(s);
}

function setSlice(s: number): void {
  const body = sliceBody(s, addresses[s] as string[]) as EndpointSliceObject;
  body.metadata = { ...body.metadata, namespace: NS };
  slices.set(`${NS}/${serviceName(s)}`, [body]);
}

// NB as the controller leaves it after the start: each Service's load balancer in both groups.
const ranges = clusterRanges({ ...NET, joinCIDRs: [NET.joinCIDR] });
const wire = (table: string, row: Record<string, unknown>) => {
  const t = schema.tables.get(table);
  const out: Record<string, unknown> = {};
  for (const [col, v] of Object.entries(row)) {
    const c = t?.columns.get(col);
    if (c) out[col] = encodeValue(v, c.type);
  }
  return out;
};
const lbs: Record<string, unknown> = {};
const lbUuids: string[] = [];
let s = 0;
for (const svc of services.values()) {
  const { model } = parseService(svc, ranges);
  if (!model) throw new Error("a bench Service has no model");
  for (const d of serviceLoadBalancers(
    model,
    slices.get(`${NS}/${svc.metadata?.name}`) ?? [],
    [],
    ranges.serviceCIDRs,
  ).rows) {
    const u = uuid(++s);
    lbUuids.push(u);
    lbs[u] = { new: wire("Load_Balancer", d.row) };
  }
}
const group = (i: number, name: string) => ({
  [uuid(1_000_000 + i)]: { new: wire("Load_Balancer_Group", { name, load_balancer: lbUuids }) },
});
cache.replace(
  {
    Load_Balancer: lbs,
    Load_Balancer_Group: { ...group(1, CLUSTER_LB_GROUP), ...group(2, CLUSTER_IP_LB_GROUP) },
  },
  1,
);

/** NB's side of a commit: each update op becomes the row update the server would send back. */
async function commit(txn: Transaction) {
  for (const op of txn.ops) {
    if (op.op !== "update" || op.table !== "Load_Balancer") throw new Error(`unexpected op ${op.op}`);
    const where = op.where as [string, string, [string, string]][];
    const u = where[0]?.[2][1] as string;
    const row = cache.table("Load_Balancer").get(u) as AnyRow;
    const { _uuid, ...cols } = row;
    const next = { ...wire("Load_Balancer", cols), ...(op.row as Record<string, unknown>) };
    cache.apply({ Load_Balancer: { [u]: { old: op.row, new: next } } }, 1);
  }
  return { uuids: new Map(), results: [], alreadyApplied: false };
}

const client = {
  cache,
  schema,
  transaction: () => new Transaction(schema, commit as never),
  commit,
  insertUuidSupported: async () => true,
};
// The reconcilers get the client's view for the leader's term, as in the controller (controller.ts).
const nb = OvsdbClient.prototype.fenced.call(
  client as never,
  new AbortController().signal,
) as unknown as typeof client;
const informer = <T>(get: (k: string) => T | undefined, list: () => T[]) => ({
  get,
  list,
  keys: () => services.keys(),
  byIndex: (_: string, k: string) => slices.get(k) ?? [],
  addHandlers: () => () => undefined,
});
let requeues = 0;
const ctx = {
  o: { nb, workers: 4 },
  net: NET,
  informers: {
    services: informer(
      (k) => services.get(k),
      () => [...services.values()],
    ),
    endpointSlices: informer(
      () => undefined,
      () => [...slices.values()].flat(),
    ),
    nodes: informer(
      () => undefined,
      () => [{ metadata: { name: "node-1" } }],
    ),
  },
  requeueService: () => requeues++,
} as unknown as ControllerContext;
const reconciler = new ServiceReconciler(ctx);
reconciler.watch();

// Every Service once (what a restart does: nothing to write), then the churn.
/** CPU time of this process, µs: unlike the wall clock, not lengthened by other processes on the machine. */
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
/** Minor GCs (scavenges): with the controller's young generation (runtime-flags.ts), a measure of allocation. */
let scavenges = 0;
const gcs = new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if ((e as unknown as { detail?: { kind?: number } }).detail?.kind === 1) scavenges++;
});
gcs.observe({ entryTypes: ["gc"] });
let t0 = cpu();
let writes = 0;
client.commit = (txn: Transaction) => {
  writes++;
  return commit(txn);
};
for (const key of services.keys()) await reconciler.reconcile(key);
const idleUs = (cpu() - t0) / SERVICES;
const idleWrites = writes;
t0 = cpu();
const scavenges0 = scavenges;
for (let i = 0; i < CHANGES; i++) {
  const svc = i % Math.min(SERVICES, 100);
  (addresses[svc] as string[])[Math.floor(i / 100) % ENDPOINTS] = churnIp(i % 65_536);
  setSlice(svc);
  await reconciler.reconcile(`${NS}/${serviceName(svc)}`);
}
const churnUs = (cpu() - t0) / CHANGES;
// The observer is told after the GC; let it catch up.
await new Promise((r) => setTimeout(r, 100));
gcs.disconnect();
process.stdout.write(
  `CPU per reconcile of an unchanged Service: ${idleUs.toFixed(1)} µs, ${idleWrites} writes for ${SERVICES} Services\n` +
    `CPU per endpoint change (its reconcile, its update applied to the cache): ${churnUs.toFixed(1)} µs; ` +
    `${writes - idleWrites} writes for ${CHANGES} changes, ${requeues} requeues by the NB listener; ` +
    `${(((scavenges - scavenges0) * 1000) / CHANGES).toFixed(1)} minor GCs per 1,000 changes\n`,
);
