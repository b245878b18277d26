// `zovn sandbox demo`: a Deployment spread over the nodes, then a connectivity matrix proving each pod reaches
// every other pod over TCP (same node and across nodes), plus each pod's egress to the external host.

import { type ChildProcess, spawn } from "node:child_process";
import { isIP } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "./command.ts";
import { execArgv } from "./exec.ts";
import { kubectl } from "./kubectl.ts";
import type { Layout } from "./layout.ts";
import { imageRef, resolveNodeImages } from "./node-images.ts";
import type { SandboxState } from "./state.ts";
import { findHost, type Topology } from "./topology.ts";

export const DEMO_NAME = "demo";
const TCP_PORT = 8080;
const EXT_PORT = 9090;
const EXT_HTTP_PORT = 9091;

/**
 * On real nodes (`up --kubelet`) the demo pods are containers of the sandbox's busybox image: httpd with a CGI
 * script that answers as the simulator's podserver does, "<server name> <client ip:port> <payload>". It binds
 * IPv4 only, so the client address is never an IPv4-mapped IPv6 one.
 */
const REAL_NODE_SERVER = [
  "mkdir -p /www/cgi-bin",
  `printf '%s\\n' '#!/bin/sh' 'echo "Content-Type: text/plain"' echo 'echo "$(hostname) $REMOTE_ADDR:$REMOTE_PORT $QUERY_STRING"' > /www/cgi-bin/echo`,
  "chmod +x /www/cgi-bin/echo",
  `exec httpd -f -p 0.0.0.0:${TCP_PORT} -h /www`,
].join(" && ");

/** The demo Deployment: `app` in `namespace` (the demo's own, or `up --zstack`'s on ZStack's switch). */
export function demoManifest(
  replicas: number,
  busybox?: string,
  app: string = DEMO_NAME,
  namespace = "default",
): string {
  const container = busybox
    ? {
        name: "server",
        image: busybox,
        imagePullPolicy: "Never",
        command: ["sh", "-c", REAL_NODE_SERVER],
        ports: [{ containerPort: TCP_PORT, protocol: "TCP" }],
      }
    : {
        name: "podserver",
        image: "zstack-ovn/podserver",
        ports: [
          { containerPort: TCP_PORT, protocol: "TCP" },
          { containerPort: 8081, protocol: "UDP" },
          { containerPort: 80, name: "http", protocol: "TCP" },
        ],
      };
  return JSON.stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: app, namespace },
    spec: {
      replicas,
      selector: { matchLabels: { app } },
      template: {
        metadata: { labels: { app } },
        spec: {
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: "kubernetes.io/hostname",
              whenUnsatisfiable: "ScheduleAnyway",
              labelSelector: { matchLabels: { app } },
            },
          ],
          ...(busybox ? { terminationGracePeriodSeconds: 1 } : {}),
          containers: [container],
        },
      },
    },
  });
}

export interface DemoPod {
  name: string;
  ip: string;
  node: string;
}

export interface MatrixCell {
  from: string;
  to: string;
  ok: boolean;
  detail: string;
}

export interface DemoReport {
  pods: DemoPod[];
  matrix: MatrixCell[];
  egress: { pod: string; node: string; seenAs: string; ok: boolean }[];
}

/** The Running pods of the demo Deployment `app` in `namespace`. */
export async function demoPods(
  layout: Layout,
  state: SandboxState,
  app: string = DEMO_NAME,
  namespace = "default",
): Promise<DemoPod[]> {
  const out = await kubectl(layout, state, [
    "get",
    "pods",
    "-n",
    namespace,
    "-l",
    `app=${app}`,
    "-o",
    "jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{'\\n'}{end}",
  ]);
  return (
    out
      .split("\n")
      .map((l) => l.trim().split(" "))
      // A terminating pod has a fifth field, its deletion time.
      .filter((f) => f.length === 4 && f[3] === "Running" && f[1])
      .map(([name, ip, node]) => ({ name: name as string, ip: ip as string, node: node as string }))
  );
}

