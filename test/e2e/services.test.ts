// Services with no kube-proxy, end to end: the sandbox with zstack-ovnkube-controller (OVN load balancers for pod
// clients) and zstack-ovnkube-node on every node (nftables for everything entering a node's own stack), real
// kube-apiserver and EndpointSlice controller, real OVN and OVS. Every check is real TCP or UDP connections made
// with `podserver dial --count N`, whose replies name the pod that answered and the client address it saw.
//
// One sandbox (`zsbsvc`, VXLAN) holds every workload from the start, so pods come up once; each test then checks
// one acceptance item of issue 10 and fails on its own, naming what it saw, so a partial implementation shows
// which items work. The last test brings the sandbox up again with Geneve for the ClusterIP matrix.
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { CONTROLLER_DAEMON } from "../../src/sandbox/ovnkube-controller.ts";
import { isAlive, terminate } from "../../src/sandbox/process-table.ts";
import { diagnoseSandbox } from "../rig/sandbox-diagnosis.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";
import { type DialAttempt, describeTally, dialMany } from "../rig/service-dial.ts";

const NAME = "zsbsvc";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;

/** How long a change may take to reach the datapath before a check gives up (a condition wait, not a bound). */
const PROPAGATION_MS = 45_000;
/** Once a check of a test has failed, the datapath had its time: later checks of that test wait this long. */
const AFTER_FAILURE_MS = 8_000;
let patience = PROPAGATION_MS;
const LABEL = "svc-e2e";

// Addresses outside every cluster range, routed on the external host through one node.
const LB_INGRESS_IP = "192.168.201.10";
const LB_NO_NODEPORT_IP = "192.168.201.11";
const EXTERNAL_IP = "192.168.202.10";
const EXTRA_SERVICE_CIDR = "10.97.0.0/24";
const EXTRA_CLUSTER_IP = "10.97.0.10";
const NP_TCP = 30080;
const NP_UDP = 30081;
const LB_NODE_PORT = 30090;
const HEALTH_CHECK_PORT = 30091;
const EXT_IP = "192.168.200.100";
/** The Services whose NB load balancers a failure's diagnosis lists. */
const DIAGNOSED_SERVICES = ["web", "web-affinity", "hairpin", "itp", "term", "scale", "web-extra-cidr"];

// ---- manifests ----------------------------------------------------------------------------------------------

interface PortSpec {
  name: string;
  port: number;
  protocol: "TCP" | "UDP";
}

const ECHO_PORTS: PortSpec[] = [
  { name: "tcp-echo", port: 8080, protocol: "TCP" },
  { name: "udp-echo", port: 8081, protocol: "UDP" },
];

function serverFlags(ports: readonly PortSpec[]): string[] {
  return ports.flatMap((p) => [p.protocol === "UDP" ? "--udp" : "--tcp", String(p.port)]);
}

function podTemplateSpec(ports: readonly PortSpec[], extraArgs: readonly string[] = []): object {
  return {
    terminationGracePeriodSeconds: 30,
    containers: [
      {
        name: "server",
        image: "zstack-ovn/podserver",
        args: [...serverFlags(ports), ...extraArgs],
        ports: ports.map((p) => ({ name: p.name, containerPort: p.port, protocol: p.protocol })),
      },
    ],
  };
}

/** A podserver pod pinned to a node (nodeName: no scheduler in the way), serving `ports`. */
function serverPod(
  name: string,
  node: string,
  app: string,
  ports: readonly PortSpec[],
  extraArgs: readonly string[] = [],
): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app, [LABEL]: "1" } },
    spec: { nodeName: node, ...podTemplateSpec(ports, extraArgs) },
  };
}

function clientPod(name: string, node: string): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { role: "client", [LABEL]: "1" } },
    spec: { nodeName: node, containers: [{ name: "client", image: "zstack-ovn/podserver" }] },
  };
}

interface SvcPort {
  name: string;
  port: number;
  protocol: "TCP" | "UDP";
  targetPort: number | string;
  nodePort?: number;
}

function service(name: string, app: string, ports: readonly SvcPort[], spec: object = {}): object {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default", labels: { [LABEL]: "1" } },
    spec: { selector: { app }, ports, ...spec },
  };
}

const TCP80: SvcPort = { name: "tcp", port: 80, protocol: "TCP", targetPort: "tcp-echo" };
const UDP53: SvcPort = { name: "udp", port: 53, protocol: "UDP", targetPort: "udp-echo" };

/** The ClusterIP matrix's workload: a server on every node, a client pod on node1 and node3. */
function clusterIpWorkload(): object[] {
  return [
    serverPod("web-1", "node1", "web", ECHO_PORTS),
    serverPod("web-2", "node2", "web", ECHO_PORTS),
    serverPod("web-3", "node3", "web", ECHO_PORTS),
    clientPod("client-1", "node1"),
    clientPod("client-3", "node3"),
    service("web", "web", [TCP80, UDP53]),
  ];
}

