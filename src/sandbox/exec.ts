// `zovn sandbox exec TARGET -- CMD...`: runs a command in a host's namespaces (cp, ext, a node) or a pod's
// (NAMESPACE/NAME, or NAME in "default"). A pod's netns file exists only in its node's mount namespace, so
// the command enters the node's namespaces first and the pod's netns from there.

import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Layout } from "./layout.ts";
import { nsenterArgs } from "./netns.ts";
import { nodePlace } from "./node.ts";
import type { SandboxRecord } from "./pod-sandbox.ts";
import { findHost, type Host, type Topology } from "./topology.ts";

export interface PodLocation {
  node: Host;
  record: SandboxRecord;
}

export function findPod(layout: Layout, topo: Topology, target: string): PodLocation | undefined {
  const [namespace, name] = target.includes("/") ? target.split("/", 2) : ["default", target];
  for (const node of topo.nodes) {
    const dir = layout.node(node.name).podRecords;
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) {
      if (!f.endsWith(".json")) continue;
      const record = JSON.parse(readFileSync(join(dir, f), "utf8")) as SandboxRecord;
      if (record.namespace === namespace && record.name === name) return { node, record };
    }
  }
  return undefined;
}

/** The argv (nsenter ... -- CMD) that runs `command` inside the target's namespaces. */
export function execArgv(
  layout: Layout,
  topo: Topology,
  target: string,
  command: readonly string[],
): string[] {
  const host = findHost(topo, target);
  if (host) {
    const place =
      host.role === "node" || host.role === "hypervisor" ? nodePlace(layout, host) : { netns: host.netns };
    return ["nsenter", ...nsenterArgs(place), ...command];
  }
  const vm = topo.zstack?.vms.find((v) => v.name === target);
  if (vm) return ["nsenter", ...nsenterArgs({ netns: vm.netns }), ...command];
  const pod = findPod(layout, topo, target);
  if (!pod) {
    const zs = topo.zstack
      ? [topo.zstack.controller, ...topo.zstack.hypervisors, ...topo.zstack.vms].map((h) => h.name)
      : [];
    const hosts = ["cp", "ext", ...topo.nodes.map((n) => n.name), ...zs].join(", ");
    throw new Error(`no host or pod sandbox named "${target}" (hosts: ${hosts}; pods as NAMESPACE/NAME)`);
  }
  const outer = ["nsenter", ...nsenterArgs(nodePlace(layout, pod.node))];
  if (!pod.record.netns) return [...outer, ...command];
  return [...outer, "nsenter", `--net=/run/netns/${pod.record.netns}`, "--", ...command];
}

export function execInteractive(argv: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: "inherit" });
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}
