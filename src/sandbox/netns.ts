// Named network namespaces (the `ip netns` kind, bound under /run/netns) and entering them with nsenter.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { ipBatch } from "./command.ts";

export const NETNS_DIR = "/run/netns";

export function netnsPath(name: string): string {
  return `${NETNS_DIR}/${name}`;
}

export function listNetns(): string[] {
  if (!existsSync(NETNS_DIR)) return [];
  return readdirSync(NETNS_DIR).sort();
}

/** A bound namespace file has the nsfs inode of the namespace; a plain file left behind does not count. */
export function netnsInode(name: string): number | undefined {
  try {
    const st = statSync(netnsPath(name));
    return isNsfsMounted(netnsPath(name)) ? st.ino : undefined;
  } catch {
    return undefined;
  }
}

export interface MountEntry {
  id: number;
  parent: number;
  mountPoint: string;
  fsType: string;
  source: string;
}

/** Mount points in /proc/self/mountinfo; octal escapes (\040 for space) are decoded. */
export function readMountInfo(pid: number | "self" = "self"): MountEntry[] {
  const text = readFileSync(`/proc/${pid}/mountinfo`, "utf8");
  const decode = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  const out: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (!line) continue;
    const [left, right] = line.split(" - ");
    const f = (left ?? "").split(" ");
    const r = (right ?? "").split(" ");
    out.push({
      id: Number(f[0]),
      parent: Number(f[1]),
      mountPoint: decode(f[4] ?? ""),
      fsType: r[0] ?? "",
      source: decode(r[1] ?? ""),
    });
  }
  return out;
}

export function isMountPoint(path: string): boolean {
  return readMountInfo().some((m) => m.mountPoint === path);
}

function isNsfsMounted(path: string): boolean {
  return readMountInfo().some((m) => m.mountPoint === path && m.fsType === "nsfs");
}

/** Creates the missing ones among the named netns; callers bring their links (loopback too) up. */
export async function ensureNetns(names: readonly string[]): Promise<void> {
  const existing = new Set(listNetns().filter((n) => netnsInode(n) !== undefined));
  const missing = names.filter((n) => !existing.has(n));
  // A name whose file exists without a namespace bound to it is a leftover of an interrupted `ip netns add`.
  await ipBatch(
    missing.flatMap((n) =>
      existsSync(netnsPath(n)) ? [`netns del ${n}`, `netns add ${n}`] : [`netns add ${n}`],
    ),
  );
}

export async function deleteNetns(names: readonly string[]): Promise<void> {
  const present = new Set(listNetns());
  await ipBatch(names.filter((n) => present.has(n)).map((n) => `netns del ${n}`));
}

/** Where a command runs: a netns, optionally with a node's mount namespace. */
export interface Place {
  netns: string;
  mountNsFile?: string;
}

/** Argument prefix that runs a command inside `place`; nsenter execs, so the PID is the command's. */
export function nsenterArgs(place: Place): string[] {
  const args = [`--net=${netnsPath(place.netns)}`];
  if (place.mountNsFile) args.push(`--mount=${place.mountNsFile}`);
  return [...args, "--"];
}
