// make bench-controller: zstack-ovnkube-controller annotating unscheduled pods, against a minimal patcher
// doing the same PATCHes with no NB. Each run gets a fresh etcd + kube-apiserver (the sandbox's binaries and
// flags, with raised in-flight limits) so neither inherits the other's objects; the controller run also gets
// a fresh NB ovsdb-server. Both annotators are separate node processes with the same flags (NODE_FLAGS) and
// the same number of workers. By default each is first bundled as the product image's executable is (esbuild,
// tools/build-sea.ts: minified CommonJS, no keepNames) and run as `node FLAGS bundle.cjs`; --tsx runs the
// TypeScript sources through tsx instead, as the sandbox does.
//   node --import tsx bench/controller.ts [--quick] [--pods=N,M] [--workers=W] [--in-flight=K] [--tunnel=T]
//     [--bundle | --tsx] [--profile=DIR] [--node-flags="--flag1 --flag2"] [--keep-output=DIR]

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { SUBNET_PATH, type Subnet } from "../src/api/subnet.ts";
import { ApiClient } from "../src/k8s/api-client.ts";
import { NODE_FLAGS } from "../src/runtime-flags.ts";
import { tsNodeCommand } from "../src/sandbox/repo.ts";
import { writeRecords } from "../test/rig/db-log.ts";
import { type KubeApiserver, startKubeApiserver } from "../test/rig/kube-apiserver.ts";
import { freePort, SCHEMAS, startOvsdbServer } from "../test/rig/ovsdb-server.ts";
import { type Daemon, spawnDaemon } from "../test/rig/process.ts";
import { bundleEntry } from "../tools/build-sea.ts";
import {
  BENCH_NAMESPACE,
  type LoadResult,
  percentile,
  prepareNamespace,
  runLoad,
} from "./controller/pod-load.ts";

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const quick = argv.includes("--quick");
const SIZES = (flag("pods") ?? (quick ? "300" : "1000,5000")).split(",").map(Number);
// The controller's default (ZSTACK_WORKERS), given to both annotators explicitly.
const WORKERS = Number(flag("workers") ?? "4");
const IN_FLIGHT = Number(flag("in-flight") ?? "20");
// Under VXLAN one logical switch takes at most 2,048 ports and the controller rightly refuses pod 2,048 of the
// default subnet; Geneve lifts that limit without changing the work done per pod.
const TUNNEL = flag("tunnel") ?? "geneve";
// --profile=DIR: both annotators write V8 CPU profiles there (.cpuprofile, open in Chrome DevTools).
const PROFILE_DIR = flag("profile");
// --node-flags: V8/node flags for both annotators instead of NODE_FLAGS (to try GC settings, say).
const ANNOTATOR_FLAGS = flag("node-flags")?.split(" ").filter(Boolean) ?? NODE_FLAGS;
// --keep-output=DIR: each annotator's stdout and stderr (with --node-flags=--trace-gc, say) is copied there.
const KEEP_DIR = flag("keep-output");
// --tsx: run the annotators' TypeScript through tsx (transpiled at load, keepNames) instead of the bundles.
if (argv.includes("--tsx") && argv.includes("--bundle"))
  throw new Error("--tsx and --bundle exclude each other");
const TSX = argv.includes("--tsx");
const RSS_LIMIT_MIB = 250;
const RSS_AT = 5000;

const repo = fileURLToPath(new URL("..", import.meta.url));
const CRD = join(repo, "deploy/crds/subnet.network.zstack.io.yaml");
const CONTROLLER = join(repo, "src/cli/zstack-ovnkube-controller.ts");
const PATCHER = join(repo, "bench/controller/patcher.ts");

const log = (line: string) => process.stderr.write(`${line}\n`);

/** What each annotator runs: its TypeScript entry under tsx, or the bundle made of it for this run. */
const scripts = { controller: CONTROLLER, patcher: PATCHER };

/**
 * Bundles both annotators once, with the product build's own esbuild options (bundleEntry: the options the
 * image's executable is built with, minus the SEA blob and its code cache, which only speed up the start).
 * The image bundles src/cli/zstack-ovn.ts, which imports the named program; bundling the controller's entry
 * directly gives the same code without the other two programs. The directory goes when the bench exits.
 */
