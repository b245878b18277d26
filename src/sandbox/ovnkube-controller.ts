// Runs zstack-ovnkube-controller in the sandbox, as a process on the control-plane host: the Subnet CRD is
// applied first, then the controller starts with the sandbox's NB remotes, an apiserver URL reachable from
// the control-plane netns and a token of the chart's controller ServiceAccount (chart-rbac.ts), never admin.

import { join } from "node:path";
import { NODE_FLAGS } from "../runtime-flags.ts";
import type { Binaries } from "./binaries.ts";
import {
  CONTROLLER_SA,
  chartRbacObjects,
  serviceAccountNamespace,
  writeServiceAccountKubeconfig,
} from "./chart-rbac.ts";
import { run } from "./command.ts";
import { spawnDetached } from "./daemon.ts";
import type { Layout } from "./layout.ts";
import type { Pki } from "./pki.ts";
import { repoRoot, tsNodeCommand } from "./repo.ts";
import { type DaemonRecord, liveDaemon, recordDaemon, type SandboxState } from "./state.ts";
import { apiserverUrl, centralRemote, NB_PORT, SB_PORT, type Topology } from "./topology.ts";

export const CONTROLLER_DAEMON = "cp/zstack-ovnkube-controller";
export const SUBNET_CRD = join(repoRoot, "deploy/crds/subnet.network.zstack.io.yaml");

export interface ControllerContext {
  layout: Layout;
  topo: Topology;
  pki: Pki;
  bins: Binaries;
  state: SandboxState;
  adminKubeconfig: string;
  encap: "vxlan" | "geneve";
}

export async function ensureOvnkubeController(ctx: ControllerContext): Promise<DaemonRecord> {
  await run(ctx.bins.KUBECTL, ["--kubeconfig", ctx.adminKubeconfig, "apply", "-f", SUBNET_CRD]);
  await run(ctx.bins.KUBECTL, [
    "--kubeconfig",
    ctx.adminKubeconfig,
    "wait",
    "--for=condition=Established",
    "--timeout=30s",
    "crd/subnets.network.zstack.io",
  ]);
  const live = liveDaemon(ctx.state, CONTROLLER_DAEMON);
  if (live) return live;
  // The controller reaches the apiserver over the underlay, as a Deployment would over the pod network.
  const kubeconfig = join(ctx.layout.kubeDir, "zstack-ovnkube-controller.kubeconfig");
  await writeServiceAccountKubeconfig({
    kubectl: ctx.bins.KUBECTL,
    adminKubeconfig: ctx.adminKubeconfig,
    serviceAccount: CONTROLLER_SA,
    path: kubeconfig,
    server: apiserverUrl(ctx.topo),
    caCert: ctx.pki.caCert,
  });
  // The chart's leader-election Role covers one Lease, named after the ServiceAccount, in its namespace.
  const leaseNamespace = serviceAccountNamespace(chartRbacObjects(), CONTROLLER_SA);
  const log = join(ctx.layout.cpLogDir, "zstack-ovnkube-controller.log");
  const ts = tsNodeCommand(NODE_FLAGS);
  const id = spawnDetached({
    place: { netns: ctx.topo.controlPlane.netns },
    command: ts.command,
    args: [...ts.args, join(repoRoot, "src/cli/zstack-ovnkube-controller.ts")],
    log,
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      ZSTACK_OVN_NBDB_ADDRESS: centralRemote(ctx.topo, NB_PORT),
      ZSTACK_KUBECONFIG: kubeconfig,
      ZSTACK_TUNNEL_TYPE: ctx.encap,
      ZSTACK_LEASE_NAMESPACE: leaseNamespace,
      ZSTACK_LEASE_NAME: CONTROLLER_SA,
      ZSTACK_LOG_FORMAT: "json",
      ZSTACK_POD_NAME: "sandbox-controller-1",
      // `up --zstack`: the NB and SB are the simulated ZStack's (docs/external-mode.md).
      ...(ctx.topo.spec.zstack
        ? { ZSTACK_OVN_MODE: "external", ZSTACK_OVN_SBDB_ADDRESS: centralRemote(ctx.topo, SB_PORT) }
        : {}),
    },
  });
  const record: DaemonRecord = { name: CONTROLLER_DAEMON, log, ...id };
  recordDaemon(ctx.layout, ctx.state, record);
  return record;
}
