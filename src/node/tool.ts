// Running a system tool (ip, nft, ethtool, sysctl) to completion, in the agent's own network namespace or
// inside another one by path. Every process the node agent spawns goes through here, so the number of
// processes an operation costs can be counted (a CNI ADD must cost a small fixed number, never one per item).

import { Worker } from "node:worker_threads";

export interface ToolOptions {
  /** Path of a network namespace (e.g. /run/netns/x, /proc/PID/ns/net); the command runs inside it via nsenter. */
  netns?: string;
  /** Written to the tool's stdin. */
  input?: string;
  /** Default 30 s; the tool is killed when it passes. */
  timeoutMs?: number;
  /** Variables set for the tool on top of the agent's environment (e.g. OVS_RUNDIR). */
  env?: Readonly<Record<string, string>>;
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

/** What a spawner thread is asked: one process to run to completion. */
interface SpawnRequest {
  id: number;
  argv: string[];
  input?: string;
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
}

/** Its answer: the exit status and output, or why the process could not run (errno code and message). */
interface SpawnReply {
  id: number;
  code: number | null;
  stdout: string;
  stderr: string;
  killed: boolean;
  error?: string;
}

// The spawner threads' code, fixed text (CommonJS, as an eval worker is). Starting a process forks this one,
// which holds the thread that calls it for milliseconds per process and more the larger the agent's memory:
// on the main thread, 50 concurrent CNI ADDs (3 processes each) stopped the event loop, and with it every
// other ADD, for about half a second. On spawner threads the main thread keeps serving.
const SPAWNER = `
const { parentPort } = require("node:worker_threads");
const { execFile } = require("node:child_process");
parentPort.on("message", (m) => {
  let child;
  try {
    child = execFile(
    m.argv[0],
    m.argv.slice(1),
    { timeout: m.timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 * 1024 * 1024, encoding: "utf8", env: m.env },
    (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
      const error = err && typeof err.code !== "number" && !err.killed ? String(err.message) : undefined;
      parentPort.postMessage({ id: m.id, code, stdout, stderr, killed: Boolean(err && err.killed), error });
    },
  );
  } catch (err) {
    // Refused before any process started (an argument with a NUL, say): this call fails, the thread lives on.
    parentPort.postMessage({ id: m.id, code: null, stdout: "", stderr: "", killed: false, error: String(err && err.message) });
    return;
  }
  child.stdin && child.stdin.on("error", () => {});
  if (m.input !== undefined && child.stdin) child.stdin.end(m.input);
});
`;

const SPAWNERS = 2;

/** A few threads that start processes, each kept referenced (the process stays alive) only while it has work. */
class SpawnerPool {
  private readonly threads: ({ worker: Worker; busy: number } | undefined)[] = new Array(SPAWNERS);
  private readonly waiting = new Map<
    number,
    { slot: number; done: (r: SpawnReply) => void; fail: (e: Error) => void }
  >();
  private next = 0;

  run(req: Omit<SpawnRequest, "id">): Promise<SpawnReply> {
    const id = this.next++;
    const slot = id % SPAWNERS;
    const t = this.thread(slot);
    return new Promise((done, fail) => {
      this.waiting.set(id, { slot, done, fail });
      if (t.busy++ === 0) t.worker.ref();
      t.worker.postMessage({ ...req, id } satisfies SpawnRequest);
    });
  }

  private thread(slot: number): { worker: Worker; busy: number } {
    const known = this.threads[slot];
    if (known) return known;
    const worker = new Worker(SPAWNER, { eval: true });
    const t = { worker, busy: 0 };
    worker.unref();
    worker.on("message", (m: SpawnReply) => {
      const w = this.waiting.get(m.id);
      if (!w) return;
      this.waiting.delete(m.id);
      if (--t.busy === 0) worker.unref();
      w.done(m);
    });
    // A thread that dies fails its calls; the next call starts a new one.
    const lost = (err: Error) => {
      if (this.threads[slot] !== t) return;
      this.threads[slot] = undefined;
      for (const [id, w] of this.waiting)
        if (w.slot === slot) {
          this.waiting.delete(id);
          w.fail(err);
        }
    };
    worker.on("error", lost);
    worker.on("exit", (code) => lost(new Error(`the spawner thread exited (${code})`)));
    this.threads[slot] = t;
    return t;
  }
}

const pool = new SpawnerPool();

/** Runs the tool and resolves with its exit status and output; rejects only if it cannot run or times out. */
export async function runTool(
  command: string,
  args: readonly string[],
  opts: ToolOptions = {},
): Promise<ToolResult> {
  const argv = argvIn(opts.netns, command, args);
  spawned++;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const r = await pool.run({
    argv,
    timeoutMs,
    env: { ...toolEnv(), ...opts.env },
    ...(opts.input !== undefined ? { input: opts.input } : {}),
  });
  const result: ToolResult = { code: r.code, stdout: r.stdout, stderr: r.stderr };
  if (r.killed) throw new ToolError(argv, result, `killed after ${timeoutMs} ms`);
  if (r.error !== undefined) throw new ToolError(argv, result, r.error);
  return result;
}
