// Per-node mount namespaces. Each node sees its own /run, /etc/cni/net.d, /opt/cni/bin, /var/lib/cni and OVS
// directories at the standard paths, so the product runs unchanged and nodes never collide. A namespace
// persists without any process in it through a bind mount of its nsfs file, the way `ip netns` keeps netns.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { run } from "./command.ts";
import { isMountPoint, readMountInfo } from "./netns.ts";

/**
 * The directory holding namespace files must not have shared propagation (the kernel refuses to bind an nsfs
 * file there), so it is bound onto itself and made private, whatever the host's propagation is.
 */
export function ensurePrivateNsDir(dir: string): Promise<void> {
  // Nodes start in parallel; one bind for all of them, not one stacked per node.
  let pending = privatizing.get(dir);
  if (!pending) {
    pending = (async () => {
      mkdirSync(dir, { recursive: true });
      if (isMountPoint(dir)) return;
      await run("mount", ["--bind", dir, dir]);
      await run("mount", ["--make-private", dir]);
    })().finally(() => privatizing.delete(dir));
    privatizing.set(dir, pending);
  }
  return pending;
}

const privatizing = new Map<string, Promise<void>>();

export interface Bind {
  source: string;
  target: string;
  /** A file over a file (it must exist on both sides) rather than a directory over a directory. */
  file?: boolean;
}

/**
 * Creates the mount namespace persisted at `file`, with each bind applied inside it only. The targets must
 * exist on the host, because a bind needs a mount point; missing ones are created empty.
 */
export async function createMountNamespace(file: string, binds: readonly Bind[]): Promise<void> {
  if (isMountPoint(file)) return;
  for (const b of binds) {
    if (b.file) {
      if (!existsSync(b.source) || !existsSync(b.target))
        throw new Error(`cannot bind ${b.source} over ${b.target}`);
      continue;
    }
    mkdirSync(b.source, { recursive: true });
    mkdirSync(b.target, { recursive: true });
  }
  if (!existsSync(file)) writeFileSync(file, "");
  const script = 'while [ $# -gt 0 ]; do mount --bind "$1" "$2"; shift 2; done';
  const pairs = binds.flatMap((b) => [b.source, b.target]);
  // Private propagation keeps the node's mounts (its binds, its pods' netns files) out of every other namespace.
  await run("unshare", [
    `--mount=${file}`,
    "--propagation",
    "private",
    "--",
    "sh",
    "-ec",
    script,
    "sh",
    ...pairs,
  ]);
}

export function mountNamespaceExists(file: string): boolean {
  return isMountPoint(file);
}

/** Unmounts every mount at or below `dir` in this mount namespace, deepest first. */
export async function unmountBelow(dir: string): Promise<string[]> {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const points = readMountInfo()
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(prefix));
  // A path can be mounted more than once (stacked); unmount each occurrence, the deepest paths first.
  points.sort((a, b) => b.length - a.length);
  for (const p of points) {
    await run("umount", [p]).catch(() => run("umount", ["-l", p]));
  }
  return points;
}
