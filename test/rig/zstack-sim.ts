// The ZStack simulator: an OVN that plays ZStack's, for tests of External mode. It runs its own NB, SB and
// ovn-northd (standalone servers, or 3-member Raft clusters), and fills NB the way ZStack does before the plugin
// ever starts: a VPC router with IPv4 and IPv6 router ports, NAT rules and a route; an overlay switch with
// other_config:subnet and exclude_ips, DHCP options and a router-type port; a flat switch with a localnet port;
// VM ports named like ZStack's NICs, with an extra address in port_security and requested-chassis (one VM
// migrating, so two chassis); the edge ports (dynamic, unknown, MAC-only localport, virtual, empty, disabled); a
// security group (port group, ACLs, address set); a load balancer; and a second switch with the same display
// name. Every row it writes carries SIM_ROLE_KEY, valued with the row's role, so a test finds ZStack's rows and
// can prove none was touched. A writer adds and removes VM ports and rewrites a switch while a test runs.
//
// Snapshots are `ovsdb-client dump -f json` of NB (wire JSON, every column): `foreignRows` keeps the rows that do
// not carry our ownership key, `diffDumps` lists every row and column that differs, byte for byte.

import { mkdtemp, readFile } from "node:fs/promises";
import { join } from "node:path";
import { CONTROLLER, OWNER_KEY } from "../../src/ovn/ownership.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import {
  HOSTS,
  type HostPair,
  initialContent,
  NB_DB,
  SIM_ROLE_KEY,
  ZStackWriter,
} from "../../src/sandbox/zstack/content.ts";
import type { DatabaseDump } from "./dump-format.ts";
import { claimDir, type Daemon, removeOwnedDir, spawnDaemon } from "./process.ts";
import { type RaftCluster, startRaftCluster } from "./raft.ts";
import { type OvsdbServer, SCHEMAS, startOvsdbServer } from "./server.ts";
import { type AfterHook, teardownFor } from "./teardown.ts";

// The content and the writer are the sandbox's too (`zovn sandbox up --zstack`), so they live in src.
export {
  FLAT,
  HOSTS,
  type HostPair,
  NB_DB,
  OVERLAY,
  SHARED_SWITCH_NAME,
  SIM_NAME_KEY,
  SIM_ROLE_KEY,
  TWIN,
  type VmPort,
  type VmPortSpec,
  vmMac,
  vmPortName,
  ZStackWriter,
  zstackUuid,
} from "../../src/sandbox/zstack/content.ts";

/**
 * NB_Global columns that count northd's and the chassis' progress (nb_cfg handshakes); `sync()` moves them.
 * Snapshots are compared without them: they say how far northd got, not what anyone configured.
 */
export const NB_GLOBAL_COUNTERS = [
  "nb_cfg",
  "nb_cfg_timestamp",
  "sb_cfg",
  "sb_cfg_timestamp",
  "hv_cfg",
  "hv_cfg_timestamp",
] as const;

export interface ZStackSimOptions {
  /** NB and SB as 3-member Raft clusters (default: one standalone server each). */
  raft?: boolean;
  /** Also listen on tcp:127.0.0.1 (every member); the unix sockets are always there. */
  tcp?: boolean;
  /** The hypervisors' management IPs, the chassis the VM ports request (default HOSTS). */
  hosts?: HostPair;
}

export interface ZStackSim {
  /** Unix remotes of NB (all members with Raft), for our clients. */
  readonly nbRemotes: readonly string[];
  readonly nbTcpRemotes?: readonly string[];
  readonly sbRemotes: readonly string[];
  readonly nbCluster?: RaftCluster;
  /** The standalone NB server (without Raft). */
  readonly nbServer?: OvsdbServer;
  /** The hypervisors' management IPs (chassis hostnames) the VM ports request. */
  readonly hosts: HostPair;
  /** Role -> UUID of every row the simulator created at start-up. */
  readonly roles: ReadonlyMap<string, string>;
  uuid(role: string): string;
  readonly writer: ZStackWriter;
  /** `ovsdb-client dump` of NB from the server (the Raft leader), every table and column, _version dropped. */
  dump(): Promise<DatabaseDump>;
  /** Waits until northd has processed everything written so far (nb_cfg bumped, sb_cfg caught up). */
  sync(): Promise<void>;
  /** sync(), then the rows of the dump that are not ours: what "byte-identical" is checked against. */
  snapshot(): Promise<DatabaseDump>;
  stop(): Promise<void>;
}

/** Rows of the dump that are not ours (owner key valued with our controller): ZStack's, and anything else. */
export function foreignRows(dump: DatabaseDump): DatabaseDump {
  const out: DatabaseDump = {};
  for (const [table, rows] of Object.entries(dump)) {
    out[table] = {};
    for (const [uuid, row] of Object.entries(rows)) if (!carriesOwner(row)) out[table][uuid] = row;
  }
  return out;
}

/** "Table uuid" of every row in the dump that is ours by its owner key. */
export function ownedRows(dump: DatabaseDump): string[] {
  const out: string[] = [];
  for (const [table, rows] of Object.entries(dump))
    for (const [uuid, row] of Object.entries(rows)) if (carriesOwner(row)) out.push(`${table} ${uuid}`);
  return out;
}