async function bundleAnnotators(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "zovn-bench-ctl-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const started = Date.now();
  scripts.controller = join(dir, "controller.cjs");
  scripts.patcher = join(dir, "patcher.cjs");
  await bundleEntry(CONTROLLER, scripts.controller, false);
  await bundleEntry(PATCHER, scripts.patcher, false);
  log(`bundled both annotators into ${dir} in ${Date.now() - started} ms`);
}

/** A node process with the annotators' flags, running a bundle or (with --tsx) TypeScript through tsx. */
function nodeProcess(script: string, env: NodeJS.ProcessEnv, outputFile: string): Daemon {
  const flags = [...ANNOTATOR_FLAGS, ...(PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [])];
  const cmd = TSX ? tsNodeCommand(flags) : { command: process.execPath, args: flags };
  return spawnDaemon(cmd.command, [...cmd.args, script], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    outputFile,
  });
}

function vmHwmMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** User + system CPU seconds a process has used so far (USER_HZ is 100 on Linux). */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds each named process spends while `fn` runs: where the machine's two cores go. */
async function cpuDuring<T>(
  procs: Record<string, number>,
  fn: () => Promise<T>,
): Promise<{ value: T; cpu: Record<string, number> }> {
  const before = Object.fromEntries(Object.entries(procs).map(([k, pid]) => [k, cpuSeconds(pid)]));
  const self = process.cpuUsage();
  const value = await fn();
  const cpu: Record<string, number> = {};
  for (const [k, pid] of Object.entries(procs)) cpu[k] = cpuSeconds(pid) - (before[k] as number);
  const used = process.cpuUsage(self);
  cpu.driver = (used.user + used.system) / 1e6;
  return { value, cpu };
}

/**
 * Requests the apiserver served during the run, by verb and resource (the driver's creates and watch included):
 * tells whether an annotator sends more than one PATCH per pod.
 */
async function apiserverRequests(kube: KubeApiserver): Promise<string> {
  const text = await kube.kubectl(["get", "--raw", "/metrics"]).catch(() => "");
  const counts = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const verb = /verb="([^"]+)"/.exec(line)?.[1] ?? "?";
    const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? "";
    if (!["pods", "subnets", "events", "leases"].includes(resource)) continue;
    const k = `${verb} ${resource}`;
    counts.set(k, (counts.get(k) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return [...counts]
    .sort()
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
}

async function keepOutput(file: string, name: string): Promise<void> {
  if (!KEEP_DIR) return;
  await mkdir(KEEP_DIR, { recursive: true });
  await copyFile(file, join(KEEP_DIR, name)).catch(() => {});
}

/** Polls fn until it returns a value; `alive` failing ends the wait at once. */
async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs: number,
  alive: () => boolean = () => true,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (!alive()) throw new Error(`the process exited while waiting for ${what}`);
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await delay(100);
  }
}

async function withApiserver<T>(fn: (kube: KubeApiserver, api: ApiClient) => Promise<T>): Promise<T> {
  const kube = await startKubeApiserver({
    // Enough in-flight requests that the apiserver's own limits do not shape either run.
    apiserverArgs: ["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"],
  });
  const api = new ApiClient(kube.kubeConfig, { userAgent: "bench-driver" });
  try {
    await prepareNamespace(api);
    return await fn(kube, api);
  } finally {
    api.close();
    await kube.stop();
  }
}

interface RunResult extends LoadResult {
  rssMiB: number;
  /** 1-minute load average at the end: other work on the machine skews the ratios. */
  load: number;
  /** CPU seconds per process during the load. */
  cpu: Record<string, number>;
  /** Requests served by the apiserver over the whole run, by verb and resource. */
  requests: string;
  nbTxns?: number;
  metrics?: string;
}

function loadTimeout(pods: number): number {
  return 120_000 + pods * 60;
}

/** Settling time after the last annotation, inside the CPU window of both runs. */
const SETTLE_MS = 3000;

