// Many connections to one address from inside a sandbox host, in one `podserver dial --count N` process, and
// what each attempt saw: which server answered and the client address it saw, or why it failed. The Services
// e2e tests and benchmark read distributions, stickiness and refusals from this.
import { CommandError, run } from "../../src/sandbox/command.ts";
import { execArgv } from "../../src/sandbox/exec.ts";
import type { SandboxHandle } from "./sandbox-handle.ts";

export type DialAttempt =
  | { ok: true; server: string; client: string; payload: string }
  | { ok: false; error: string };

/** One attempt per line, in order: `<server> <client ip:port> <payload>`, or `error: <reason>`. */
export function parseDialOutput(stdout: string): DialAttempt[] {
  const lines = stdout.split("\n").filter((l) => l.trim() !== "");
  return lines.map((line): DialAttempt => {
    if (line.startsWith("error: ")) return { ok: false, error: line.slice("error: ".length) };
    const [server, client, ...rest] = line.trim().split(" ");
    if (!server || !client) return { ok: false, error: `unparsable reply ${JSON.stringify(line)}` };
    return { ok: true, server, client, payload: rest.join(" ") };
  });
}

export interface DialOptions {
  count?: number;
  /** Per attempt; a Go duration ("2s", "500ms"). */
  timeout?: string;
  payload?: string;
}

/**
 * Dials `addr` over `proto` from `from` (a node, `ext`, or a pod `ns/name`) `count` times, each over a fresh
 * connection. Always resolves with `count` attempts; a failure of the dial process itself throws.
 */
export async function dialMany(
  sandbox: SandboxHandle,
  from: string,
  proto: "tcp" | "udp",
  addr: string,
  opts: DialOptions = {},
): Promise<DialAttempt[]> {
  const count = opts.count ?? 1;
  const { topo } = sandbox.ctx();
  const argv = execArgv(sandbox.layout, topo, from, [
    sandbox.binary("PODSERVER"),
    "dial",
    proto,
    addr,
    "--count",
    String(count),
    "--timeout",
    opts.timeout ?? "2s",
    "--payload",
    opts.payload ?? "svc",
  ]);
  let stdout: string;
  try {
    stdout = await run(argv[0] as string, argv.slice(1), { timeoutMs: 30_000 + count * 5_000 });
  } catch (err) {
    // Exit 1 means some attempt failed; with --count > 1 its lines are still on stdout, a single dial puts
    // its reason on stderr.
    if (!(err instanceof CommandError) || err.code !== 1) throw err;
    stdout =
      count === 1 ? `error: ${err.stderr.trim().replace(/^podserver dial \S+ \S+: /, "")}` : err.stdout;
  }
  const attempts = parseDialOutput(stdout);
  if (attempts.length !== count)
    throw new Error(`dial ${proto} ${addr} from ${from}: ${attempts.length} lines for ${count} attempts`);
  return attempts;
}

/**
 * How many attempts each server answered; failed attempts are counted under "error: <reason>", the reason
 * without the socket's own ephemeral address ("read udp 10.244.0.5:43791->10.96.0.10:53: ..." counts as
 * "read udp 10.96.0.10:53: ...").
 */
export function tally(attempts: readonly DialAttempt[]): Map<string, number> {
  const by = new Map<string, number>();
  for (const a of attempts) {
    const key = a.ok ? a.server : `error: ${a.error.replace(/\S+:\d+->/g, "")}`;
    by.set(key, (by.get(key) ?? 0) + 1);
  }
  return by;
}

/** A short text for assertion messages: `web-1 x12, web-2 x8, error: i/o timeout x1`. */
export function describeTally(attempts: readonly DialAttempt[]): string {
  return [...tally(attempts)].map(([k, n]) => `${k} x${n}`).join(", ") || "(no attempts)";
}
