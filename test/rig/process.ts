import { type ChildProcess, execFile, spawn } from "node:child_process";
import { closeSync, openSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";

// Everything the rig started and has not cleaned up yet. The exit hook below empties it synchronously, so a
// test file that throws or calls process.exit() leaves no daemon and no temp dir behind.
const liveChildren = new Map<number, ChildProcess>();
const ownedDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const pid of liveChildren.keys()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    liveChildren.clear();
    for (const dir of ownedDirs) {
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // best effort at exit: nothing left to report to
      }
    }
    ownedDirs.clear();
  });
}

/** Marks a directory for removal at process exit unless released earlier with removeOwnedDir. */
export function claimDir(dir: string): void {
  installExitHook();
  ownedDirs.add(dir);
}

export async function removeOwnedDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  ownedDirs.delete(dir);
}

/** PIDs of the daemons this process started that have not exited yet. */
export function livePids(): number[] {
  return [...liveChildren.keys()];
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Daemon {
  readonly pid: number;
  readonly exited: Promise<Exit>;
  hasExited(): boolean;
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
  terminate(graceMs?: number): Promise<Exit>;
}

export interface DaemonOptions {
  env?: NodeJS.ProcessEnv;
  /** stdout and stderr of the daemon are appended here; the daemon's own log may not be open yet when it fails. */
  outputFile: string;
}

/**
 * Starts a long-running child that is not detached. setpriv's parent-death signal makes the kernel kill it
 * even when this process dies by SIGKILL, where no exit hook runs; setpriv execs, so the PID is the daemon's.
 */
export function spawnDaemon(command: string, args: string[], opts: DaemonOptions): Daemon {
  installExitHook();
  const out = openSync(opts.outputFile, "a");
  let child: ChildProcess;
  try {
    child = spawn("setpriv", ["--pdeathsig", "KILL", command, ...args], {
      stdio: ["ignore", out, out],
      env: opts.env ?? process.env,
    });
  } finally {
    closeSync(out);
  }
  // Without a listener a failed spawn (ENOENT) would crash the test process from an 'error' event.
  child.on("error", () => {});
  const pid = child.pid;
  if (pid === undefined) {
    throw new Error(`could not spawn ${command}`);
  }
  liveChildren.set(pid, child);
  // A forgotten daemon must not keep the test file alive forever; the exit hook kills it instead.
  child.unref();
  let done = false;
  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true;
      liveChildren.delete(pid);
      resolve({ code, signal });
    });
  });
  const send = (signal: NodeJS.Signals): void => {
    if (done) return;
    try {
      process.kill(pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
    }
  };
  return {
    pid,
    exited,
    hasExited: () => done,
    signal: send,
    terminate: async (graceMs = 3000) => {
      if (done) return exited;
      send("SIGTERM");
      // This timer also keeps the event loop alive while we wait on the unref'd child.
      const escalate = setTimeout(() => send("SIGKILL"), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(escalate);
      }
    },
  };
}

/** Resolves when the daemon exits; keeps the event loop alive meanwhile, since the child itself is unref'd. */
export async function waitForExit(daemon: Daemon): Promise<Exit> {
  const keepAlive = setInterval(() => {}, 1000);
  try {
    return await daemon.exited;
  } finally {
    clearInterval(keepAlive);
  }
}

export interface ToolOptions {
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

/** Runs a command-line tool to completion and returns its stdout; a non-zero exit becomes an Error with stderr. */
export function runTool(command: string, args: string[], opts: ToolOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      {
        env: opts.env ?? process.env,
        timeout: opts.timeoutMs ?? 15_000,
        killSignal: "SIGKILL",
        maxBuffer: 64 * 1024 * 1024,
        encoding: "utf8",
      },
      (err, stdout, stderr) => {
        if (err) {
          const how = err.killed ? "was killed (timeout)" : `failed (exit ${String(err.code)})`;
          reject(new Error(`${command} ${args.join(" ")} ${how}: ${stderr.trim() || stdout.trim()}`));
          return;
        }
        resolve(stdout);
      },
    );
  });
}