/** A TCP exchange by the podserver binary run in `from` (a host, a pod, a VM): the server's reply line. */
export async function dial(
  layout: Layout,
  topo: Topology,
  podserver: string,
  from: string,
  addr: string,
  payload: string,
): Promise<string> {
  const argv = execArgv(layout, topo, from, [
    podserver,
    "dial",
    "tcp",
    addr,
    "--payload",
    payload,
    "--timeout",
    "3s",
  ]);
  return (await run(argv[0] as string, argv.slice(1), { timeoutMs: 10_000 })).trim();
}

/** A TCP exchange from a demo pod: the reply line "<server name> <client ip:port> <payload>". */
type PodDial = (from: DemoPod, target: "pod" | "external", ip: string, payload: string) => Promise<string>;

/** The simulator's pods are network namespaces: the podserver binary dials from inside them. */
function simulatorDial(layout: Layout, topo: Topology, podserver: string): PodDial {
  return (from, target, ip, payload) =>
    dial(
      layout,
      topo,
      podserver,
      `default/${from.name}`,
      `${ip}:${target === "pod" ? TCP_PORT : EXT_PORT}`,
      payload,
    );
}

const PAYLOAD_RE = /^[a-z0-9.-]+$/;

/**
 * Real nodes' pods are containers: busybox nc, run by `kubectl exec`, sends an HTTP/1.0 GET to the server's CGI
 * script (pods) or the external podserver's HTTP port, which answer with the same reply line. (busybox 1.35's
 * static wget crashes in these containers.) The address, port and path reach the script as positional arguments,
 * never spliced into its text.
 */
function realNodeDial(layout: Layout, state: SandboxState): PodDial {
  const script = 'printf "GET %s HTTP/1.0\\r\\n\\r\\n" "$2" | nc -w 3 "$0" "$1"';
  return async (from, target, ip, payload) => {
    if (!isIP(ip) || !PAYLOAD_RE.test(payload)) throw new Error(`bad demo target ${ip} ${payload}`);
    const [port, path] =
      target === "pod" ? [TCP_PORT, `/cgi-bin/echo?${payload}`] : [EXT_HTTP_PORT, `/?echo=${payload}`];
    const out = await kubectl(layout, state, [
      ...["exec", "-n", "default", from.name, "--"],
      ...["sh", "-c", script, ip, String(port), path],
    ]);
    // The reply line is the body's last line, after the status line and headers.
    return (
      out
        .split(/\r?\n/)
        .filter((l) => l.trim() !== "")
        .at(-1) ?? ""
    ).trim();
  };
}

export async function runDemo(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  opts: { replicas?: number; timeoutMs?: number } = {},
): Promise<DemoReport> {
  const replicas = opts.replicas ?? topo.nodes.length * 2;
  const podserver = state.binaries?.PODSERVER;
  if (!podserver)
    throw new Error("the sandbox has no podserver binary recorded; run `zovn sandbox up` first");
  const busybox = state.spec.kubelet ? imageRef((await resolveNodeImages()).busybox) : undefined;
  await run(
    state.binaries?.KUBECTL as string,
    ["--kubeconfig", `${layout.pkiDir}/admin.kubeconfig`, "apply", "-f", "-"],
    { input: demoManifest(replicas, busybox) },
  );
  const podDial = busybox ? realNodeDial(layout, state) : simulatorDial(layout, topo, podserver);
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  // A changed template (another mode's demo left over) rolls the pods: wait for the new ones only.
  await kubectl(layout, state, [
    ...["rollout", "status", `deployment/${DEMO_NAME}`, "-n", "default"],
    `--timeout=${Math.ceil(timeoutMs / 1000)}s`,
  ]);
  let pods = await demoPods(layout, state);
  while (pods.length < replicas) {
    if (Date.now() > deadline) throw new Error(`only ${pods.length}/${replicas} demo pods Running`);
    await sleep(500);
    pods = await demoPods(layout, state);
  }
  const matrix: MatrixCell[] = [];
  for (const a of pods) {
    for (const b of pods) {
      if (a === b) continue;
      const payload = `${a.name}.to.${b.name}`;
      try {
        const reply = await podDial(a, "pod", b.ip, payload);
        // The server echoes "<server name> <client ip:port> <payload>": check all three.
        const [server, client, echoed] = reply.split(" ");
        const ok = server === b.name && client?.split(":")[0] === a.ip && echoed === payload;
        matrix.push({ from: a.name, to: b.name, ok, detail: reply });
      } catch (e) {
        matrix.push({
          from: a.name,
          to: b.name,
          ok: false,
          detail: (e as Error).message.split("\n")[0] ?? "",
        });
      }
    }
  }
  const egress = await egressCheck(topo, podserver, pods, podDial);
  return { pods, matrix, egress };
}

