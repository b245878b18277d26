// make bench-policy: zstack-ovnkube-controller turning NetworkPolicies into OVN port groups, ACLs and address
// sets, against the same rows written by a bare OVSDB client (the raw baseline), the time from a pod relabel
// until a probe's outcome flips against one ACL changed by hand, and a restart with nothing changed.
//   node --import tsx bench/policy.ts [--quick] [--namespaces=N] [--pods=P] [--relabels=R] [--flips=F]
//     [--no-sandbox] [--profile]
// One run prints, side by side:
//   A. N namespaces × P pods, 10 policies per namespace (a mix: deny-all, namespace/pod selectors, ipBlock with
//      except, named ports, endPort, egress): controller spawned with the policies already in the apiserver →
//      NB settled; NB rows per policy; controller peak RSS and CPU; raw: the same rows in batches on a fresh NB.
//      Then R pod relabels (in and out of one policy's selector): PATCH → NB membership, and the reconciles
//      each one costs per queue (the fan-out).
//   B. (sandbox zsbnpbench) client relabelled into / out of the allowed peer → its dials flip; raw: one ACL
//      added / removed by hand with ovn-nbctl → the same flip.
//   C. restart with every policy in place and nothing changed: NB write transactions (server side) and the time
//      until the controller has reconciled everything.

import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { SUBNET_PATH, type Subnet } from "../src/api/subnet.ts";
import { BULK_IN_FLIGHT } from "../src/controller/network-policy-reconciler.ts";
import { ApiClient } from "../src/k8s/api-client.ts";
import { KIND_KEY, OWNER_KEY } from "../src/ovn/ownership.ts";
import { podPortName } from "../src/ovn/pod-port.ts";
import { POLICY_KEY, policyGroupName } from "../src/policy/nb-names.ts";
import { NODE_FLAGS } from "../src/runtime-flags.ts";
import { tsNodeCommand } from "../src/sandbox/repo.ts";
import { writeRecords } from "../test/rig/db-log.ts";
import { type KubeApiserver, startKubeApiserver } from "../test/rig/kube-apiserver.ts";
import { freePort, type OvsdbServer, SCHEMAS, startOvsdbServer } from "../test/rig/ovsdb-server.ts";
import { type Daemon, spawnDaemon } from "../test/rig/process.ts";
import { eventually, sandboxHandle } from "../test/rig/sandbox-handle.ts";
import { percentile } from "./controller/pod-load.ts";
import {
  createPolicies,
  createWorkload,
  nsName,
  POLICIES_PER_NAMESPACE,
  podName,
  policyName,
} from "./policy/api-load.ts";
import { PolicyWatch } from "./policy/nb-watch.ts";
import { type FlipResult, probeFlip } from "./policy/probe-flip.ts";
import { type PolicyRows, type RawResult, rawPolicyBaseline } from "./policy/raw-baseline.ts";
import { churnBreakdown, type Samples, scrape } from "./services/controller-metrics.ts";

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const quick = argv.includes("--quick");
const NAMESPACES = Number(flag("namespaces") ?? (quick ? "20" : "100"));
const PODS_PER_NS = Number(flag("pods") ?? "10");
const POLICIES = NAMESPACES * POLICIES_PER_NAMESPACE;
const PODS = NAMESPACES * PODS_PER_NS;
const RELABELS = Number(flag("relabels") ?? (quick ? "10" : "40"));
const FLIPS = Number(flag("flips") ?? (quick ? "2" : "5"));
const SANDBOX = !argv.includes("--no-sandbox");
const PROFILE = argv.includes("--profile");
const PROFILE_DIR = join(tmpdir(), `zovn-bench-policy-profile-${process.pid}`);
const IN_FLIGHT = 20;
const RAW_BATCH = 100;
/** NB counts as settled once the server's write count has not moved for this long. */
const QUIET_MS = 3000;

