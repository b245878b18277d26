// The sandbox part of make bench-services: how long after a Deployment behind a Service is scaled up a client's
// new connections reach the new pod, against a load balancer changed by hand (ovn-nbctl) in the same sandbox.
// The client is one `podserver dial --count ... --interval` process in a pod, whose lines are timestamped as
// they arrive; a flip is the first line answered by the new pod.
import { type ChildProcess, spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { ApiClient } from "../../src/k8s/api-client.ts";
import { run } from "../../src/sandbox/command.ts";
import { execArgv } from "../../src/sandbox/exec.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { localRemote } from "../../src/sandbox/ovn-central.ts";
import { eventually, type SandboxHandle } from "../../test/rig/sandbox-handle.ts";
import { watchFrom } from "../controller/watch.ts";

const HAND_VIP = "10.96.254.254";

export interface FlipResult {
  /** kubectl scale issued → first answer from the new pod, ms. */
  scaleToFlipMs: number[];
  /** The new pod's endpoint ready in its EndpointSlice → first answer from it, ms. */
  readyToFlipMs: number[];
  /** ovn-nbctl change issued → first answer from the added backend, ms. */
  rawToFlipMs: number[];
}

/** A paced client in a pod: every answer with the time its line arrived. */
class Prober {
  private readonly child: ChildProcess;
  readonly lines: Array<{ t: number; server: string }> = [];

  constructor(sandbox: SandboxHandle, from: string, addr: string) {
    const argv = execArgv(sandbox.layout, sandbox.ctx().topo, from, [
      sandbox.binary("PODSERVER"),
      "dial",
      "tcp",
      addr,
      "--count",
      "1000000",
      "--interval",
      "10ms",
      "--timeout",
      "1s",
    ]);
    this.child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "pipe", "ignore"] });
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      const server = line.startsWith("error: ") ? "error" : (line.split(" ")[0] ?? "");
      this.lines.push({ t: performance.now(), server });
    });
  }

  /** Resolves with the time of the first answer after `since` from a server not in `old` (and not an error). */
  async firstNew(old: ReadonlySet<string>, since: number, timeoutMs: number): Promise<number> {
    const hit = await eventually("an answer from the new endpoint", timeoutMs, async () => {
      const l = this.lines.find((x) => x.t >= since && x.server !== "error" && !old.has(x.server));
      return l?.t;
    });
    return hit;
  }

  /** Waits until the last `n` answers all came from `servers`. */
  async settled(servers: ReadonlySet<string>, n = 20): Promise<void> {
    await eventually(`answers only from {${[...servers].join(", ")}}`, 60_000, async () => {
      const tail = this.lines.slice(-n);
      return tail.length === n && tail.every((l) => servers.has(l.server)) ? true : undefined;
    });
  }

  stop(): void {
    this.child.kill();
  }
}

interface SliceEvent {
  metadata: { labels?: Record<string, string>; resourceVersion?: string };
  endpoints?: Array<{ targetRef?: { name?: string }; conditions?: { ready?: boolean } }>;
}

const manifests = [
  {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "flip", namespace: "default" },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "flip" } },
      template: {
        metadata: { labels: { app: "flip" } },
        spec: { containers: [{ name: "s", image: "podserver", args: ["--tcp", "8080"] }] },
      },
    },
  },
  {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "flip", namespace: "default" },
    spec: { selector: { app: "flip" }, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }] },
  },
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "flip-client", namespace: "default" },
    spec: { nodeName: "node1", containers: [{ name: "c", image: "podserver" }] },
  },
];

