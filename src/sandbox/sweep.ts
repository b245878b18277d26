// Finding what belongs to a sandbox instance even when its state file is incomplete (a killed `up`): network
// namespaces carry the instance prefix, mount namespaces are the files in its ns directory, and a process
// is the sandbox's when it runs inside one of those namespaces.

import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { isMountPoint, listNetns, netnsInode } from "./netns.ts";
import { listPids, namespaceInode, type ProcessIdentity, readProcess } from "./process-table.ts";

export interface SandboxNamespaces {
  netns: Map<string, number>;
  mountNs: Map<string, number>;
}

export function prefixedNetns(prefix: string): string[] {
  return listNetns().filter((n) => n.startsWith(prefix));
}

export function findNamespaces(prefix: string, nsDir: string): SandboxNamespaces {
  const netns = new Map<string, number>();
  for (const name of prefixedNetns(prefix)) {
    const ino = netnsInode(name);
    if (ino !== undefined) netns.set(name, ino);
  }
  const mountNs = new Map<string, number>();
  if (existsSync(nsDir)) {
    for (const f of readdirSync(nsDir)) {
      const file = join(nsDir, f);
      if (isMountPoint(file)) mountNs.set(file, statSync(file).ino);
    }
  }
  return { netns, mountNs };
}

/** Processes (other than this one) whose network or mount namespace is one of the given ones. */
export function processesIn(
  netInodes: ReadonlySet<number>,
  mntInodes: ReadonlySet<number>,
): ProcessIdentity[] {
  const out: ProcessIdentity[] = [];
  for (const pid of listPids()) {
    if (pid === process.pid) continue;
    const net = namespaceInode(pid, "net");
    const mnt = namespaceInode(pid, "mnt");
    const inside = (net !== undefined && netInodes.has(net)) || (mnt !== undefined && mntInodes.has(mnt));
    if (!inside) continue;
    const info = readProcess(pid);
    if (info && info.state !== "Z") out.push({ pid, startTime: info.startTime });
  }
  return out;
}
