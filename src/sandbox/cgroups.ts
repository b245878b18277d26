// The cgroup subtree of a real-node sandbox. Each node's kubelet gets its own `cgroupRoot`
// (`/zovn-<instance>/<node>`), which must already exist in every mounted hierarchy (the named `systemd` one
// included) or the kubelet exits with "cgroup [...] has some missing paths". The subtree is also how `down`
// finds container processes: they run in their own network and mount namespaces, so the namespace sweep
// misses them, but every one of them sits in a cgroup below the instance's root.

import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { identify, type ProcessIdentity } from "./process-table.ts";

export interface CgroupHierarchy {
  /** Where it is mounted, e.g. /sys/fs/cgroup/cpuset. */
  mountPoint: string;
  version: 1 | 2;
  /** v1 controllers and named hierarchies from the mount options ("cpuset", "name=systemd"). */
  controllers: string[];
}

const V1_CONTROLLERS = new Set([
  "blkio",
  "cpu",
  "cpuacct",
  "cpuset",
  "devices",
  "freezer",
  "hugetlb",
  "memory",
  "misc",
  "net_cls",
  "net_prio",
  "perf_event",
  "pids",
  "rdma",
]);

/**
 * The cgroup hierarchies in a mountinfo listing. A hierarchy mounted twice counts once (the first mount
 * point), and only mounts of a hierarchy's root count: a bind of a sub-cgroup is not where the kubelet looks.
 */
export function parseCgroupMounts(mountinfo: string): CgroupHierarchy[] {
  const out: CgroupHierarchy[] = [];
  const seen = new Set<string>();
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const f = left.split(" ");
    const [fsType, , superOpts] = right.split(" ");
    if (fsType !== "cgroup" && fsType !== "cgroup2") continue;
    if (f[3] !== "/") continue;
    const mountPoint = f[4] ?? "";
    const device = f[2] ?? "";
    if (!mountPoint || seen.has(device)) continue;
    seen.add(device);
    const controllers =
      fsType === "cgroup"
        ? (superOpts ?? "").split(",").filter((o) => V1_CONTROLLERS.has(o) || o.startsWith("name="))
        : [];
    out.push({ mountPoint, version: fsType === "cgroup" ? 1 : 2, controllers });
  }
  return out;
}

export function cgroupHierarchies(): CgroupHierarchy[] {
  return parseCgroupMounts(readFileSync("/proc/self/mountinfo", "utf8"));
}

/** The instance's subtree and a node's `cgroupRoot` inside it; names are already validated identifiers. */
export function instanceCgroup(instance: string): string {
  return `/zovn-${instance}`;
}

export function nodeCgroup(instance: string, node: string): string {
  return `${instanceCgroup(instance)}/${node}`;
}

/**
 * Creates `path` (absolute, below the hierarchy roots) in every hierarchy. A new cpuset cgroup starts with
 * no CPUs and no memory nodes, and nothing can join it, so each level copies its parent's.
 */
export function ensureCgroup(
  path: string,
  hierarchies: readonly CgroupHierarchy[] = cgroupHierarchies(),
): void {
  const parts = path.split("/").filter(Boolean);
  for (const h of hierarchies) {
    let dir = h.mountPoint;
    for (const part of parts) {
      const parent = dir;
      dir = join(dir, part);
      if (existsSync(dir)) continue;
      mkdirSync(dir);
      if (h.controllers.includes("cpuset")) {
        for (const file of ["cpuset.cpus", "cpuset.mems"]) {
          writeFileSync(join(dir, file), readFileSync(join(parent, file), "utf8").trim() || "\n");
        }
      }
    }
  }
}

/** Every cgroup directory at or below `dir`, deepest first. */
function subtree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d)) {
      const child = join(d, entry);
      if (statSync(child).isDirectory()) walk(child);
    }
    out.push(d);
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** The processes in `path` or below it, in any hierarchy. */
export function processesInCgroup(
  path: string,
  hierarchies: readonly CgroupHierarchy[] = cgroupHierarchies(),
): ProcessIdentity[] {
  const pids = new Set<number>();
  for (const h of hierarchies) {
    for (const dir of subtree(join(h.mountPoint, path))) {
      let text = "";
      try {
        text = readFileSync(join(dir, "cgroup.procs"), "utf8");
      } catch {
        continue;
      }
      for (const line of text.split("\n")) if (/^\d+$/.test(line)) pids.add(Number(line));
    }
  }
  const out: ProcessIdentity[] = [];
  for (const pid of pids) {
    if (pid === process.pid) continue;
    const id = identify(pid);
    if (id) out.push(id);
  }
  return out;
}

/**
 * Removes `path` and everything below it from every hierarchy, deepest first; the processes must be gone.
 * Returns the directories that were removed.
 */
export function removeCgroup(
  path: string,
  hierarchies: readonly CgroupHierarchy[] = cgroupHierarchies(),
): string[] {
  const removed: string[] = [];
  for (const h of hierarchies) {
    for (const dir of subtree(join(h.mountPoint, path))) {
      rmdirSync(dir);
      removed.push(dir);
    }
  }
  return removed;
}

/** The hierarchies in which `path` still exists. */
export function cgroupLeftovers(
  path: string,
  hierarchies: readonly CgroupHierarchy[] = cgroupHierarchies(),
): string[] {
  return hierarchies.map((h) => join(h.mountPoint, path)).filter((d) => existsSync(d));
}
