// The NetworkPolicy reachability matrix in a sandbox: 3 namespaces × 3 pods spread over the nodes, each pod
// serving TCP 80/81 and UDP 80/81 under the names serve-80-tcp ..., probed with real connections from every pod
// and every node's own network stack (the kubelet path) to every pod and port, and compared cell by cell with
// the independent model of the API (test/policy-model). One source is one `podserver probe` process that dials
// its whole row at once, and every row runs at the same time, so a matrix costs about one probe timeout; a
// denied cell is a dropped packet, that is a timeout.
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import {
  type ContainerPort,
  type ModelCluster,
  type ModelNamespace,
  type ModelNode,
  type ModelPod,
  type NetworkPolicy,
  PolicyModel,
  type Protocol,
  type Source,
} from "../policy-model/reachability.ts";
import type { SandboxHandle } from "./sandbox-handle.ts";

export const NAMESPACES = ["x", "y", "z"] as const;
export const POD_NAMES = ["a", "b", "c"] as const;

export interface Service {
  protocol: "TCP" | "UDP";
  port: number;
}
export const SERVICES: readonly Service[] = [
  { protocol: "TCP", port: 80 },
  { protocol: "TCP", port: 81 },
  { protocol: "UDP", port: 80 },
  { protocol: "UDP", port: 81 },
];
export const portName = (s: Service) => `serve-${s.port}-${s.protocol.toLowerCase()}`;
const serviceKey = (s: Service) => `${s.protocol.toLowerCase()}/${s.port}`;

/** Label every matrix object carries, so the workload is found and removed as one. */
export const MATRIX_LABEL = "policy-matrix";

/** Pod `i` of namespace `j` runs on node (i + j) mod N: each namespace has a pod on every node. */
export function matrixNode(nsIndex: number, podIndex: number, nodes: readonly string[]): string {
  return nodes[(nsIndex + podIndex) % nodes.length] as string;
}

export function namespaceManifest(name: string, labels: Record<string, string> = {}): object {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name, labels: { ...baseLabels({ ns: name }), ...labels } },
  };
}

/** The labels the matrix's own objects always keep: `ns: x` on namespace x, `pod: a` on pods named a. */
export function baseLabels(of: { ns: string } | { pod: string }): Record<string, string> {
  return { [MATRIX_LABEL]: "1", ...of };
}
const KEEP = new Set([MATRIX_LABEL, "ns", "pod", "kubernetes.io/metadata.name"]);

export function podManifest(
  ns: string,
  name: string,
  node: string,
  labels: Record<string, string> = {},
): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, labels: { ...baseLabels({ pod: name }), ...labels } },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 0,
      containers: [
        {
          name: "server",
          image: "zstack-ovn/podserver",
          ports: SERVICES.map((s) => ({ name: portName(s), containerPort: s.port, protocol: s.protocol })),
        },
      ],
    },
  };
}

// ---- one probe of the whole matrix -------------------------------------------------------------------------

export interface Cell {
  from: string;
  to: string;
  service: Service;
}
export type Matrix = Map<string, boolean>;
export const cellKey = (c: Cell) => `${c.from}|${c.to}|${serviceKey(c.service)}`;

/** Parses `podserver probe` output: one "<proto>:<ip>:<port> ok|error ..." line per target, in order. */
export function parseProbeOutput(stdout: string, targets: readonly string[]): boolean[] {
  const lines = stdout.split("\n").filter((l) => l.trim() !== "");
  if (lines.length !== targets.length)
    throw new Error(`probe: ${lines.length} lines for ${targets.length} targets`);
  return lines.map((line, i) => {
    const [target, verdict] = line.split(" ");
    if (target !== targets[i])
      throw new Error(`probe: line ${i} is ${JSON.stringify(line)}, want ${targets[i]}`);
    if (verdict !== "ok" && verdict !== "error") throw new Error(`probe: bad line ${JSON.stringify(line)}`);
    return verdict === "ok";
  });
}

