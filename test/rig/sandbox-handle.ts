// A named sandbox as the e2e suites and the CNI benchmark drive it: `zovn sandbox --name N ...`, its recorded
// state and topology, commands run inside one of its hosts, and a patient wait.
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "../../src/sandbox/command.ts";
import { execArgv } from "../../src/sandbox/exec.ts";
import { type Layout, layoutFor } from "../../src/sandbox/layout.ts";
import { repoRoot } from "../../src/sandbox/repo.ts";
import { loadState, type SandboxState } from "../../src/sandbox/state.ts";
import { planTopology, type Topology } from "../../src/sandbox/topology.ts";

export interface SandboxHandle {
  readonly name: string;
  readonly layout: Layout;
  /** Runs `bin/zovn sandbox --name <name> ...args`; resolves with its stdout. */
  zovn(args: readonly string[], timeoutMs?: number): Promise<string>;
  /** The sandbox's recorded state and its topology; throws when it is not up. */
  ctx(): { state: SandboxState; topo: Topology };
  /** A binary the sandbox recorded (the Go fixtures). */
  binary(key: "CNI_DRIVER" | "CNITOOL" | "PODSERVER"): string;
  /** Runs a command inside a host of the sandbox (a node, a pod "ns/name", the control plane); trimmed stdout. */
  inside(
    target: string,
    command: readonly string[],
    opts?: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string },
  ): Promise<string>;
}

export function sandboxHandle(name: string): SandboxHandle {
  const layout = layoutFor(name);
  const ctx = () => {
    const state = loadState(layout);
    if (!state) throw new Error(`sandbox ${name}: state missing (is it up?)`);
    return { state, topo: planTopology(state.spec) };
  };
  return {
    name,
    layout,
    zovn: (args, timeoutMs = 10 * 60_000) =>
      run(`${repoRoot}/bin/zovn`, ["sandbox", "--name", name, ...args], { timeoutMs }),
    ctx,
    binary: (key) => {
      const path = ctx().state.binaries?.[key];
      if (!path) throw new Error(`sandbox ${name} records no ${key}`);
      return path;
    },
    inside: async (target, command, opts = {}) => {
      const argv = execArgv(layout, ctx().topo, target, [...command]);
      return (
        await run(argv[0] as string, argv.slice(1), {
          timeoutMs: opts.timeoutMs ?? 60_000,
          ...(opts.env ? { env: opts.env } : {}),
          ...(opts.input !== undefined ? { input: opts.input } : {}),
        })
      ).trim();
    },
  };
}

/** Polls `fn` until it returns a value; a throw counts as "not yet", and the last one is named on timeout. */
export async function eventually<T>(
  what: string,
  timeoutMs: number,
  fn: () => Promise<T | undefined>,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out: ${what}${last ? ` (${(last as Error).message})` : ""}`);
    await sleep(300);
  }
}