function workload(): object[] {
  const tcpOnly: PortSpec[] = [ECHO_PORTS[0] as PortSpec];
  return [
    ...clusterIpWorkload(),
    service("web-affinity", "web", [TCP80], {
      sessionAffinity: "ClientIP",
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
    }),
    // The named targetPort "web" is 8080 on one pod and 9090 on the other; "dgram" is 7001 and 7002.
    serverPod("multi-a", "node1", "multi", [
      { name: "web", port: 8080, protocol: "TCP" },
      { name: "dgram", port: 7001, protocol: "UDP" },
    ]),
    serverPod("multi-b", "node2", "multi", [
      { name: "web", port: 9090, protocol: "TCP" },
      { name: "dgram", port: 7002, protocol: "UDP" },
    ]),
    service("multi", "multi", [
      { name: "web", port: 80, protocol: "TCP", targetPort: "web" },
      { name: "dgram", port: 81, protocol: "UDP", targetPort: "dgram" },
    ]),
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "scale", namespace: "default", labels: { [LABEL]: "1" } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "scale" } },
        template: { metadata: { labels: { app: "scale", [LABEL]: "1" } }, spec: podTemplateSpec(ECHO_PORTS) },
      },
    },
    service("scale", "scale", [TCP80, UDP53]),
    // Terminating pods keep answering for the simulator's whole grace period (at most 10 s).
    serverPod("term-a", "node1", "term", tcpOnly, ["--drain", "60s"]),
    serverPod("term-b", "node2", "term", tcpOnly, ["--drain", "60s"]),
    service("term", "term", [TCP80]),
    serverPod("hairpin", "node2", "hairpin", tcpOnly),
    service("hairpin", "hairpin", [TCP80]),
    serverPod("np-1", "node1", "np", ECHO_PORTS),
    service(
      "np-cluster",
      "np",
      [
        { ...TCP80, nodePort: NP_TCP },
        { ...UDP53, nodePort: NP_UDP },
      ],
      { type: "NodePort", externalTrafficPolicy: "Cluster", externalIPs: [EXTERNAL_IP] },
    ),
    // allocateLoadBalancerNodePorts: false: the ingress IP alone, no node port.
    service("lb-no-nodeport", "np", [TCP80], { type: "LoadBalancer", allocateLoadBalancerNodePorts: false }),
    serverPod("lbl-1", "node1", "lbl", tcpOnly),
    serverPod("lbl-2", "node2", "lbl", tcpOnly),
    service("lb-local", "lbl", [{ ...TCP80, nodePort: LB_NODE_PORT }], {
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      healthCheckNodePort: HEALTH_CHECK_PORT,
    }),
    serverPod("itp-1", "node1", "itp", tcpOnly),
    serverPod("itp-2", "node2", "itp", tcpOnly),
    service("itp", "itp", [TCP80], { internalTrafficPolicy: "Local" }),
  ];
}

// ---- helpers ------------------------------------------------------------------------------------------------

function kubectlArgs(args: readonly string[]): [string, string[]] {
  const kc = ctx().state.binaries?.KUBECTL;
  if (!kc) throw new Error("sandbox records no kubectl");
  return [kc, [`--kubeconfig=${adminKubeconfig(layout)}`, ...args]];
}

async function kubectl(args: readonly string[], input?: string): Promise<string> {
  const [cmd, argv] = kubectlArgs(args);
  return run(cmd, argv, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
}

async function apply(objects: readonly object[]): Promise<void> {
  await kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }));
}

async function clusterIP(svc: string): Promise<string> {
  const ip = (await kubectl(["get", "svc", svc, "-o", "jsonpath={.spec.clusterIP}"])).trim();
  assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/, `service ${svc} has a clusterIP`);
  return ip;
}

async function podIP(pod: string): Promise<string> {
  return (await kubectl(["get", "pod", pod, "-o", "jsonpath={.status.podIP}"])).trim();
}

const nodeIP = (node: string): string => {
  const host = ctx().topo.nodes.find((n) => n.name === node);
  if (!host) throw new Error(`no node ${node}`);
  return host.ip;
};

const servers = (attempts: readonly DialAttempt[]): Set<string> =>
  new Set(attempts.flatMap((a) => (a.ok ? [a.server] : [])));

/**
 * Waits until clients at `from` reach exactly `expected` at `addr`: batches in which every attempt succeeds and
 * is answered by one of `expected`, until together they have seen every one of them. A bad batch starts over.
 */
async function reachesExactly(
  from: string,
  proto: "tcp" | "udp",
  addr: string,
  expected: readonly string[],
  opts: { count?: number; timeoutMs?: number } = {},
): Promise<DialAttempt[]> {
  const want = new Set(expected);
  let seen = new Set<string>();
  let all: DialAttempt[] = [];
  return eventually(
    `${from} → ${proto} ${addr} answered by exactly {${expected.join(", ")}}`,
    opts.timeoutMs ?? patience,
    async () => {
      // A short probe first, so a path that does not work yet costs seconds per round, not a whole batch.
      const probe = await dialMany(sandbox, from, proto, addr, { count: 2, timeout: "1s" });
      if (probe.some((a) => !a.ok)) throw new Error(`last probe: ${describeTally(probe)}`);
      const batch = await dialMany(sandbox, from, proto, addr, {
        count: opts.count ?? Math.max(12, expected.length * 10),
      });
      if (batch.some((a) => !a.ok || !want.has(a.server))) {
        seen = new Set();
        all = [];
        throw new Error(`last batch: ${describeTally(batch)}`);
      }
      for (const s of servers(batch)) seen.add(s);
      all = [...all, ...batch];
      if (seen.size < want.size) throw new Error(`so far only {${[...seen].join(", ")}}`);
      return all;
    },
  );
}

/**
 * The checks of one test, each run to its end: the test fails once, listing every check that failed, so a
 * partial implementation shows which parts of an item work. After a failure, later checks wait less.
 */
class Checks {
  private readonly failures: string[] = [];
  async check(what: string, fn: () => Promise<unknown>): Promise<boolean> {
    try {
      await fn();
      return true;
    } catch (err) {
      this.failures.push(`${what}: ${(err as Error).message}`);
      patience = AFTER_FAILURE_MS;
      return false;
    }
  }
  done(): void {
    if (this.failures.length > 0)
      assert.fail(`${this.failures.length} check(s) failed:\n- ${this.failures.join("\n- ")}`);
  }
}

/**
 * A refusal, not a timeout: ECONNREFUSED (a TCP reset, or an ICMP port unreachable on a connected UDP socket).
 * A datagram the node's own OUTPUT hook rejects never leaves: its send fails at once with EPERM, as with
 * kube-proxy's REJECT rules, so for a node's UDP client that counts as the refusal.
 */
