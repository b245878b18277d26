// `zovn sandbox ...`: parses the arguments and hands each subcommand to its module in src/sandbox.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { runApiserverForward } from "../sandbox/apiserver-forward.ts";
import { formatReport, runDemo } from "../sandbox/demo.ts";
import { sandboxDown } from "../sandbox/down.ts";
import { execArgv, execInteractive } from "../sandbox/exec.ts";
import { kubectl, kubectlInteractive } from "../sandbox/kubectl.ts";
import type { KubeletSimConfig } from "../sandbox/kubelet-sim.ts";
import { DEFAULT_BASE_DIR, layoutFor } from "../sandbox/layout.ts";
import { ovnCtl } from "../sandbox/ovn-central.ts";
import { Progress } from "../sandbox/progress.ts";
import { restartNode } from "../sandbox/restart-node.ts";
import { loadState } from "../sandbox/state.ts";
import { sandboxStatus } from "../sandbox/status.ts";
import {
  DEFAULT_SPEC,
  type Encap,
  planTopology,
  type SandboxSpec,
  validateName,
} from "../sandbox/topology.ts";
import type { UpResult } from "../sandbox/up.ts";
import { upSummary } from "../sandbox/up-summary.ts";

const usage = `usage: zovn sandbox [--name NAME] COMMAND ...

  demo     deploy a Deployment over the nodes and print a pod-to-pod connectivity matrix
           (up --zstack: pods on ZStack's switches and ZStack's VMs, both ways; node <-> pod; pod -> Service)
  up [--nodes N] [--raft] [--encap vxlan|geneve] [--no-node-agent] [--kubelet [--no-chart]] [--timeout SECONDS]
        bring the sandbox up (idempotent); prints the time until all nodes are Ready;
        --kubelet: real nodes (containerd and a real kubelet) instead of the node simulator, with the product
        installed on them by its Helm chart (--chart, the default with --kubelet);
        --no-chart: the product as sandbox processes on the real nodes (the default with --raft or --no-node-agent)
  up --zstack [--raft] [--nodes N] [--timeout SECONDS]
        External mode against a simulated ZStack: its controller host (NB, SB, northd with ZStack's content), two
        hypervisors with VMs on its overlay and flat switches, the controller and node agents on ZStack's NB and SB,
        Subnets on both switches (namespaces zstack, zstack-flat); --raft: ZStack's NB and SB as 3-member Raft
        clusters (a northd per member); not with --kubelet, --chart, --no-node-agent or --encap vxlan
  down [--purge]          stop and remove everything; --purge also deletes the logs
  status                  components, nodes and chassis
  kubectl ARGS...         kubectl against the sandbox apiserver
  exec TARGET -- CMD...   run CMD in cp, ext, a node (node1...), a pod (NAMESPACE/NAME),
                          or with --zstack zs, zh1, zh2, vm21, vm22, vm31, vm32
  restart-node NODE       reboot a node: its processes and pod sandboxes are recreated

NAME defaults to $ZOVN_SANDBOX_NAME or "${DEFAULT_SPEC.name}"; files live under $ZOVN_SANDBOX_BASE (default ${DEFAULT_BASE_DIR}).`;

interface Instance {
  name: string;
  baseDir: string | undefined;
}

