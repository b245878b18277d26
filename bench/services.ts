// make bench-services: zstack-ovnkube-controller turning Services and EndpointSlices into OVN load balancers,
// against the same NB rows written by a bare OVSDB client (the raw baseline), and the time from scaling a
// Deployment until clients reach the new pod, against a load balancer changed by hand in the same sandbox.
//   node --import tsx bench/services.ts [--quick] [--services=N] [--endpoints=E] [--pods=P] [--changes=C]
//     [--churn-services=S] [--flips=F] [--no-sandbox] [--profile] [--node-flags="V8 flags of the controller"]
// One run prints, side by side:
//   A. N Services × E endpoints: time until NB holds them all, NB rows per Service; raw: the same rows in batches.
//   B. C endpoint changes across S Services: the slice event reaches the controller → NB reflects it, p50/p99
//      (and from a separate watcher's event, from the PUT); raw: the same single-row updates, sent → NB reflects it.
//   C. Deployment scaled → a client's new connections reach the new pod; raw: ovn-nbctl change → the same.
//   D. the controller's peak RSS holding N Services and P pods.

import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { SUBNET_PATH, type Subnet } from "../src/api/subnet.ts";
import { SERVICE_WORKERS_PER_WORKER } from "../src/controller/service-reconciler.ts";
import { ApiClient } from "../src/k8s/api-client.ts";
import { NODE_FLAGS } from "../src/runtime-flags.ts";
import { tsNodeCommand } from "../src/sandbox/repo.ts";
import { writeRecords } from "../test/rig/db-log.ts";
import { type KubeApiserver, startKubeApiserver } from "../test/rig/kube-apiserver.ts";
import { freePort, SCHEMAS, startOvsdbServer } from "../test/rig/ovsdb-server.ts";
import { type Daemon, spawnDaemon } from "../test/rig/process.ts";
import { eventually, sandboxHandle } from "../test/rig/sandbox-handle.ts";
import { BENCH_NAMESPACE, percentile, prepareNamespace, runLoad } from "./controller/pod-load.ts";
import { churnIp, createServices, endpointIp, replaceEndpoint, TARGET_PORT } from "./services/api-load.ts";
import { type Arrivals, changeId, toEpoch, tracedArrivals } from "./services/arrivals.ts";
import { startBareWatcher } from "./services/bare-watcher.ts";
import { type ClockCheck, checkClock } from "./services/clock-check.ts";
import { churnBreakdown, scrape } from "./services/controller-metrics.ts";
import { backendsOf, NbWatch } from "./services/nb-watch.ts";
import { type FlipResult, probeFlip } from "./services/probe-flip.ts";
import {
  type ChurnChange,
  type RawResult,
  rawBaseline,
  rawOnePerTransaction,
} from "./services/raw-baseline.ts";
import { SliceClock } from "./services/slice-clock.ts";

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const quick = argv.includes("--quick");
const SERVICES = Number(flag("services") ?? (quick ? "200" : "2000"));
const ENDPOINTS = Number(flag("endpoints") ?? "10");
const PODS = Number(flag("pods") ?? (quick ? "300" : "5000"));
const CHANGES = Number(flag("changes") ?? (quick ? "100" : "500"));
const CHURN_SERVICES = Math.min(SERVICES, Number(flag("churn-services") ?? (quick ? "50" : "100")));
const FLIPS = Number(flag("flips") ?? (quick ? "2" : "5"));
const SANDBOX = !argv.includes("--no-sandbox");
/** --profile: the controller writes a V8 CPU profile (.cpuprofile) into PROFILE_DIR when it stops. */
const PROFILE = argv.includes("--profile");
/** --node-flags="...": the controller's V8 flags instead of NODE_FLAGS (e.g. another young-generation size). */
const CONTROLLER_FLAGS: readonly string[] = flag("node-flags")?.split(" ").filter(Boolean) ?? NODE_FLAGS;
const PROFILE_DIR = join(tmpdir(), `zovn-bench-services-profile-${process.pid}`);
const IN_FLIGHT = 20;
const CHURN_IN_FLIGHT = 10;
/** The controller's Service workers: its controller.workers default, times SERVICE_WORKERS_PER_WORKER. */
const SERVICE_WORKERS = 4 * SERVICE_WORKERS_PER_WORKER;
const RAW_BATCH = 100;
const RSS_LIMIT_MIB = 300;
const LOAD_AT_START = loadavg()[0] as number;

