// OVN central on the control-plane host (or with --zstack ZStack's controller host): the NB and SB ovsdb-servers
// (standalone, or three-member Raft clusters) and ovn-northd (with Raft one beside each member). Clients on the
// underlay use tcp:IP:6641/6642; tools on the machine use the unix sockets in the instance's directory, which work
// across network namespaces.

import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { centralNode } from "./chart-install.ts";
import { run } from "./command.ts";
import { runSelfDetaching } from "./daemon.ts";
import type { Layout } from "./layout.ts";
import type { Place } from "./netns.ts";
import { liveDaemon, recordDaemon, type SandboxState } from "./state.ts";
import { type Host, NB_PORT, NB_RAFT_PORT, SB_PORT, SB_RAFT_PORT, type Topology } from "./topology.ts";

const SCHEMAS = { nb: "/usr/share/ovn/ovn-nb.ovsschema", sb: "/usr/share/ovn/ovn-sb.ovsschema" } as const;
const DB_NAMES = { nb: "OVN_Northbound", sb: "OVN_Southbound" } as const;
type Db = "nb" | "sb";

export interface CentralMember {
  db: Db;
  /** 1-based member index; standalone has only member 1. */
  index: number;
  ip: string;
  file: string;
  socket: string;
  ctl: string;
  pidfile: string;
  log: string;
}

export function centralMembers(layout: Layout, topo: Topology, db: Db): CentralMember[] {
  const clustered = topo.spec.raft;
  return topo.centralIps.map((ip, i) => {
    const base = clustered ? `${db}${i + 1}` : db;
    return {
      db,
      index: i + 1,
      ip,
      file: join(layout.centralDir, `${base}.db`),
      socket: join(layout.centralDir, `${base}.sock`),
      ctl: join(layout.centralDir, `${base}.ctl`),
      pidfile: join(layout.centralDir, `${base}.pid`),
      log: join(centralLogDir(layout, topo), `ovsdb-server-${base}.log`),
    };
  });
}

/** The central host's log directory: logs/cp, or with `--zstack` logs/zs (ZStack's controller host). */
function centralLogDir(layout: Layout, topo: Topology): string {
  return join(layout.logDir, topo.central.name);
}

/** The unix-socket remote for tools on the machine, e.g. `ovn-sbctl --db=...`. */
export function localRemote(layout: Layout, topo: Topology, db: Db): string {
  return centralMembers(layout, topo, db)
    .map((m) => `unix:${m.socket}`)
    .join(",");
}

function clientPort(db: Db): number {
  return db === "nb" ? NB_PORT : SB_PORT;
}

function raftPort(db: Db): number {
  return db === "nb" ? NB_RAFT_PORT : SB_RAFT_PORT;
}

function ovsEnv(layout: Layout, logDir: string = layout.cpLogDir): NodeJS.ProcessEnv {
  // Without these the daemons would fall back to the machine's /var/run/openvswitch and /var/run/ovn.
  return {
    ...process.env,
    OVS_RUNDIR: layout.centralDir,
    OVS_DBDIR: layout.centralDir,
    OVS_LOGDIR: logDir,
    OVN_RUNDIR: layout.centralDir,
    OVN_DBDIR: layout.centralDir,
    OVN_LOGDIR: logDir,
  };
}

async function createDatabase(members: CentralMember[], clustered: boolean): Promise<void> {
  const first = members[0] as CentralMember;
  const schema = SCHEMAS[first.db];
  if (!clustered) {
    if (!existsSync(first.file)) await run("ovsdb-tool", ["create", first.file, schema]);
    return;
  }
  const port = raftPort(first.db);
  if (!existsSync(first.file))
    await run("ovsdb-tool", ["create-cluster", first.file, schema, `tcp:${first.ip}:${port}`]);
  for (const m of members.slice(1)) {
    if (existsSync(m.file)) continue;
    await run("ovsdb-tool", [
      "join-cluster",
      m.file,
      DB_NAMES[m.db],
      `tcp:${m.ip}:${port}`,
      `tcp:${first.ip}:${port}`,
    ]);
  }
}

/**
 * Starts what is missing of NB, SB (on the central host: cp, or ZStack's controller with `--zstack`) and northd.
 * `beforeNorthd` runs once the databases answer and before northd starts (the simulated ZStack's content).
 */
export async function startOvnCentral(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  beforeNorthd?: () => Promise<void>,
): Promise<void> {
  const logDir = centralLogDir(layout, topo);
  mkdirSync(layout.centralDir, { recursive: true });
  mkdirSync(logDir, { recursive: true });
  const place: Place = { netns: topo.central.netns };
  const env = ovsEnv(layout, logDir);
  await Promise.all(
    (["nb", "sb"] as const).map(async (db) => {
      const members = centralMembers(layout, topo, db);
      await createDatabase(members, topo.spec.raft);
      await Promise.all(
        members.map(async (m) => {
          const name = `${topo.central.name}/ovsdb-server-${topo.spec.raft ? `${db}${m.index}` : db}`;
          if (liveDaemon(state, name)) return;
          const args = [
            m.file,
            `--remote=punix:${m.socket}`,
            `--remote=ptcp:${clientPort(db)}:${m.ip}`,
            `--pidfile=${m.pidfile}`,
            `--unixctl=${m.ctl}`,
            `--log-file=${m.log}`,
            "--detach",
            "--no-chdir",
          ];
          const id = await runSelfDetaching(place, "ovsdb-server", args, m.pidfile, env);
          recordDaemon(layout, state, { name, log: m.log, ...id });
        }),
      );
    }),
  );
  await beforeNorthd?.();
  // With Raft, one northd beside each member, as OVN's clustered deployments run it: they hold SB's northd lock in
  // turn (one active, the others standby), and each follows the NB and SB leaders wherever they are.
  const northds = topo.spec.raft ? centralMembers(layout, topo, "nb").map((m) => `${m.index}`) : [""];
  await Promise.all(
    northds.map(async (suffix) => {
      const name = `${topo.central.name}/ovn-northd${suffix}`;
      if (liveDaemon(state, name)) return;
      const pidfile = join(layout.centralDir, `ovn-northd${suffix}.pid`);
      const log = join(logDir, `ovn-northd${suffix}.log`);
      const args = [
        `--ovnnb-db=${localRemote(layout, topo, "nb")}`,
        `--ovnsb-db=${localRemote(layout, topo, "sb")}`,
        `--pidfile=${pidfile}`,
        `--unixctl=${join(layout.centralDir, `ovn-northd${suffix}.ctl`)}`,
        `--log-file=${log}`,
        "--detach",
        "--no-chdir",
      ];
      const id = await runSelfDetaching(place, "ovn-northd", args, pidfile, env);
      recordDaemon(layout, state, { name, log, ...id });
    }),
  );
}

/** Runs ovn-nbctl or ovn-sbctl from the machine against the central databases. */
export function ovnCtl(layout: Layout, topo: Topology, db: Db, args: readonly string[]): Promise<string> {
  const tool = db === "nb" ? "ovn-nbctl" : "ovn-sbctl";
  if (topo.spec.chart) {
    // The chart's OVN central listens on its node's address (hostNetwork), reachable inside the sandbox only.
    const node = topo.nodes.find((n) => n.name === centralNode(topo)) as Host;
    const remote = `tcp:${node.ip}:${clientPort(db)}`;
    return run("ip", ["netns", "exec", node.netns, tool, `--db=${remote}`, "--timeout=10", ...args]);
  }
  return run(tool, [`--db=${localRemote(layout, topo, db)}`, "--timeout=10", ...args], {
    env: ovsEnv(layout),
  });
}