const isRefusal = (from: string, proto: "tcp" | "udp") => (a: DialAttempt) =>
  !a.ok &&
  (/connection refused/.test(a.error) ||
    (proto === "udp" && !from.includes("/") && from !== "ext" && /operation not permitted/.test(a.error)));

/** Waits until every attempt from `from` to `addr` is refused at once (see isRefusal), not timed out. */
async function refused(from: string, proto: "tcp" | "udp", addr: string, count = 4): Promise<DialAttempt[]> {
  return eventually(`${from} → ${proto} ${addr} refused at once`, patience, async () => {
    const batch = await dialMany(sandbox, from, proto, addr, { count, timeout: "2s" });
    if (!batch.every(isRefusal(from, proto))) throw new Error(`last batch: ${describeTally(batch)}`);
    return batch;
  });
}

/** Waits until no attempt from `from` to `addr` gets an answer (dropped or refused). */
async function unanswered(from: string, proto: "tcp" | "udp", addr: string): Promise<DialAttempt[]> {
  return eventually(`${from} → ${proto} ${addr} unanswered`, patience, async () => {
    const batch = await dialMany(sandbox, from, proto, addr, { count: 3, timeout: "1s" });
    if (batch.some((a) => a.ok)) throw new Error(`last batch: ${describeTally(batch)}`);
    return batch;
  });
}

async function httpGet(from: string, url: string): Promise<{ code: number; body: string }> {
  const out = await sandbox.inside(from, ["curl", "-s", "--max-time", "3", "-w", "\n%{http_code}", url], {
    timeoutMs: 15_000,
  });
  const nl = out.lastIndexOf("\n");
  return { code: Number(out.slice(nl + 1)), body: out.slice(0, Math.max(0, nl)) };
}

async function readyPods(app: string): Promise<string[]> {
  const out = await kubectl([
    "get",
    "pods",
    "-l",
    `app=${app}`,
    "-o",
    "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
  ]);
  return out
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length === 2 && f[1] === "True")
    .map((f) => f[0] as string)
    .sort();
}

async function scaleTo(replicas: number): Promise<string[]> {
  await kubectl(["scale", "deployment", "scale", `--replicas=${replicas}`]);
  return eventually(`deployment scale at ${replicas} ready pods`, 120_000, async () => {
    const all = await kubectl(["get", "pods", "-l", "app=scale", "-o", "name"]);
    const ready = await readyPods("scale");
    const count = all.split("\n").filter(Boolean).length;
    return ready.length === replicas && count === replicas ? ready : undefined;
  });
}

interface SliceEndpoint {
  pod: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
}

async function sliceEndpoints(svc: string): Promise<SliceEndpoint[]> {
  const out = await kubectl([
    "get",
    "endpointslices",
    "-l",
    `kubernetes.io/service-name=${svc}`,
    "-o",
    "json",
  ]);
  const list = JSON.parse(out) as {
    items: Array<{
      endpoints?: Array<{
        targetRef?: { name?: string };
        conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
      }>;
    }>;
  };
  return list.items.flatMap((s) =>
    (s.endpoints ?? []).map((e) => ({
      pod: e.targetRef?.name ?? "",
      ready: e.conditions?.ready === true,
      serving: e.conditions?.serving === true,
      terminating: e.conditions?.terminating === true,
    })),
  );
}

const CONTROLLER_RECORD = /^record \d+:.*"zstack-ovnkube-controller[^"]*"\s*$/;

/** Write records in the NB database file committed by zstack-ovnkube-controller (by their comment). */
async function controllerNbWrites(): Promise<number> {
  const out = await run("ovsdb-tool", ["show-log", `${layout.centralDir}/nb.db`], { timeoutMs: 60_000 });
  return out.split("\n").filter((l) => CONTROLLER_RECORD.test(l)).length;
}

/**
 * What the controller's write records from the `skip`+1-th on changed: each record's tables and rows, with the
 * first four columns written of each (what a restarted controller found different from what its predecessor
 * left in NB).
 */
async function controllerNbWritesSince(skip: number): Promise<string> {
  const out = await run("ovsdb-tool", ["show-log", "-mm", `${layout.centralDir}/nb.db`], {
    timeoutMs: 60_000,
  });
  const records = out
    .split(/\n(?=record \d+:)/)
    .filter((r) => CONTROLLER_RECORD.test(r.split("\n")[0] ?? ""));
  const lines: string[] = [];
  for (const r of records.slice(skip)) {
    let columns = 0;
    for (const l of r.split("\n")) {
      if (/^record /.test(l) || /^ {2}table /.test(l)) {
        lines.push(l.trimEnd());
        columns = 0;
      } else if (/^ {4}\S/.test(l) && columns++ < 4) lines.push(l.slice(0, 200).trimEnd());
    }
  }
  return lines.slice(0, 80).join("\n") + (lines.length > 80 ? `\n(${lines.length - 80} more lines)` : "");
}