function carriesOwner(row: Record<string, unknown>): boolean {
  const ext = row.external_ids;
  return (
    Array.isArray(ext) &&
    ext[0] === "map" &&
    (ext[1] as [string, string][]).some(([k, v]) => k === OWNER_KEY && v === CONTROLLER)
  );
}

/**
 * Every difference between two dumps, one line each: a row only in one of them, or a column whose wire JSON
 * differs (set and map elements come sorted from the server, so equal content is equal text). `ignore` leaves
 * columns out per table (NB_Global's counters).
 */
export function diffDumps(
  before: DatabaseDump,
  after: DatabaseDump,
  ignore: Readonly<Record<string, readonly string[]>> = { NB_Global: NB_GLOBAL_COUNTERS },
): string[] {
  const out: string[] = [];
  const tables = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const table of [...tables].sort()) {
    const a = before[table] ?? {};
    const b = after[table] ?? {};
    const skip = new Set(ignore[table] ?? []);
    for (const uuid of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const ra = a[uuid];
      const rb = b[uuid];
      if (!ra) out.push(`${table} ${uuid}: added`);
      else if (!rb) out.push(`${table} ${uuid}: removed`);
      else
        for (const col of [...new Set([...Object.keys(ra), ...Object.keys(rb)])].sort()) {
          if (skip.has(col)) continue;
          const ja = JSON.stringify(ra[col]);
          const jb = JSON.stringify(rb[col]);
          if (ja !== jb) out.push(`${table} ${uuid} ${col}: ${ja} -> ${jb}`);
        }
    }
  }
  return out;
}

/**
 * The differences between two dumps (a snapshot taken before the plugin started, and a dump while it runs) that
 * are not documented mutations (docs/external-mode.md, "What the plugin writes on ZStack's rows"): each must be a
 * row of ours (`ours`: UUIDs), or a column of a ZStack row that only grew, by UUIDs of ours or `zsvc_` map entries.
 */
export function onlyDocumentedMutations(
  before: DatabaseDump,
  during: DatabaseDump,
  ours: Set<string>,
): string[] {
  const bad: string[] = [];
  for (const line of diffDumps(before, during)) {
    const added = /^\S+ (\S+): added$/.exec(line);
    if (added && ours.has(added[1] as string)) continue;
    const m = /^(\S+) (\S+) (\S+): (.*) -> (.*)$/.exec(line);
    if (!m) {
      bad.push(line);
      continue;
    }
    const [, table, uuid, column] = m as unknown as [string, string, string, string];
    const a = before[table]?.[uuid]?.[column];
    const b = during[table]?.[uuid]?.[column];
    if (Array.isArray(b) && b[0] === "map") {
      const was = new Map((a as ["map", [string, string][]])[1]);
      const added = (b[1] as [string, string][]).filter(([k, v]) => was.get(k) !== v);
      const kept = [...was].every(([k, v]) =>
        (b[1] as [string, string][]).some(([k2, v2]) => k2 === k && v2 === v),
      );
      if (!kept || added.some(([k]) => !k.startsWith("zsvc_"))) bad.push(line);
      continue;
    }
    const was = new Set(uuidsOf(a));
    const now = uuidsOf(b);
    const grew =
      [...was].every((u) => now.includes(u)) && now.filter((u) => !was.has(u)).every((u) => ours.has(u));
    if (!grew) bad.push(line);
  }
  return bad;
}

const uuidsOf = (v: unknown): string[] =>
  (Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v]).map((u) =>
    Array.isArray(u) ? (u[1] as string) : String(u),
  );