const repo = fileURLToPath(new URL("..", import.meta.url));
const CRD = join(repo, "deploy/crds/subnet.network.zstack.io.yaml");
const CONTROLLER = join(repo, "src/cli/zstack-ovnkube-controller.ts");
const log = (line: string) => process.stderr.write(`${line}\n`);
const QUEUES = ["network-policies", "policy-peers", "policy-isolation", "pods"] as const;

function vmHwmMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** utime + stime of a process, seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Waits until the server's write count has not moved for QUIET_MS; returns it. */
async function settledWrites(nb: OvsdbServer): Promise<number> {
  let last = await writeRecords(nb, "OVN_Northbound");
  for (;;) {
    await delay(QUIET_MS);
    const now = await writeRecords(nb, "OVN_Northbound");
    if (now === last) return now;
    last = now;
  }
}

const sample = (s: Samples, name: string, queue: string, label = "queue"): number => {
  for (const [k, v] of s) if (k.startsWith(`${name}{`) && k.includes(`${label}="${queue}"`)) return v;
  return 0;
};

interface ControllerResult {
  createMs: number;
  spawnToAllMs: number;
  firstToAllMs: number;
  nbTxns: number;
  cpuS: number;
  rssMiB: number;
  rows: PolicyRows;
  counts: { policyGroups: number; policyAcls: number; namedSets: number; peerSets: number; shared: number };
  relabelMs: number[];
  relabelReconciles: Record<string, number>;
  relabelBreakdown: string[];
  restartWrites: number;
  restartReadyMs: number;
  restartSettledMs: number;
}