export async function probeFlip(
  sandbox: SandboxHandle,
  rounds: number,
  log: (l: string) => void,
): Promise<FlipResult> {
  const { state, topo } = sandbox.ctx();
  const kc = [`--kubeconfig=${adminKubeconfig(sandbox.layout)}`];
  const kubectl = (args: string[], input?: string) =>
    run(state.binaries?.KUBECTL as string, [...kc, ...args], input === undefined ? {} : { input });
  const nbctl = (args: string[]) =>
    run("ovn-nbctl", [`--db=${localRemote(sandbox.layout, topo, "nb")}`, ...args]);
  await kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: manifests }));
  await kubectl(["rollout", "status", "deployment/flip", "--timeout=180s"]);
  await kubectl(["wait", "--for=condition=Ready", "pod/flip-client", "--timeout=180s"]);
  const vip = (await kubectl(["get", "svc", "flip", "-o", "jsonpath={.spec.clusterIP}"])).trim();

  const config = new KubeConfig();
  config.loadFromFile(adminKubeconfig(sandbox.layout));
  const api = new ApiClient(config, { userAgent: "bench-services" });
  const readyAt = new Map<string, number>();
  const stop = new AbortController();
  const slicesPath = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
  const list = await api.request<{ metadata: { resourceVersion: string } }>(slicesPath);
  const watching = watchFrom<SliceEvent>(
    api,
    slicesPath,
    list.metadata.resourceVersion,
    (ev) => {
      if (ev.object.metadata.labels?.["kubernetes.io/service-name"] !== "flip") return;
      for (const e of ev.object.endpoints ?? []) {
        const name = e.targetRef?.name;
        if (name && e.conditions?.ready && !readyAt.has(name)) readyAt.set(name, performance.now());
      }
    },
    stop.signal,
  );
  const readyPods = async (): Promise<Set<string>> => {
    const out = await kubectl([
      "get",
      "pods",
      "-l",
      "app=flip",
      "-o",
      "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
    ]);
    return new Set(
      out
        .split("\n")
        .map((l) => l.trim().split(/\s+/))
        .filter((f) => f.length === 2 && f[1] === "True")
        .map((f) => f[0] as string),
    );
  };
  const result: FlipResult = { scaleToFlipMs: [], readyToFlipMs: [], rawToFlipMs: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      const old = await eventually("one flip pod", 120_000, async () => {
        const s = await readyPods();
        const all = (await kubectl(["get", "pods", "-l", "app=flip", "-o", "name"]))
          .split("\n")
          .filter(Boolean);
        return s.size === 1 && all.length === 1 ? s : undefined;
      });
      const prober = new Prober(sandbox, "default/flip-client", `${vip}:80`);
      try {
        await prober.settled(old);
        const t0 = performance.now();
        await kubectl(["scale", "deployment/flip", "--replicas=2"]);
        const flip = await prober.firstNew(old, t0, 120_000);
        const fresh = [...(await readyPods())].find((p) => !old.has(p));
        const ready = fresh ? readyAt.get(fresh) : undefined;
        result.scaleToFlipMs.push(flip - t0);
        if (ready !== undefined) result.readyToFlipMs.push(flip - ready);
        log(
          `  round ${r + 1}: scale → new pod answers ${(flip - t0).toFixed(0)} ms; endpoint ready → answers ${ready === undefined ? "?" : (flip - ready).toFixed(0)} ms`,
        );
      } finally {
        prober.stop();
      }
      await kubectl(["scale", "deployment/flip", "--replicas=1"]);
    }

    // The raw side: two backends of the same Deployment behind a load balancer made by hand.
    await kubectl(["scale", "deployment/flip", "--replicas=2"]);
    const pods = await eventually("two flip pods", 120_000, async () => {
      const s = await readyPods();
      return s.size === 2 ? [...s].sort() : undefined;
    });
    const ipOf = async (p: string) =>
      (await kubectl(["get", "pod", p, "-o", "jsonpath={.status.podIP}"])).trim();
    const [a, b] = pods as [string, string];
    const [ipA, ipB] = [await ipOf(a), await ipOf(b)];
    const sw = (
      await nbctl(["--bare", "--columns=name", "find", "Logical_Switch", "name=subnet-default"])
    ).trim();
    await nbctl(["--may-exist", "lb-add", "bench-hand", `${HAND_VIP}:80`, `${ipA}:8080`, "tcp"]);
    await nbctl(["ls-lb-add", sw, "bench-hand"]);
    try {
      for (let r = 0; r < rounds; r++) {
        await nbctl(["set", "Load_Balancer", "bench-hand", `vips:"${HAND_VIP}:80"="${ipA}:8080"`]);
        const prober = new Prober(sandbox, "default/flip-client", `${HAND_VIP}:80`);
        try {
          await prober.settled(new Set([a]));
          const t0 = performance.now();
          await nbctl([
            "set",
            "Load_Balancer",
            "bench-hand",
            `vips:"${HAND_VIP}:80"="${ipA}:8080,${ipB}:8080"`,
          ]);
          const flip = await prober.firstNew(new Set([a]), t0, 60_000);
          result.rawToFlipMs.push(flip - t0);
          log(`  raw round ${r + 1}: ovn-nbctl change → new backend answers ${(flip - t0).toFixed(0)} ms`);
        } finally {
          prober.stop();
        }
        await sleep(200);
      }
    } finally {
      await nbctl(["--if-exists", "lb-del", "bench-hand"]).catch(() => undefined);
    }
  } finally {
    stop.abort();
    await watching;
    api.close();
  }
  return result;
}