/** Expected and observed side by side; a readable table per port of the cells that disagree. */
export function diffTable(
  sources: readonly string[],
  dests: readonly string[],
  expected: (c: Cell) => boolean,
  observed: Matrix,
  services: readonly Service[] = SERVICES,
): string {
  const out: string[] = [];
  const width = Math.max(...sources.map((s) => s.length), 6);
  for (const service of services) {
    let bad = 0;
    const rows = sources.map((from) => {
      const cells = dests.map((to) => {
        const c = { from, to, service };
        const want = expected(c);
        const got = observed.get(cellKey(c));
        if (got === undefined) return "   ?";
        if (got === want) return want ? "   ." : "   x";
        bad++;
        return got ? "  A!" : "  D!";
      });
      return `${from.padEnd(width)} ${cells.join("")}`;
    });
    if (bad === 0) continue;
    out.push(`${serviceKey(service)}: ${bad} cell(s) differ (rows: from, columns: to)`);
    out.push(`${"".padEnd(width)} ${dests.map((d) => d.padStart(4)).join("")}`);
    out.push(...rows);
  }
  if (out.length === 0) return "";
  out.push(
    "legend: . allowed as expected, x denied as expected, A! allowed but the model denies, D! denied but the model allows",
  );
  return out.join("\n");
}

// ---- the matrix in a sandbox -------------------------------------------------------------------------------

interface ApiList<T> {
  items: T[];
}
interface ApiMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
}
interface ApiPod {
  metadata: ApiMeta;
  spec: { nodeName?: string; hostNetwork?: boolean; containers: Array<{ ports?: ContainerPort[] }> };
  status: { podIP?: string; conditions?: Array<{ type: string; status: string }> };
}

export interface MatrixOptions {
  /** Per cell, as a Go duration. */
  timeout?: string;
  /** How long a disagreeing matrix is re-probed (policies take time to converge) before it fails. */
  convergeMs?: number;
  /** Diagnosis only: flush the datapath flow cache before every probe too. */
  flushDatapathFlows?: boolean;
}

export class PolicyMatrix {
  readonly pods: string[] = [];
  private nodeNames?: string[];
  /** Each node's source addresses as a pod sees them (node IP and the management IP its traffic leaves by). */
  private nodeAddresses = new Map<string, string[]>();
  private podIPs = new Map<string, string>();

  constructor(
    private readonly sandbox: SandboxHandle,
    private readonly opts: MatrixOptions = {},
  ) {
    for (const ns of NAMESPACES) for (const p of POD_NAMES) this.pods.push(`${ns}/${p}`);
  }

  /** The sandbox's nodes, read once it is up (the matrix is built before the sandbox starts). */
  get nodes(): string[] {
    this.nodeNames ??= this.sandbox.ctx().topo.nodes.map((n) => n.name);
    return this.nodeNames;
  }

  get sources(): string[] {
    return [...this.pods, ...this.nodes];
  }

  private clients?: { core: CoreV1Api };

  /** In-process API clients for the calls every scenario makes (a kubectl process costs ~0.5 s on a busy box). */
  api(): { core: CoreV1Api } {
    if (!this.clients) {
      const kc = new KubeConfig();
      kc.loadFromFile(adminKubeconfig(this.sandbox.layout));
      this.clients = { core: kc.makeApiClient(CoreV1Api) };
    }
    return this.clients;
  }

  /**
   * Replaces every NetworkPolicy with `policies`. Through kubectl, in the API's own JSON: the typed client renames
   * fields of NetworkPolicy (`from` is `_from` there), which would silently drop peers both ways.
   */
  async replacePolicies(policies: readonly NetworkPolicy[]): Promise<void> {
    await this.kubectl(["delete", "networkpolicies", "--all", "-A", "--wait=false"]);
    if (policies.length > 0) await this.apply(policies);
  }

  async kubectl(args: readonly string[], input?: string): Promise<string> {
    const kc = this.sandbox.ctx().state.binaries?.KUBECTL;
    if (!kc) throw new Error("sandbox records no kubectl");
    const argv = [`--kubeconfig=${adminKubeconfig(this.sandbox.layout)}`, ...args];
    return run(kc, argv, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
  }

  async apply(objects: readonly object[]): Promise<void> {
    await this.kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    );
  }

  /** Creates the namespaces and pods (idempotent), waits until they are Ready and learns their addresses. */
  async setup(): Promise<void> {
    await this.apply([
      ...NAMESPACES.map((ns) => namespaceManifest(ns)),
      ...NAMESPACES.flatMap((ns, i) =>
        POD_NAMES.map((p, j) => podManifest(ns, p, matrixNode(i, j, this.nodes))),
      ),
    ]);
    for (const ns of NAMESPACES)
      await this.kubectl(["wait", "-n", ns, "--for=condition=Ready", "pod", "--all", "--timeout=180s"]);
    await this.refreshPods();
    if (this.nodeAddresses.size === 0) await this.learnNodeAddresses();
  }

