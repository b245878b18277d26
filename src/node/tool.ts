// Running a system tool (ip, nft, ethtool, sysctl) to completion, in the agent's own network namespace or
// inside another one by path. Every process the node agent spawns goes through here, so the number of
// processes an operation costs can be counted (a CNI ADD must cost a small fixed number, never one per item).

import { execFile } from "node:child_process";

export interface ToolOptions {
  /** Path of a network namespace (e.g. /run/netns/x, /proc/PID/ns/net); the command runs inside it via nsenter. */
  netns?: string;
  /** Written to the tool's stdin. */
  input?: string;
  /** Default 30 s; the tool is killed when it passes. */
  timeoutMs?: number;
}

export interface ToolResult {
  /** Exit status; null when the process was killed. */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export class ToolError extends Error {
  constructor(
    readonly argv: readonly string[],
    readonly result: ToolResult,
    reason?: string,
  ) {
    const shown = argv.join(" ");
    const detail = reason ?? (result.stderr.trim() || result.stdout.trim() || `exit ${result.code}`);
    super(`${shown.length > 200 ? `${shown.slice(0, 200)}...` : shown}: ${detail}`);
    this.name = "ToolError";
  }
}

let spawned = 0;

/** How many tool processes this process has spawned so far (tests and metrics take differences). */
export function spawnedTools(): number {
  return spawned;
}

/** The argv that runs `command` inside `netns`; nsenter execs, so it costs no extra process. */
export function argvIn(netns: string | undefined, command: string, args: readonly string[]): string[] {
  return netns ? ["nsenter", `--net=${netns}`, "--", command, ...args] : [command, ...args];
}

/**
 * The environment tools run with: the C locale, because failures are classified by their message text
 * (ip-batch's isAlreadyExists, isNoSuchDevice) and strerror's text follows the locale.
 */
export function toolEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, LC_ALL: "C", LANG: "C" };
  // GNU gettext would still prefer LANGUAGE's translations for some messages.
  delete env.LANGUAGE;
  return env;
}

/** Runs the tool and resolves with its exit status and output; rejects only if it cannot run or times out. */
export function runTool(
  command: string,
  args: readonly string[],
  opts: ToolOptions = {},
): Promise<ToolResult> {
  const argv = argvIn(opts.netns, command, args);
  spawned++;
  return new Promise((resolve, reject) => {
    const child = execFile(
      argv[0] as string,
      argv.slice(1),
      {
        timeout: opts.timeoutMs ?? 30_000,
        killSignal: "SIGKILL",
        maxBuffer: 64 * 1024 * 1024,
        encoding: "utf8",
        env: toolEnv(),
      },
      (err, stdout, stderr) => {
        if (!err) {
          resolve({ code: 0, stdout, stderr });
          return;
        }
        const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean };
        const result = { code: typeof e.code === "number" ? e.code : null, stdout, stderr };
        if (e.killed) reject(new ToolError(argv, result, `killed after ${opts.timeoutMs ?? 30_000} ms`));
        else if (typeof e.code === "number") resolve(result);
        else reject(new ToolError(argv, result, e.message));
      },
    );
    // A tool that exits before reading its stdin must not crash the agent with EPIPE.
    child.stdin?.on("error", () => {});
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}
