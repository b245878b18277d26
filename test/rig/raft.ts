import { mkdir, mkdtemp, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "./ports.ts";
import { claimDir, removeOwnedDir, runTool } from "./process.ts";
import { type OvsdbServer, schemaName, startOvsdbServer } from "./server.ts";

export interface RaftMember {
  /** "m1", "m2", ... also the name of its subdirectory. */
  name: string;
  server: OvsdbServer;
  /** "tcp:127.0.0.1:PORT", the address the members talk Raft on. */
  raftAddress: string;
}

export interface ClusterStatus {
  /** Full server ID (UUID). */
  serverId: string;
  /** "cluster member", "joining cluster", "disconnected from the cluster (election timeout)", ... */
  status: string;
  /** "leader", "follower" or "candidate". */
  role: string;
  term: number;
  /** Short ID of the leader, "self", or "unknown" while there is none. */
  leader: string;
}

export interface RaftCluster {
  dir: string;
  dbName: string;
  members: RaftMember[];
  /** Unix remotes of all members, in member order. */
  remotes: string[];
  /** TCP remotes of all members, in member order, when started with tcp. */
  tcpRemotes?: string[];
  /** The member whose cluster/status says "Role: leader", polled until one is found or timeoutMs (default 15 s). */
  leader(timeoutMs?: number): Promise<RaftMember>;
  /** Until there is a leader and every running member is a cluster member that knows it (default 15 s). */
  waitForQuorum(timeoutMs?: number): Promise<void>;
  status(member: RaftMember): Promise<ClusterStatus>;
  /** Stops every member and removes the dir if the rig created it. Idempotent. */
  stop(): Promise<void>;
}

export interface RaftOptions {
  schema: string;
  /** Default 3. */
  size?: number;
  dir?: string;
  /** Each member also listens on ptcp (its OvsdbServer.tcp). */
  tcp?: boolean;
}

const QUORUM_TIMEOUT_MS = 15_000;
const POLL_MS = 100;

export function parseClusterStatus(text: string): ClusterStatus {
  const fields = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z][A-Za-z ]*): (.*)$/.exec(line);
    if (match) fields.set(match[1]!, match[2]!.trim());
  }
  const field = (key: string): string => {
    const value = fields.get(key);
    if (value === undefined) throw new Error(`cluster/status has no "${key}":\n${text}`);
    return value;
  };
  const serverId = /\(([0-9a-f-]{36})\)/.exec(field("Server ID"))?.[1];
  if (serverId === undefined) throw new Error(`cluster/status has no full server ID:\n${text}`);
  return {
    serverId,
    status: field("Status"),
    role: field("Role"),
    term: Number(field("Term")),
    leader: field("Leader"),
  };
}

export async function startRaftCluster(opts: RaftOptions): Promise<RaftCluster> {
  // A Raft port is chosen before ovsdb-server binds it; in the rare case another process took it meanwhile,
  // a second attempt with fresh ports succeeds.
  try {
    return await startOnce(opts);
  } catch (err) {
    if (!(err instanceof PortTakenError)) throw err;
    return startOnce(opts);
  }
}

class PortTakenError extends Error {}

