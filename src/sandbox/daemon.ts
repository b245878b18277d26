// Starting the sandbox's long-running processes so that they outlive the `zovn sandbox up` that started
// them: each runs in its own session, inside its host's namespaces, with output appended to its log file.

import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "./command.ts";
import { nsenterArgs, type Place } from "./netns.ts";
import { identify, type ProcessIdentity } from "./process-table.ts";

export interface DetachedSpec {
  place?: Place;
  command: string;
  args: readonly string[];
  log: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Extra descriptors handed to the child as fd 3, 4, ... */
  passFds?: readonly number[];
}

/** Spawns a detached process; it keeps running when this process exits or is killed. */
export function spawnDetached(spec: DetachedSpec): ProcessIdentity {
  mkdirSync(dirname(spec.log), { recursive: true });
  const out = openSync(spec.log, "a");
  try {
    const [command, args] = spec.place
      ? ["nsenter", [...nsenterArgs(spec.place), spec.command, ...spec.args]]
      : [spec.command, [...spec.args]];
    const child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", out, out, ...(spec.passFds ?? [])],
      env: spec.env ?? process.env,
      cwd: spec.cwd,
    });
    child.unref();
    if (child.pid === undefined) throw new Error(`could not spawn ${spec.command}`);
    const id = identify(child.pid);
    if (!id) throw new Error(`${spec.command} exited at once; see ${spec.log}`);
    return id;
  } finally {
    closeSync(out);
  }
}

/**
 * Runs an OVS or OVN daemon that detaches itself (--detach --pidfile): the command returns once the daemon is
 * ready, and the pidfile names the daemon's PID.
 */
export async function runSelfDetaching(
  place: Place | undefined,
  command: string,
  args: readonly string[],
  pidfileOnHost: string,
  env?: NodeJS.ProcessEnv,
): Promise<ProcessIdentity> {
  const [cmd, argv] = place ? ["nsenter", [...nsenterArgs(place), command, ...args]] : [command, [...args]];
  await run(cmd, argv, { env: env ?? process.env });
  for (let i = 0; i < 50; i++) {
    try {
      const pid = Number(readFileSync(pidfileOnHost, "utf8").trim());
      const id = pid > 0 ? identify(pid) : undefined;
      if (id) return id;
    } catch {
      // the pidfile appears a moment after the parent returns on some daemons
    }
    await sleep(20);
  }
  throw new Error(`${command} did not leave a live PID in ${pidfileOnHost}`);
}
