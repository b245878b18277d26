// A sandbox node: a netns plus a mount namespace with private standard directories, and the infrastructure
// the sandbox owns on it: the underlay link, br-phy carrying the node's underlay IP (userspace native
// tunnelling needs the tunnel endpoint on an OVS bridge), ovsdb-server, ovs-vswitchd, ovn-controller and the
// node simulator. br-int and ovn-controller's settings belong to the node agent (see chassis-config.ts).

import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Binaries } from "./binaries.ts";
import { ensureCgroup, nodeCgroup } from "./cgroups.ts";
import { centralNode, type ProductImages } from "./chart-install.ts";
import { chassisConfigArgs } from "./chassis-config.ts";
import { ipBatch, run } from "./command.ts";
import { ensureContainerd } from "./containerd.ts";
import { runSelfDetaching, spawnDetached } from "./daemon.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import { currentOomScoreAdj, kubeletArgs, kubeletConfig } from "./kubelet.ts";
import type { KubeletSimConfig } from "./kubelet-sim.ts";
import { KUBELET_SYSCTLS, type Layout, type NodeDirs, nodeBinds } from "./layout.ts";
import { createMountNamespace, ensurePrivateNsDir, mountNamespaceExists } from "./mount-namespace.ts";
import { netnsInode, nsenterArgs, type Place } from "./netns.ts";
import { imageRef, type NodeImages } from "./node-images.ts";
import type { Pki } from "./pki.ts";
import { identify, type ProcessIdentity, readCmdline, readProcess, terminate } from "./process-table.ts";
import { tsNodeCommand, zovnEntry } from "./repo.ts";
import { liveDaemon, recordDaemon, type SandboxState, saveState } from "./state.ts";
import { processesIn } from "./sweep.ts";
import {
  apiserverUrl,
  CLUSTER_DNS_IP,
  CLUSTER_DOMAIN,
  type Host,
  type Topology,
  UNDERLAY_GATEWAY,
  UNDERLAY_PREFIX_LEN,
} from "./topology.ts";

export const BR_PHY = "br-phy";
/** Debian's containernetworking-plugins. */
const LOOPBACK_PLUGIN = "/usr/lib/cni/loopback";
const VSWITCH_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema";

export interface NodeContext {
  layout: Layout;
  topo: Topology;
  state: SandboxState;
  pki: Pki;
  bins: Binaries;
  /** Real-node mode only: what each node's containerd imports. */
  images?: NodeImages;
  /** Chart mode only: the product image for every node, OVN central's for the node it runs on. */
  productImages?: ProductImages;
}

export function nodePlace(layout: Layout, node: Host): Place {
  return { netns: node.netns, mountNsFile: layout.mountNsFile(node.name) };
}

/** Runs a command inside the node's namespaces and returns its stdout. */
export function runOnNode(
  layout: Layout,
  node: Host,
  command: string,
  args: readonly string[],
): Promise<string> {
  return run("nsenter", [...nsenterArgs(nodePlace(layout, node)), command, ...args]);
}

export async function ensureNodeMountNamespace(layout: Layout, node: Host, realNode = false): Promise<void> {
  await ensurePrivateNsDir(layout.nsDir);
  const dirs = layout.node(node.name);
  for (const d of [dirs.kubelet, dirs.podRecords, dirs.podLogs]) mkdirSync(d, { recursive: true });
  if (realNode) {
    mkdirSync(dirs.sysctlFakes, { recursive: true });
    for (const [key, value] of KUBELET_SYSCTLS)
      writeFileSync(join(dirs.sysctlFakes, key.replaceAll("/", ".")), `${value}\n`);
  }
  await createMountNamespace(layout.mountNsFile(node.name), nodeBinds(dirs, realNode));
  // A pod's `mountPropagation: HostToContainer` volume (the node agent's /var/run/netns) must sit on a shared
  // or slave mount, or containerd refuses the container ("path "/var/run/netns" is mounted on "/" but it is not
  // a shared or slave mount"); a real host's / is shared (systemd). The node's mounts become shared inside its
  // own namespace only, made with private propagation: their peers are the node's containers, never the machine.
  if (realNode) await runOnNode(layout, node, "mount", ["--make-rshared", "/"]);
}

