// `zovn sandbox demo` on a sandbox brought up with `--zstack`: a Deployment in the namespace of each Subnet on
// ZStack's switches (overlay and flat), one pod per node, then TCP both ways between every pod and every VM of
// ZStack's on its switch (each side must see the other's own address: no NAT on ZStack's switch), from each pod's node to the pod (the path of
// kubelet probes: the management port, the cluster router, our router port on ZStack's switch), from each pod to
// its node's management address (the pod's annotation routes through our router port), and from each pod to a
// Service backed by the demo pods (DNAT on ZStack's switch, which refers to our cluster-IP load-balancer group).
// The last three only on the overlay switch: the flat one has a localnet port, and such a switch gets no router
// port of ours (docs/external-mode.md), so its pods talk with the VMs and ZStack's network only.

import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { MGMT_IFNAME } from "../../node/mgmt-port.ts";
import { run } from "../command.ts";
import { type DemoPod, demoManifest, demoPods, dial, listening } from "../demo.ts";
import { execArgv } from "../exec.ts";
import { kubectl } from "../kubectl.ts";
import type { Layout } from "../layout.ts";
import type { SandboxState } from "../state.ts";
import { type Topology, ZSTACK_NETWORKS, type ZStackNetworkPlan } from "../topology.ts";
import { VM_TCP_PORT, zstackPlan } from "./world.ts";

export const ZSTACK_DEMO = "zsdemo";
const POD_TCP_PORT = 8080;
/** The port of the listener the demo starts on each node, for pod → node. */
const NODE_TCP_PORT = 9092;

/** The demo's Service: port 80 to the pods' 8080. */
function serviceManifest(namespace: string): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: ZSTACK_DEMO, namespace },
    spec: {
      selector: { app: ZSTACK_DEMO },
      ports: [{ port: 80, targetPort: POD_TCP_PORT, protocol: "TCP" }],
    },
  });
}

export interface ZStackCheck {
  /** "pod -> vm (overlay)", "vm -> pod (flat)", "node -> pod", "pod -> node", "pod -> service (overlay)"... */
  kind: string;
  from: string;
  to: string;
  ok: boolean;
  /** The reply line "<server> <client ip:port> <payload>", or the error. */
  detail: string;
}

export interface ZStackPod extends DemoPod {
  namespace: string;
}