  async refreshPods(): Promise<ApiPod[]> {
    const list = await this.api().core.listPodForAllNamespaces({ labelSelector: MATRIX_LABEL });
    const items = list.items as unknown as ApiPod[];
    this.podIPs = new Map(
      items.flatMap((p) =>
        p.status?.podIP ? [[`${p.metadata.namespace}/${p.metadata.name}`, p.status.podIP]] : [],
      ),
    );
    return items;
  }

  podIP(pod: string): string {
    const ip = this.podIPs.get(pod);
    if (!ip) throw new Error(`pod ${pod} has no IP`);
    return ip;
  }

  /**
   * A node's traffic to a pod carries the address it is routed from (the management port's), not
   * necessarily the node IP: learn it from what a pod saw, before any policy exists.
   */
  private async learnNodeAddresses(): Promise<void> {
    const target = this.pods[0] as string;
    const { topo } = this.sandbox.ctx();
    for (const node of this.nodes) {
      const out = await this.sandbox.inside(
        node,
        [this.sandbox.binary("PODSERVER"), "dial", "tcp", `${this.podIP(target)}:80`],
        {
          timeoutMs: 20_000,
        },
      );
      const client = out.split(" ")[1]?.replace(/:\d+$/, "");
      const nodeIP = topo.nodes.find((n) => n.name === node)?.ip;
      if (!client || !nodeIP)
        throw new Error(`${node}: cannot learn its source address from ${JSON.stringify(out)}`);
      this.nodeAddresses.set(node, [...new Set([nodeIP, client])]);
    }
  }

  nodeSourceAddresses(node: string): readonly string[] {
    return this.nodeAddresses.get(node) ?? [];
  }

  /** The model of the cluster as the apiserver holds it now: namespace and pod labels, and every policy. */
  async model(): Promise<PolicyModel> {
    const { core } = this.api();
    const [nsList, pods, pols] = await Promise.all([
      core.listNamespace() as unknown as Promise<ApiList<{ metadata: ApiMeta }>>,
      this.refreshPods(),
      this.kubectl(["get", "networkpolicies", "-A", "-o", "json"]).then(
        (o) => JSON.parse(o) as ApiList<NetworkPolicy>,
      ),
    ]);
    const namespaces: ModelNamespace[] = nsList.items.map((n) => ({
      name: n.metadata.name,
      labels: n.metadata.labels ?? {},
    }));
    const modelPods: ModelPod[] = pods.flatMap((p) =>
      p.status.podIP && p.spec.nodeName
        ? [
            {
              namespace: p.metadata.namespace as string,
              name: p.metadata.name,
              labels: p.metadata.labels ?? {},
              node: p.spec.nodeName,
              ip: p.status.podIP,
              hostNetwork: p.spec.hostNetwork === true,
              ports: p.spec.containers.flatMap((c) => c.ports ?? []),
            },
          ]
        : [],
    );
    const nodes: ModelNode[] = this.nodes.map((name) => ({
      name,
      addresses: this.nodeSourceAddresses(name),
    }));
    const cluster: ModelCluster = { namespaces, pods: modelPods, nodes, policies: pols.items };
    return new PolicyModel(cluster);
  }

  /**
   * Every source dials every target once ("tcp:IP:PORT"), each source in one `podserver probe` process, all at
   * once; the verdicts per source, in target order.
   */
  async probeRows(sources: readonly string[], targets: readonly string[]): Promise<Map<string, boolean[]>> {
    // Each probe starts from empty datapath conntrack tables. ovs-vswitchd 3.1's userspace conntrack (the
    // sandbox has no kernel datapath) aborts on "assertion conn->conn_type == CT_CONN_TYPE_DEFAULT failed in
    // conn_update_state()" after about a minute of this churn; with the tables flushed before every probe, 858
    // probes in a row (370,000 connections) ran without one. No probe is in flight at that moment, and each
    // cell is a new connection, so what the matrix asserts is unchanged.
    await Promise.all(
      this.nodes.map(async (node) => {
        await this.sandbox.inside(node, ["ovs-appctl", "dpctl/flush-conntrack"]);
        // Also drop the datapath's cached flows (see the e2e's options): a stale megaflow is then never
        // mistaken for a wrong OpenFlow table.
        if (this.opts.flushDatapathFlows) await this.sandbox.inside(node, ["ovs-appctl", "dpctl/del-flows"]);
      }),
    );
    const rows = await Promise.all(
      sources.map(async (from) => {
        const out = await this.sandbox.inside(
          from,
          [this.sandbox.binary("PODSERVER"), "probe", "--timeout", this.opts.timeout ?? "1500ms", ...targets],
          { timeoutMs: 60_000 },
        );
        return [from, parseProbeOutput(out, targets)] as const;
      }),
    );
    return new Map(rows);
  }

