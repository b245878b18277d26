// `zovn sandbox down`: leaves nothing behind. Processes go first (the recorded ones and any other process
// inside the sandbox's namespaces), then the node mount namespaces (taking the pods' netns with them), then
// the named netns (taking every veth with them), then the instance's files. It works from the state file
// when there is one and from names and namespaces alone when `up` was killed before writing everything.

import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { instanceCgroup, processesInCgroup, removeCgroup } from "./cgroups.ts";
import { type Layout, layoutFor } from "./layout.ts";
import { unmountBelow } from "./mount-namespace.ts";
import { deleteNetns, isMountPoint, NETNS_DIR, readMountInfo } from "./netns.ts";
import { isAlive, type ProcessIdentity, terminate } from "./process-table.ts";
import type { Progress } from "./progress.ts";
import { acquireLock, loadState } from "./state.ts";
import { findNamespaces, prefixedNetns, processesIn } from "./sweep.ts";

export interface DownOptions {
  name: string;
  baseDir?: string;
  /** Also delete the logs, which are otherwise kept for a post-mortem. */
  purge?: boolean;
}

export interface DownReport {
  processes: number;
  netns: string[];
  mounts: string[];
  cgroups: string[];
}

/**
 * The recorded processes, every process in the instance's namespaces, and (real nodes) every process in its
 * cgroup subtree: containers run in their own network and mount namespaces, but always below the node's
 * cgroupRoot.
 */
function sandboxProcesses(
  layout: Layout,
  name: string,
  recorded: readonly ProcessIdentity[],
): ProcessIdentity[] {
  const ns = findNamespaces(`${name}-`, layout.nsDir);
  const found = processesIn(new Set(ns.netns.values()), new Set(ns.mountNs.values()));
  const inCgroups = processesInCgroup(instanceCgroup(name));
  const byPid = new Map<number, ProcessIdentity>();
  for (const p of [...recorded.filter(isAlive), ...found, ...inCgroups]) byPid.set(p.pid, p);
  return [...byPid.values()];
}

export async function sandboxDown(opts: DownOptions, progress: Progress): Promise<DownReport> {
  const layout = layoutFor(opts.name, opts.baseDir);
  const prefix = `${opts.name}-`;
  const lock = existsSync(layout.root) ? acquireLock(layout) : undefined;
  try {
    const state = loadState(layout);
    const recorded = state?.daemons ?? [];
    // Node simulators and kubelets first, so none of them starts a pod while the rest are being stopped.
    const simulators = recorded.filter(
      (d) => (d.name.endsWith("/kubelet-sim") || d.name.endsWith("/kubelet")) && isAlive(d),
    );
    await terminate(simulators);
    let killed = simulators.length;
    for (let pass = 0; pass < 3; pass++) {
      const procs = sandboxProcesses(layout, opts.name, recorded);
      if (procs.length === 0) break;
      await terminate(procs);
      killed += procs.length;
    }
    progress.note(`stopped ${killed} processes`);

    const mounts = await unmountBelow(layout.root);
    const netns = [...new Set([...(state?.netns ?? []), ...prefixedNetns(prefix)])].filter((n) =>
      n.startsWith(prefix),
    );
    await deleteNetns(netns);
    const left = prefixedNetns(prefix);
    if (left.length > 0) throw new Error(`netns still present: ${left.join(", ")}`);
    // `ip netns add` turns /run/netns into a mount point; undo that if this sandbox caused it and nobody else
    // has a netns there now.
    if (state && !state.runNetnsWasMounted && isMountPoint(NETNS_DIR)) {
      const below = readMountInfo().filter((m) => m.mountPoint.startsWith(`${NETNS_DIR}/`));
      if (below.length === 0 && readdirSync(NETNS_DIR).length === 0) {
        mounts.push(...(await unmountBelow(NETNS_DIR)));
      }
    }
    // A cgroup whose last process is still exiting refuses rmdir (EBUSY) for a moment: try again, and if one
    // stays busy, finish the rest of `down` (the mount check above all) before saying which.
    let cgroups: string[] = [];
    let busy: unknown;
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        cgroups = removeCgroup(instanceCgroup(opts.name));
        busy = undefined;
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EBUSY") throw e;
        busy = e;
        await terminate(processesInCgroup(instanceCgroup(opts.name)));
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    progress.note(`removed ${netns.length} netns, ${mounts.length} mounts and ${cgroups.length} cgroups`);

    const stillMounted = readMountInfo().filter((m) => m.mountPoint.startsWith(`${layout.root}/`));
    if (stillMounted.length > 0) {
      throw new Error(
        `not deleting ${layout.root}: still mounted ${stillMounted.map((m) => m.mountPoint).join(", ")}`,
      );
    }
    if (existsSync(layout.root)) {
      for (const entry of readdirSync(layout.root)) {
        if (entry === "lock" || (!opts.purge && entry === "logs")) continue;
        rmSync(join(layout.root, entry), { recursive: true, force: true });
      }
    }
    if (busy) {
      const pids = processesInCgroup(instanceCgroup(opts.name)).map((p) => p.pid);
      throw new Error(
        `cgroup ${instanceCgroup(opts.name)} is still busy (${(busy as Error).message}; processes: ${pids.join(", ") || "none"}); run down again`,
        { cause: busy },
      );
    }
    lock?.release();
    if (opts.purge) rmSync(layout.root, { recursive: true, force: true });
    return { processes: killed, netns, mounts, cgroups };
  } finally {
    lock?.release();
  }
}
