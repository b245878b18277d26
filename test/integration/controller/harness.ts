// A real apiserver and a real NB for controller reliability tests, the controller as a separate process (so it
// can be SIGKILLed like a crashed replica), and the consistency check that NB and pod annotations must pass.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { Subnet } from "../../../src/api/subnet.ts";
import { OvnController } from "../../../src/controller/controller.ts";
import { ApiClient, isNotFound } from "../../../src/k8s/api-client.ts";
import type { EventRecorder } from "../../../src/k8s/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { CHASSIS_GUARD_MONITOR } from "../../../src/ovn/chassis-mac-guard.ts";
import { POD_KEY, POD_UID_KEY } from "../../../src/ovn/ownership.ts";
import { POD_NETWORKS_ANNOTATION, parsePodNetworksAnnotation } from "../../../src/ovn/pod-port.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { type SbTables, sbModel } from "../../../src/ovsdb/models/sb.generated.ts";
import { NODE_FLAGS } from "../../../src/runtime-flags.ts";
import { tsNodeCommand } from "../../../src/sandbox/repo.ts";
import { type KubeApiserver, useKubeApiserver } from "../../rig/kube-apiserver.ts";
import { type OvsdbServer, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import { freePort } from "../../rig/ports.ts";
import { type Daemon, spawnDaemon } from "../../rig/process.ts";
import { teardownFor } from "../../rig/teardown.ts";

const CRD = new URL("../../../deploy/crds/subnet.network.zstack.io.yaml", import.meta.url).pathname;
const CLI = new URL("../../../src/cli/zstack-ovnkube-controller.ts", import.meta.url).pathname;

export interface Cluster {
  kube: KubeApiserver;
  srv: OvsdbServer;
  api: ApiClient;
  /** The test's own view of NB, to inspect what the controller wrote. */
  nb: OvsdbClient<NbTables>;
}

/** The apiserver with the Subnet CRD, for tests that bring their own NB (a Raft cluster, a proxy). */
export async function useApiserver(t: {
  after(fn: () => unknown): void;
}): Promise<Pick<Cluster, "kube" | "api">> {
  const kube = await useKubeApiserver(t);
  await kube.kubectl(["apply", "-f", CRD]);
  await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
  const api = new ApiClient(kube.kubeConfig);
  teardownFor(t).after(() => api.close());
  return { kube, api };
}

export async function useCluster(t: { after(fn: () => unknown): void }): Promise<Cluster> {
  const { kube, api } = await useApiserver(t);
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const nb = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  teardownFor(t).after(() => nb.close());
  await nb.connect();
  return { kube, srv, api, nb };
}

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  pollMs = 200,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(pollMs);
  }
}

/** Like until, but a failing check (an API error while objects settle) counts as "not yet". */
export function untilOk<T>(
  what: string,
  fn: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  return until(
    what,
    () =>
      Promise.resolve()
        .then(fn)
        .catch(() => undefined),
    timeoutMs,
    100,
  );
}

/** A namespace with the default ServiceAccount, which pod admission insists on (no controller-manager here). */
export async function createNamespace(api: ApiClient, ns: string): Promise<void> {
  await api.request("/api/v1/namespaces", { method: "POST", body: { metadata: { name: ns } } });
  await api.request(`/api/v1/namespaces/${ns}/serviceaccounts`, {
    method: "POST",
    body: { metadata: { name: "default" } },
  });
}

export async function createSubnet(
  api: ApiClient,
  name: string,
  spec: Record<string, unknown>,
): Promise<void> {
  await api.request("/apis/network.zstack.io/v1/subnets", {
    method: "POST",
    body: { apiVersion: "network.zstack.io/v1", kind: "Subnet", metadata: { name }, spec },
  });
}

/** A Subnet's Ready condition. */
export function readyCondition(s: Subnet | undefined) {
  return s?.status?.conditions?.find((c) => c.type === "Ready");
}