/** The controller's work queues that hold keys, from its metrics ("" when all are empty). */
async function busyQueues(): Promise<string> {
  const r = await httpGet("cp", "http://127.0.0.1:10660/metrics");
  return r.body
    .split("\n")
    .filter((l) => /^zstack_ovn_workqueue_depth\{/.test(l) && !/\s0$/.test(l))
    .join(", ");
}

/** ClusterIP from pods and nodes, TCP and UDP: each client reaches every endpoint, on its own node and the others. */
async function clusterIpMatrix(): Promise<void> {
  const ip = await clusterIP("web");
  const all = ["web-1", "web-2", "web-3"];
  const c = new Checks();
  for (const from of ["default/client-1", "default/client-3", "node1", "node2"]) {
    await c.check(`${from} TCP`, () => reachesExactly(from, "tcp", `${ip}:80`, all));
    await c.check(`${from} UDP`, () => reachesExactly(from, "udp", `${ip}:53`, all));
  }
  c.done();
}

// ---- the tests ----------------------------------------------------------------------------------------------

describe("Services in the sandbox (no kube-proxy)", { timeout: 40 * 60_000 }, () => {
  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up"]);
    await apply(workload());
    await kubectl(["wait", "--for=condition=Ready", "pod", "-l", `${LABEL}=1`, "--timeout=180s"]);
    // The cloud controller's part for a LoadBalancer: publish the ingress address in the status.
    await kubectl([
      "patch",
      "service",
      "lb-local",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { loadBalancer: { ingress: [{ ip: LB_INGRESS_IP }] } } }),
    ]);
    await kubectl([
      "patch",
      "service",
      "lb-no-nodeport",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { loadBalancer: { ingress: [{ ip: LB_NO_NODEPORT_IP }] } } }),
    ]);
    // The external host reaches the LoadBalancer ingress addresses through node1 and node3, the externalIP
    // through node2.
    await sandbox.inside("ext", ["ip", "route", "replace", `${LB_INGRESS_IP}/32`, "via", nodeIP("node1")]);
    await sandbox.inside("ext", [
      "ip",
      "route",
      "replace",
      `${LB_NO_NODEPORT_IP}/32`,
      "via",
      nodeIP("node3"),
    ]);
    await sandbox.inside("ext", ["ip", "route", "replace", `${EXTERNAL_IP}/32`, "via", nodeIP("node2")]);
  });

  // Every test starts with the full patience: a failure shortens it only for the rest of its own test (the hairpin
  // test, which has no Checks, once inherited the 8 s left by the failed test before it).
  beforeEach(() => {
    patience = PROPAGATION_MS;
  });

  // The first failure, with the sandbox's state taken right then: later failures often only follow from it.
  let firstFailure: { test: string; message: string; diagnosis: string } | undefined;
  afterEach(async (t) => {
    // Node 20's test context carries the test's error at run time; its type declarations do not say so.
    const err = (t as unknown as { error?: Error & { cause?: Error } }).error;
    if (firstFailure || !err) return;
    const message = (err.cause?.message ?? err.message).slice(0, 1500);
    firstFailure = { test: t.name, message, diagnosis: await diagnoseSandbox(sandbox, DIAGNOSED_SERVICES) };
    console.log(`first failure: ${t.name}\n${message}\n${firstFailure.diagnosis}`);
  });

  after(async () => {
    // ZOVN_E2E_KEEP_ON_FAILURE=1 leaves a failed run's sandbox up to be looked at (`zovn sandbox --name zsbsvc down
    // --purge` when done).
    const keep = firstFailure !== undefined && process.env.ZOVN_E2E_KEEP_ON_FAILURE === "1";
    if (!keep) await zovn(["down", "--purge"]).catch(() => undefined);
    // CI keeps only the tail of the output: the suite's own failure, printed last, names the first failure.
    if (firstFailure)
      assert.fail(
        `first failure: ${firstFailure.test}: ${firstFailure.message}\n${firstFailure.diagnosis}${keep ? `\n(sandbox ${NAME} kept)` : ""}`,
      );
  });

  it("ClusterIP (VXLAN): pods and nodes reach the endpoints on their own node and on the others, over TCP and UDP", async () => {
    await clusterIpMatrix();
  });

  it("multi-port: a named targetPort resolves to each pod's own port number, for TCP and UDP", async () => {
    const ip = await clusterIP("multi");
    const c = new Checks();
    for (const from of ["default/client-3", "node3"]) {
      await c.check(`${from} TCP`, () => reachesExactly(from, "tcp", `${ip}:80`, ["multi-a", "multi-b"]));
      await c.check(`${from} UDP`, () => reachesExactly(from, "udp", `${ip}:81`, ["multi-a", "multi-b"]));
    }
    c.done();
  });

  it("endpoints 1 → 5 → 0 → 2: new connections follow each change, and with none the client is refused at once", async (t) => {
    const ip = await clusterIP("scale");
    const c = new Checks();
    const follow = async (pods: string[]) => {
      const t0 = Date.now();
      await c.check(`${pods.length}: pod TCP`, () =>
        reachesExactly("default/client-1", "tcp", `${ip}:80`, pods),
      );
      // A figure for the record, not an assertion: pods Ready → a batch answered by exactly them.
      t.diagnostic(
        `${pods.length} endpoints: the pod client followed ${Date.now() - t0} ms after the pods were Ready`,
      );
      await c.check(`${pods.length}: pod UDP`, () =>
        reachesExactly("default/client-1", "udp", `${ip}:53`, pods),
      );
      await c.check(`${pods.length}: node TCP`, () => reachesExactly("node2", "tcp", `${ip}:80`, pods));
    };
    for (const replicas of [1, 5]) await follow(await scaleTo(replicas));
    await scaleTo(0);
    const t0 = Date.now();
    // Refused, not timed out: TCP gets a reset and UDP an ICMP port unreachable, from pods and from nodes.
    await c.check("0: pod TCP refused", () => refused("default/client-1", "tcp", `${ip}:80`));
    await c.check("0: pod UDP refused", () => refused("default/client-1", "udp", `${ip}:53`));
    await c.check("0: node TCP refused", () => refused("node2", "tcp", `${ip}:80`));
    await c.check("0: node UDP refused", () => refused("node2", "udp", `${ip}:53`));
    t.diagnostic(`0 endpoints: every client refused ${Date.now() - t0} ms after the last pod was gone`);
    await follow(await scaleTo(2));
    c.done();
  });

  it("a terminating pod gets no new connections while a ready endpoint exists", async () => {
    const ip = await clusterIP("term");
    const c = new Checks();
    await c.check("before: pod", () =>
      reachesExactly("default/client-3", "tcp", `${ip}:80`, ["term-a", "term-b"]),
    );
    await c.check("before: node", () => reachesExactly("node3", "tcp", `${ip}:80`, ["term-a", "term-b"]));
    const termAIP = await podIP("term-a");
    await kubectl(["delete", "pod", "term-a", "--wait=false"]);
    // The simulator gives it at most 10 s; podserver --drain keeps it answering all that time.
    await eventually("term-a is serving and terminating in the EndpointSlice", 8_000, async () =>
      (await sliceEndpoints("term")).some((e) => e.pod === "term-a" && e.terminating && e.serving)
        ? true
        : undefined,
    );
    const onlyB = (from: string) =>
      eventually(`${from}: new connections all go to term-b`, 4_000, async () => {
        const batch = await dialMany(sandbox, from, "tcp", `${ip}:80`, { count: 10, timeout: "1s" });
        if (!batch.every((a) => a.ok && a.server === "term-b")) throw new Error(describeTally(batch));
        return batch;
      });
    await c.check("terminating: pod", () => onlyB("default/client-3"));
    await c.check("terminating: node", () => onlyB("node3"));
    // term-a was still up and serving: it is the Service that kept new connections away from it.
    const direct = await dialMany(sandbox, "default/client-3", "tcp", `${termAIP}:8080`);
    assert.ok(
      direct[0]?.ok && direct[0].server === "term-a",
      `term-a still answers directly: ${describeTally(direct)}`,
    );
    const still = (await sliceEndpoints("term")).find((e) => e.pod === "term-a");
    assert.ok(
      still?.serving && still.terminating,
      `term-a still serving+terminating: ${JSON.stringify(still)}`,
    );
    c.done();
  });

  it("sessionAffinity ClientIP keeps a client on one endpoint; without it connections spread over all", async () => {
    const sticky = await clusterIP("web-affinity");
    const web = await clusterIP("web");
    const c = new Checks();
    for (const from of ["default/client-1", "node1"]) {
      await c.check(`${from}: affinity`, async () => {
        // OVN records the client's endpoint with a flow that its first connection's `learn` adds in
        // ovs-vswitchd; datapath flows cached before it are revalidated asynchronously (later on a loaded
        // machine), so the first few connections may still be balanced. Once 3 in a row meet one endpoint the
        // affinity is in place, and from then on every connection must keep to it.
        await eventually(
          `${from} reaches the affinity Service, 3 connections on one endpoint`,
          patience,
          async () => {
            const b = await dialMany(sandbox, from, "tcp", `${sticky}:80`, { count: 3 });
            if (!b.every((a) => a.ok) || servers(b).size !== 1) throw new Error(describeTally(b));
            return true;
          },
        );
        const first = await dialMany(sandbox, from, "tcp", `${sticky}:80`, { count: 30 });
        await sleep(3_000);
        const later = await dialMany(sandbox, from, "tcp", `${sticky}:80`, { count: 30 });
        const both = [...first, ...later];
        if (!both.every((a) => a.ok) || servers(both).size !== 1)
          throw new Error(`60 connections over 3 s, want one endpoint: ${describeTally(both)}`);
      });
      // 90 connections over 3 endpoints: each expects 30; fewer than 10 has odds below 1e-5.
      await c.check(`${from}: spread without affinity`, async () => {
        const spread = await dialMany(sandbox, from, "tcp", `${web}:80`, { count: 90 });
        const counts = ["web-1", "web-2", "web-3"].map(
          (s) => spread.filter((a) => a.ok && a.server === s).length,
        );
        if (!spread.every((a) => a.ok) || !counts.every((n) => n >= 10))
          throw new Error(`90 connections, want >= 10 on each of 3 endpoints: ${describeTally(spread)}`);
      });
    }
    c.done();
  });

  it("hairpin: a pod reaches itself through its own Service", async () => {
    const ip = await clusterIP("hairpin");
    const batch = await reachesExactly("default/hairpin", "tcp", `${ip}:80`, ["hairpin"], { count: 5 });
    assert.ok(
      batch.every((a) => a.ok && a.server === "hairpin"),
      `hairpin answered itself: ${describeTally(batch)}`,
    );
  });

  it("NodePort, externalTrafficPolicy Cluster: the external host reaches an endpoint on another node through every node IP; nodes and pods reach it too", async () => {
    const c = new Checks();
    for (const node of ["node1", "node2", "node3"]) {
      await c.check(`ext → ${node} TCP`, () =>
        reachesExactly("ext", "tcp", `${nodeIP(node)}:${NP_TCP}`, ["np-1"], { count: 5 }),
      );
      await c.check(`ext → ${node} UDP`, () =>
        reachesExactly("ext", "udp", `${nodeIP(node)}:${NP_UDP}`, ["np-1"], { count: 5 }),
      );
    }
    // From another node's own stack, a node's own NodePort, and a pod (which arrives through its node's
    // management port).
    await c.check("node2 → node3 TCP", () =>
      reachesExactly("node2", "tcp", `${nodeIP("node3")}:${NP_TCP}`, ["np-1"], { count: 5 }),
    );
    await c.check("node3 → node3 TCP", () =>
      reachesExactly("node3", "tcp", `${nodeIP("node3")}:${NP_TCP}`, ["np-1"], { count: 5 }),
    );
    await c.check("pod on node3 → node2 TCP", () =>
      reachesExactly("default/client-3", "tcp", `${nodeIP("node2")}:${NP_TCP}`, ["np-1"], { count: 5 }),
    );
    await c.check("pod on node3 → node2 UDP", () =>
      reachesExactly("default/client-3", "udp", `${nodeIP("node2")}:${NP_UDP}`, ["np-1"], { count: 5 }),
    );
    c.done();
  });

  it("NodePort, externalTrafficPolicy Cluster under NetworkPolicy: the pod sees the receiving node's service SNAT address, so deny-all ingress drops the NodePort while the pod's own node still reaches it, and allow-all admits it", async () => {
    const annotation = async (node: string) => {
      const text = await kubectl([
        "get",
        "node",
        node,
        "-o",
        String.raw`jsonpath={.metadata.annotations.network\.zstack\.io/mgmt-port}`,
      ]);
      const v = JSON.parse(text) as { ip: string; serviceSnatIp?: string };
      assert.ok(v.serviceSnatIp, `${node}'s annotation has a service SNAT address: ${text}`);
      return { mgmt: v.ip.split("/")[0]!, snat: v.serviceSnatIp };
    };
    // No stale cached flow or conntrack entry may answer for the ACLs (see docs/network-policy.md).
    const fresh = async () => {
      for (const node of ["node1", "node2", "node3"]) {
        await sandbox.inside(node, ["ovs-appctl", "dpctl/flush-conntrack"]);
        await sandbox.inside(node, ["ovs-appctl", "dpctl/del-flows"]);
      }
    };
    const npPolicy = (name: string, spec: object) => ({
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name, namespace: "default", labels: { [LABEL]: "1" } },
      spec: { podSelector: { matchLabels: { app: "np" } }, ...spec },
    });
    const c = new Checks();
    const addrs = { node1: await annotation("node1"), node2: await annotation("node2") };
    // np-1 runs on node1: through node2 the reply crosses the overlay back to node2's management port.
    for (const node of ["node1", "node2"] as const)
      await c.check(`ext → ${node}: the pod sees ${node}'s service SNAT address`, async () => {
        const batch = await reachesExactly("ext", "tcp", `${nodeIP(node)}:${NP_TCP}`, ["np-1"], { count: 5 });
        const seen = new Set(batch.flatMap((a) => (a.ok ? [a.client.split(":")[0]] : [])));
        assert.deepEqual([...seen], [addrs[node].snat], describeTally(batch));
      });
    const npIp = await podIP("np-1");
    try {
      await apply([npPolicy("np-deny-ingress", { policyTypes: ["Ingress"] })]);
      await c.check("deny-all: ext → node1 and node2 NodePort unanswered", async () => {
        await eventually("the NodePort is closed", PROPAGATION_MS, async () => {
          await fresh();
          for (const node of ["node1", "node2"]) {
            const batch = await dialMany(sandbox, "ext", "tcp", `${nodeIP(node)}:${NP_TCP}`, {
              count: 3,
              timeout: "1s",
            });
            if (batch.some((a) => a.ok)) throw new Error(`via ${node}: ${describeTally(batch)}`);
          }
          return true;
        });
      });
      await c.check(
        "deny-all: node1 (the pod's own node, the kubelet path) still reaches the pod",
        async () => {
          await fresh();
          const batch = await reachesExactly("node1", "tcp", `${npIp}:8080`, ["np-1"], { count: 5 });
          const seen = new Set(batch.flatMap((a) => (a.ok ? [a.client.split(":")[0]] : [])));
          assert.deepEqual([...seen], [addrs.node1.mgmt], describeTally(batch));
        },
      );
      await apply([npPolicy("np-allow-ingress", { ingress: [{}] })]);
      await c.check("deny-all + allow-all: ext → node2 NodePort answered again", async () => {
        await fresh();
        await reachesExactly("ext", "tcp", `${nodeIP("node2")}:${NP_TCP}`, ["np-1"], { count: 5 });
      });
    } finally {
      await kubectl(["delete", "networkpolicy", "-n", "default", "-l", `${LABEL}=1`, "--ignore-not-found"]);
    }
    c.done();
  });

  it("NodePort, externalTrafficPolicy Local: only local endpoints answer, the client address is preserved, the node itself gets every endpoint with its own address, and the health check port says 200 only where endpoints are", async () => {
    const c = new Checks();
    for (const [node, pod] of [
      ["node1", "lbl-1"],
      ["node2", "lbl-2"],
    ] as const) {
      await c.check(`ext → ${node}`, async () => {
        const batch = await reachesExactly("ext", "tcp", `${nodeIP(node)}:${LB_NODE_PORT}`, [pod], {
          count: 10,
        });
        const sources = new Set(batch.flatMap((a) => (a.ok ? [a.client.split(":")[0]] : [])));
        if (sources.size !== 1 || !sources.has(EXT_IP))
          throw new Error(`${pod} must see ${EXT_IP}, saw ${[...sources].join(", ")}`);
      });
    }
    // node3 has no endpoint: nothing answers there (kube-proxy drops too).
    await c.check("ext → node3 unanswered", () =>
      unanswered("ext", "tcp", `${nodeIP("node3")}:${LB_NODE_PORT}`),
    );
    // The node itself is an in-cluster client (kube-proxy's short-circuit): node3's own NodePort answers from
    // the endpoints on node1 and node2, which see node3's own address (the cluster router's reply policy brings
    // their replies back to node3).
    await c.check("node3 → its own NodePort: every endpoint, node3's address kept", async () => {
      const batch = await reachesExactly(
        "node3",
        "tcp",
        `${nodeIP("node3")}:${LB_NODE_PORT}`,
        ["lbl-1", "lbl-2"],
        {
          count: 10,
        },
      );
      const sources = new Set(batch.flatMap((a) => (a.ok ? [a.client.split(":")[0]] : [])));
      if (sources.size !== 1 || !sources.has(nodeIP("node3")))
        throw new Error(`the endpoints must see ${nodeIP("node3")}, saw ${[...sources].join(", ")}`);
    });
    // Another node's host is an outside client of node2's NodePort: node2's endpoint only, node1's address kept,
    // and the reply returns through node2 (which DNATed it), not to node1's reply policy.
    await c.check("node1 → node2's NodePort: lbl-2, node1's address kept", async () => {
      const batch = await reachesExactly("node1", "tcp", `${nodeIP("node2")}:${LB_NODE_PORT}`, ["lbl-2"], {
        count: 10,
      });
      const sources = new Set(batch.flatMap((a) => (a.ok ? [a.client.split(":")[0]] : [])));
      if (sources.size !== 1 || !sources.has(nodeIP("node1")))
        throw new Error(`lbl-2 must see ${nodeIP("node1")}, saw ${[...sources].join(", ")}`);
    });
    for (const node of ["node1", "node2"]) {
      await c.check(`health check ${node} 200`, async () => {
        const res = await eventually(`health check on ${node} says 200`, patience, async () => {
          const r = await httpGet("ext", `http://${nodeIP(node)}:${HEALTH_CHECK_PORT}/`);
          if (r.code !== 200) throw new Error(`HTTP ${r.code} ${r.body}`);
          return r;
        });
        const body = JSON.parse(res.body) as { localEndpoints?: number };
        if (body.localEndpoints !== 1 || !/lb-local/.test(res.body))
          throw new Error(`want localEndpoints 1 and the Service's name: ${res.body}`);
      });
    }
    await c.check("health check node3 503", () =>
      eventually("health check on node3 says 503", patience, async () => {
        const r = await httpGet("ext", `http://${nodeIP("node3")}:${HEALTH_CHECK_PORT}/`);
        if (r.code !== 503) throw new Error(`HTTP ${r.code} ${r.body}`);
        return r;
      }),
    );
    c.done();
  });

  it("LoadBalancer ingress IP and an externalIP: reached from the external host, and from pods", async () => {
    const c = new Checks();
    // The ingress IP is routed through node1 and the Service is externalTrafficPolicy Local: node1's endpoint,
    // with the client's address preserved.
    await c.check("ext → LB ingress IP", async () => {
      const lb = await reachesExactly("ext", "tcp", `${LB_INGRESS_IP}:80`, ["lbl-1"], { count: 10 });
      if (!lb.every((a) => a.ok && a.client.startsWith(`${EXT_IP}:`)))
        throw new Error(`the client address must be preserved: ${JSON.stringify(lb.slice(0, 3))}`);
    });
    // The externalIP is routed through node2; its Service (Cluster) has its only endpoint on node1.
    await c.check("ext → externalIP TCP", () =>
      reachesExactly("ext", "tcp", `${EXTERNAL_IP}:80`, ["np-1"], { count: 5 }),
    );
    await c.check("ext → externalIP UDP", () =>
      reachesExactly("ext", "udp", `${EXTERNAL_IP}:53`, ["np-1"], { count: 5 }),
    );
    // allocateLoadBalancerNodePorts: false: no node port was allocated, and the ingress IP works all the same.
    await c.check("allocateLoadBalancerNodePorts false: no node port, ingress IP served", async () => {
      const np = (
        await kubectl(["get", "svc", "lb-no-nodeport", "-o", "jsonpath={.spec.ports[*].nodePort}"])
      ).trim();
      if (np !== "") throw new Error(`node port allocated: ${np}`);
      await reachesExactly("ext", "tcp", `${LB_NO_NODEPORT_IP}:80`, ["np-1"], { count: 5 });
    });
    // Pods reach both addresses through the OVN load balancers, every endpoint included.
    await c.check("pod → LB ingress IP", () =>
      reachesExactly("default/client-3", "tcp", `${LB_INGRESS_IP}:80`, ["lbl-1", "lbl-2"]),
    );
    await c.check("pod → externalIP", () =>
      reachesExactly("default/client-3", "tcp", `${EXTERNAL_IP}:80`, ["np-1"], { count: 5 }),
    );
    c.done();
  });

  it("internalTrafficPolicy Local: pods and nodes reach only the endpoints on their own node", async () => {
    const ip = await clusterIP("itp");
    const c = new Checks();
    await c.check("pod on node1", () =>
      reachesExactly("default/client-1", "tcp", `${ip}:80`, ["itp-1"], { count: 20 }),
    );
    await c.check("node2", () => reachesExactly("node2", "tcp", `${ip}:80`, ["itp-2"], { count: 20 }));
    await c.check("node1", () => reachesExactly("node1", "tcp", `${ip}:80`, ["itp-1"], { count: 20 }));
    // node3 has no endpoint of its own, so its clients get none of the others'.
    await c.check("pod on node3 unanswered", () => unanswered("default/client-3", "tcp", `${ip}:80`));
    await c.check("node3 unanswered", () => unanswered("node3", "tcp", `${ip}:80`));
    c.done();
  });

  it("a ServiceCIDR added at run time: a Service allocated from it is reachable from pods and nodes", async () => {
    await apply([
      {
        apiVersion: "networking.k8s.io/v1",
        kind: "ServiceCIDR",
        metadata: { name: "svc-e2e-extra", labels: { [LABEL]: "1" } },
        spec: { cidrs: [EXTRA_SERVICE_CIDR] },
      },
    ]);
    await kubectl(["wait", "--for=condition=Ready", "servicecidr/svc-e2e-extra", "--timeout=60s"]);
    await apply([service("web-extra-cidr", "web", [TCP80, UDP53], { clusterIP: EXTRA_CLUSTER_IP })]);
    const all = ["web-1", "web-2", "web-3"];
    const c = new Checks();
    for (const from of ["default/client-1", "node3"]) {
      await c.check(`${from} TCP`, () => reachesExactly(from, "tcp", `${EXTRA_CLUSTER_IP}:80`, all));
      await c.check(`${from} UDP`, () => reachesExactly(from, "udp", `${EXTRA_CLUSTER_IP}:53`, all));
    }
    c.done();
  });

  it("the kubernetes Service from a pod: HTTPS to 10.96.0.1:443 gets the apiserver's answer", async () => {
    const ca = `${layout.pkiDir}/ca.crt`;
    const version = await eventually(
      "GET https://10.96.0.1/version from client-1",
      PROPAGATION_MS,
      async () => {
        // --cacert: the answer must come with the apiserver's own certificate (10.96.0.1 is one of its SANs).
        const out = await sandbox.inside(
          "default/client-1",
          ["curl", "-sS", "--max-time", "3", "--cacert", ca, "https://10.96.0.1:443/version"],
          { timeoutMs: 15_000 },
        );
        return JSON.parse(out) as { gitVersion?: string };
      },
    );
    assert.match(version.gitVersion ?? "", /^v1\.37\./);
  });

  it("bad input: a Service with fields that cannot be realized gets Warning Events naming them, and the rest keeps working", async () => {
    await apply([
      service("bad-input", "web", [TCP80], {
        // OVN's affinity timeout stops at 65535 s; the API allows up to 86400.
        sessionAffinity: "ClientIP",
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 70_000 } },
        // Inside the cluster CIDR: it would capture in-cluster traffic (CVE-2020-8554).
        externalIPs: ["10.244.200.200"],
      }),
    ]);
    const c = new Checks();
    await c.check("Warning Events name both fields", () =>
      eventually("Warning Events on service bad-input", patience, async () => {
        const out = await kubectl([
          "get",
          "events",
          "--field-selector",
          "involvedObject.kind=Service,involvedObject.name=bad-input,type=Warning",
          "-o",
          "jsonpath={range .items[*]}{.reason}: {.message}{'\\n'}{end}",
        ]);
        const lines = out.split("\n").filter(Boolean);
        if (!(lines.some((l) => /timeoutSeconds/.test(l)) && lines.some((l) => /externalIPs/.test(l))))
          throw new Error(`events so far: ${JSON.stringify(lines)}`);
        return lines;
      }),
    );
    // What can be realized is: the clusterIP answers (the clamped affinity keeps one endpoint); the externalIP
    // inside the cluster CIDR is not a VIP; and other Services are undisturbed.
    const ip = await clusterIP("bad-input");
    await c.check("its clusterIP answers, affinity kept", async () => {
      const batch = await eventually("bad-input's clusterIP answers", patience, async () => {
        const b = await dialMany(sandbox, "default/client-1", "tcp", `${ip}:80`, { count: 10 });
        if (!b.every((a) => a.ok)) throw new Error(describeTally(b));
        return b;
      });
      if (servers(batch).size !== 1) throw new Error(`affinity lost: ${describeTally(batch)}`);
    });
    await c.check("10.244.200.200 is no VIP", async () => {
      const hijack = await dialMany(sandbox, "default/client-1", "tcp", "10.244.200.200:80", {
        count: 2,
        timeout: "1s",
      });
      if (hijack.some((a) => a.ok)) throw new Error(describeTally(hijack));
    });
    await c.check("other Services undisturbed", async () =>
      reachesExactly("default/client-1", "tcp", `${await clusterIP("web")}:80`, ["web-1", "web-2", "web-3"]),
    );
    c.done();
  });

  it("a controller restart with nothing changed writes no NB transaction", async () => {
    // Quiet first: no key in any of the controller's queues, and no controller write for 5 s. A controller that is
    // behind (or stuck) fails here, naming its queues, rather than passing its backlog to its successor.
    const before = await eventually("the controller is quiet", 180_000, async () => {
      const busy = await busyQueues();
      if (busy !== "") throw new Error(`queues not empty: ${busy}`);
      const a = await controllerNbWrites();
      await sleep(5_000);
      return (await controllerNbWrites()) === a && (await busyQueues()) === "" ? a : undefined;
    });
    assert.ok(before > 0, "the controller's earlier writes are found in the NB file by their comment");
    const record = ctx().state.daemons.find((d) => d.name === CONTROLLER_DAEMON);
    assert.ok(record && isAlive(record), "the controller runs");
    const left = await terminate([record]);
    assert.deepEqual(left, [], "the controller stopped");
    await zovn(["up"]);
    const restarted = ctx().state.daemons.find((d) => d.name === CONTROLLER_DAEMON);
    assert.ok(restarted && restarted.pid !== record.pid, "up started a new controller");
    await eventually("the new controller leads and has synced (/leaderz 200)", 120_000, async () => {
      const r = await httpGet("cp", "http://127.0.0.1:10660/leaderz");
      return r.code === 200 ? true : undefined;
    });
    // Its startup sync and first reconciles of every kind run now; give them time to (not) write.
    await sleep(10_000);
    const afterRestart = await controllerNbWrites();
    assert.ok(afterRestart >= before, "the NB file was not compacted meanwhile (the count would drop)");
    if (afterRestart !== before)
      assert.fail(
        `NB write transactions by the restarted controller: ${afterRestart - before}, want 0; they wrote:\n` +
          (await controllerNbWritesSince(before)),
      );
  });

  it("ClusterIP (Geneve): pods and nodes reach the endpoints on their own node and on the others, over TCP and UDP", async () => {
    await zovn(["down", "--purge"]);
    await zovn(["up", "--encap", "geneve"]);
    const encap = await run("ovn-sbctl", [
      `--db=unix:${layout.centralDir}/sb.sock`,
      "--bare",
      "--columns=type",
      "list",
      "Encap",
    ]);
    assert.deepEqual([...new Set(encap.split("\n").filter(Boolean))], ["geneve"]);
    await apply(clusterIpWorkload());
    await kubectl(["wait", "--for=condition=Ready", "pod", "-l", `${LABEL}=1`, "--timeout=180s"]);
    await clusterIpMatrix();
  });
});