const repo = fileURLToPath(new URL("..", import.meta.url));
const CRD = join(repo, "deploy/crds/subnet.network.zstack.io.yaml");
const CONTROLLER = join(repo, "src/cli/zstack-ovnkube-controller.ts");
const log = (line: string) => process.stderr.write(`${line}\n`);

/**
 * CPU the process has used, ms: its main thread (the event loop every change waits on; /proc schedstat, ns) and
 * all its threads (GC helpers included; /proc stat, clock ticks of 10 ms). Unlike a CPU profile's samples,
 * which also count the time the thread was runnable but preempted by another process, this is time on a CPU.
 */
function cpuMs(pid: number): { main: number; waited: number; all: number } {
  // schedstat: ns on a CPU, ns runnable but waiting for one, timeslices.
  const sched = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ");
  const main = Number(sched[0]) / 1e6;
  const waited = Number(sched[1]) / 1e6;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
  const all = (Number(fields[11]) + Number(fields[12])) * 10;
  return { main, waited, all };
}

function vmHwmMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

interface ControllerResult {
  createMs: number;
  /** Controller spawned → NB holds every Service with all its endpoints. */
  spawnToAllMs: number;
  /** First Load_Balancer row seen → every Service complete. */
  firstToAllMs: number;
  lbRows: number;
  groups: number;
  nbTxns: number;
  /**
   * Each change: the slice event carrying it reaches the controller's informer (its watch trace) → the NB reader
   * sees it. The clock of target B.
   */
  arrivalMs: number[];
  /** Changes the controller's trace has no arrival for (its informer relisted instead): left out above. */
  arrivalMissing: number;
  /** The same changes: PUT sent → the event reaches the controller. */
  putToArrivalMs: number[];
  /** The same changes: the controller's arrival minus the bench's independent watcher's event time. */
  arrivalSkewMs: number[];
  /** Each change: an independent watcher sees the slice event carrying it → the NB reader sees it. */
  churnMs: number[];
  /** The same changes from the PUT sent (the old clock): PUT sent → NB reader sees it. */
  fromPutMs: number[];
  /** The same changes: PUT sent → apiserver answered (the part no controller can beat). */
  putMs: number[];
  /** The same changes: PUT sent → the independent watcher sees the event (the apiserver's commit and watch). */
  putToEventMs: number[];
  /** A second independent watcher's time for the same events minus the first's: the skew between two watchers. */
  watcherSkewMs: number[];
  /** The same number of changes with a bare watcher (no controller) writing NB, on the three clocks. */
  bareArrivalMs: number[];
  bareChurnMs: number[];
  bareFromPutMs: number[];
  /** The bench process's own event-loop delay during the churn: its timestamps are that late at worst. */
  benchLag: string;
  bareBenchLag: string;
  /** The controller's own metrics over the churn (controller-metrics.ts). */
  churnBreakdown: string[];
  podsAnnotated: number;
  rssMiB: number;
  rows: Awaited<ReturnType<NbWatch["rows"]>>;
  changes: ChurnChange[];
}

/** One change of part B, each time in ms on the epoch clock of services/arrivals.ts. */
interface ChurnSample {
  /** changeId(slice key, resourceVersion). */
  id: string;
  put: number;
  answered: number;
  /** The bench's independent watcher, and a second one, see the slice event. */
  event: number;
  twin: number;
  /** The NB reader sees the new backend. */
  nb: number;
}

const ascending = (xs: number[]) => xs.sort((a, b) => a - b);

