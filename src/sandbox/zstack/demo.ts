// `zovn sandbox demo` on a sandbox brought up with `--zstack`: a Deployment in the namespace of the Subnet on
// ZStack's overlay switch, one pod per node, then TCP both ways between every pod and every VM of ZStack's (each
// side must see the other's own address: no NAT on ZStack's switch), from each pod's node to the pod (the path of
// kubelet probes: the management port, the cluster router, our router port on ZStack's switch), from each pod to
// its node's management address (the pod's annotation routes through our router port), and from each pod to a
// Service backed by the demo pods (DNAT on ZStack's switch, which refers to our Service load-balancer group).

import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { MGMT_IFNAME } from "../../node/mgmt-port.ts";
import { run } from "../command.ts";
import { type DemoPod, demoManifest, demoPods, dial, listening } from "../demo.ts";
import { execArgv } from "../exec.ts";
import { kubectl } from "../kubectl.ts";
import type { Layout } from "../layout.ts";
import type { SandboxState } from "../state.ts";
import { type Topology, ZSTACK_NAMESPACE } from "../topology.ts";
import { VM_TCP_PORT, zstackPlan } from "./world.ts";

export const ZSTACK_DEMO = "zsdemo";
const POD_TCP_PORT = 8080;
/** The port of the listener the demo starts on each node, for pod → node. */
const NODE_TCP_PORT = 9092;

/** The demo's Service: port 80 to the pods' 8080. */
function serviceManifest(): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: ZSTACK_DEMO, namespace: ZSTACK_NAMESPACE },
    spec: {
      selector: { app: ZSTACK_DEMO },
      ports: [{ port: 80, targetPort: POD_TCP_PORT, protocol: "TCP" }],
    },
  });
}

export interface ZStackCheck {
  /** "pod -> vm", "vm -> pod", "node -> pod", "pod -> node", "pod -> service". */
  kind: string;
  from: string;
  to: string;
  ok: boolean;
  /** The reply line "<server> <client ip:port> <payload>", or the error. */
  detail: string;
}

export interface ZStackDemoReport {
  pods: DemoPod[];
  checks: ZStackCheck[];
}

/** The node's management port address (IPv4), the pods' way to their node. */
export async function managementAddress(layout: Layout, topo: Topology, node: string): Promise<string> {
  const argv = execArgv(layout, topo, node, ["ip", "-4", "-o", "address", "show", "dev", MGMT_IFNAME]);
  const out = await run(argv[0] as string, argv.slice(1));
  const m = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out);
  if (!m) throw new Error(`${node} has no IPv4 address on ${MGMT_IFNAME}`);
  return m[1] as string;
}

/** One exchange, retried while OVN settles (a far chassis installs a new port's flows on its own time). */
async function check(
  kind: string,
  from: string,
  to: string,
  attempt: () => Promise<string>,
  expect: (server: string, client: string) => boolean,
): Promise<ZStackCheck> {
  let detail = "";
  for (let i = 0; i < 20; i++) {
    try {
      detail = await attempt();
      const [server, client] = detail.split(" ");
      if (expect(server ?? "", client?.split(":")[0] ?? "")) return { kind, from, to, ok: true, detail };
    } catch (e) {
      detail = (e as Error).message.split("\n")[0] ?? "";
    }
    await sleep(500);
  }
  return { kind, from, to, ok: false, detail };
}