export interface ZStackDemoReport {
  pods: ZStackPod[];
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

/** Deploys the demo and its Service in the network's namespace; resolves with its Running pods. */
async function deployOn(
  layout: Layout,
  state: SandboxState,
  kubectlBin: string,
  net: ZStackNetworkPlan,
  replicas: number,
  deadline: number,
): Promise<ZStackPod[]> {
  const apply = (input: string) =>
    run(kubectlBin, ["--kubeconfig", `${layout.pkiDir}/admin.kubeconfig`, "apply", "-f", "-"], { input });
  await apply(demoManifest(replicas, undefined, ZSTACK_DEMO, net.namespace));
  await apply(serviceManifest(net.namespace));
  await kubectl(layout, state, [
    ...["rollout", "status", `deployment/${ZSTACK_DEMO}`, "-n", net.namespace],
    `--timeout=${Math.max(1, Math.ceil((deadline - Date.now()) / 1000))}s`,
  ]);
  for (;;) {
    const pods = await demoPods(layout, state, ZSTACK_DEMO, net.namespace);
    if (pods.length >= replicas) return pods.map((p) => ({ ...p, namespace: net.namespace }));
    if (Date.now() > deadline)
      throw new Error(`only ${pods.length}/${replicas} demo pods Running in ${net.namespace}`);
    await sleep(500);
  }
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
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
  const dialFrom = (from: string, ip: string, port: number, payload: string) =>
    dial(layout, topo, podserver, from, `${ip}:${port}`, payload);
  const pods: ZStackPod[] = [];
  const checks: ZStackCheck[] = [];
  for (const net of ZSTACK_NETWORKS) {
    const netPods = await deployOn(layout, state, kubectlBin, net, topo.nodes.length, deadline);
    pods.push(...netPods);
    for (const p of netPods) {
      const podRef = `${p.namespace}/${p.name}`;
      for (const vm of plan.vms.filter((v) => v.network === net.network)) {
        checks.push(
          await check(
            `pod -> vm (${net.network})`,
            p.name,
            vm.name,
            () => dialFrom(podRef, vm.ip, VM_TCP_PORT, "pod-to-vm"),
            (server, client) => server === vm.name && client === p.ip,
          ),
          await check(
            `vm -> pod (${net.network})`,
            vm.name,
            p.name,
            () => dialFrom(vm.name, p.ip, POD_TCP_PORT, "vm-to-pod"),
            (server, client) => server === p.name && client === vm.ip,
          ),
        );
      }
    }
    // The cluster's paths go through our router port on the switch (on the flat one too, with chassis MACs).
    if (!net.clusterPath) continue;
    const vip = (
      await kubectl(layout, state, [
        ...["get", "service", ZSTACK_DEMO, "-n", net.namespace],
        ...["-o", "jsonpath={.spec.clusterIP}"],
      ])
    ).trim();
    const names = new Set(netPods.map((p) => p.name));
    for (const p of netPods)
      checks.push(
        await check(
          `pod -> service (${net.network})`,
          p.name,
          `${net.namespace}/${ZSTACK_DEMO} (${vip}:80)`,
          () => dialFrom(`${p.namespace}/${p.name}`, vip, 80, "pod-to-service"),
          // A backend that is the client itself sees the VIP (OVN's hairpin SNAT), any other the pod's address.
          (server, client) => names.has(server) && client === (server === p.name ? vip : p.ip),
        ),
      );
  }
  for (const node of topo.nodes) {
    const mgmt = await managementAddress(layout, topo, node.name);
    const argv = execArgv(layout, topo, node.name, [
      ...[podserver, "--tcp", String(NODE_TCP_PORT), "--name", node.name],
    ]);
    const server = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
    try {
      await listening(server, `the podserver on ${node.name}`);
      const reached = new Set(ZSTACK_NETWORKS.filter((n) => n.clusterPath).map((n) => n.namespace));
      for (const p of pods.filter((x) => x.node === node.name && reached.has(x.namespace))) {
        checks.push(
          await check(
            "node -> pod",
            node.name,
            `${p.namespace}/${p.name}`,
            () => dialFrom(node.name, p.ip, POD_TCP_PORT, "node-to-pod"),
            (srv, client) => srv === p.name && client === mgmt,
          ),
          await check(
            "pod -> node",
            `${p.namespace}/${p.name}`,
            `${node.name} (${mgmt})`,
            () => dialFrom(`${p.namespace}/${p.name}`, mgmt, NODE_TCP_PORT, "pod-to-node"),
            (srv, client) => srv === node.name && client === p.ip,
          ),
        );
      }
    } finally {
      server.kill();
    }
  }
  return { pods, checks };
}

export function formatZStackReport(r: ZStackDemoReport): string {
  const lines = ["pods on ZStack's switches:"];
  for (const p of r.pods)
    lines.push(`  ${`${p.namespace}/${p.name}`.padEnd(40)} ${p.ip.padEnd(16)} ${p.node}`);
  lines.push(
    "",
    "TCP exchanges (reply: <server> <client address:port> <payload>; each side sees the other's own address):",
  );
  for (const c of r.checks)
    lines.push(
      `  ${c.kind.padEnd(24)} ${c.from.padEnd(34)} -> ${c.to.padEnd(34)} ${c.ok ? "ok  " : "FAIL"} ${c.detail}`,
    );
  lines.push(`  ${r.checks.filter((c) => c.ok).length}/${r.checks.length} ok`);
  return lines.join("\n");
}
