// Entry point of the test rig: real ovsdb-server processes (standalone or Raft) for integration tests.
// Every process is a non-detached child, killed at process exit at the latest; see process.ts.
import { type RaftCluster, type RaftOptions, startRaftCluster } from "./raft.ts";
import { type OvsdbServer, type StartOptions, startOvsdbServer } from "./server.ts";
import { teardownFor } from "./teardown.ts";

export type { DatabaseDump } from "./dump-format.ts";
export { parseJsonDump } from "./dump-format.ts";
export { createPki, type Pki } from "./pki.ts";
export { freePort } from "./ports.ts";
export { type Exit, livePids } from "./process.ts";
export {
  type ClusterStatus,
  parseClusterStatus,
  type RaftCluster,
  type RaftMember,
  type RaftOptions,
  startRaftCluster,
} from "./raft.ts";
export { type OvsdbServer, SCHEMAS, type StartOptions, startOvsdbServer } from "./server.ts";

/** node:test's TestContext, or anything else with an after hook. */
export interface AfterHook {
  after(fn: () => unknown): void;
}

/** Starts a server that is stopped (and its temp dir removed) when the test ends, passed or failed. */
export async function useOvsdbServer(t: AfterHook, opts: StartOptions): Promise<OvsdbServer> {
  const server = await startOvsdbServer(opts);
  teardownFor(t).after(() => server.stop());
  return server;
}

/** Starts a Raft cluster that is stopped (and its temp dir removed) when the test ends, passed or failed. */
export async function useRaftCluster(t: AfterHook, opts: RaftOptions): Promise<RaftCluster> {
  const cluster = await startRaftCluster(opts);
  teardownFor(t).after(() => cluster.stop());
  return cluster;
}
