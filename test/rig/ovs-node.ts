// A test node: a network namespace with its own ovsdb-server (Open_vSwitch) and ovs-vswitchd on the
// userspace datapath, and optionally an OVN control plane (NB, SB, northd) with ovn-controller, so that ports
// added to br-int get `ovn-installed`. Each daemon has its own run/log directory (OVS_RUNDIR, OVN_RUNDIR),
// so several nodes and the sandbox can run side by side. Everything is removed by stop(), at process exit at
// the latest: daemons, the namespaces the node created (pods' too) and the directory.

import { type ChildProcess, execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { claimDir, type Daemon, removeOwnedDir, runTool, spawnDaemon } from "./process.ts";
import { type OvsdbServer, SCHEMAS, startOvsdbServer } from "./server.ts";

/** Every namespace a rig creates starts with this, so a leftover is recognisable (and sweepable) by name. */
export const RIG_NETNS_PREFIX = "zn-";

export interface OvsNodeOptions {
  /** Also run NB, SB, ovn-northd and ovn-controller (default false). */
  ovn?: boolean;
  /** Insert the Open_vSwitch root row as a packaged OVS's init script does (default true). */
  initDb?: boolean;
  /** How long to wait for each daemon to come up; default 10 s. */
  readyTimeoutMs?: number;
}

export interface NetnsHandle {
  readonly name: string;
  /** /run/netns/<name>, what a CNI runtime passes as CNI_NETNS. */
  readonly path: string;
}

export interface OvsNode {
  /** Short random tag; the node's netns is `zn-<tag>` and its other namespaces `zn-<tag>-<suffix>`. */
  readonly tag: string;
  readonly netns: NetnsHandle;
  readonly dir: string;
  /** The node's Open_vSwitch database. */
  readonly ovs: OvsdbServer;
  /** "unix:/.../db.sock" of the Open_vSwitch database. */
  readonly ovsRemote: string;
  readonly nb?: OvsdbServer;
  readonly sb?: OvsdbServer;
  /** Runs a command inside the node's netns and returns its stdout. */
  exec(
    command: string,
    args: readonly string[],
    opts?: { input?: string; timeoutMs?: number },
  ): Promise<string>;
  /** Runs a command inside any netns (by path) and returns its stdout. */
  execIn(
    netnsPath: string,
    command: string,
    args: readonly string[],
    opts?: { input?: string; timeoutMs?: number },
  ): Promise<string>;
  /** A further namespace (a pod, an external host), loopback up, deleted by stop(). */
  addNetns(suffix: string): Promise<NetnsHandle>;
  deleteNetns(handle: NetnsHandle): Promise<void>;
  /** `ovs-vsctl` against this node's database, for read-only assertions (an independent witness). */
  vsctl(...args: string[]): Promise<string>;
  /** Stops ovs-vswitchd and starts it again, as after a crash or an upgrade: tap devices are recreated. */
  restartVswitchd(): Promise<void>;
  /** `ovs-appctl` to this node's ovs-vswitchd. */
  appctl(...args: string[]): Promise<string>;
  /** Idempotent; daemons end, namespaces and the directory are removed. */
  stop(): Promise<void>;
}

const liveNetns = new Set<string>();
let exitHookInstalled = false;

function installNetnsExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const name of liveNetns) {
      try {
        execFileSync("ip", ["netns", "del", name], { stdio: "ignore" });
      } catch {
        // already gone
      }
    }
    liveNetns.clear();
  });
}

async function createNetns(name: string): Promise<NetnsHandle> {
  installNetnsExitHook();
  liveNetns.add(name);
  await runTool("ip", ["netns", "add", name]);
  await runTool("ip", ["-n", name, "link", "set", "lo", "up"]);
  return { name, path: `/run/netns/${name}` };
}

async function removeNetns(name: string): Promise<void> {
  if (existsSync(`/run/netns/${name}`)) await runTool("ip", ["netns", "del", name]);
  liveNetns.delete(name);
}

/** Names of namespaces this process created and has not removed yet. */
export function liveRigNetns(): string[] {
  return [...liveNetns];
}