  /** Probes every cell once: each source dials its whole row at once, and every source runs at once. */
  async probe(
    services: readonly Service[] = SERVICES,
    dests: readonly string[] = this.pods,
  ): Promise<Matrix> {
    const targets = dests.flatMap((to) =>
      services.map((service) => ({
        to,
        service,
        text: `${service.protocol.toLowerCase()}:${this.podIP(to)}:${service.port}`,
      })),
    );
    const rows = await this.probeRows(
      this.sources,
      targets.map((t) => t.text),
    );
    const m: Matrix = new Map();
    for (const [from, verdicts] of rows)
      targets.forEach((t, i) => {
        m.set(cellKey({ from, to: t.to, service: t.service }), verdicts[i] as boolean);
      });
    return m;
  }

  /**
   * Sets the labels of matrix namespaces and pods to exactly their base labels plus `extra` (keyed "x" for a
   * namespace, "x/a" for a pod); objects not named get their base labels back. One merge patch per object
   * that changes, all at once.
   */
  async setLabels(extra: ReadonlyMap<string, Record<string, string>> = new Map()): Promise<void> {
    const { core } = this.api();
    const [nsList, pods] = await Promise.all([
      core.listNamespace({ labelSelector: MATRIX_LABEL }) as unknown as Promise<
        ApiList<{ metadata: ApiMeta }>
      >,
      this.refreshPods(),
    ]);
    const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    const jobs: Array<Promise<unknown>> = [];
    const relabel = (meta: ApiMeta, key: string) => {
      const want = extra.get(key) ?? {};
      const have = meta.labels ?? {};
      // A merge patch: null removes a label.
      const labels: Record<string, string | null> = {};
      for (const k of Object.keys(have)) if (!KEEP.has(k) && !(k in want)) labels[k] = null;
      for (const [k, v] of Object.entries(want)) if (have[k] !== v) labels[k] = v;
      if (Object.keys(labels).length === 0) return;
      const body = { metadata: { labels } };
      jobs.push(
        meta.namespace
          ? core.patchNamespacedPod({ name: meta.name, namespace: meta.namespace, body }, mergePatch)
          : core.patchNamespace({ name: meta.name, body }, mergePatch),
      );
    };
    for (const n of nsList.items) relabel(n.metadata, n.metadata.name);
    for (const p of pods) relabel(p.metadata, `${p.metadata.namespace}/${p.metadata.name}`);
    await Promise.all(jobs);
  }

  /** Back to the start: no NetworkPolicy, base labels, every matrix pod present, extra objects gone. */
  async reset(): Promise<void> {
    await this.kubectl(["delete", "networkpolicies", "--all", "-A", "--wait=false"]);
    await this.kubectl(["delete", "services", "-A", "-l", MATRIX_LABEL, "--ignore-not-found"]);
    const ready = (await this.refreshPods()).filter(
      (p) => p.status.podIP && p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    if (ready.length !== this.pods.length) await this.setup();
    await this.setLabels();
  }

  /** The model's answer for one cell. */
  static expect(model: PolicyModel, c: Cell): boolean {
    const from: Source = c.from.includes("/") ? { pod: c.from } : { node: c.from };
    return model.allowed(from, c.to, c.service.protocol as Protocol, c.service.port);
  }

  /**
   * Probes the full matrix until one probe agrees with the model in every cell, or `convergeMs` passes; then
   * throws with the table of the last probe's disagreements. Resolves with the number of probes it took.
   */
  async assertMatchesModel(what: string, opts: { services?: readonly Service[] } = {}): Promise<number> {
    const model = await this.model();
    const services = opts.services ?? SERVICES;
    const expected = (c: Cell) => PolicyMatrix.expect(model, c);
    const end = Date.now() + (this.opts.convergeMs ?? 30_000);
    for (let round = 1; ; round++) {
      const observed = await this.probe(services);
      let bad = 0;
      for (const [key, got] of observed) {
        const [from, to, svc] = key.split("|") as [string, string, string];
        const [proto, port] = svc.split("/") as [string, string];
        const service = { protocol: proto.toUpperCase() as "TCP" | "UDP", port: Number(port) };
        if (got !== expected({ from, to, service })) {
          bad++;
        }
      }
      if (bad === 0) return round;
      if (Date.now() > end) {
        const table = diffTable(this.sources, this.pods, expected, observed, services);
        throw new Error(
          `${what}: ${bad} of ${observed.size} cells still disagree with the model after ${round} probes\n${table}`,
        );
      }
      await sleep(1000);
    }
  }
}