/**
 * The load, then SETTLE_MS more: each annotation comes back to the controller as an update and is reconciled
 * again, and the Subnet status is refreshed; that work belongs to the create path, so the CPU (and the NB
 * transaction count) include it. The baseline gets the same window, in which it has nothing left to do.
 */
async function loadAndSettle(api: ApiClient, pods: number): Promise<LoadResult> {
  const r = await runLoad(api, { pods, inFlight: IN_FLIGHT, timeoutMs: loadTimeout(pods), progress: log });
  await delay(SETTLE_MS);
  return r;
}

async function baselineRun(pods: number): Promise<RunResult> {
  return withApiserver(async (kube, api) => {
    const out = join(kube.dir, "patcher.out");
    const patcher = nodeProcess(
      scripts.patcher,
      { BENCH_KUBECONFIG: kube.kubeconfigPath, BENCH_WORKERS: String(WORKERS) },
      out,
    );
    try {
      await until(
        "the baseline patcher's watch",
        async () => ((await readFile(out, "utf8")).includes("watching") ? true : undefined),
        30_000,
        () => !patcher.hasExited(),
      );
      const [etcd, apiserver] = kube.pids() as [number, number];
      const { value: r, cpu } = await cpuDuring(
        { annotator: patcher.pid, "kube-apiserver": apiserver, etcd },
        () => loadAndSettle(api, pods),
      );
      const rssMiB = vmHwmMiB(patcher.pid);
      if (r.annotated < pods) log((await readFile(out, "utf8")).split("\n").slice(-10).join("\n"));
      const requests = await apiserverRequests(kube);
      return { ...r, rssMiB, cpu, requests, load: loadavg()[0] as number };
    } finally {
      await patcher.terminate(3000);
      await keepOutput(out, `patcher-${pods}.out`);
    }
  });
}

async function controllerRun(pods: number): Promise<RunResult> {
  return withApiserver(async (kube, api) => {
    await kube.kubectl(["apply", "-f", CRD]);
    await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
    const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
    const out = join(kube.dir, "controller.out");
    const metricsPort = await freePort();
    const ctl = nodeProcess(
      scripts.controller,
      {
        ZSTACK_OVN_NBDB_ADDRESS: nb.unix,
        ZSTACK_KUBECONFIG: kube.kubeconfigPath,
        ZSTACK_LEADER_ELECT: "false",
        ZSTACK_WORKERS: String(WORKERS),
        ZSTACK_CLUSTER_CIDR: "10.244.0.0/16",
        ZSTACK_TUNNEL_TYPE: TUNNEL,
        ZSTACK_METRICS_PORT: String(metricsPort),
        ZSTACK_LOG_LEVEL: "warn",
        ZSTACK_LOG_FORMAT: "json",
        ZSTACK_POD_NAME: "bench-controller",
      },
      out,
    );
    try {
      await until(
        "the default Subnet Ready",
        async () => {
          const s = await api.request<Subnet>(`${SUBNET_PATH}/default`);
          return s.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")
            ? true
            : undefined;
        },
        60_000,
        () => !ctl.hasExited(),
      ).catch(async (e) => {
        throw new Error(`${(e as Error).message}\n${(await readFile(out, "utf8")).slice(-3000)}`);
      });
      await delay(1500); // the subnet's status write and the first usage refresh are not part of the pods' cost
      const before = await writeRecords(nb, "OVN_Northbound");
      const [etcd, apiserver] = kube.pids() as [number, number];
      const { value: r, cpu } = await cpuDuring(
        { annotator: ctl.pid, "kube-apiserver": apiserver, etcd, "ovsdb-server": nb.pid },
        () => loadAndSettle(api, pods),
      );
      const after = await writeRecords(nb, "OVN_Northbound");
      const compacted = /compact/i.test(await readFile(nb.logFile, "utf8").catch(() => ""));
      if (compacted)
        log("warning: the NB server compacted its file during the run; the transaction count is low");
      const rssMiB = vmHwmMiB(ctl.pid);
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
        .then((res) => res.text())
        .catch(() => "");
      if (r.annotated < pods) log((await readFile(out, "utf8")).slice(-3000));
      const requests = await apiserverRequests(kube);
      return { ...r, rssMiB, nbTxns: after - before, metrics, cpu, requests, load: loadavg()[0] as number };
    } finally {
      await ctl.terminate(5000);
      await keepOutput(out, `controller-${pods}.out`);
      await nb.stop();
    }
  });
}