/** p50 / p99 / max of an event-loop delay histogram, ms. */
function loopDelay(h: ReturnType<typeof monitorEventLoopDelay>): string {
  const ms = (ns: number) => (ns / 1e6).toFixed(1);
  return `${ms(h.percentile(50))} / ${ms(h.percentile(99))} / ${ms(h.max)} ms`;
}

/** Part B's distributions (ascending) from the samples and the writer's arrival times. */
function churnFigures(samples: readonly ChurnSample[], arrivals: Arrivals) {
  const arrival = (x: ChurnSample) => arrivals.get(x.id) ?? Number.NaN;
  const all = (f: (x: ChurnSample) => number) => ascending(samples.map(f).filter(Number.isFinite));
  const missing = samples.filter((x) => !arrivals.has(x.id)).length;
  if (missing > 0) log(`   ${missing} of ${samples.length} changes have no arrival time at the writer`);
  return {
    missing,
    arrivalMs: all((x) => x.nb - arrival(x)),
    putToArrivalMs: all((x) => arrival(x) - x.put),
    arrivalSkewMs: all((x) => arrival(x) - x.event),
    churnMs: all((x) => x.nb - x.event),
    fromPutMs: all((x) => x.nb - x.put),
    putMs: all((x) => x.answered - x.put),
    putToEventMs: all((x) => x.event - x.put),
    watcherSkewMs: all((x) => x.twin - x.event),
  };
}

