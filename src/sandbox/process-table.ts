// Reading and signalling processes through /proc. A PID alone can be reused by an unrelated process once the
// original exits, so the sandbox always identifies a process by PID plus its start time.

import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

export interface ProcessIdentity {
  pid: number;
  /** Clock ticks since boot at which the process started (field 22 of /proc/PID/stat). */
  startTime: number;
}

export interface ProcessInfo extends ProcessIdentity {
  ppid: number;
  /** One-letter state from /proc/PID/stat; "Z" is a zombie waiting for its parent to reap it. */
  state: string;
  comm: string;
}

/** Parses /proc/PID/stat, whose second field (comm) may itself contain spaces and parentheses. */
export function parseStat(pid: number, text: string): ProcessInfo {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error(`unexpected /proc/${pid}/stat: ${text.slice(0, 80)}`);
  const comm = text.slice(open + 1, close);
  // Fields after comm start at field 3 (state); starttime is field 22.
  const rest = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  const state = rest[0] ?? "?";
  const ppid = Number(rest[1]);
  const startTime = Number(rest[19]);
  return { pid, ppid, state, comm, startTime };
}

export function readProcess(pid: number): ProcessInfo | undefined {
  try {
    return parseStat(pid, readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
}

export function identify(pid: number): ProcessIdentity | undefined {
  const info = readProcess(pid);
  return info ? { pid, startTime: info.startTime } : undefined;
}

/** True while the very process identified is running; a zombie counts as gone. */
export function isAlive(id: ProcessIdentity): boolean {
  const info = readProcess(id.pid);
  return info !== undefined && info.startTime === id.startTime && info.state !== "Z";
}

export function listPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (/^\d+$/.test(entry)) pids.push(Number(entry));
  }
  return pids;
}

/** The inode of one of a process's namespaces ("net", "mnt"), or undefined if the process is gone. */
export function namespaceInode(pid: number | "self", kind: "net" | "mnt"): number | undefined {
  try {
    const link = readlinkSync(`/proc/${pid}/ns/${kind}`);
    const m = /\[(\d+)\]$/.exec(link);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export function readCmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

function signal(id: ProcessIdentity, sig: NodeJS.Signals): void {
  if (!isAlive(id)) return;
  try {
    process.kill(id.pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

/**
 * SIGTERM to each process, SIGKILL to those still running after graceMs, then waits until all are gone.
 * Resolves to the processes that had to be killed.
 */
export async function terminate(ids: readonly ProcessIdentity[], graceMs = 2000): Promise<ProcessIdentity[]> {
  const live = ids.filter(isAlive);
  for (const id of live) signal(id, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && live.some(isAlive)) await sleep(50);
  const stubborn = live.filter(isAlive);
  for (const id of stubborn) signal(id, "SIGKILL");
  const killDeadline = Date.now() + 5000;
  while (Date.now() < killDeadline && stubborn.some(isAlive)) await sleep(50);
  const left = stubborn.filter(isAlive);
  if (left.length > 0) {
    throw new Error(`processes survived SIGKILL: ${left.map((p) => p.pid).join(", ")}`);
  }
  return stubborn;
}
