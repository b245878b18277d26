// Running the system tools the sandbox drives (ip, ovs-vsctl, openssl, nsenter) to completion.

import { execFile } from "node:child_process";

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly args: readonly string[],
    readonly code: number | string | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    const shown = [command, ...args].join(" ");
    const detail = stderr.trim() || stdout.trim() || `exit ${code}`;
    super(`${shown.length > 300 ? `${shown.slice(0, 300)}...` : shown}: ${detail}`);
    this.name = "CommandError";
  }
}

export interface RunOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  cwd?: string;
}

/** Runs a command and returns its stdout; a non-zero exit becomes a CommandError carrying stderr. */
export function run(command: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        env: opts.env ?? process.env,
        timeout: opts.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        cwd: opts.cwd,
        encoding: "utf8",
      },
      (err, stdout, stderr) => {
        if (err) {
          const code = (err as NodeJS.ErrnoException & { code?: number | string }).code ?? null;
          reject(new CommandError(command, args, code, stdout, stderr));
        } else {
          resolve(stdout);
        }
      },
    );
    if (opts.input !== undefined) {
      child.stdin?.end(opts.input);
    }
  });
}

/**
 * One `ip -batch` for many small changes, optionally inside a netns: a process per step would dominate `up`.
 * Lines are ip commands without the leading "ip".
 */
export async function ipBatch(lines: readonly string[], netns?: string): Promise<void> {
  if (lines.length === 0) return;
  const args = netns ? ["-n", netns, "-batch", "-"] : ["-batch", "-"];
  await run("ip", args, { input: `${lines.join("\n")}\n` });
}