async function controllerRun(): Promise<ControllerResult> {
  const kube: KubeApiserver = await startKubeApiserver({
    apiserverArgs: ["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"],
  });
  const api = new ApiClient(kube.kubeConfig, { userAgent: "bench-services" });
  const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const watch = new NbWatch(nb.unix);
  let ctl: Daemon | undefined;
  try {
    await prepareNamespace(api);
    await kube.kubectl(["apply", "-f", CRD]);
    await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
    log(`-- creating ${SERVICES} Services with ${ENDPOINTS} endpoints each (controller not running yet)`);
    const c0 = performance.now();
    const slices = await createServices(api, SERVICES, ENDPOINTS, IN_FLIGHT);
    const createMs = performance.now() - c0;
    await watch.start();
    let firstLb: number | undefined;
    watch.client.cache.subscribe("Load_Balancer", () => {
      firstLb ??= performance.now();
    });
    const complete = () =>
      watch.rows().filter((r) => backendsOf(r).length === ENDPOINTS).length >= SERVICES ? true : undefined;
    const out = join(kube.dir, "controller.out");
    const traceFile = join(kube.dir, "watch-trace.jsonl");
    const metricsPort = await freePort();
    const ts = tsNodeCommand(
      PROFILE ? [...CONTROLLER_FLAGS, "--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : CONTROLLER_FLAGS,
    );
    if (PROFILE) log(`   CPU profile in ${PROFILE_DIR}`);
    const nbBefore = await writeRecords(nb, "OVN_Northbound");
    log("-- starting the controller");
    const t0 = performance.now();
    ctl = spawnDaemon(ts.command, [...ts.args, CONTROLLER], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ZSTACK_OVN_NBDB_ADDRESS: nb.unix,
        ZSTACK_KUBECONFIG: kube.kubeconfigPath,
        ZSTACK_LEADER_ELECT: "false",
        ZSTACK_CLUSTER_CIDR: "10.244.0.0/16",
        // Geneve: under VXLAN one switch takes at most 2,048 ports, fewer than the pods of part D.
        ZSTACK_TUNNEL_TYPE: "geneve",
        ZSTACK_METRICS_PORT: String(metricsPort),
        ZSTACK_LOG_LEVEL: "warn",
        ZSTACK_LOG_FORMAT: "json",
        ZSTACK_POD_NAME: "bench-controller",
        ZSTACK_WATCH_TRACE_FILE: traceFile,
      },
      outputFile: out,
    });
    const alive = ctl;
    const tAll = await eventually("NB holds every Service", 600_000, async () => {
      if (alive.hasExited())
        throw new Error(`the controller exited: ${(await readFile(out, "utf8")).slice(-2000)}`);
      return complete() ? performance.now() : undefined;
    }).catch(async (e) => {
      const have = watch.rows().filter((r) => backendsOf(r).length === ENDPOINTS).length;
      throw new Error(`${(e as Error).message}; ${have}/${SERVICES} complete`);
    });
    const nbTxns = (await writeRecords(nb, "OVN_Northbound")) - nbBefore;
    // The bench's Services only (the rig's `kubernetes` Service has a load balancer too).
    const rows = watch
      .rows()
      .filter((r) => r.external_ids["zstack.io/id"]?.startsWith(`${BENCH_NAMESPACE}/`));
    const groups = watch.client.cache.table("Load_Balancer_Group").find(() => true).length;
    log(
      `   NB complete ${((tAll - t0) / 1000).toFixed(1)} s after the spawn; ${rows.length} Load_Balancer rows`,
    );
    await eventually("the default Subnet Ready", 60_000, async () => {
      const s = await api.request<Subnet>(`${SUBNET_PATH}/default`);
      return s.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? true : undefined;
    });

    // B. Endpoint churn: change i replaces endpoint k of service s; one worker per group of services, so no two
    // changes of one slice are in flight together.
    log(`-- ${CHANGES} endpoint changes across ${CHURN_SERVICES} Services, ${CHURN_IN_FLIGHT} in flight`);
    const changes: ChurnChange[] = [];
    const current = Array.from({ length: CHURN_SERVICES }, (_, s) =>
      Array.from({ length: ENDPOINTS }, (_, k) => endpointIp(s, k)),
    );
    // Each churned Service's row, found by its last endpoint (never churned), once, not during the churn.
    const rowByBackend = new Map<string, number>();
    rows.forEach((r, i) => {
      for (const b of backendsOf(r)) rowByBackend.set(b, i);
    });
    const rowOf = (s: number) => rowByBackend.get(`${endpointIp(s, ENDPOINTS - 1)}:${TARGET_PORT}`) ?? -1;
    /**
     * Changes offset..offset+CHANGES-1; the first pass also records them for the raw baseline. Each sample is
     * on the epoch clock of arrivals.ts, so that it joins the writer's arrival times.
     */
    const churn = async (offset: number) => {
      const samples: ChurnSample[] = [];
      const byWorker = new Map<number, number[]>();
      for (let i = offset; i < offset + CHANGES; i++) {
        const w = (i % CHURN_SERVICES) % CHURN_IN_FLIGHT;
        byWorker.set(w, [...(byWorker.get(w) ?? []), i]);
      }
      const clock = new SliceClock(kube.kubeConfig);
      const twin = new SliceClock(kube.kubeConfig);
      await clock.start();
      await twin.start();
      const lag = monitorEventLoopDelay({ resolution: 1 });
      lag.enable();
      try {
        await Promise.all(
          [...byWorker.values()].map(async (list) => {
            for (const i of list) {
              const s = i % CHURN_SERVICES;
              const k = Math.floor(i / CHURN_SERVICES) % ENDPOINTS;
              const eps = current[s] as string[];
              const from = eps[k] as string;
              const to = churnIp(i);
              eps[k] = to;
              if (offset === 0)
                changes.push({ row: rowOf(s), from: `${from}:${TARGET_PORT}`, to: `${to}:${TARGET_PORT}` });
              const seen = watch.whenBackend(`${to}:${TARGET_PORT}`, 60_000);
              const event = clock.when(to);
              const twinEvent = twin.when(to);
              const put = performance.now();
              const { key, resourceVersion } = await replaceEndpoint(api, slices, s, k, to);
              const answered = performance.now();
              samples.push({
                id: changeId(key, resourceVersion),
                put: toEpoch(put),
                answered: toEpoch(answered),
                nb: toEpoch(await seen),
                event: toEpoch(await event),
                twin: toEpoch(await twinEvent),
              });
            }
          }),
        );
      } finally {
        lag.disable();
        await clock.close();
        await twin.close();
      }
      return { samples, benchLag: loopDelay(lag) };
    };
    const m0 = await scrape(metricsPort);
    const cpu0 = cpuMs(ctl.pid);
    // The churn window on the monotonic clock V8's CPU profile uses (µs), for bench/services/profile-window.ts.
    const w0 = process.hrtime.bigint() / 1000n;
    const { samples: ctlSamples, benchLag } = await churn(0);
    if (PROFILE)
      log(
        `   churn window (monotonic µs): --from=${w0} --to=${process.hrtime.bigint() / 1000n} (node --import tsx bench/services/profile-window.ts ${PROFILE_DIR}/*.cpuprofile --from=... --to=... --changes=${CHANGES})`,
      );
    const cpu1 = cpuMs(ctl.pid);
    const breakdown = churnBreakdown(m0, await scrape(metricsPort), "services");
    breakdown.push(
      `B.   controller CPU during the churn: main thread ${f0(cpu1.main - cpu0.main)} ms = ${f2((cpu1.main - cpu0.main) / CHANGES)} ms per change; all threads ${f0(cpu1.all - cpu0.all)} ms = ${f2((cpu1.all - cpu0.all) / CHANGES)} ms per change; the main thread waited ${f0(cpu1.waited - cpu0.waited)} ms for a CPU`,
    );
    const ctlArrivals = await tracedArrivals(
      traceFile,
      ctlSamples.map((x) => x.id),
    );

    // D. Pods on top, then the controller's peak RSS.
    log(`-- ${PODS} pods`);
    const load = await runLoad(api, {
      pods: PODS,
      inFlight: IN_FLIGHT,
      timeoutMs: 120_000 + PODS * 60,
      progress: log,
    });
    const rssMiB = vmHwmMiB(ctl.pid);

    // B again with the controller stopped and a bare watcher writing NB instead (bench/services/bare-watcher.ts).
    await ctl.terminate(5000);
    ctl = undefined;
    log(`-- the same ${CHANGES} changes, applied by a bare watcher`);
    const bareArrivals: Arrivals = new Map();
    const stopBare = await startBareWatcher(api, nb.unix, bareArrivals);
    const { samples: bareSamples, benchLag: bareBenchLag } = await churn(CHANGES).finally(stopBare);
    const ctlB = churnFigures(ctlSamples, ctlArrivals);
    const bareB = churnFigures(bareSamples, bareArrivals);
    return {
      benchLag,
      bareBenchLag,
      arrivalMissing: ctlB.missing,
      arrivalMs: ctlB.arrivalMs,
      putToArrivalMs: ctlB.putToArrivalMs,
      arrivalSkewMs: ctlB.arrivalSkewMs,
      bareArrivalMs: bareB.arrivalMs,
      bareChurnMs: bareB.churnMs,
      bareFromPutMs: bareB.fromPutMs,
      fromPutMs: ctlB.fromPutMs,
      putToEventMs: ctlB.putToEventMs,
      watcherSkewMs: ctlB.watcherSkewMs,
      churnBreakdown: breakdown,
      createMs,
      spawnToAllMs: tAll - t0,
      firstToAllMs: tAll - (firstLb ?? t0),
      lbRows: rows.length,
      groups,
      nbTxns,
      churnMs: ctlB.churnMs,
      putMs: ctlB.putMs,
      podsAnnotated: load.annotated,
      rssMiB,
      rows,
      changes,
    };
  } finally {
    await ctl?.terminate(5000);
    await watch.close();
    await nb.stop();
    api.close();
    await kube.stop();
  }
}