function daemonName(node: Host, component: string): string {
  return `${node.name}/${component}`;
}

/**
 * ovsdb-server and ovs-vswitchd at their default paths, which the mount namespace makes private. Also ZStack's
 * hypervisors' (`up --zstack`).
 */
export async function ensureOvs(ctx: Pick<NodeContext, "layout" | "state">, node: Host): Promise<void> {
  const { layout, state } = ctx;
  const dirs = layout.node(node.name);
  const place = nodePlace(layout, node);
  mkdirSync(join(dirs.run, "openvswitch"), { recursive: true });
  const confDb = join(dirs.ovsEtc, "conf.db");
  if (!existsSync(confDb)) await run("ovsdb-tool", ["create", confDb, VSWITCH_SCHEMA]);
  const dbName = daemonName(node, "ovsdb-server");
  if (!liveDaemon(state, dbName)) {
    const args = [
      "/etc/openvswitch/conf.db",
      "--remote=punix:/var/run/openvswitch/db.sock",
      "--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
      "--pidfile",
      "--log-file",
      "--detach",
      "--no-chdir",
    ];
    const id = await runSelfDetaching(
      place,
      "ovsdb-server",
      args,
      join(dirs.run, "openvswitch", "ovsdb-server.pid"),
    );
    recordDaemon(layout, state, { name: dbName, log: join(dirs.ovsLogs, "ovsdb-server.log"), ...id });
    await runOnNode(layout, node, "ovs-vsctl", ["--no-wait", "init"]);
  }
  const swName = daemonName(node, "ovs-vswitchd");
  if (!liveDaemon(state, swName)) {
    // ZOVN_OVS_MONITOR=1 (hack/conformance.sh): ovs-vswitchd under OVS's own monitor, as Debian's ovs-ctl runs it
    // on a real host, so an abort (OVS 3.1's userspace conntrack assertion, docs/sandbox.md) restarts it instead
    // of leaving the node without its network. The monitor is what the sandbox records and stops.
    const monitor = process.env.ZOVN_OVS_MONITOR === "1";
    const args = ["--pidfile", "--log-file", "--detach", "--no-chdir", ...(monitor ? ["--monitor"] : [])];
    const child = await runSelfDetaching(
      place,
      "ovs-vswitchd",
      args,
      join(dirs.run, "openvswitch", "ovs-vswitchd.pid"),
    );
    const id = (monitor && monitorOf(child.pid, "ovs-vswitchd")) || child;
    recordDaemon(layout, state, { name: swName, log: join(dirs.ovsLogs, "ovs-vswitchd.log"), ...id });
  }
}

/** The OVS monitor of a daemon started with --monitor: its parent, running the same program. */
function monitorOf(pid: number, program: string): ProcessIdentity | undefined {
  const ppid = readProcess(pid)?.ppid;
  if (!ppid || ppid <= 1) return undefined;
  // OVS retitles its monitor ("ovs-vswitchd: monitoring pid N (healthy)").
  const argv0 = (readCmdline(ppid)[0] ?? "").split(/[\s:]/)[0] ?? "";
  return argv0 === program || argv0.endsWith(`/${program}`) ? identify(ppid) : undefined;
}

/** br-phy (userspace datapath) takes eth0 as its port and the node's underlay address. */
export async function ensureBrPhy(layout: Layout, node: Host): Promise<void> {
  const vsctl = ["--may-exist", "add-br", BR_PHY, "--", "set", "Bridge", BR_PHY, "datapath_type=netdev"];
  vsctl.push("--", "--may-exist", "add-port", BR_PHY, "eth0");
  await runOnNode(layout, node, "ovs-vsctl", vsctl);
  await ipBatch(
    [
      `link set ${BR_PHY} up`,
      `address replace ${node.ip}/${UNDERLAY_PREFIX_LEN} dev ${BR_PHY}`,
      `route replace default via ${UNDERLAY_GATEWAY} dev ${BR_PHY}`,
    ],
    node.netns,
  );
}

