// Many iproute2 commands in one `ip -force -batch -` process, with the outcome of each line. With -force, ip
// goes on after a failing line and reports it as "Command failed -:N" after the line's own messages, so the
// caller can tell an expected failure (the link exists already, the link is gone already) from a real one.

import { runTool, ToolError } from "./tool.ts";

export interface IpBatchFailure {
  /** 0-based index into the lines given. */
  readonly line: number;
  readonly command: string;
  readonly message: string;
}

export interface IpBatchResult {
  readonly failures: readonly IpBatchFailure[];
  /** With json, one JSON document per successful "show" line, in order. */
  readonly stdout: string;
}

export interface IpBatchOptions {
  /** Network namespace path to run in (default: the agent's own). */
  netns?: string;
  /** Global ip options placed before -batch, e.g. ["-j", "-d"]. */
  globalArgs?: readonly string[];
  timeoutMs?: number;
}

/** Failures as reported on stderr: the messages since the previous marker belong to the marked line. */
export function parseBatchErrors(stderr: string, lines: readonly string[]): IpBatchFailure[] {
  const failures: IpBatchFailure[] = [];
  let pending: string[] = [];
  for (const raw of stderr.split("\n")) {
    const text = raw.trim();
    if (!text) continue;
    const m = /^Command failed -:(\d+)$/.exec(text);
    if (!m) {
      pending.push(text);
      continue;
    }
    const line = Number(m[1]) - 1;
    failures.push({ line, command: lines[line] ?? "", message: pending.join("; ") });
    pending = [];
  }
  return failures;
}

/** Runs the lines (ip commands without the leading "ip") in one process and reports each failed line. */
export async function ipBatch(lines: readonly string[], opts: IpBatchOptions = {}): Promise<IpBatchResult> {
  if (lines.length === 0) return { failures: [], stdout: "" };
  const args = [...(opts.globalArgs ?? []), "-force", "-batch", "-"];
  const r = await runTool("ip", args, {
    input: `${lines.join("\n")}\n`,
    ...(opts.netns !== undefined ? { netns: opts.netns } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  });
  const failures = parseBatchErrors(r.stderr, lines);
  // A non-zero exit with no failed line means ip (or nsenter, e.g. a missing netns) never ran the batch.
  if (r.code !== 0 && failures.length === 0) {
    throw new ToolError(["ip", ...args], r);
  }
  return { failures, stdout: r.stdout };
}

export class IpBatchError extends Error {
  constructor(
    readonly what: string,
    readonly failures: readonly IpBatchFailure[],
  ) {
    super(`${what}: ${failures.map((f) => `"${f.command}": ${f.message || "failed"}`).join("; ")}`);
    this.name = "IpBatchError";
  }
}

/** The failures that `tolerated` does not accept; throws IpBatchError naming `what` if any remain. */
export function requireSuccess(
  what: string,
  result: IpBatchResult,
  tolerated: (f: IpBatchFailure) => boolean = () => false,
): void {
  const real = result.failures.filter((f) => !tolerated(f));
  if (real.length > 0) throw new IpBatchError(what, real);
}

export const isAlreadyExists = (f: IpBatchFailure): boolean => /File exists/i.test(f.message);
export const isNoSuchDevice = (f: IpBatchFailure): boolean =>
  /Cannot find device|No such device|does not exist/i.test(f.message);