export async function runZStackDemo(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  opts: { timeoutMs?: number } = {},
): Promise<ZStackDemoReport> {
  const plan = zstackPlan(topo);
  const podserver = state.binaries?.PODSERVER;
  const kubectlBin = state.binaries?.KUBECTL;
  if (!podserver || !kubectlBin)
    throw new Error("the sandbox has no binaries recorded; run `zovn sandbox up` first");
  const replicas = topo.nodes.length;
  await run(kubectlBin, ["--kubeconfig", `${layout.pkiDir}/admin.kubeconfig`, "apply", "-f", "-"], {
    input: demoManifest(replicas, undefined, ZSTACK_DEMO, ZSTACK_NAMESPACE),
  });
  await run(kubectlBin, ["--kubeconfig", `${layout.pkiDir}/admin.kubeconfig`, "apply", "-f", "-"], {
    input: serviceManifest(),
  });
  const timeoutMs = opts.timeoutMs ?? 180_000;
  const deadline = Date.now() + timeoutMs;
  await kubectl(layout, state, [
    ...["rollout", "status", `deployment/${ZSTACK_DEMO}`, "-n", ZSTACK_NAMESPACE],
    `--timeout=${Math.ceil(timeoutMs / 1000)}s`,
  ]);
  let pods = await demoPods(layout, state, ZSTACK_DEMO, ZSTACK_NAMESPACE);
  while (pods.length < replicas) {
    if (Date.now() > deadline) throw new Error(`only ${pods.length}/${replicas} demo pods Running`);
    await sleep(500);
    pods = await demoPods(layout, state, ZSTACK_DEMO, ZSTACK_NAMESPACE);
  }
  const dialFrom = (from: string, ip: string, port: number, payload: string) =>
    dial(layout, topo, podserver, from, `${ip}:${port}`, payload);
  const checks: ZStackCheck[] = [];
  for (const p of pods) {
    const podRef = `${ZSTACK_NAMESPACE}/${p.name}`;
    for (const vm of plan.vms) {
      checks.push(
        await check(
          "pod -> vm",
          p.name,
          vm.name,
          () => dialFrom(podRef, vm.ip, VM_TCP_PORT, "pod-to-vm"),
          (server, client) => server === vm.name && client === p.ip,
        ),
        await check(
          "vm -> pod",
          vm.name,
          p.name,
          () => dialFrom(vm.name, p.ip, POD_TCP_PORT, "vm-to-pod"),
          (server, client) => server === p.name && client === vm.ip,
        ),
      );
    }
  }
  for (const node of topo.nodes) {
    const mgmt = await managementAddress(layout, topo, node.name);
    const argv = execArgv(layout, topo, node.name, [
      ...[podserver, "--tcp", String(NODE_TCP_PORT), "--name", node.name],
    ]);
    const server = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
    try {
      await listening(server, `the podserver on ${node.name}`);
      for (const p of pods.filter((x) => x.node === node.name)) {
        checks.push(
          await check(
            "node -> pod",
            node.name,
            p.name,
            () => dialFrom(node.name, p.ip, POD_TCP_PORT, "node-to-pod"),
            (srv, client) => srv === p.name && client === mgmt,
          ),
          await check(
            "pod -> node",
            p.name,
            `${node.name} (${mgmt})`,
            () => dialFrom(`${ZSTACK_NAMESPACE}/${p.name}`, mgmt, NODE_TCP_PORT, "pod-to-node"),
            (srv, client) => srv === node.name && client === p.ip,
          ),
        );
      }
    } finally {
      server.kill();
    }
  }
  const vip = (
    await kubectl(layout, state, [
      ...["get", "service", ZSTACK_DEMO, "-n", ZSTACK_NAMESPACE],
      ...["-o", "jsonpath={.spec.clusterIP}"],
    ])
  ).trim();
  const names = new Set(pods.map((p) => p.name));
  for (const p of pods)
    checks.push(
      await check(
        "pod -> service",
        p.name,
        `${ZSTACK_NAMESPACE}/${ZSTACK_DEMO} (${vip}:80)`,
        () => dialFrom(`${ZSTACK_NAMESPACE}/${p.name}`, vip, 80, "pod-to-service"),
        // A backend that is the client itself sees the VIP (OVN's hairpin SNAT), any other the pod's address.
        (server, client) => names.has(server) && client === (server === p.name ? vip : p.ip),
      ),
    );
  return { pods, checks };
}

export function formatZStackReport(r: ZStackDemoReport): string {
  const lines = [`pods on ZStack's overlay switch (namespace ${ZSTACK_NAMESPACE}):`];
  for (const p of r.pods) lines.push(`  ${p.name.padEnd(28)} ${p.ip.padEnd(15)} ${p.node}`);
  lines.push(
    "",
    "TCP exchanges (reply: <server> <client address:port> <payload>; each side sees the other's own address):",
  );
  for (const c of r.checks)
    lines.push(
      `  ${c.kind.padEnd(12)} ${c.from.padEnd(28)} -> ${c.to.padEnd(28)} ${c.ok ? "ok  " : "FAIL"} ${c.detail}`,
    );
  lines.push(`  ${r.checks.filter((c) => c.ok).length}/${r.checks.length} ok`);
  return lines.join("\n");
}