async function waitFor(what: string, daemon: Daemon, deadline: number, probe: () => boolean): Promise<void> {
  for (;;) {
    if (daemon.hasExited()) throw new Error(`${what} exited during start-up`);
    if (probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export async function startOvsNode(opts: OvsNodeOptions = {}): Promise<OvsNode> {
  const tag = randomBytes(4).toString("hex").slice(0, 6);
  const dir = await mkdtemp("/tmp/zn-");
  claimDir(dir);
  const daemons: Daemon[] = [];
  const servers: OvsdbServer[] = [];
  const extraNetns = new Set<string>();
  let nodeNetns: NetnsHandle | undefined;
  let stopping: Promise<void> | undefined;

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // ovn-controller and vswitchd first, while the databases they talk to still answer.
      for (const d of [...daemons].reverse()) await d.terminate();
      for (const s of servers) await s.stop();
      for (const name of extraNetns) await removeNetns(name);
      if (nodeNetns) await removeNetns(nodeNetns.name);
      await removeOwnedDir(dir);
    })();
    return stopping;
  };

  try {
    const timeout = opts.readyTimeoutMs ?? 10_000;
    nodeNetns = await createNetns(`${RIG_NETNS_PREFIX}${tag}`);
    const ns = nodeNetns;
    const ovs = await startOvsdbServer({ schemas: [SCHEMAS.vswitch], dir: join(dir, "ovs") });
    servers.push(ovs);
    if (opts.initDb !== false) {
      await ovs.transactRaw("Open_vSwitch", [{ op: "insert", table: "Open_vSwitch", row: {} }]);
    }
    const ovsEnv = { ...process.env, OVS_RUNDIR: ovs.dir, OVS_LOGDIR: ovs.dir, OVS_DBDIR: ovs.dir };
    const inNode = (command: string, args: string[]): [string, string[]] => [
      "nsenter",
      [`--net=${ns.path}`, "--", command, ...args],
    ];
    const vswitchdCtl = join(ovs.dir, "ovs-vswitchd.ctl");
    const startVswitchd = async (): Promise<Daemon> => {
      const d = spawnDaemon(
        ...inNode("ovs-vswitchd", [
          ovs.unix,
          "--no-chdir",
          `--pidfile=${join(ovs.dir, "ovs-vswitchd.pid")}`,
          `--log-file=${join(ovs.dir, "ovs-vswitchd.log")}`,
          `--unixctl=${vswitchdCtl}`,
        ]),
        { env: ovsEnv, outputFile: join(ovs.dir, "ovs-vswitchd.out") },
      );
      await waitFor("ovs-vswitchd", d, Date.now() + timeout, () => existsSync(vswitchdCtl));
      return d;
    };
    let vswitchd = await startVswitchd();
    daemons.push(vswitchd);

    let nb: OvsdbServer | undefined;
    let sb: OvsdbServer | undefined;
    if (opts.ovn) {
      nb = await startOvsdbServer({ schemas: [SCHEMAS.nb], dir: join(dir, "nb") });
      servers.push(nb);
      sb = await startOvsdbServer({ schemas: [SCHEMAS.sb], dir: join(dir, "sb") });
      servers.push(sb);
      const northdCtl = join(nb.dir, "ovn-northd.ctl");
      const northd = spawnDaemon(
        "ovn-northd",
        [
          `--ovnnb-db=${nb.unix}`,
          `--ovnsb-db=${sb.unix}`,
          `--unixctl=${northdCtl}`,
          `--log-file=${join(nb.dir, "ovn-northd.log")}`,
          "--no-chdir",
        ],
        { env: { ...process.env, OVN_RUNDIR: nb.dir }, outputFile: join(nb.dir, "ovn-northd.out") },
      );
      daemons.push(northd);
      await waitFor("ovn-northd", northd, Date.now() + timeout, () => existsSync(northdCtl));
      // ovn-controller has no --unixctl: it follows OVN_RUNDIR, and finds br-int's OpenFlow socket in OVS_RUNDIR.
      const ovnDir = join(dir, "ovn-controller");
      await runTool("mkdir", ["-p", ovnDir]);
      const controller = spawnDaemon(
        ...inNode("ovn-controller", [
          ovs.unix,
          "--no-chdir",
          `--pidfile=${join(ovnDir, "ovn-controller.pid")}`,
          `--log-file=${join(ovnDir, "ovn-controller.log")}`,
        ]),
        {
          env: { ...ovsEnv, OVN_RUNDIR: ovnDir, OVN_LOGDIR: ovnDir },
          outputFile: join(ovnDir, "ovn-controller.out"),
        },
      );
      daemons.push(controller);
      await waitFor("ovn-controller", controller, Date.now() + timeout, () =>
        existsSync(join(ovnDir, "ovn-controller.pid")),
      );
    }

    const execIn = (
      path: string,
      command: string,
      args: readonly string[],
      o: { input?: string; timeoutMs?: number } = {},
    ): Promise<string> => runInput("nsenter", [`--net=${path}`, "--", command, ...args], o);

    return {
      tag,
      netns: ns,
      dir,
      ovs,
      ovsRemote: ovs.unix,
      ...(nb ? { nb } : {}),
      ...(sb ? { sb } : {}),
      exec: (command, args, o) => execIn(ns.path, command, args, o),
      execIn,
      addNetns: async (suffix) => {
        const name = `${ns.name}-${suffix}`;
        extraNetns.add(name);
        return createNetns(name);
      },
      deleteNetns: async (h) => {
        await removeNetns(h.name);
        extraNetns.delete(h.name);
      },
      restartVswitchd: async () => {
        await vswitchd.terminate();
        await rm(vswitchdCtl, { force: true });
        const next = await startVswitchd();
        daemons[daemons.indexOf(vswitchd)] = next;
        vswitchd = next;
      },
      vsctl: (...args) => runTool("ovs-vsctl", [`--db=${ovs.unix}`, "--timeout=10", ...args]),
      appctl: (...args) => runTool("ovs-appctl", ["--timeout=10", "-t", vswitchdCtl, ...args]),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** node:test's TestContext, or anything else with an after hook. */
export interface AfterHook {
  after(fn: () => unknown): void;
}

/** Starts a node that is stopped (namespaces and daemons removed) when the test ends, passed or failed. */
export async function useOvsNode(t: AfterHook, opts: OvsNodeOptions = {}): Promise<OvsNode> {
  const node = await startOvsNode(opts);
  t.after(() => node.stop());
  return node;
}

function runInput(
  command: string,
  args: string[],
  opts: { input?: string; timeoutMs?: number },
): Promise<string> {
  if (opts.input === undefined) return runTool(command, args, { timeoutMs: opts.timeoutMs ?? 15_000 });
  return new Promise((resolve, reject) => {
    const child = execFileCb(command, args, opts.timeoutMs ?? 15_000, (err, stdout) =>
      err ? reject(err) : resolve(stdout),
    );
    child.stdin?.end(opts.input);
  });
}

function execFileCb(
  command: string,
  args: string[],
  timeoutMs: number,
  done: (err: Error | undefined, stdout: string) => void,
): ChildProcess {
  return execFile(
    command,
    args,
    { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
    (err, stdout, stderr) => {
      if (err) {
        done(new Error(`${command} ${args.join(" ")} failed: ${stderr.trim() || stdout.trim()}`), stdout);
        return;
      }
      done(undefined, stdout);
    },
  );
}