const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "-");
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "-");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "-");
const median = (xs: readonly number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const verdict = (ok: boolean) => (ok ? "MET" : "MISSED");

function report(
  ctl: ControllerResult,
  raw: RawResult,
  rawSingles: number,
  flip: FlipResult | undefined,
  clock: ClockCheck,
): string[] {
  const lines = [
    `== bench-services: ${SERVICES} Services × ${ENDPOINTS} endpoints, ${CHANGES} changes over ${CHURN_SERVICES} Services, ${PODS} pods ==`,
    "                                              controller         raw",
    `A. Services created in the apiserver (s)     ${f1(ctl.createMs / 1000).padStart(10)}           -`,
    `A. spawn → NB holds all (s)                   ${f1(ctl.spawnToAllMs / 1000).padStart(10)}           -`,
    `A. first LB row → NB holds all (s)            ${f1(ctl.firstToAllMs / 1000).padStart(10)} ${f1(raw.writeMs / 1000).padStart(11)}`,
    `A.   raw, one transaction per row, ${SERVICE_WORKERS} writers (s)          ${f1(rawSingles / 1000).padStart(11)}`,
    `A. Load_Balancer rows per Service             ${f2(ctl.lbRows / SERVICES).padStart(10)} ${f2(ctl.lbRows / SERVICES).padStart(11)}`,
    `A. Load_Balancer_Group rows                   ${String(ctl.groups).padStart(10)} ${"1".padStart(11)}`,
    `A. NB write transactions                      ${String(ctl.nbTxns).padStart(10)} ${String(raw.transactions).padStart(11)}`,
    `B. change reaches the writer → NB p50 (ms)    ${f1(percentile(ctl.arrivalMs, 0.5)).padStart(10)} ${f1(percentile(raw.churnMs, 0.5)).padStart(11)}`,
    `B. change reaches the writer → NB p99 (ms)    ${f1(percentile(ctl.arrivalMs, 0.99)).padStart(10)} ${f1(percentile(raw.churnMs, 0.99)).padStart(11)}`,
    `B.   (controller: its informer receives the slice event → NB reader sees it, ${CHANGES - ctl.arrivalMissing} of ${CHANGES} changes traced; raw: single-row vips update sent → NB reader sees it)`,
    `B.   a separate watcher of the bench sees the event → NB p50 / p99 (ms) ${f1(percentile(ctl.churnMs, 0.5))} / ${f1(percentile(ctl.churnMs, 0.99))}`,
    `B.   old clock, PUT sent → NB p50 / p99 (ms) ${f1(percentile(ctl.fromPutMs, 0.5)).padStart(7)} / ${f1(percentile(ctl.fromPutMs, 0.99))}`,
    `B.   PUT → apiserver answered p50 / p99 (ms) ${f1(percentile(ctl.putMs, 0.5)).padStart(7)} / ${f1(percentile(ctl.putMs, 0.99))}`,
    `B.   PUT → watcher sees the event p50 / p99 (ms) ${f1(percentile(ctl.putToEventMs, 0.5))} / ${f1(percentile(ctl.putToEventMs, 0.99))}`,
    `B.   PUT → the event reaches the controller p50 / p99 (ms) ${f1(percentile(ctl.putToArrivalMs, 0.5))} / ${f1(percentile(ctl.putToArrivalMs, 0.99))}`,
    `B.   the controller's arrival time minus the bench watcher's: p1 / p50 / p99 (ms) ${f1(percentile(ctl.arrivalSkewMs, 0.01))} / ${f1(percentile(ctl.arrivalSkewMs, 0.5))} / ${f1(percentile(ctl.arrivalSkewMs, 0.99))}`,
    `B.   a second independent watcher, its event time minus the first's: p1 / p50 / p99 (ms) ${f1(percentile(ctl.watcherSkewMs, 0.01))} / ${f1(percentile(ctl.watcherSkewMs, 0.5))} / ${f1(percentile(ctl.watcherSkewMs, 0.99))}`,
    ...ctl.churnBreakdown,
    `B.   the bench's own event-loop delay p50 / p99 / max: controller churn ${ctl.benchLag}; bare watcher churn ${ctl.bareBenchLag}; raw churn ${raw.benchLag}`,
    `B.   bare watcher instead of the controller, p50 / p99 (ms): its own arrival → NB ${f1(percentile(ctl.bareArrivalMs, 0.5))} / ${f1(percentile(ctl.bareArrivalMs, 0.99))}; the bench watcher's event → NB ${f1(percentile(ctl.bareChurnMs, 0.5))} / ${f1(percentile(ctl.bareChurnMs, 0.99))}; PUT → NB ${f1(percentile(ctl.bareFromPutMs, 0.5))} / ${f1(percentile(ctl.bareFromPutMs, 0.99))}`,
  ];
  if (flip) {
    lines.push(
      `C. scale → new pod answers, median (ms)      ${f0(median(flip.scaleToFlipMs)).padStart(10)}           -`,
      `C. endpoint ready / LB change → answers (ms) ${f0(median(flip.readyToFlipMs)).padStart(10)} ${f0(median(flip.rawToFlipMs)).padStart(11)}`,
      `   rounds (ms): scale→flip ${flip.scaleToFlipMs.map(f0).join(" ")}; ready→flip ${flip.readyToFlipMs.map(f0).join(" ")}; raw ${flip.rawToFlipMs.map(f0).join(" ")}`,
    );
  }
  lines.push(
    `D. controller peak RSS, ${SERVICES} Services + ${ctl.podsAnnotated}/${PODS} pods (MiB) ${f1(ctl.rssMiB)}`,
  );
  const a = ctl.firstToAllMs / raw.writeMs;
  const b = percentile(ctl.arrivalMs, 0.99) / percentile(raw.churnMs, 0.99);
  const bBare = percentile(ctl.arrivalMs, 0.99) / percentile(ctl.bareArrivalMs, 0.99);
  const bWatcher = percentile(ctl.churnMs, 0.99) / percentile(raw.churnMs, 0.99);
  lines.push(
    `target A <= 2x raw: ${f2(a)}x  ${verdict(a <= 2)}  (against one transaction per row: ${f2(ctl.firstToAllMs / rawSingles)}x)`,
  );
  const bPut = percentile(ctl.fromPutMs, 0.99) / percentile(raw.churnMs, 0.99);
  lines.push(
    `target B p99 <= 2x raw (clock from the change reaching the writer): ${f2(b)}x  ${verdict(b <= 2)}  (against the bare watcher on its own arrival: ${f2(bBare)}x; from a separate watcher's event: ${f2(bWatcher)}x; from the PUT: ${f2(bPut)}x)`,
  );
  if (flip) {
    const c = median(flip.readyToFlipMs) / median(flip.rawToFlipMs);
    lines.push(`target C <= 3x raw (endpoint ready → answers, medians): ${f2(c)}x  ${verdict(c <= 3)}`);
  }
  lines.push(
    `target D RSS < ${RSS_LIMIT_MIB} MiB: ${f1(ctl.rssMiB)} MiB  ${verdict(ctl.rssMiB < RSS_LIMIT_MIB)}`,
  );
  lines.push(
    `B. clock check: another Node.js process's epoch clock minus the bench's ${clock.offsetMs.toFixed(3)} ms, ± ${clock.boundMs.toFixed(3)} ms`,
  );
  lines.push(`load average (1 min) at the start / end: ${f1(LOAD_AT_START)} / ${f1(loadavg()[0] as number)}`);
  return lines;
}

async function main(): Promise<void> {
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => process.exit(130));
  log(`bench-services: controller node ${CONTROLLER_FLAGS.join(" ")}`);
  const ctl = await controllerRun();
  log("-- raw baseline: the same rows and updates from a bare client");
  const raw = await rawBaseline(ctl.rows, ctl.changes, { batch: RAW_BATCH, inFlight: CHURN_IN_FLIGHT });
  // The controller runs as many Service workers as its controller.workers (default 4, not set here); the same
  // number of writers, one row per transaction.
  const rawSingles = await rawOnePerTransaction(ctl.rows, SERVICE_WORKERS);
  let flip: FlipResult | undefined;
  if (SANDBOX) {
    const sandbox = sandboxHandle("zsbbench");
    log("-- probe flip in sandbox zsbbench");
    try {
      await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
      await sandbox.zovn(["up"]);
      flip = await probeFlip(sandbox, FLIPS, log);
    } finally {
      await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
    }
  }
  const lines = report(ctl, raw, rawSingles, flip, await checkClock());
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench-services: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
