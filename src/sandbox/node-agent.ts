// Runs zstack-ovnkube-node on a sandbox node, inside the node's network and mount namespaces, as a DaemonSet
// pod would run on a real node: it owns br-int and ovn-controller's settings, the management port, egress SNAT,
// the CNI server on /var/run/zstack-ovn/cni-server.sock, the CNI binary and the conflist.

import {
  chmodSync,
  copyFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { CNI_BINARY_NAME, CNI_SHIM_NAME } from "../cni/install.ts";
import { NODE_FLAGS } from "../runtime-flags.ts";
import { resolveBinaries } from "./binaries.ts";
import { NODE_SA, writeServiceAccountKubeconfig } from "./chart-rbac.ts";
import { run } from "./command.ts";
import { spawnDetached } from "./daemon.ts";
import type { Layout } from "./layout.ts";
import { BR_PHY, nodePlace } from "./node.ts";
import type { Pki } from "./pki.ts";
import { repoRoot, tsNodeCommand } from "./repo.ts";
import { liveDaemon, recordDaemon, type SandboxState } from "./state.ts";
import {
  apiserverUrl,
  centralRemote,
  controlPlaneSources,
  FLAT_PROVIDER_BRIDGE,
  FLAT_UPLINK_IF,
  type Host,
  SANDBOX_PROVIDER,
  SB_PORT,
  type Topology,
} from "./topology.ts";
import { FLAT } from "./zstack/content.ts";

/** The plugin as the agent installs it (docs/cni.md): the Go forwarder, with the SEA shim beside it. */
export const CNI_DIR = join(repoRoot, "dist", "cni");
export const CNI_PLUGIN = join(CNI_DIR, CNI_BINARY_NAME);
const CNI_SHIM = join(CNI_DIR, CNI_SHIM_NAME);

/** What the single executable is built from (as mk/cni.mk lists it): a newer one means a rebuild. */
function cniSources(): string[] {
  const cniDir = join(repoRoot, "src", "cni");
  return [
    ...readdirSync(cniDir)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => join(cniDir, f)),
    join(repoRoot, "src", "cli", "zstack-ovn-cni.ts"),
    join(repoRoot, "tools", "build-sea.ts"),
    join(repoRoot, "package-lock.json"),
  ];
}

/**
 * Builds the single-executable CNI shim (a few seconds) when it is missing or older than any of its sources,
 * and puts the cached Go forwarder beside it when it differs, so a sandbox never runs a plugin that predates
 * the code under test.
 */
export async function ensureCniExecutable(): Promise<string> {
  const built = existsSync(CNI_SHIM) ? statSync(CNI_SHIM).mtimeMs : -1;
  const stale = built < 0 || cniSources().some((f) => existsSync(f) && statSync(f).mtimeMs > built);
  if (stale) {
    await run(
      process.execPath,
      ["--import", "tsx", join(repoRoot, "tools/build-sea.ts"), "--out", CNI_SHIM],
      {
        cwd: repoRoot,
        timeoutMs: 300_000,
      },
    );
  }
  const forwarder = (await resolveBinaries()).CNI_FORWARDER;
  if (!existsSync(CNI_PLUGIN) || !readFileSync(forwarder).equals(readFileSync(CNI_PLUGIN))) {
    const tmp = `${CNI_PLUGIN}.tmp-${process.pid}`;
    copyFileSync(forwarder, tmp);
    chmodSync(tmp, 0o755);
    renameSync(tmp, CNI_PLUGIN);
  }
  return CNI_PLUGIN;
}

export interface AgentContext {
  layout: Layout;
  topo: Topology;
  state: SandboxState;
  pki: Pki;
  /** kubectl and the admin kubeconfig, to mint the agent's ServiceAccount token. */
  kubectl: string;
  adminKubeconfig: string;
}

/**
 * Starts the agent unless it runs, with a fresh token of the chart's node ServiceAccount (as the DaemonSet's
 * pod would have): the node's kubelet credentials are not the agent's.
 */
export async function ensureNodeAgent(ctx: AgentContext, node: Host): Promise<void> {
  const name = `${node.name}/zstack-ovnkube-node`;
  if (liveDaemon(ctx.state, name)) return;
  const dirs = ctx.layout.node(node.name);
  const kubeconfig = join(dirs.kubelet, "zstack-ovnkube-node.kubeconfig");
  await writeServiceAccountKubeconfig({
    kubectl: ctx.kubectl,
    adminKubeconfig: ctx.adminKubeconfig,
    serviceAccount: NODE_SA,
    path: kubeconfig,
    server: apiserverUrl(ctx.topo),
    caCert: ctx.pki.caCert,
  });
  const log = join(dirs.logs, "zstack-ovnkube-node.log");
  const ts = tsNodeCommand(NODE_FLAGS);
  const id = spawnDetached({
    place: nodePlace(ctx.layout, node),
    command: ts.command,
    args: [...ts.args, join(repoRoot, "src/cli/zstack-ovnkube-node.ts")],
    log,
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      ZSTACK_NODE_NAME: node.name,
      ZSTACK_KUBECONFIG: kubeconfig,
      ZSTACK_OVN_SBDB_ADDRESS: centralRemote(ctx.topo, SB_PORT),
      ZSTACK_TUNNEL_TYPE: ctx.topo.spec.encap,
      ZSTACK_ENCAP_IP: node.ip,
      // No OVS kernel module here: the userspace datapath, with TX checksum offload off in pods.
      ZSTACK_DATAPATH_TYPE: "netdev",
      ZSTACK_CNI_BINARY: CNI_PLUGIN,
      // br-phy, which holds eth0, is the provider bridge of the underlay (and its VLAN); the sandbox made it.
      // `up --zstack`: also ZStack's provider `flat`, on br-flat, which the agent creates with the flat link.
      ZSTACK_BRIDGE_MAPPINGS: [
        `${SANDBOX_PROVIDER}:${BR_PHY}`,
        ...(ctx.topo.spec.zstack ? [`${FLAT.network}:${FLAT_PROVIDER_BRIDGE}:${FLAT_UPLINK_IF}`] : []),
      ].join(","),
      // Real nodes: the control-plane host routes the pod network through node1 (topology.ts,
      // controlPlanePodRoutes); every agent admits it, so the route may move to any node.
      ...(ctx.topo.spec.kubelet ? { ZSTACK_POD_ACCESS_FROM: controlPlaneSources(ctx.topo).join(",") } : {}),
      // `up --zstack`: the SB is the simulated ZStack's; the chassis is k8s-<node> beside ZStack's hosts.
      ...(ctx.topo.spec.zstack ? { ZSTACK_OVN_MODE: "external" } : {}),
    },
  });
  recordDaemon(ctx.layout, ctx.state, { name, log, ...id });
}
