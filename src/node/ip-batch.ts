// Many iproute2 commands in one `ip -force -batch -` process, with the outcome of each line. With -force, ip
// goes on after a failing line and reports it as "Command failed -:N" after the line's own messages, so the
// caller can tell an expected failure (the link exists already, the link is gone already) from a real one.
// Lines are given as token arrays, never as text: ip's batch reader splits on whitespace, honours quotes and
// '#' comments and starts a new command at each newline, so a token holding any of those could smuggle in a
// command of its own (`netns exec x sh -c ...` runs as root). Such a token is refused before ip runs.

import { runTool, ToolError } from "./tool.ts";

/** One ip command without the leading "ip", one argument per element, e.g. ["link", "set", "dev", "eth0", "up"]. */
export type IpLine = readonly string[];

export interface IpBatchFailure {
  /** 0-based index into the lines given. */
  readonly line: number;
  /** The line's tokens joined by single spaces. */
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
export function parseBatchErrors(stderr: string, lines: readonly IpLine[]): IpBatchFailure[] {
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
    failures.push({ line, command: lines[line]?.join(" ") ?? "", message: pending.join("; ") });
    pending = [];
  }
  return failures;
}

// Whitespace ends a token or a command, quotes and backslashes regroup tokens, '#' starts a comment; other
// control characters have no business in an ip argument either.
const UNSAFE_TOKEN = /[\s"'#\\]/;
const isUnsafeToken = (t: string): boolean =>
  t === "" || UNSAFE_TOKEN.test(t) || [...t].some((ch) => (ch.codePointAt(0) ?? 0) < 0x20 || ch === "\x7f");

/** A token of an ip line that ip's batch reader would not read back as exactly one argument. */
export class UnsafeIpTokenError extends Error {
  constructor(
    readonly line: number,
    readonly token: string,
  ) {
    super(
      `refusing to run ip: argument ${JSON.stringify(token)} of batch line ${line + 1} is empty or holds ` +
        "whitespace, a quote, a backslash, '#' or a control character",
    );
    this.name = "UnsafeIpTokenError";
  }
}

/** The batch text for `lines`; throws UnsafeIpTokenError unless every token reads back as one argument. */
export function formatBatch(lines: readonly IpLine[]): string {
  lines.forEach((tokens, i) => {
    if (tokens.length === 0) throw new UnsafeIpTokenError(i, "");
    for (const t of tokens) if (isUnsafeToken(t)) throw new UnsafeIpTokenError(i, t);
  });
  return lines.map((tokens) => `${tokens.join(" ")}\n`).join("");
}

/** Runs the lines in one process and reports each failed line. */
export async function ipBatch(lines: readonly IpLine[], opts: IpBatchOptions = {}): Promise<IpBatchResult> {
  if (lines.length === 0) return { failures: [], stdout: "" };
  const input = formatBatch(lines);
  const args = [...(opts.globalArgs ?? []), "-force", "-batch", "-"];
  const r = await runTool("ip", args, {
    input,
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

/** The records of `ip -j` output (an empty output is no record). */
export function ipJson<T>(stdout: string): T[] {
  const text = stdout.trim();
  return text ? (JSON.parse(text) as T[]) : [];
}
