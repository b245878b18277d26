// The node simulator: stands in for the kubelet and the container runtime on one sandbox node. It registers
// the Node, keeps its Lease and Ready condition fresh, and runs each pod bound to the node: a netns through
// the CNI (cni-driver), lightweight processes for the containers, and the pod's status through the status
// subresource, so the real EndpointSlice controller sees real pod IPs and readiness.

import { createHash, randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync, watch } from "node:fs";
import { arch, cpus, release, totalmem } from "node:os";
import {
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  VersionApi,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { EventRecorder } from "./event-recorder.ts";
import { microTime, type NodeFacts, nodeLabels, nodeStatusPatch } from "./node-status.ts";
import { containerProcess } from "./pod-command.ts";
import { type ContainerRecord, PodRuntime, type SandboxRecord } from "./pod-sandbox.ts";
import { apiTime, type ContainerView, type PodView, podStatusPatch } from "./pod-status.ts";

export interface KubeletSimConfig {
  nodeName: string;
  nodeIp: string;
  kubeconfig: string;
  cniDriver: string;
  podserver: string;
  recordsDir: string;
  podLogsDir: string;
  cniConfDir: string;
}

const LEASE_NAMESPACE = "kube-node-lease";
const LEASE_SECONDS = 40;
const LEASE_RENEW_MS = 10_000;
const NODE_STATUS_MS = 20_000;
const RESYNC_MS = 2_000;
const SANDBOX_RETRY_MIN_MS = 1_000;
const SANDBOX_RETRY_MAX_MS = 10_000;
const CRASH_BACKOFF_MIN_MS = 1_000;
const CRASH_BACKOFF_MAX_MS = 30_000;

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

function statusCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" ? code : undefined;
}

function podKey(pod: V1Pod): string {
  return `${pod.metadata?.namespace}/${pod.metadata?.name}`;
}

interface Retry {
  at: number;
  delayMs: number;
  error: string;
}

interface CrashBackoff {
  at: number;
  delayMs: number;
}

function osImage(): string {
  try {
    const m = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readFileSync("/etc/os-release", "utf8"));
    return m?.[1] ?? "Linux";
  } catch {
    return "Linux";
  }
}

export class NodeSimulator {
  private readonly kc = new KubeConfig();
  private readonly core: CoreV1Api;
  private readonly coord: CoordinationV1Api;
  private readonly runtime: PodRuntime;
  private readonly pods = new Map<string, V1Pod>();
  private readonly records = new Map<string, SandboxRecord>();
  private readonly syncing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly sandboxRetry = new Map<string, Retry>();
  private readonly crashBackoff = new Map<string, CrashBackoff>();
  /** Restart counts carried over when a pod gets a new sandbox. */
  private readonly carriedRestarts = new Map<string, Record<string, number>>();
  private readonly startTimes = new Map<string, string>();
  private readonly lastPatch = new Map<string, string>();
  private readonly events: EventRecorder;
  private facts?: NodeFacts;

  constructor(
    private readonly cfg: KubeletSimConfig,
    private readonly log: Logger,
  ) {
    this.kc.loadFromFile(cfg.kubeconfig);
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.coord = this.kc.makeApiClient(CoordinationV1Api);
    this.events = new EventRecorder(this.core, cfg.nodeName, log);
    this.runtime = new PodRuntime({
      nodeIp: cfg.nodeIp,
      cniDriver: cfg.cniDriver,
      recordsDir: cfg.recordsDir,
      podLogsDir: cfg.podLogsDir,
    });
  }

  async start(): Promise<void> {
    this.facts = await this.retrying("read the server version", () => this.gatherFacts());
    await this.retrying("register the node", () => this.register());
    this.log.info({ node: this.cfg.nodeName }, "node registered");
    await this.retrying("create the node lease", () => this.renewLease());
    setInterval(
      () => this.renewLease().catch((err) => this.log.warn({ err }, "lease renewal failed")),
      LEASE_RENEW_MS,
    );
    setInterval(
      () => this.reportNodeStatus().catch((err) => this.log.warn({ err }, "node status failed")),
      NODE_STATUS_MS,
    );

    for (const rec of this.runtime.loadRecords()) this.records.set(rec.uid, rec);
    await this.startPodInformer();
    setInterval(() => this.resyncAll(), RESYNC_MS);
    this.watchCniConfig();
  }