export async function ensureOvnController(
  ctx: Pick<NodeContext, "layout" | "state">,
  node: Host,
): Promise<void> {
  const { layout, state } = ctx;
  const dirs = layout.node(node.name);
  const name = daemonName(node, "ovn-controller");
  if (liveDaemon(state, name)) return;
  mkdirSync(join(dirs.run, "ovn"), { recursive: true });
  // ovn-controller's default log directory is OVS's; the node's OVN logs belong in /var/log/ovn.
  const args = ["--pidfile", "--log-file=/var/log/ovn/ovn-controller.log", "--detach", "--no-chdir"];
  const pidfile = join(dirs.run, "ovn", "ovn-controller.pid");
  const id = await runSelfDetaching(nodePlace(layout, node), "ovn-controller", args, pidfile);
  recordDaemon(layout, state, { name, log: join(dirs.ovnLogs, "ovn-controller.log"), ...id });
}

export function kubeletConfigFile(dirs: NodeDirs): string {
  return join(dirs.kubelet, "config.json");
}

/** The node's credentials (CN=system:node:NODE, O=system:nodes), for the simulator or the real kubelet. */
function writeNodeKubeconfig(ctx: NodeContext, node: Host): string {
  const dirs = ctx.layout.node(node.name);
  const kubeconfig = join(dirs.kubelet, "kubeconfig");
  const client = ctx.pki.cert(`node-${node.name}`);
  writeKubeconfig(kubeconfig, {
    server: apiserverUrl(ctx.topo),
    caCert: ctx.pki.caCert,
    clientCert: client.cert,
    clientKey: client.key,
    user: `system:node:${node.name}`,
  });
  return kubeconfig;
}

function writeKubeletConfig(ctx: NodeContext, node: Host): void {
  const dirs = ctx.layout.node(node.name);
  const kubeconfig = writeNodeKubeconfig(ctx, node);
  const cfg: KubeletSimConfig = {
    nodeName: node.name,
    nodeIp: node.ip,
    kubeconfig,
    cniDriver: ctx.bins.CNI_DRIVER,
    podserver: ctx.bins.PODSERVER,
    recordsDir: dirs.podRecords,
    podLogsDir: dirs.podLogs,
    cniConfDir: "/etc/cni/net.d",
  };
  writeFileSync(kubeletConfigFile(dirs), `${JSON.stringify(cfg, null, 2)}\n`);
}

function ensureNodeSimulator(ctx: NodeContext, node: Host): void {
  const { layout, state } = ctx;
  const name = daemonName(node, "kubelet-sim");
  if (liveDaemon(state, name)) return;
  writeKubeletConfig(ctx, node);
  const dirs = layout.node(node.name);
  const ts = tsNodeCommand();
  const log = join(dirs.logs, "kubelet-sim.log");
  const id = spawnDetached({
    place: nodePlace(layout, node),
    command: ts.command,
    args: [...ts.args, zovnEntry, "sandbox", "internal-kubelet", "--config", kubeletConfigFile(dirs)],
    log,
  });
  recordDaemon(layout, state, { name, log, ...id });
}

/**
 * Real-node mode: the node's cgroupRoot in every hierarchy, containerd with the images imported, then the
 * kubelet with the node's credentials.
 */
/**
 * The kubelet sets kernel sysctls at start; in the sandbox it must meet the node's fakes bound over them, never
 * the machine's. A mount namespace made before (by an `up` without --kubelet) lacks them: refuse, naming the fix.
 */
async function assertSysctlFakes(layout: Layout, node: Host): Promise<void> {
  const missing: string[] = [];
  for (const [key] of KUBELET_SYSCTLS) {
    const path = `/proc/sys/${key}`;
    const bound = await runOnNode(layout, node, "mountpoint", ["-q", path]).then(
      () => true,
      () => false,
    );
    if (!bound) missing.push(path);
  }
  if (missing.length > 0)
    throw new Error(
      `node ${node.name}: its mount namespace has no sandbox copy of ${missing.join(", ")}, so the kubelet would set the machine's own; run \`zovn sandbox down\` and then \`up --kubelet\``,
    );
}