async function startOnce(opts: RaftOptions): Promise<RaftCluster> {
  const size = opts.size ?? 3;
  if (size < 1) throw new Error("a Raft cluster needs at least one member");
  const ownsDir = opts.dir === undefined;
  const dir = resolve(opts.dir ?? (await mkdtemp("/tmp/zo-")));
  if (ownsDir) claimDir(dir);
  const servers: OvsdbServer[] = [];
  let cluster: RaftCluster | undefined;
  try {
    const dbName = await schemaName(opts.schema);
    const names = Array.from({ length: size }, (_, i) => `m${i + 1}`);
    const addresses: string[] = [];
    for (let i = 0; i < size; i++) addresses.push(`tcp:127.0.0.1:${await freePort()}`);
    const files = names.map((name) => join(dir, name, `${dbName}.db`));
    await Promise.all(names.map((name) => mkdir(join(dir, name), { recursive: true })));
    await runTool("ovsdb-tool", ["create-cluster", files[0]!, opts.schema, addresses[0]!]);
    for (let i = 1; i < size; i++) {
      await runTool("ovsdb-tool", [
        "join-cluster",
        files[i]!,
        dbName,
        addresses[i]!,
        ...addresses.slice(0, i),
      ]);
    }
    const started = await Promise.allSettled(
      names.map((name, i) =>
        startOvsdbServer({ schemas: [], databases: [files[i]!], dir: join(dir, name), tcp: opts.tcp }),
      ),
    );
    for (const result of started) if (result.status === "fulfilled") servers.push(result.value);
    const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    const members = servers.map((server, i) => ({ name: names[i]!, server, raftAddress: addresses[i]! }));
    cluster = new RigCluster(dir, ownsDir, dbName, members);
    try {
      await cluster.waitForQuorum();
    } catch (err) {
      const logs = await Promise.all(servers.map((s) => readFile(s.logFile, "utf8").catch(() => "")));
      if (logs.some((log) => log.includes("Address already in use"))) throw new PortTakenError(String(err));
      throw err;
    }
    return cluster;
  } catch (err) {
    if (cluster) await cluster.stop();
    else {
      await Promise.all(servers.map((s) => s.stop()));
      if (ownsDir) await removeOwnedDir(dir);
    }
    throw err;
  }
}

class RigCluster implements RaftCluster {
  readonly remotes: string[];
  readonly tcpRemotes?: string[];
  private stopping: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    private readonly ownsDir: boolean,
    readonly dbName: string,
    readonly members: RaftMember[],
  ) {
    this.remotes = members.map((m) => m.server.unix);
    const tcp = members.map((m) => m.server.tcp);
    if (tcp.every((r) => r !== undefined)) this.tcpRemotes = tcp;
  }

  async status(member: RaftMember): Promise<ClusterStatus> {
    return parseClusterStatus(await member.server.appctl("cluster/status", this.dbName));
  }

  /** Statuses of the members that run and answer; a member being killed or restarted is simply left out. */
  private async runningStatuses(): Promise<Array<{ member: RaftMember; status: ClusterStatus }>> {
    const running = this.members.filter((m) => m.server.running);
    const results = await Promise.all(
      running.map(async (member) => {
        try {
          return { member, status: await this.status(member) };
        } catch {
          return undefined;
        }
      }),
    );
    return results.filter((r) => r !== undefined);
  }

  async leader(timeoutMs = QUORUM_TIMEOUT_MS): Promise<RaftMember> {
    const deadline = Date.now() + timeoutMs;
    let last: Array<{ member: RaftMember; status: ClusterStatus }> = [];
    for (;;) {
      last = await this.runningStatuses();
      const leaders = last.filter((s) => s.status.role === "leader" && s.status.status === "cluster member");
      // Right after an election an old leader can still believe it leads; the higher term wins.
      leaders.sort((a, b) => b.status.term - a.status.term);
      if (leaders[0]) return leaders[0].member;
      if (Date.now() > deadline) {
        throw new Error(`no Raft leader within ${timeoutMs} ms; last seen: ${describe(last)}`);
      }
      await sleep(POLL_MS);
    }
  }

  async waitForQuorum(timeoutMs = QUORUM_TIMEOUT_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const running = this.members.filter((m) => m.server.running).length;
      const seen = await this.runningStatuses();
      const settled =
        seen.length === running &&
        seen.some((s) => s.status.role === "leader") &&
        seen.every((s) => s.status.status === "cluster member" && s.status.leader !== "unknown");
      if (settled) return;
      if (Date.now() > deadline) {
        throw new Error(`no Raft quorum within ${timeoutMs} ms; last seen: ${describe(seen)}`);
      }
      await sleep(POLL_MS);
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.all(this.members.map((m) => m.server.stop()));
      if (this.ownsDir) await removeOwnedDir(this.dir);
    })();
    return this.stopping;
  }
}

function describe(seen: Array<{ member: RaftMember; status: ClusterStatus }>): string {
  if (seen.length === 0) return "no member answered";
  return seen
    .map(({ member, status }) => `${member.name}: ${status.status}, ${status.role}, term ${status.term}`)
    .join("; ");
}