async function controllerRun(): Promise<ControllerResult> {
  const kube: KubeApiserver = await startKubeApiserver({
    apiserverArgs: ["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"],
  });
  const api = new ApiClient(kube.kubeConfig, { userAgent: "bench-policy" });
  const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const watch = new PolicyWatch(nb.unix);
  let ctl: Daemon | undefined;
  const metricsPort = await freePort();
  const out = join(kube.dir, "controller.out");
  const spawnController = (): Daemon => {
    const ts = tsNodeCommand(
      PROFILE ? [...NODE_FLAGS, "--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : NODE_FLAGS,
    );
    return spawnDaemon(ts.command, [...ts.args, CONTROLLER], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ZSTACK_OVN_NBDB_ADDRESS: nb.unix,
        ZSTACK_KUBECONFIG: kube.kubeconfigPath,
        ZSTACK_LEADER_ELECT: "false",
        ZSTACK_CLUSTER_CIDR: "10.244.0.0/16",
        ZSTACK_TUNNEL_TYPE: "geneve",
        ZSTACK_METRICS_PORT: String(metricsPort),
        ZSTACK_LOG_LEVEL: "warn",
        ZSTACK_LOG_FORMAT: "json",
        ZSTACK_POD_NAME: "bench-controller",
      },
      outputFile: out,
    });
  };
  const waitFor = async <T>(
    what: string,
    timeoutMs: number,
    fn: () => Promise<T | undefined>,
  ): Promise<T> => {
    const alive = ctl;
    return eventually(what, timeoutMs, async () => {
      if (alive?.hasExited())
        throw new Error(`the controller exited: ${(await readFile(out, "utf8")).slice(-2000)}`);
      return fn();
    });
  };
  const podPorts = () =>
    watch.client.cache.table("Logical_Switch_Port").find((r) => r.external_ids[KIND_KEY] === "pod-port")
      .length;
  const policyGroups = () =>
    watch.client.cache.table("Port_Group").find((r) => r.external_ids[POLICY_KEY] !== undefined).length;
  try {
    await kube.kubectl(["apply", "-f", CRD]);
    await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
    await watch.start();
    log(`-- ${NAMESPACES} namespaces × ${PODS_PER_NS} pods, the controller giving them ports`);
    ctl = spawnController();
    await waitFor("the default Subnet Ready", 120_000, async () => {
      const s = await api.request<Subnet>(`${SUBNET_PATH}/default`);
      return s.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? true : undefined;
    });
    await createWorkload(api, NAMESPACES, PODS_PER_NS, IN_FLIGHT);
    await waitFor(`${PODS} pod ports`, 600_000, async () => (podPorts() >= PODS ? true : undefined));
    await settledWrites(nb);
    await ctl.terminate(5000);
    ctl = undefined;

    log(`-- creating ${POLICIES} policies (controller not running)`);
    const c0 = performance.now();
    await createPolicies(api, NAMESPACES, IN_FLIGHT);
    const createMs = performance.now() - c0;

    if (PROFILE) log(`   CPU profile in ${PROFILE_DIR}`);
    log("-- starting the controller");
    const nbBefore = await writeRecords(nb, "OVN_Northbound");
    watch.mark();
    const t0 = performance.now();
    ctl = spawnController();
    await waitFor(`${POLICIES} policy port groups`, 900_000, async () =>
      policyGroups() >= POLICIES ? true : undefined,
    );
    const nbAfter = await settledWrites(nb);
    const tAll = watch.last ?? performance.now();
    const cpuS = cpuSeconds(ctl.pid);
    const rssMiB = vmHwmMiB(ctl.pid);
    log(
      `   NB settled ${((tAll - t0) / 1000).toFixed(1)} s after the spawn; ${nbAfter - nbBefore} writes; the last change the reader saw: ${watch.lastChange}`,
    );
    if (PROFILE)
      log(
        `   first policy row → NB settled on the profiles' clock (CLOCK_MONOTONIC µs): ${watch.firstMonoUs} ${watch.lastMonoUs} (controller pid ${ctl.pid})`,
      );

    const cache = watch.client.cache;
    const owned = <R extends { external_ids: Readonly<Record<string, string>> }>(r: R) =>
      r.external_ids[OWNER_KEY] !== undefined &&
      (r.external_ids[KIND_KEY] ?? "").startsWith("network-policy");
    const rows: PolicyRows = {
      ports: cache.table("Logical_Switch_Port").find(() => true),
      groups: cache.table("Port_Group").find(owned),
      acls: cache.table("ACL").find(owned),
      sets: cache.table("Address_Set").find(owned),
    };
    const kindCount = <R extends { external_ids: Readonly<Record<string, string>> }>(xs: R[], kind: string) =>
      xs.filter((r) => r.external_ids[KIND_KEY] === kind).length;
    const counts = {
      policyGroups: kindCount(rows.groups, "network-policy"),
      policyAcls: kindCount(rows.acls, "network-policy-acl"),
      namedSets: kindCount(rows.sets, "network-policy-named"),
      peerSets: kindCount(rows.sets, "network-policy-peer"),
      shared: kindCount(rows.groups, "network-policy-isolation"),
    };

    // Fan-out: pod p-0 of namespace i (app=a0, selected by pol-2) relabelled out of and back into pol-2.
    log(`-- ${RELABELS} pod relabels with ${POLICIES} policies in place`);
    const relabelMs: number[] = [];
    const m0 = await scrape(metricsPort);
    for (let r = 0; r < RELABELS; r++) {
      const ns = nsName(r % NAMESPACES);
      const port = cache.table("Logical_Switch_Port").lookupOne("name", podPortName(ns, podName(0)));
      if (!port) throw new Error(`no port for ${ns}/${podName(0)}`);
      const group = policyGroupName(`${ns}/${policyName(2)}`);
      const holds = () => cache.table("Port_Group").lookupOne("name", group)?.ports.includes(port._uuid);
      for (const [app, member] of [
        ["a9", false],
        ["a0", true],
      ] as const) {
        const seen = watch.when(
          `${group} ${member ? "holds" : "drops"} the pod`,
          () => holds() === member,
          120_000,
        );
        const start = performance.now();
        await api.request(`/api/v1/namespaces/${ns}/pods/${podName(0)}`, {
          method: "PATCH",
          body: { metadata: { labels: { app } } },
        });
        relabelMs.push((await seen) - start);
      }
    }
    await settledWrites(nb);
    const m1 = await scrape(metricsPort);
    relabelMs.sort((a, b) => a - b);
    const relabelReconciles = Object.fromEntries(
      QUEUES.map((q) => [
        q,
        sample(m1, "zstack_ovn_reconcile_duration_seconds_count", q, "controller") -
          sample(m0, "zstack_ovn_reconcile_duration_seconds_count", q, "controller"),
      ]),
    );
    const relabelBreakdown = ["policy-isolation", "network-policies", "policy-peers"].flatMap((q) =>
      churnBreakdown(m0, m1, q)
        .slice(0, 1)
        .map((l) => l.replace("B.   controller, during the churn:", `A.   ${q}:`)),
    );

    // C. Restart with nothing changed.
    log("-- restart with nothing changed");
    await ctl.terminate(5000);
    ctl = undefined;
    const before = await writeRecords(nb, "OVN_Northbound");
    const r0 = performance.now();
    ctl = spawnController();
    const restartReadyMs = await waitFor("the restarted controller caught up", 600_000, async () => {
      const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).then((res) => res.ok);
      if (!ready) return undefined;
      const m = await scrape(metricsPort);
      const done = sample(m, "zstack_ovn_reconcile_duration_seconds_count", "network-policies", "controller");
      const idle = QUEUES.every((q) => sample(m, "zstack_ovn_workqueue_depth", q) === 0);
      return done >= POLICIES && idle ? performance.now() - r0 : undefined;
    });
    await settledWrites(nb);
    const restartSettledMs = performance.now() - r0 - QUIET_MS;
    const restartWrites = (await writeRecords(nb, "OVN_Northbound")) - before;
    return {
      createMs,
      spawnToAllMs: tAll - t0,
      firstToAllMs: tAll - (watch.first ?? t0),
      nbTxns: nbAfter - nbBefore,
      cpuS,
      rssMiB,
      rows,
      counts,
      relabelMs,
      relabelReconciles,
      relabelBreakdown,
      restartWrites,
      restartReadyMs,
      restartSettledMs,
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
    [...xs].filter(Number.isFinite).sort((a, b) => a - b),
    0.5,
  );