export type PodRef = readonly [namespace: string, name: string];

/** Runs fn over items with at most `limit` in flight. */
export async function eachLimited<T>(items: readonly T[], limit: number, fn: (x: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const x = items[next++] as T;
      await fn(x);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Pods that no node can take: the controller works before scheduling, and no netns is needed. */
export function createPods(api: ApiClient, pods: readonly PodRef[], concurrency = 16): Promise<void> {
  return eachLimited(pods, concurrency, async ([ns, name]) => {
    await api.request(`/api/v1/namespaces/${ns}/pods`, {
      method: "POST",
      body: {
        metadata: { name },
        spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
      },
    });
  });
}

export function deletePods(api: ApiClient, pods: readonly PodRef[], concurrency = 16): Promise<void> {
  return eachLimited(pods, concurrency, async ([ns, name]) => {
    try {
      await api.request(`/api/v1/namespaces/${ns}/pods/${name}`, {
        method: "DELETE",
        query: { gracePeriodSeconds: 0 },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  });
}

export interface PodView {
  metadata: { name: string; namespace: string; uid: string; annotations?: Record<string, string> };
}

export async function listPods(api: ApiClient): Promise<PodView[]> {
  const l = await api.request<{ items: PodView[] }>("/api/v1/pods");
  return l.items;
}

export function podAddress(p: PodView): string | undefined {
  const ann = parsePodNetworksAnnotation(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
  return ann?.ip_addresses[0]?.split("/")[0];
}

/** Waits until every pod that exists carries an address; returns the pods. */
export async function allAnnotated(api: ApiClient, expected: number, timeoutMs = 60_000) {
  return until(
    `${expected} pods annotated`,
    async () => {
      const pods = await listPods(api);
      return pods.length === expected && pods.every((p) => podAddress(p) !== undefined) ? pods : undefined;
    },
    timeoutMs,
    500,
  );
}

export interface PodPortView {
  name: string;
  pod: string;
  uid: string;
  ips: string[];
}

export async function podPorts(nb: OvsdbClient<NbTables>): Promise<PodPortView[]> {
  await nb.echo();
  return nb.cache
    .table("Logical_Switch_Port")
    .find((r) => r.external_ids["zstack.io/kind"] === "pod-port")
    .map((r) => ({
      name: r.name,
      pod: r.external_ids[POD_KEY] as string,
      uid: r.external_ids[POD_UID_KEY] as string,
      ips: r.addresses.flatMap((a) => a.split(" ").slice(1)),
    }));
}

/**
 * What must hold whenever the controller is quiet: every pod has exactly one port, of its own incarnation, whose
 * address its annotation shows; no port outlives its pod; no address is on two ports (ours or anyone's);
 * every port sits on a switch. Returns the violations, empty when consistent.
 */
export async function inconsistencies(api: ApiClient, nb: OvsdbClient<NbTables>): Promise<string[]> {
  const pods = await listPods(api);
  const ports = await podPorts(nb);
  const out: string[] = [];
  const byPod = new Map<string, PodPortView[]>();
  for (const p of ports) byPod.set(p.pod, [...(byPod.get(p.pod) ?? []), p]);
  const live = new Set<string>();
  for (const pod of pods) {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    live.add(key);
    const mine = byPod.get(key) ?? [];
    if (mine.length !== 1) {
      out.push(`${key} has ${mine.length} ports`);
      continue;
    }
    const port = mine[0] as PodPortView;
    if (port.uid !== pod.metadata.uid) out.push(`${key}: port ${port.name} is of another pod incarnation`);
    const ip = podAddress(pod);
    if (ip === undefined) out.push(`${key} has no annotation`);
    else if (!port.ips.includes(ip))
      out.push(`${key}: annotation says ${ip}, port holds ${port.ips.join(",")}`);
  }
  for (const p of ports) if (!live.has(p.pod)) out.push(`stale port ${p.name} of missing pod ${p.pod}`);
  const annotated = new Map<string, string>();
  for (const pod of pods) {
    const ip = podAddress(pod);
    if (ip === undefined) continue;
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const other = annotated.get(ip);
    if (other) out.push(`${ip} is annotated on both ${other} and ${key}`);
    else annotated.set(ip, key);
  }
  const holders = new Map<string, string>();
  const attached = new Set<string>();
  for (const ls of nb.cache.table("Logical_Switch").values())
    for (const u of ls.ports as readonly string[]) attached.add(u);
  for (const r of nb.cache.table("Logical_Switch_Port").values()) {
    if (r.external_ids["zstack.io/kind"] === "pod-port" && !attached.has(r._uuid))
      out.push(`port ${r.name} is on no switch`);
    for (const a of r.addresses) {
      for (const ip of a.split(" ").slice(1)) {
        const other = holders.get(ip);
        if (other) out.push(`${ip} is held by both ${other} and ${r.name}`);
        else holders.set(ip, r.name);
      }
    }
  }
  return out;
}

export async function assertConsistent(api: ApiClient, nb: OvsdbClient<NbTables>): Promise<void> {
  const bad = await inconsistencies(api, nb);
  assert.deepEqual(bad.slice(0, 20), [], `${bad.length} inconsistencies`);
}

export interface ControllerProcess {
  readonly daemon: Daemon;
  readonly logFile: string;
  readonly identity: string;
  /** Port of /metrics and the health endpoints. */
  readonly port: number;
  /** Sum of all samples of a metric on /metrics (0 when absent), of those whose labels include `label` if given. */
  metricSum(name: string, label?: string): Promise<number>;
  /** Log lines (JSON) parsed; lines that are not JSON are skipped. */
  logs(): Record<string, unknown>[];
  /** Resolves when the log shows msg (after `since` lines). */
  waitForLog(msg: string, timeoutMs?: number, since?: number): Promise<void>;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts zstack-ovnkube-controller as the sandbox does (node + tsx on the CLI), against this rig's apiserver and
 * NB. Stopped at the end of the test at the latest.
 */
export async function spawnController(
  t: { after(fn: () => unknown): void },
  c: Pick<Cluster, "kube"> & Partial<Pick<Cluster, "srv">>,
  opts: {
    identity: string;
    leaderElect?: boolean;
    env?: Record<string, string>;
    /** NB remotes, comma-separated; default the rig's standalone NB. */
    nbAddress?: string;
  },
): Promise<ControllerProcess> {
  const nbAddress = opts.nbAddress ?? c.srv?.unix;
  if (nbAddress === undefined) throw new Error("spawnController: no NB to connect to");
  const logFile = join(c.kube.dir, `controller-${opts.identity}-${Date.now()}.log`);
  const port = await freePort();
  const ts = tsNodeCommand(NODE_FLAGS);
  const daemon = spawnDaemon(ts.command, [...ts.args, CLI], {
    outputFile: logFile,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      ZSTACK_OVN_NBDB_ADDRESS: nbAddress,
      ZSTACK_KUBECONFIG: c.kube.kubeconfigPath,
      ZSTACK_TUNNEL_TYPE: "vxlan",
      ZSTACK_LEASE_NAMESPACE: "kube-system",
      ZSTACK_LOG_FORMAT: "json",
      ZSTACK_LOG_LEVEL: "info",
      ZSTACK_POD_NAME: opts.identity,
      ZSTACK_METRICS_PORT: String(port),
      ZSTACK_LEADER_ELECT: opts.leaderElect ? "true" : "false",
      ...opts.env,
    },
  });
  const logs = () => {
    let text = "";
    try {
      text = readFileSync(logFile, "utf8");
    } catch {
      return [];
    }
    const out: Record<string, unknown>[] = [];
    for (const line of text.split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // a line cut by SIGKILL
      }
    }
    return out;
  };
  const proc: ControllerProcess = {
    daemon,
    logFile,
    identity: opts.identity,
    port,
    metricSum: async (name, label) => {
      const text = await fetch(`http://127.0.0.1:${port}/metrics`)
        .then((r) => r.text())
        .catch((e: Error) => {
          const state = daemon.hasExited() ? "has exited" : "is running";
          throw new Error(
            `/metrics of ${opts.identity} (which ${state}): ${e.message}\n${readTail(logFile)}`,
          );
        });
      let sum = 0;
      for (const line of text.split("\n")) {
        if (!(line.startsWith(`${name}{`) || line.startsWith(`${name} `))) continue;
        if (label && !line.slice(0, line.lastIndexOf(" ")).includes(label)) continue;
        sum += Number(line.slice(line.lastIndexOf(" ") + 1));
      }
      return sum;
    },
    logs,
    waitForLog: async (msg, timeoutMs = 60_000, since = 0) => {
      await until(
        `${opts.identity} to log "${msg}"`,
        () => {
          if (daemon.hasExited())
            throw new Error(`controller ${opts.identity} exited:\n${readTail(logFile)}`);
          return logs()
            .slice(since)
            .some((l) => l.msg === msg);
        },
        timeoutMs,
      ).catch((e: Error) => {
        throw new Error(`${e.message}\n${readTail(logFile)}`);
      });
    },
    kill: async () => {
      daemon.signal("SIGKILL");
      await daemon.exited;
    },
    stop: async () => {
      await daemon.terminate(8000);
    },
  };
  teardownFor(t).after(() => daemon.terminate(3000));
  return proc;
}

function readTail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-20).join("\n");
  } catch {
    return "(no output)";
  }
}

export interface InProcessController {
  /** The controller's own NB client. */
  nb: OvsdbClient<NbTables>;
  /** Resolves once the startup sync is done (every startup key enqueued). */
  synced: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Runs OvnController in this process with its own NB client (cluster CIDR 10.244.0.0/16, VXLAN): for tests
 * that stop and start it, or read its cache, without a separate process. `nbRemote` puts something (a fault
 * proxy) between it and NB, or names another NB (ZStack's, with `external`: ovn.mode=external and Geneve).
 */
export async function startInProcess(
  c: Pick<Cluster, "api"> & Partial<Pick<Cluster, "srv">>,
  opts: { nbRemote?: string; events?: EventRecorder; external?: boolean; sbRemote?: string } = {},
): Promise<InProcessController> {
  const remotes = opts.nbRemote ?? c.srv?.unix;
  if (!remotes) throw new Error("startInProcess needs the cluster's NB server or nbRemote");
  const nb = new OvsdbClient<NbTables>({ remotes, model: nbModel });
  await nb.connect();
  // ZStack's SB (External mode): the chassis MAC guard reads its Chassis rows, as the controller's entry point does.
  const sb = opts.sbRemote
    ? new OvsdbClient<SbTables>({
        remotes: opts.sbRemote,
        model: sbModel,
        leaderOnly: false,
        monitor: CHASSIS_GUARD_MONITOR,
      })
    : undefined;
  await sb?.connect({ retry: true });
  const ctl = new OvnController({
    api: c.api,
    nb,
    clusterCIDR: "10.244.0.0/16",
    serviceCIDRs: ["10.96.0.0/16"],
    joinCIDR: "100.64.0.0/16",
    ...(opts.external ? { tunnel: "geneve", ovnMode: "external" } : { tunnel: "vxlan" }),
    ...(sb ? { sb } : {}),
    log: silentLogger,
    ...(opts.events ? { events: opts.events } : {}),
  });
  const abort = new AbortController();
  let onSynced = () => {};
  const synced = new Promise<void>((resolve) => {
    onSynced = resolve;
  });
  const running = ctl.run(abort.signal, onSynced);
  return {
    nb,
    synced,
    async stop() {
      abort.abort();
      await running;
      await nb.close();
      await sb?.close();
    },
  };
}