/** sum/count of a histogram for the pods controller, from the Prometheus text. */
function histogramMean(
  text: string,
  name: string,
  queue: string,
): { mean: number; count: number } | undefined {
  const pick = (suffix: string) => {
    const line = text
      .split("\n")
      .find((l) => l.startsWith(`${name}_${suffix}{`) && l.includes(`="${queue}"`));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : undefined;
  };
  const sum = pick("sum");
  const count = pick("count");
  return sum !== undefined && count ? { mean: sum / count, count } : undefined;
}

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

/** The targets of issue 15 §3, each a ratio of the controller's figure to the baseline patcher's. */
const TARGETS = { throughput: 0.95, p99: 1.5, cpuPerPod: 1.3 } as const;

function report(pods: number, base: RunResult, ctl: RunResult): string[] {
  const rate = (r: RunResult) => (r.annotated / r.wallMs) * 1000;
  const createRate = (r: RunResult) => (r.pods / r.createMs) * 1000;
  const p = (r: RunResult, q: number) => percentile(r.latenciesMs, q);
  const cpuMsPerPod = (r: RunResult) => ((r.cpu.annotator ?? Number.NaN) * 1000) / r.pods;
  const verdict = (ok: boolean) => (ok ? "MET" : "MISSED");
  const all = ctl.annotated === pods && base.annotated === pods;
  const row = (label: string, b: string, c: string, ratio = "", target = "") =>
    `${label.padEnd(34)}${b.padStart(10)} ${c.padStart(12)} ${ratio.padStart(7)}  ${target}`;
  const tput = rate(ctl) / rate(base);
  const p50 = p(ctl, 0.5) / p(base, 0.5);
  const p99 = p(ctl, 0.99) / p(base, 0.99);
  const cpu = cpuMsPerPod(ctl) / cpuMsPerPod(base);
  const lines = [
    `== ${pods} unscheduled pods, ${WORKERS} workers, ${IN_FLIGHT} creates in flight, tunnel ${TUNNEL}, ${TSX ? "tsx" : "bundled"} ==`,
    row("", "baseline", "controller", "ratio", "target"),
    row("pods annotated", String(base.annotated), String(ctl.annotated)),
    row("creates answered per second", f1(createRate(base)), f1(createRate(ctl))),
    row(
      "throughput, pods annotated/s",
      f1(rate(base)),
      f1(rate(ctl)),
      `${f2(tput)}x`,
      `>= ${TARGETS.throughput}x ${verdict(tput >= TARGETS.throughput && all)}`,
    ),
    row("create -> annotation p50 (ms)", f1(p(base, 0.5)), f1(p(ctl, 0.5)), `${f2(p50)}x`),
    row(
      "create -> annotation p99 (ms)",
      f1(p(base, 0.99)),
      f1(p(ctl, 0.99)),
      `${f2(p99)}x`,
      `<= ${TARGETS.p99}x ${verdict(p99 <= TARGETS.p99 && all)}`,
    ),
    row("annotator CPU s (load + settle)", f2(base.cpu.annotator ?? 0), f2(ctl.cpu.annotator ?? 0)),
    row(
      "annotator CPU ms per pod",
      f2(cpuMsPerPod(base)),
      f2(cpuMsPerPod(ctl)),
      `${f2(cpu)}x`,
      `<= ${TARGETS.cpuPerPod}x ${verdict(cpu <= TARGETS.cpuPerPod)}`,
    ),
    row("peak RSS, VmHWM (MiB)", f1(base.rssMiB), f1(ctl.rssMiB)),
    row("NB write transactions (server)", "-", String(ctl.nbTxns)),
    row("load average (1 min, at the end)", f1(base.load), f1(ctl.load)),
  ];
  const perPod = (ctl.nbTxns ?? Number.NaN) / pods;
  if (pods >= RSS_AT) {
    const ratio = ctl.rssMiB / RSS_LIMIT_MIB;
    lines.push(
      `target RSS < ${RSS_LIMIT_MIB} MiB at ${RSS_AT} pods:   ${f1(ctl.rssMiB)} MiB = ${f2(ratio)}x of the limit  ${verdict(ratio < 1)}`,
    );
  } else {
    lines.push(
      `RSS (target applies at ${RSS_AT} pods):  ${f1(ctl.rssMiB)} MiB = ${f2(ctl.rssMiB / RSS_LIMIT_MIB)}x of ${RSS_LIMIT_MIB} MiB`,
    );
  }
  lines.push(`target <= 1 NB transaction per pod: ${f2(perPod)}  ${verdict(perPod <= 1)}`);
  const cpuLine = (r: RunResult) =>
    Object.entries(r.cpu)
      .map(([k, v]) => `${k} ${f1(v)}`)
      .join(", ");
  lines.push(`CPU s during the load, baseline:   ${cpuLine(base)}`);
  lines.push(`CPU s during the load, controller: ${cpuLine(ctl)}`);
  lines.push(`apiserver requests, baseline run:   ${base.requests}`);
  lines.push(`apiserver requests, controller run: ${ctl.requests}`);
  if (ctl.metrics) {
    // Two stages per pod: "pods" (address and port, one NB transaction) and "pod-annotations" (the PATCH).
    for (const queue of ["pods", "pod-annotations"]) {
      const rec = histogramMean(ctl.metrics, "zstack_ovn_reconcile_duration_seconds", queue);
      const wait = histogramMean(ctl.metrics, "zstack_ovn_workqueue_queue_duration_seconds", queue);
      if (rec && wait)
        lines.push(
          `controller ${queue} queue: ${rec.count} reconciles, mean ${f1(rec.mean * 1000)} ms each; ` +
            `mean wait in queue ${f1(wait.mean * 1000)} ms`,
        );
    }
    const buckets = ctl.metrics
      .split("\n")
      .filter(
        (l) =>
          l.startsWith("zstack_ovn_reconcile_duration_seconds_bucket{") && l.includes('controller="pods"'),
      )
      .map((l) => `<=${/le="([^"]+)"/.exec(l)?.[1]}s:${l.slice(l.lastIndexOf(" ") + 1)}`);
    if (buckets.length) lines.push(`pod reconcile durations (cumulative): ${buckets.join(" ")}`);
    // Over the whole life of the process (startup and the initial sync included), from prom-client's GC metric.
    const gc = ["minor", "major", "incremental", "weakcb"]
      .map((kind) => {
        const sum = ctl.metrics
          ?.split("\n")
          .find(
            (l) => l.startsWith("zstack_ovn_nodejs_gc_duration_seconds_sum{") && l.includes(`kind="${kind}"`),
          );
        return sum ? `${kind} ${f2(Number(sum.slice(sum.lastIndexOf(" ") + 1)))}` : undefined;
      })
      .filter(Boolean);
    if (gc.length) lines.push(`controller GC s since start: ${gc.join(", ")}`);
  }
  return lines;
}

async function main(): Promise<void> {
  // exit() runs the rig's exit hook, which kills the daemons and removes their temp dirs.
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => process.exit(130));
  log(
    `bench-controller: pods ${SIZES.join(", ")}; namespace ${BENCH_NAMESPACE}; node ${ANNOTATOR_FLAGS.join(" ")}; ` +
      `annotators ${TSX ? "through tsx" : "bundled as the product is"}`,
  );
  if (!TSX) await bundleAnnotators();
  const out: string[] = [];
  for (const pods of SIZES) {
    log(`-- ${pods} pods: baseline run (patcher, no NB)`);
    const base = await baselineRun(pods);
    log(`-- ${pods} pods: controller run`);
    const ctl = await controllerRun(pods);
    const lines = report(pods, base, ctl);
    log(lines.join("\n"));
    out.push(...lines, "");
  }
  process.stdout.write(`${out.join("\n")}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench-controller: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