export async function startZStackSim(opts: ZStackSimOptions = {}): Promise<ZStackSim> {
  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    const errors: unknown[] = [];
    for (const s of stops.splice(0).reverse()) {
      try {
        await s();
      } catch (e) {
        errors.push(e);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, "ZStack simulator: stop failed");
  };
  try {
    let nbServer: OvsdbServer | undefined;
    let nbCluster: RaftCluster | undefined;
    let nbRemotes: string[];
    let sbRemotes: string[];
    let nbTcpRemotes: string[] | undefined;
    let runDir: string;
    if (opts.raft) {
      nbCluster = await startRaftCluster({ schema: SCHEMAS.nb, tcp: opts.tcp });
      const nbc = nbCluster;
      stops.push(() => nbc.stop());
      const sbCluster = await startRaftCluster({ schema: SCHEMAS.sb });
      stops.push(() => sbCluster.stop());
      nbRemotes = nbCluster.remotes;
      nbTcpRemotes = nbCluster.tcpRemotes;
      sbRemotes = sbCluster.remotes;
      runDir = await mkdtemp("/tmp/zs-");
      claimDir(runDir);
      const dir = runDir;
      stops.push(() => removeOwnedDir(dir));
    } else {
      nbServer = await startOvsdbServer({ schemas: [SCHEMAS.nb], tcp: opts.tcp });
      const nbs = nbServer;
      stops.push(() => nbs.stop());
      const sb = await startOvsdbServer({ schemas: [SCHEMAS.sb] });
      stops.push(() => sb.stop());
      nbRemotes = [nbServer.unix];
      nbTcpRemotes = nbServer.tcp ? [nbServer.tcp] : undefined;
      sbRemotes = [sb.unix];
      runDir = nbServer.dir;
    }

    // ZStack's own session: writes raw operations, monitors only NB_Global (for sync()).
    const client = new OvsdbClient({ remotes: nbRemotes, database: NB_DB, monitor: { NB_Global: true } });
    stops.push(() => client.close());
    await client.connect({ retry: true });
    const created = (await client.transactRaw(initialContent(opts.hosts ?? HOSTS))) as {
      error?: string;
      uuid?: [string, string];
    }[];
    const failed = created.find((r) => r?.error);
    if (failed) throw new Error(`ZStack simulator: initial content refused: ${JSON.stringify(failed)}`);

    const northd = startNorthd(runDir, nbRemotes, sbRemotes);
    stops.push(() => northd.terminate());

    const dumpNow = async (): Promise<DatabaseDump> =>
      nbServer ? nbServer.dump(NB_DB) : (await (nbCluster as RaftCluster).leader(60_000)).server.dump(NB_DB);

    const roles = new Map<string, string>();
    for (const [table, rows] of Object.entries(await dumpNow())) {
      for (const [uuid, row] of Object.entries(rows)) {
        const ext = row.external_ids as ["map", [string, string][]] | undefined;
        const role = ext?.[1]?.find(([k]) => k === SIM_ROLE_KEY)?.[1];
        if (role === undefined) continue;
        if (roles.has(role)) throw new Error(`ZStack simulator: role ${role} twice (${table})`);
        roles.set(role, uuid);
      }
    }
    const uuid = (role: string): string => {
      const u = roles.get(role);
      if (u === undefined) throw new Error(`ZStack simulator: no row with role ${role}`);
      return u;
    };
    const switchOf = (network: string): string =>
      network === "overlay" || network === "flat" || network === "twin" ? uuid(`${network}-switch`) : network;
    const writer = new ZStackWriter(client, switchOf, opts.hosts ?? HOSTS);

    let cfg = 0;
    const sync = async (): Promise<void> => {
      const [, sel] = (await client.transactRaw([
        { op: "mutate", table: "NB_Global", where: [], mutations: [["nb_cfg", "+=", 1]] },
        { op: "select", table: "NB_Global", where: [], columns: ["nb_cfg"] },
      ])) as [unknown, { rows: { nb_cfg: number }[] }];
      cfg = sel.rows[0]?.nb_cfg ?? cfg + 1;
      const want = cfg;
      try {
        await client.waitForRow(
          "NB_Global",
          (g) => Number((g as unknown as { sb_cfg: number }).sb_cfg) >= want,
          { timeoutMs: 120_000, description: `sb_cfg >= ${want} (northd caught up)` },
        );
      } catch (err) {
        const log = await readFile(join(runDir, "zstack-northd.log"), "utf8").catch(() => "(no log)");
        throw new Error(`${(err as Error).message}; ovn-northd's log ends with:\n${log.slice(-3000)}`);
      }
    };
    await sync();
    // northd assigns the dynamic port's address; the snapshot is taken only once it is there.
    for (let i = 0; ; i++) {
      const d = await dumpNow();
      const dyn = d.Logical_Switch_Port?.[uuid("edge-dynamic")]?.dynamic_addresses;
      if (typeof dyn === "string" && dyn.length > 0) break;
      if (i > 600) throw new Error("ZStack simulator: northd never set the dynamic port's dynamic_addresses");
      await new Promise((r) => setTimeout(r, 100));
    }

    return {
      hosts: opts.hosts ?? HOSTS,
      nbRemotes,
      ...(nbTcpRemotes ? { nbTcpRemotes } : {}),
      sbRemotes,
      ...(nbCluster ? { nbCluster } : {}),
      ...(nbServer ? { nbServer } : {}),
      roles,
      uuid,
      writer,
      dump: dumpNow,
      sync,
      snapshot: async () => {
        await sync();
        return foreignRows(await dumpNow());
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll().catch(() => {});
    throw err;
  }
}

function startNorthd(dir: string, nb: readonly string[], sb: readonly string[]): Daemon {
  return spawnDaemon(
    "ovn-northd",
    [
      `--ovnnb-db=${nb.join(",")}`,
      `--ovnsb-db=${sb.join(",")}`,
      `--unixctl=${join(dir, "zstack-northd.ctl")}`,
      `--log-file=${join(dir, "zstack-northd.log")}`,
      "--no-chdir",
    ],
    { env: { ...process.env, OVN_RUNDIR: dir }, outputFile: join(dir, "zstack-northd.out") },
  );
}

/** Starts the simulator, stopped (daemons ended, directories removed) when the test ends, passed or failed. */
export async function useZStackSim(t: AfterHook, opts: ZStackSimOptions = {}): Promise<ZStackSim> {
  const sim = await startZStackSim(opts);
  teardownFor(t).after(() => sim.stop());
  return sim;
}