/** Returns the exit code, or -1 for the internal daemons, which keep the process alive. */
export async function runSandboxCommand(argv: string[]): Promise<number> {
  const instance: Instance = {
    name: process.env.ZOVN_SANDBOX_NAME || DEFAULT_SPEC.name,
    baseDir: process.env.ZOVN_SANDBOX_BASE || undefined,
  };
  let i = 0;
  while (argv[i]?.startsWith("--name")) {
    const arg = argv[i] as string;
    instance.name = arg.includes("=") ? arg.slice("--name=".length) : (argv[++i] ?? "");
    i++;
  }
  const [command, ...rest] = argv.slice(i);
  validateName(instance.name);
  if (command && !["-h", "--help"].includes(command) && process.getuid?.() !== 0) {
    throw new Error("the sandbox needs root (network and mount namespaces)");
  }
  switch (command) {
    case "up":
      return up(instance, rest);
    case "down":
      return down(instance, rest);
    case "status":
      return (await sandboxStatus(instance.name, instance.baseDir, process.stdout)) ? 0 : 1;
    case "kubectl": {
      const state = loadState(layoutFor(instance.name, instance.baseDir));
      if (!state) throw new Error(`sandbox "${instance.name}" is not up`);
      return kubectlInteractive(layoutFor(instance.name, instance.baseDir), state, rest);
    }
    case "exec":
      return exec(instance, rest);
    case "demo": {
      const layout = layoutFor(instance.name, instance.baseDir);
      const state = loadState(layout);
      if (!state) throw new Error(`sandbox "${instance.name}" is not up`);
      if (state.spec.zstack) {
        const { runZStackDemo, formatZStackReport } = await import("../sandbox/zstack/demo.ts");
        const zs = await runZStackDemo(layout, planTopology(state.spec), state);
        process.stdout.write(`${formatZStackReport(zs)}\n`);
        return zs.checks.length > 0 && zs.checks.every((c) => c.ok) ? 0 : 1;
      }
      const report = await runDemo(layout, planTopology(state.spec), state);
      process.stdout.write(`${formatReport(report)}\n`);
      return report.matrix.every((m) => m.ok) && report.egress.every((e) => e.ok) ? 0 : 1;
    }
    case "restart-node": {
      if (!rest[0]) throw new Error("restart-node needs a node name");
      await restartNode(instance.name, instance.baseDir, rest[0], new Progress());
      return 0;
    }
    case "internal-kubelet":
      return internalKubelet(rest);
    case "internal-forward":
      return internalForward(rest);
    case undefined:
    case "-h":
    case "--help":
      process.stdout.write(`${usage}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`zovn sandbox: unknown command "${command}"\n${usage}\n`);
      return 2;
  }
}

async function up(instance: Instance, argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: "string" },
      raft: { type: "boolean" },
      encap: { type: "string" },
      "node-agent": { type: "boolean" },
      "no-node-agent": { type: "boolean" },
      kubelet: { type: "boolean" },
      zstack: { type: "boolean" },
      chart: { type: "boolean" },
      "no-chart": { type: "boolean" },
      timeout: { type: "string" },
    },
  });
  const spec: SandboxSpec = { ...DEFAULT_SPEC, name: instance.name };
  const explicit = new Set<keyof SandboxSpec>();
  if (values.nodes !== undefined) {
    spec.nodes = Number(values.nodes);
    explicit.add("nodes");
  }
  if (values.raft !== undefined) {
    spec.raft = values.raft;
    explicit.add("raft");
  }
  if (values.encap !== undefined) {
    spec.encap = values.encap as Encap;
    explicit.add("encap");
  }
  if (values["node-agent"] !== undefined || values["no-node-agent"] !== undefined) {
    spec.nodeAgent = values["no-node-agent"] !== true;
    explicit.add("nodeAgent");
  }
  if (values.kubelet !== undefined) {
    spec.kubelet = values.kubelet;
    explicit.add("kubelet");
  }
  if (values.zstack !== undefined) {
    spec.zstack = values.zstack;
    explicit.add("zstack");
    // ZStack's hosts use Geneve; an explicit --encap vxlan is refused by the topology's check.
    if (values.encap === undefined && spec.zstack) {
      spec.encap = "geneve";
      explicit.add("encap");
    }
  }
  if (values.chart !== undefined && values["no-chart"] !== undefined)
    throw new Error("--chart and --no-chart contradict each other: give one of them");
  if (values.chart !== undefined || values["no-chart"] !== undefined) {
    spec.chart = values["no-chart"] !== true && values.chart === true;
    explicit.add("chart");
    // The chart's pods need a kubelet to run them.
    if (spec.chart && !spec.kubelet) {
      spec.kubelet = true;
      explicit.add("kubelet");
    }
  } else if (spec.kubelet && values.raft !== true && values["no-node-agent"] !== true) {
    // Real nodes get the product the way an operator installs it: by its chart. The chart installs a single OVN
    // central and needs the node agent, so --raft and --no-node-agent keep the process mode.
    spec.chart = true;
    explicit.add("chart");
  }
  const progress = new Progress();
  // Loaded on demand: the Kubernetes client is large, and the relay process needs none of it.
  const { sandboxUp } = await import("../sandbox/up.ts");
  let result: UpResult;
  try {
    result = await sandboxUp(
      {
        spec,
        explicit,
        ...(instance.baseDir ? { baseDir: instance.baseDir } : {}),
        ...(values.timeout ? { readyTimeoutMs: Number(values.timeout) * 1000 } : {}),
      },
      progress,
    );
  } catch (err) {
    const logs = layoutFor(instance.name, instance.baseDir).logDir;
    throw new Error(
      `${(err as Error).message}\n  logs: ${logs}\n  what runs: zovn sandbox status; clean up: zovn sandbox down`,
    );
  }
  process.stdout.write("\n$ kubectl get nodes -o wide\n");
  process.stdout.write(await kubectl(result.layout, result.state, ["get", "nodes", "-o", "wide"]));
  process.stdout.write("\n$ ovn-sbctl show\n");
  process.stdout.write(await ovnCtl(result.layout, result.topo, "sb", ["show"]));
  process.stdout.write(upSummary(result));
  return 0;
}

async function down(instance: Instance, argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { purge: { type: "boolean" } } });
  const progress = new Progress();
  await sandboxDown(
    { name: instance.name, baseDir: instance.baseDir, purge: values.purge === true },
    progress,
  );
  progress.note(`sandbox "${instance.name}" is down`);
  return 0;
}

async function exec(instance: Instance, argv: string[]): Promise<number> {
  const [target, ...rest] = argv;
  const command = rest[0] === "--" ? rest.slice(1) : rest;
  if (!target || command.length === 0) throw new Error("usage: zovn sandbox exec TARGET -- CMD...");
  const layout = layoutFor(instance.name, instance.baseDir);
  const state = loadState(layout);
  if (!state) throw new Error(`sandbox "${instance.name}" is not up`);
  return execInteractive(execArgv(layout, planTopology(state.spec), target, command));
}

async function internalKubelet(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: "string" } } });
  if (!values.config) throw new Error("internal-kubelet needs --config");
  const cfg = JSON.parse(readFileSync(values.config, "utf8")) as KubeletSimConfig;
  const [{ pino }, { NodeSimulator }] = await Promise.all([
    import("pino"),
    import("../sandbox/kubelet-sim.ts"),
  ]);
  const log = pino({ base: { node: cfg.nodeName } });
  process.on("SIGTERM", () => process.exit(0));
  await new NodeSimulator(cfg, log).start();
  return -1;
}

function internalForward(argv: string[]): number {
  const { values } = parseArgs({
    args: argv,
    options: { target: { type: "string" }, tag: { type: "string" } },
  });
  if (!values.target) throw new Error("internal-forward needs --target");
  process.on("SIGTERM", () => process.exit(0));
  runApiserverForward(values.target);
  return -1;
}