const verdict = (ok: boolean) => (ok ? "MET" : "MISSED");

function report(ctl: ControllerResult, raw: RawResult, flip: FlipResult | undefined): string[] {
  const c = ctl.counts;
  const lines = [
    `== bench-policy: ${NAMESPACES} namespaces × ${PODS_PER_NS} pods, ${POLICIES} policies ==`,
    "                                              controller         raw",
    `A. policies created in the apiserver (s)     ${f1(ctl.createMs / 1000).padStart(10)}           -`,
    `A. spawn → NB settled (s)                     ${f1(ctl.spawnToAllMs / 1000).padStart(10)}           -`,
    `A. first policy row → NB settled (s)          ${f1(ctl.firstToAllMs / 1000).padStart(10)} ${f1(raw.writeMs / 1000).padStart(11)}`,
    `A. NB write transactions                      ${String(ctl.nbTxns).padStart(10)} ${String(raw.transactions).padStart(11)}`,
    `A. rows: ${ctl.rows.groups.length} Port_Group, ${ctl.rows.acls.length} ACL, ${ctl.rows.sets.length} Address_Set (the same on both sides)`,
    `A.   per policy: ${f2(c.policyGroups / POLICIES)} Port_Group, ${f2(c.policyAcls / POLICIES)} allow ACL, ${f2(c.namedSets / POLICIES)} named-port Address_Set; shared: ${c.peerSets} peer Address_Sets, ${c.shared} isolation/node Port_Groups`,
    `A. controller CPU from spawn to settled (s)   ${f1(ctl.cpuS).padStart(10)}`,
    `A. controller peak RSS, VmHWM (MiB)           ${f1(ctl.rssMiB).padStart(10)}`,
    `A. pod relabel → policy group membership in NB, p50 / p99 / max (ms): ${f0(percentile(ctl.relabelMs, 0.5))} / ${f0(percentile(ctl.relabelMs, 0.99))} / ${f0(ctl.relabelMs.at(-1) ?? Number.NaN)} over ${ctl.relabelMs.length} relabels`,
    `A.   reconciles per relabel: ${Object.entries(ctl.relabelReconciles)
      .map(([q, n]) => `${q} ${f1(n / Math.max(1, ctl.relabelMs.length))}`)
      .join(", ")}`,
    ...ctl.relabelBreakdown,
  ];
  if (flip) {
    lines.push(
      `B. relabel → dials open, median (ms)         ${f0(median(flip.openMs)).padStart(10)} ${f0(median(flip.rawOpenMs)).padStart(11)}`,
      `B. unlabel → dials refused, median (ms)      ${f0(median(flip.closeMs)).padStart(10)} ${f0(median(flip.rawCloseMs)).padStart(11)}`,
      "B.   (raw: one ACL added / removed with ovn-nbctl on a port group holding the server)",
      `B. raw': client's address added / removed in an address set an ACL refers to, medians (ms) ${f0(median(flip.rawSetOpenMs))} / ${f0(median(flip.rawSetCloseMs))}`,
      "B.   (a refused dial is reported when its 100 ms deadline passes: close figures are ±100 ms)",
      `B.   rounds that settled only after dropping cached datapath flows: ${flip.flushes}`,
      `    rounds (ms): open ${flip.openMs.map(f0).join(" ")}; close ${flip.closeMs.map(f0).join(" ")}; raw open ${flip.rawOpenMs.map(f0).join(" ")}; raw close ${flip.rawCloseMs.map(f0).join(" ")}; raw' open ${flip.rawSetOpenMs.map(f0).join(" ")}; raw' close ${flip.rawSetCloseMs.map(f0).join(" ")}`,
    );
  }
  lines.push(
    `C. restart, nothing changed: NB write transactions ${ctl.restartWrites}; spawn → all reconciled and queues empty ${f1(ctl.restartReadyMs / 1000)} s (NB quiet from ${f1(ctl.restartSettledMs / 1000)} s)`,
  );
  const a = ctl.firstToAllMs / raw.writeMs;
  lines.push(`target A <= 2x raw: ${f2(a)}x  ${verdict(a <= 2)}`);
  if (flip) {
    const open = median(flip.openMs) / median(flip.rawOpenMs);
    const close = median(flip.closeMs) / median(flip.rawCloseMs);
    const openSet = median(flip.openMs) / median(flip.rawSetOpenMs);
    const closeSet = median(flip.closeMs) / median(flip.rawSetCloseMs);
    lines.push(
      `target B <= 3x raw (medians): open ${f2(open)}x ${verdict(open <= 3)}; close ${f2(close)}x ${verdict(close <= 3)}; against raw': open ${f2(openSet)}x, close ${f2(closeSet)}x`,
    );
  }
  lines.push(`target C 0 NB writes: ${ctl.restartWrites}  ${verdict(ctl.restartWrites === 0)}`);
  lines.push(`load average (1 min) at the end: ${f1(loadavg()[0] as number)}`);
  return lines;
}

async function main(): Promise<void> {
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => process.exit(130));
  log(`bench-policy: node ${NODE_FLAGS.join(" ")}`);
  const ctl = await controllerRun();
  log(
    `-- raw baseline: the same rows from a bare client, ${RAW_BATCH} per transaction, ${BULK_IN_FLIGHT} in flight`,
  );
  const raw = await rawPolicyBaseline(ctl.rows, RAW_BATCH, BULK_IN_FLIGHT);
  // A and C now, so a failure in the sandbox part does not lose them.
  log(report(ctl, raw, undefined).join("\n"));
  let flip: FlipResult | undefined;
  if (SANDBOX) {
    const sandbox = sandboxHandle("zsbnpbench");
    log("-- probe flip in sandbox zsbnpbench");
    try {
      await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
      await sandbox.zovn(["up"]);
      flip = await probeFlip(sandbox, FLIPS, log);
    } finally {
      await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
    }
  }
  process.stdout.write(`${report(ctl, raw, flip).join("\n")}\n`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench-policy: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
