// containerd on a real sandbox node (`up --kubelet`): Debian's containerd 1.6 with runc, run inside the
// node's network and mount namespaces, so its socket, state and runc root sit in the node's private /run and
// its CNI directories are the node's /etc/cni/net.d and /opt/cni/bin. Images come from local OCI archives.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "./command.ts";
import { spawnDetached } from "./daemon.ts";
import type { Layout } from "./layout.ts";
import { nsenterArgs, type Place } from "./netns.ts";
import type { NodeImage } from "./node-images.ts";
import { terminate } from "./process-table.ts";
import { liveDaemon, recordDaemon, type SandboxState } from "./state.ts";

/** Inside the node's mount namespace (its private /run). */
export const CONTAINERD_SOCKET = "/run/containerd/containerd.sock";
/** The namespace the CRI plugin keeps Kubernetes' images and containers in. */
export const CRI_NAMESPACE = "k8s.io";

export interface ContainerdConfigInput {
  /** Persistent root (images, snapshots), a per-node directory. */
  root: string;
  /** containerd's "opt" plugin directory, which defaults to the machine's /opt/containerd. */
  optDir: string;
  /** `registry.k8s.io/pause:3.10.2`: the CRI plugin runs every pod sandbox from it. */
  sandboxImage: string;
}

/**
 * A version 2 configuration that works on these machines (docs/sandbox.md): runc through the v2 shim with
 * cgroupfs, as the kubelet's cgroupDriver; `restrict_oom_score_adj`, because the machine lacks
 * CAP_SYS_RESOURCE and runc would fail every sandbox trying to set the kubelet's -998; only one CNI
 * configuration, the first in the node's /etc/cni/net.d, as the kubelet would expect.
 */
export function containerdConfig(input: ContainerdConfigInput): string {
  const q = (s: string) => JSON.stringify(s);
  const cri = '[plugins."io.containerd.grpc.v1.cri"';
  return [
    "version = 2",
    `root = ${q(input.root)}`,
    `state = ${q("/run/containerd")}`,
    // Snapshotters and tracing this machine cannot use would only log errors at start.
    "disabled_plugins = [",
    '  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
    '  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",',
    '  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",',
    "]",
    "",
    "[grpc]",
    `  address = ${q(CONTAINERD_SOCKET)}`,
    "",
    "[ttrpc]",
    `  address = ${q(`${CONTAINERD_SOCKET}.ttrpc`)}`,
    "",
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${q(input.optDir)}`,
    "",
    `${cri}]`,
    `  sandbox_image = ${q(input.sandboxImage)}`,
    "  restrict_oom_score_adj = true",
    "  enable_selinux = false",
    // The kubelet streams exec, attach and port-forward from here; the node's own loopback.
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    `${cri}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `${cri}.containerd.runtimes.runc.options]`,
    "  SystemdCgroup = false",
    `${cri}.cni]`,
    '  bin_dir = "/opt/cni/bin"',
    '  conf_dir = "/etc/cni/net.d"',
    "  max_conf_num = 1",
    "",
  ].join("\n");
}

export interface ContainerdNode {
  layout: Layout;
  state: SandboxState;
  place: Place;
  /** "node1": the daemon's record is "node1/containerd". */
  node: string;
  configFile: string;
  root: string;
  optDir: string;
  /** The node's private /run as seen from the machine, to wait for the socket. */
  runDir: string;
  log: string;
  sandboxImage: string;
}

function ctrArgs(args: readonly string[]): string[] {
  return ["--address", CONTAINERD_SOCKET, "--namespace", CRI_NAMESPACE, ...args];
}

/** `ctr` inside the node, against the node's containerd. */
export function ctr(place: Place, args: readonly string[], timeoutMs = 120_000): Promise<string> {
  return run("nsenter", [...nsenterArgs(place), "ctr", ...ctrArgs(args)], { timeoutMs });
}

async function waitReady(n: ContainerdNode, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const socket = join(n.runDir, "containerd", "containerd.sock");
  let last = "";
  while (Date.now() < deadline) {
    if (!liveDaemon(n.state, `${n.node}/containerd`)) throw new Error(`containerd exited; see ${n.log}`);
    if (existsSync(socket)) {
      try {
        await ctr(n.place, ["version"], 10_000);
        return;
      } catch (err) {
        last = (err as Error).message;
      }
    }
    await sleep(100);
  }
  throw new Error(`containerd on ${n.node} did not answer on ${CONTAINERD_SOCKET}: ${last}; see ${n.log}`);
}

function start(n: ContainerdNode): void {
  for (const d of [n.root, n.optDir]) mkdirSync(d, { recursive: true });
  writeFileSync(
    n.configFile,
    containerdConfig({ root: n.root, optDir: n.optDir, sandboxImage: n.sandboxImage }),
  );
  const id = spawnDetached({
    place: n.place,
    command: "containerd",
    args: ["--config", n.configFile],
    log: n.log,
  });
  recordDaemon(n.layout, n.state, { name: `${n.node}/containerd`, log: n.log, ...id });
}

/** The image names containerd holds in the CRI namespace. */
async function imageNames(place: Place): Promise<string[]> {
  return (await ctr(place, ["images", "list", "--quiet"])).split("\n").filter(Boolean);
}

/**
 * Starts containerd unless it runs, and imports every image it lacks under its exact name
 * (`ctr images import --base-name REPOSITORY` turns the archive's bare tag into REPOSITORY:TAG). The CRI
 * plugin's image store only learns of images imported behind its back when containerd starts, so after
 * any import containerd restarts once; the kubelet must start after this.
 */
export async function ensureContainerd(n: ContainerdNode, images: readonly NodeImage[]): Promise<void> {
  const name = `${n.node}/containerd`;
  if (!liveDaemon(n.state, name)) start(n);
  await waitReady(n, 60_000);
  const have = new Set(await imageNames(n.place));
  const missing = images.filter((i) => !have.has(`${i.repository}:${i.tag}`));
  for (const image of missing) {
    await ctr(n.place, ["images", "import", "--base-name", image.repository, image.archive], 300_000);
  }
  const names = await imageNames(n.place);
  const stray = names.filter((x) => /(^|\/)import-/.test(x));
  if (stray.length > 0) await ctr(n.place, ["images", "remove", ...stray]);
  const absent = images.filter((i) => !names.includes(`${i.repository}:${i.tag}`));
  if (absent.length > 0) {
    throw new Error(
      `containerd on ${n.node} lacks ${absent.map((i) => `${i.repository}:${i.tag}`).join(", ")} after import`,
    );
  }
  if (missing.length > 0) {
    const running = liveDaemon(n.state, name);
    if (running) await terminate([running]);
    start(n);
    await waitReady(n, 60_000);
  }
}