/** Resolves once the podserver logs "listening" on stderr; rejects if it exits or stays silent for 10 s. */
export function listening(server: ChildProcess, what = "the external podserver"): Promise<void> {
  return new Promise((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${err}`)), 10_000);
    server.stderr?.on("data", (d: Buffer) => {
      err += d.toString();
      if (err.includes("listening ")) {
        clearTimeout(timer);
        resolve();
      }
    });
    server.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}): ${err}`));
    });
  });
}

/** Each node's pods reach the external host, which sees the pod's node address as the source (local gateway). */
async function egressCheck(
  topo: Topology,
  podserver: string,
  pods: DemoPod[],
  podDial: PodDial,
): Promise<DemoReport["egress"]> {
  const ext = findHost(topo, "ext");
  if (!ext) return [];
  const server = spawn(
    "ip",
    [
      ...["netns", "exec", ext.netns, podserver],
      ...["--tcp", String(EXT_PORT), "--http", String(EXT_HTTP_PORT), "--name", "external"],
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  try {
    await listening(server);
    const out: DemoReport["egress"] = [];
    const oneEach = [...new Map(pods.map((p) => [p.node, p])).values()];
    for (const p of oneEach) {
      const nodeIp = topo.nodes.find((n) => n.name === p.node)?.ip ?? "?";
      try {
        const reply = await podDial(p, "external", ext.ip, "egress");
        const seenAs = reply.split(" ")[1]?.split(":")[0] ?? "";
        out.push({ pod: p.name, node: p.node, seenAs, ok: seenAs === nodeIp });
      } catch (e) {
        out.push({ pod: p.name, node: p.node, seenAs: (e as Error).message.split("\n")[0] ?? "", ok: false });
      }
    }
    return out;
  } finally {
    server.kill();
  }
}

export function formatReport(r: DemoReport): string {
  const names = r.pods.map((p) => p.name);
  const short = (n: string) => n.replace(`${DEMO_NAME}-`, "").slice(-5);
  const lines: string[] = [];
  lines.push("demo pods:");
  for (const p of r.pods) lines.push(`  ${p.name.padEnd(24)} ${p.ip.padEnd(15)} ${p.node}`);
  lines.push(
    "",
    "TCP connectivity matrix (row = client, column = server; ok = payload echoed back from the right pod):",
  );
  lines.push(`  ${"".padEnd(8)}${names.map((n) => short(n).padStart(7)).join("")}`);
  for (const a of names) {
    const cells = names.map((b) => {
      if (a === b) return "-".padStart(7);
      return (r.matrix.find((m) => m.from === a && m.to === b)?.ok ? "ok" : "FAIL").padStart(7);
    });
    lines.push(`  ${short(a).padEnd(8)}${cells.join("")}`);
  }
  const good = r.matrix.filter((m) => m.ok).length;
  lines.push(`  ${good}/${r.matrix.length} pairs reachable`);
  lines.push("", "egress to the external host (it must see the pod's node address):");
  for (const e of r.egress)
    lines.push(`  ${e.pod.padEnd(24)} on ${e.node}: seen as ${e.seenAs} ${e.ok ? "ok" : "FAIL"}`);
  return lines.join("\n");
}