async function ensureRealKubelet(ctx: NodeContext, node: Host): Promise<void> {
  const { layout, state } = ctx;
  const name = daemonName(node, "kubelet");
  if (liveDaemon(state, name)) return;
  const images = ctx.images;
  if (!images) throw new Error("real-node mode needs the node images");
  const dirs = layout.node(node.name);
  const place = nodePlace(layout, node);
  const cgroupRoot = nodeCgroup(ctx.topo.spec.name, node.name);
  ensureCgroup(cgroupRoot);
  // containerd 1.6 brings every pod's lo up with the reference loopback plugin from the node's CNI bin
  // directory; on a real node the OS's CNI plugins package provides it, here Debian's.
  mkdirSync(dirs.cniBin, { recursive: true });
  if (!existsSync(join(dirs.cniBin, "loopback")))
    copyFileSync(LOOPBACK_PLUGIN, join(dirs.cniBin, "loopback"));
  await ensureContainerd(
    {
      layout,
      state,
      place,
      node: node.name,
      configFile: join(dirs.kubelet, "containerd.toml"),
      root: dirs.containerdRoot,
      optDir: dirs.containerdOpt,
      runDir: dirs.run,
      log: join(dirs.logs, "containerd.log"),
      sandboxImage: imageRef(images.pause),
    },
    [
      images.pause,
      images.busybox,
      images.coredns,
      ...(ctx.productImages ? [ctx.productImages.product] : []),
      ...(ctx.productImages && node.name === centralNode(ctx.topo) ? [ctx.productImages.central] : []),
    ],
  );
  await assertSysctlFakes(layout, node);
  const kubeconfig = writeNodeKubeconfig(ctx, node);
  const config = join(dirs.kubelet, "kubelet-config.json");
  const cfg = kubeletConfig({
    cgroupRoot,
    clientCaFile: ctx.pki.caCert,
    oomScoreAdj: currentOomScoreAdj(),
    clusterDns: CLUSTER_DNS_IP,
    clusterDomain: CLUSTER_DOMAIN,
  });
  writeFileSync(config, `${JSON.stringify(cfg, null, 2)}\n`);
  const log = join(dirs.logs, "kubelet.log");
  const id = spawnDetached({
    place,
    command: ctx.bins.KUBELET,
    args: kubeletArgs({ config, kubeconfig, nodeName: node.name, nodeIp: node.ip }),
    log,
  });
  recordDaemon(layout, state, { name, log, ...id });
}

/**
 * Brings a node up, each part skipped when already there: namespaces, OVS, br-phy, the chassis settings
 * (unless the spec leaves them to the node agent), ovn-controller (unless the chart runs it), then the node
 * simulator or, in real-node mode, containerd and the kubelet. The node agent is started apart (node-agent.ts), once the apiserver can
 * mint its ServiceAccount token.
 */
export async function startNode(ctx: NodeContext, node: Host): Promise<void> {
  const realNode = ctx.topo.spec.kubelet === true;
  await ensureNodeMountNamespace(ctx.layout, node, realNode);
  await ensureOvs(ctx, node);
  await ensureBrPhy(ctx.layout, node);
  if (!ctx.topo.spec.nodeAgent)
    await runOnNode(ctx.layout, node, "ovs-vsctl", chassisConfigArgs(ctx.topo, node));
  // With the chart, ovn-controller runs in the node DaemonSet's pods; OVS stays the node's own (hostOVS).
  if (!ctx.topo.spec.chart) await ensureOvnController(ctx, node);
  if (realNode) await ensureRealKubelet(ctx, node);
  else ensureNodeSimulator(ctx, node);
}

/**
 * Powers the node off: every process in its namespaces ends, its mount namespace goes away (and with it the
 * pods' netns files), and its /run is emptied as a reboot would. The netns, eth0, the OVS database and the
 * CNI directories survive, like a machine's NIC and disk.
 */
export async function stopNode(layout: Layout, node: Host, state: SandboxState): Promise<void> {
  const file = layout.mountNsFile(node.name);
  const net = netnsInode(node.netns);
  const mntInodes = new Set<number>();
  if (mountNamespaceExists(file)) mntInodes.add(statSync(file).ino);
  await terminate(processesIn(new Set(net === undefined ? [] : [net]), mntInodes));
  state.daemons = state.daemons.filter((d) => !d.name.startsWith(`${node.name}/`));
  saveState(layout, state);
  if (mountNamespaceExists(file)) await run("umount", [file]);
  const { run: runDir } = layout.node(node.name);
  if (existsSync(runDir)) {
    for (const entry of readdirSync(runDir)) rmSync(join(runDir, entry), { recursive: true, force: true });
  }
}