  private async retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (let delay = 200; ; delay = Math.min(delay * 2, 1000)) {
      try {
        return await fn();
      } catch (err) {
        this.log.info({ err: (err as Error).message }, `cannot ${what} yet; retrying`);
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  private async gatherFacts(): Promise<NodeFacts> {
    const version = await this.kc.makeApiClient(VersionApi).getCode();
    let machine = "";
    try {
      machine = readFileSync("/etc/machine-id", "utf8").trim();
    } catch {
      machine = randomBytes(16).toString("hex");
    }
    return {
      name: this.cfg.nodeName,
      ip: this.cfg.nodeIp,
      kubeletVersion: version.gitVersion,
      bootId: randomUUID(),
      machineId: createHash("sha256").update(`${machine}/${this.cfg.nodeName}`).digest("hex").slice(0, 32),
      kernelVersion: release(),
      osImage: osImage(),
      architecture: arch() === "x64" ? "amd64" : arch(),
      cpus: cpus().length,
      memoryKi: Math.floor(totalmem() / 1024),
      readySince: new Date(),
    };
  }

  private async register(): Promise<void> {
    const facts = this.facts as NodeFacts;
    try {
      await this.core.createNode({ body: { metadata: { name: facts.name, labels: nodeLabels(facts) } } });
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
    await this.reportNodeStatus();
  }

  private async reportNodeStatus(): Promise<void> {
    const body = nodeStatusPatch(this.facts as NodeFacts, new Date());
    try {
      await this.core.patchNodeStatus({ name: this.cfg.nodeName, body }, mergePatch);
    } catch (err) {
      // Someone deleted the Node object: register again, as a kubelet does.
      if (statusCode(err) === 404) await this.register();
      else throw err;
    }
  }

  private async renewLease(): Promise<void> {
    const name = this.cfg.nodeName;
    const body = {
      spec: { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime: microTime(new Date()) },
    };
    try {
      await this.coord.patchNamespacedLease({ name, namespace: LEASE_NAMESPACE, body }, mergePatch);
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
      const node = await this.core.readNode({ name });
      // renewTime is left to the patch: the client's Date encoding has three fraction digits, MicroTime needs six.
      await this.coord.createNamespacedLease({
        namespace: LEASE_NAMESPACE,
        body: {
          metadata: {
            name,
            ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid: node.metadata?.uid as string }],
          },
          spec: { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS },
        },
      });
      await this.coord.patchNamespacedLease({ name, namespace: LEASE_NAMESPACE, body }, mergePatch);
    }
  }

  private async startPodInformer(): Promise<void> {
    const fieldSelector = `spec.nodeName=${this.cfg.nodeName}`;
    const informer = new ListWatch<V1Pod>(
      "/api/v1/pods",
      new Watch(this.kc),
      () => this.core.listPodForAllNamespaces({ fieldSelector }),
      false,
      undefined,
      fieldSelector,
    );
    const upsert = (pod: V1Pod) => {
      const uid = pod.metadata?.uid;
      if (!uid) return;
      this.pods.set(uid, pod);
      this.enqueue(uid);
    };
    informer.on("add", upsert);
    informer.on("update", upsert);
    informer.on("delete", (pod) => {
      const uid = pod.metadata?.uid;
      if (!uid) return;
      this.pods.delete(uid);
      this.enqueue(uid);
    });
    informer.on("error", (err) => {
      this.log.warn({ err: (err as Error)?.message }, "pod watch failed; restarting");
      setTimeout(() => informer.start().catch(() => undefined), 1000);
    });
    await this.retrying("list pods", () => informer.start());
    // Records of pods the API no longer has are torn down by this first pass.
    this.resyncAll();
  }

  private watchCniConfig(): void {
    if (!existsSync(this.cfg.cniConfDir)) return;
    // A network configuration appearing is the moment waiting pods can proceed; do not wait out their backoff.
    watch(this.cfg.cniConfDir, () => {
      this.sandboxRetry.clear();
      this.resyncAll();
    });
  }

  private resyncAll(): void {
    for (const uid of new Set([...this.pods.keys(), ...this.records.keys()])) this.enqueue(uid);
  }

  /** Serializes work per pod: an event during a sync marks the pod dirty and it syncs once more. */
  private enqueue(uid: string): void {
    if (this.syncing.has(uid)) {
      this.dirty.add(uid);
      return;
    }
    this.syncing.add(uid);
    void (async () => {
      try {
        do {
          this.dirty.delete(uid);
          try {
            await this.sync(uid);
          } catch (err) {
            this.log.error({ err, uid }, "pod sync failed");
          }
        } while (this.dirty.has(uid));
      } finally {
        this.syncing.delete(uid);
      }
    })();
  }

  private async sync(uid: string): Promise<void> {
    const pod = this.pods.get(uid);
    let rec = this.records.get(uid);
    const phase = pod?.status?.phase;
    if (!pod || phase === "Succeeded" || phase === "Failed") {
      if (rec) await this.teardown(rec, 0);
      if (!pod) this.forgetPod(uid);
      return;
    }
    if (pod.metadata?.deletionTimestamp) {
      if (rec) {
        await this.events.record(pod, "Normal", "Killing", "Stopping pod sandbox and its containers");
        await this.teardown(rec, Math.min((pod.metadata.deletionGracePeriodSeconds ?? 30) * 1000, 10_000));
      }
      await this.finalDelete(pod);
      return;
    }
    if (rec && !this.runtime.sandboxIntact(rec)) {
      this.log.info(
        { pod: podKey(pod), containerId: rec.containerId },
        "sandbox lost; a new one will be created",
      );
      const counts: Record<string, number> = {};
      for (const c of Object.values(rec.containers)) counts[c.name] = c.restartCount + 1;
      this.carriedRestarts.set(uid, counts);
      await this.teardown(rec, 0);
      await this.events.record(
        pod,
        "Normal",
        "SandboxChanged",
        "Pod sandbox changed, it will be killed and re-created.",
      );
      rec = undefined;
    }
    if (!rec) {
      rec = await this.createSandbox(pod);
      if (!rec) return;
    }
    await this.syncContainers(pod, rec);
    await this.reportPod(pod, rec);
  }

  private async createSandbox(pod: V1Pod): Promise<SandboxRecord | undefined> {
    const uid = pod.metadata?.uid as string;
    const retry = this.sandboxRetry.get(uid);
    if (retry && Date.now() < retry.at) {
      await this.reportPod(pod, undefined, retry.error);
      return undefined;
    }
    try {
      const rec = await this.runtime.createSandbox({
        uid,
        namespace: pod.metadata?.namespace as string,
        name: pod.metadata?.name as string,
        hostNetwork: pod.spec?.hostNetwork === true,
      });
      this.records.set(uid, rec);
      this.sandboxRetry.delete(uid);
      this.log.info({ pod: podKey(pod), containerId: rec.containerId, ips: rec.ips }, "sandbox ready");
      return rec;
    } catch (err) {
      const detail = (err as Error).message;
      const message = `Failed to create pod sandbox: failed to setup network for sandbox: ${detail}`;
      const delayMs = Math.min((retry?.delayMs ?? SANDBOX_RETRY_MIN_MS / 2) * 2, SANDBOX_RETRY_MAX_MS);
      this.sandboxRetry.set(uid, { at: Date.now() + delayMs, delayMs, error: message });
      this.log.warn({ pod: podKey(pod), err: detail }, "sandbox creation failed");
      await this.events.record(pod, "Warning", "FailedCreatePodSandBox", message);
      await this.reportPod(pod, undefined, message);
      return undefined;
    }
  }

  private async syncContainers(pod: V1Pod, rec: SandboxRecord): Promise<void> {
    const uid = pod.metadata?.uid as string;
    const policy = pod.spec?.restartPolicy ?? "Always";
    for (const c of pod.spec?.containers ?? []) {
      const cur = rec.containers[c.name];
      if (cur && this.runtime.containerRunning(cur)) continue;
      if (
        cur?.lastTermination &&
        cur.lastTermination.startedAt === cur.startedAt &&
        !this.mayRestart(policy, cur)
      ) {
        continue;
      }
      if (cur && cur.lastTermination?.startedAt !== cur.startedAt) {
        const exitCode = this.runtime.exitCode(cur) ?? 137;
        cur.lastTermination = {
          exitCode,
          reason: exitCode === 0 ? "Completed" : "Error",
          startedAt: cur.startedAt,
          finishedAt: apiTime(new Date()) as string,
        };
        this.runtime.save(rec);
        if (!this.mayRestart(policy, cur)) continue;
      }
      const key = `${uid}/${c.name}`;
      if (cur) {
        const backoff = this.crashBackoff.get(key);
        if (backoff && Date.now() < backoff.at) continue;
        const delayMs = Math.min((backoff?.delayMs ?? CRASH_BACKOFF_MIN_MS / 2) * 2, CRASH_BACKOFF_MAX_MS);
        this.crashBackoff.set(key, { at: Date.now() + delayMs, delayMs });
      }
      const restarts = cur ? cur.restartCount + 1 : (this.carriedRestarts.get(uid)?.[c.name] ?? 0);
      const proc = containerProcess(
        c,
        { name: pod.metadata?.name as string, namespace: pod.metadata?.namespace as string },
        this.cfg.podserver,
      );
      const started = this.runtime.startContainer(rec, c.name, proc, restarts);
      this.log.info(
        { pod: podKey(pod), container: c.name, pid: started.process.pid, cmd: proc.command },
        "container started",
      );
      await this.events.record(pod, "Normal", "Started", `Started container ${c.name}`);
    }
  }

  private mayRestart(policy: string, c: ContainerRecord): boolean {
    if (policy === "Always") return true;
    if (policy === "OnFailure") return (c.lastTermination?.exitCode ?? 1) !== 0;
    return false;
  }

  private containerView(pod: V1Pod, rec: SandboxRecord | undefined, sandboxError?: string): ContainerView[] {
    const uid = pod.metadata?.uid as string;
    return (pod.spec?.containers ?? []).map((c) => {
      const image = c.image ?? "";
      const cur = rec?.containers[c.name];
      if (!rec || !cur) {
        return {
          name: c.name,
          image,
          restartCount: this.carriedRestarts.get(uid)?.[c.name] ?? 0,
          ready: false,
          state: {
            kind: "waiting",
            reason: "ContainerCreating",
            ...(sandboxError ? { message: sandboxError } : {}),
          },
        };
      }
      const last = cur.lastTermination;
      const lastTerminated = last
        ? {
            kind: "terminated" as const,
            exitCode: last.exitCode,
            reason: last.reason,
            startedAt: apiTime(last.startedAt),
            finishedAt: last.finishedAt,
          }
        : undefined;
      const base = {
        name: c.name,
        image,
        containerId: `sandbox://${cur.containerId}`,
        restartCount: cur.restartCount,
      };
      if (this.runtime.containerRunning(cur)) {
        return {
          ...base,
          ready: true,
          state: { kind: "running", startedAt: apiTime(cur.startedAt) as string },
          ...(lastTerminated ? { lastTerminated } : {}),
        };
      }
      if (last && last.startedAt === cur.startedAt && lastTerminated) {
        const policy = pod.spec?.restartPolicy ?? "Always";
        if (!this.mayRestart(policy, cur)) return { ...base, ready: false, state: lastTerminated };
        return {
          ...base,
          ready: false,
          state: {
            kind: "waiting",
            reason: "CrashLoopBackOff",
            message: `back-off restarting failed container ${c.name}`,
          },
          lastTerminated,
        };
      }
      return { ...base, ready: false, state: { kind: "waiting", reason: "ContainerCreating" } };
    });
  }

  private async reportPod(pod: V1Pod, rec: SandboxRecord | undefined, sandboxError?: string): Promise<void> {
    const uid = pod.metadata?.uid as string;
    const containers = this.containerView(pod, rec, sandboxError);
    const terminated = containers.filter((c) => c.state.kind === "terminated");
    let phase: PodView["phase"] = rec ? "Running" : "Pending";
    if (containers.length > 0 && terminated.length === containers.length) {
      phase = terminated.every((c) => c.state.kind === "terminated" && c.state.exitCode === 0)
        ? "Succeeded"
        : "Failed";
    }
    let startTime = this.startTimes.get(uid) ?? apiTime(pod.status?.startTime);
    if (!startTime) startTime = apiTime(new Date()) as string;
    this.startTimes.set(uid, startTime);
    const view: PodView = {
      phase,
      sandboxReady: rec !== undefined,
      ...(sandboxError ? { sandboxMessage: sandboxError } : {}),
      podIPs: rec?.ips ?? [],
      hostIP: this.cfg.nodeIp,
      startTime,
      containers,
    };
    const body = podStatusPatch(view, pod.status?.conditions ?? [], new Date());
    const text = JSON.stringify(body);
    if (this.lastPatch.get(uid) === text) return;
    try {
      await this.core.patchNamespacedPodStatus(
        { name: pod.metadata?.name as string, namespace: pod.metadata?.namespace as string, body },
        mergePatch,
      );
      this.lastPatch.set(uid, text);
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
  }

  private async teardown(rec: SandboxRecord, graceMs: number): Promise<void> {
    const delError = await this.runtime.destroySandbox(rec, graceMs);
    this.records.delete(rec.uid);
    this.log.info(
      {
        pod: `${rec.namespace}/${rec.name}`,
        containerId: rec.containerId,
        cniDel: delError?.message ?? "ok",
      },
      "sandbox removed",
    );
  }

  private async finalDelete(pod: V1Pod): Promise<void> {
    try {
      await this.core.deleteNamespacedPod({
        name: pod.metadata?.name as string,
        namespace: pod.metadata?.namespace as string,
        gracePeriodSeconds: 0,
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata?.uid as string } },
      });
    } catch (err) {
      const code = statusCode(err);
      if (code !== 404 && code !== 409) throw err;
    }
  }

  private forgetPod(uid: string): void {
    this.sandboxRetry.delete(uid);
    this.carriedRestarts.delete(uid);
    this.startTimes.delete(uid);
    this.lastPatch.delete(uid);
    for (const key of [...this.crashBackoff.keys()])
      if (key.startsWith(`${uid}/`)) this.crashBackoff.delete(key);
    this.events.forget(uid);
  }
}
