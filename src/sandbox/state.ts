// The instance's state file: what `up` created and started, written before or right after each step, so a
// `down` after a killed `up` still knows what to remove. A lock file keeps two commands from racing.

import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname } from "node:path";
import type { Binaries } from "./binaries.ts";
import type { Layout } from "./layout.ts";
import { identify, isAlive, type ProcessIdentity } from "./process-table.ts";
import type { SandboxSpec } from "./topology.ts";

export interface DaemonRecord extends ProcessIdentity {
  /** "<host>/<component>", e.g. "cp/kube-apiserver", "node2/ovs-vswitchd". */
  name: string;
  log: string;
}

export interface SandboxState {
  version: 1;
  spec: SandboxSpec;
  /** Whether /run/netns was already a mount point before this instance's first `up`. */
  runNetnsWasMounted: boolean;
  /** Network namespaces, recorded before they are created. */
  netns: string[];
  daemons: DaemonRecord[];
  /** The 127.0.0.1 port forwarded into the control-plane host's apiserver. */
  apiserverPort?: number;
  /** Paths of the Go binaries this instance runs, so later commands need not look them up again. */
  binaries?: Binaries;
}

export function loadState(layout: Layout): SandboxState | undefined {
  if (!existsSync(layout.stateFile)) return undefined;
  return JSON.parse(readFileSync(layout.stateFile, "utf8")) as SandboxState;
}

export function saveState(layout: Layout, state: SandboxState): void {
  mkdirSync(dirname(layout.stateFile), { recursive: true });
  const tmp = `${layout.stateFile}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(tmp, layout.stateFile);
}

/** Replaces (by name) or adds the record of a daemon that was just started. */
export function recordDaemon(layout: Layout, state: SandboxState, record: DaemonRecord): void {
  state.daemons = state.daemons.filter((d) => d.name !== record.name);
  state.daemons.push(record);
  saveState(layout, state);
}

export function liveDaemon(state: SandboxState, name: string): DaemonRecord | undefined {
  const d = state.daemons.find((x) => x.name === name);
  return d && isAlive(d) ? d : undefined;
}

export interface Lock {
  release(): void;
}

/**
 * Takes the instance lock. A lock left by a process that no longer runs (a killed `up`) is taken over, which
 * is what lets `down` clean up after it.
 */
export function acquireLock(layout: Layout): Lock {
  mkdirSync(dirname(layout.lockFile), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(layout.lockFile, "wx");
      const me = identify(process.pid);
      writeFileSync(fd, JSON.stringify(me));
      closeSync(fd);
      return { release: () => rmSync(layout.lockFile, { force: true }) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      let holder: ProcessIdentity | undefined;
      try {
        holder = JSON.parse(readFileSync(layout.lockFile, "utf8")) as ProcessIdentity;
      } catch {
        holder = undefined;
      }
      if (holder && isAlive(holder)) {
        throw new Error(`another sandbox command (pid ${holder.pid}) is working on ${layout.root}`);
      }
      rmSync(layout.lockFile, { force: true });
    }
  }
  throw new Error(`could not take the lock ${layout.lockFile}`);
}
