// What the `zovn sandbox up --zstack` suites read of a running sandbox: ZStack's NB as the simulator's snapshots
// read it, ZStack's own rows in it, and what `down` must leave behind (nothing of the sandbox).

import assert from "node:assert/strict";
import { run } from "../../src/sandbox/command.ts";
import { listNetns, readMountInfo } from "../../src/sandbox/netns.ts";
import { localRemote } from "../../src/sandbox/ovn-central.ts";
import { isAlive } from "../../src/sandbox/process-table.ts";
import type { SandboxState } from "../../src/sandbox/state.ts";
import { findNamespaces, processesIn } from "../../src/sandbox/sweep.ts";
import { SIM_ROLE_KEY } from "../../src/sandbox/zstack/content.ts";
import { type DatabaseDump, parseJsonDump } from "./dump-format.ts";
import { eventually, type SandboxHandle } from "./sandbox-handle.ts";

/**
 * `ovsdb-client dump -f json` of the sandbox's (ZStack's) NB. With Raft the remotes name every member and
 * ovsdb-client reads the leader's copy only.
 */
export async function dumpNb(sb: SandboxHandle): Promise<DatabaseDump> {
  const { topo } = sb.ctx();
  return parseJsonDump(
    await run("ovsdb-client", ["-f", "json", "dump", localRemote(sb.layout, topo, "nb"), "OVN_Northbound"]),
  );
}

/** "Table uuid" of every row the simulator wrote (its role key in external_ids). */
export function zstackRows(dump: DatabaseDump): string[] {
  return Object.entries(dump).flatMap(([table, rows]) =>
    Object.entries(rows)
      .filter(([, r]) => JSON.stringify(r.external_ids ?? "").includes(`"${SIM_ROLE_KEY}"`))
      .map(([u]) => `${table} ${u}`),
  );
}

/** After `down`: no netns, recorded process, process in the sandbox's namespaces, or mount of the sandbox. */
export async function assertNothingLeft(sb: SandboxHandle, state: SandboxState): Promise<void> {
  assert.deepEqual(
    listNetns().filter((n) => n.startsWith(`${sb.name}-`)),
    [],
  );
  assert.deepEqual(
    state.daemons.filter(isAlive).map((d) => d.name),
    [],
  );
  await eventually("no process in the sandbox's namespaces", 30_000, async () => {
    const ns = findNamespaces(`${sb.name}-`, sb.layout.nsDir);
    const left = processesIn(new Set(ns.netns.values()), new Set(ns.mountNs.values()));
    return left.length === 0 ? true : undefined;
  });
  assert.deepEqual(
    readMountInfo()
      .map((m) => m.mountPoint)
      .filter((m) => m.startsWith(`${sb.layout.root}/`) || m.includes(`${sb.name}-`)),
    [],
  );
}
