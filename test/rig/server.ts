import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { connect } from "node:net";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type DatabaseDump, parseJsonDump } from "./dump-format.ts";
import type { Pki } from "./pki.ts";
import {
  claimDir,
  type Daemon,
  type Exit,
  removeOwnedDir,
  runTool,
  spawnDaemon,
  waitForExit,
} from "./process.ts";

export const SCHEMAS = {
  nb: "/usr/share/ovn/ovn-nb.ovsschema",
  sb: "/usr/share/ovn/ovn-sb.ovsschema",
  vswitch: "/usr/share/openvswitch/vswitch.ovsschema",
} as const;

export interface StartOptions {
  /** One database file `<dir>/<name>.db` per schema, created with `ovsdb-tool create` unless it already exists. */
  schemas: string[];
  /** Existing database files (standalone or clustered) served after those from `schemas`. */
  databases?: string[];
  /** Also listen on ptcp:<port>:127.0.0.1. */
  tcp?: boolean;
  /** Also listen on pssl:<port>:127.0.0.1 with the server certificate of this PKI. */
  ssl?: Pki;
  /** Default: a fresh /tmp/zo-XXXXXX, removed by stop(). A dir given here is left in place. */
  dir?: string;
  extraArgs?: string[];
  /** How long to wait for the daemon to accept connections; default 10 s. */
  readyTimeoutMs?: number;
}

export interface OvsdbServer {
  readonly dir: string;
  /** PID of the current process; changes on restart(). */
  readonly pid: number;
  /** False once the process has exited (killed, crashed or stopped) until restart(). */
  readonly running: boolean;
  /** "unix:/abs/path/db.sock" */
  readonly unix: string;
  /** "tcp:127.0.0.1:PORT" */
  readonly tcp?: string;
  /** "ssl:127.0.0.1:PORT" */
  readonly ssl?: string;
  /** The same endpoints for node:net / node:tls. */
  readonly socketPath: string;
  readonly tcpPort?: number;
  readonly sslPort?: number;
  /** Database names in the order of schemas, then databases. */
  readonly dbNames: string[];
  readonly logFile: string;
  readonly unixctl: string;
  /** table -> _uuid -> column -> wire JSON value, every table of db (empty ones too), _version dropped. */
  dump(db: string): Promise<DatabaseDump>;
  /** stdout of `ovs-appctl -t <unixctl> ...args`. */
  appctl(...args: string[]): Promise<string>;
  /** Parsed result array of `ovsdb-client transact` over the unix socket: an independent writer. */
  transactRaw(db: string, ops: unknown[]): Promise<unknown>;
  /** SIGTERM, SIGKILL after 3 s, then removes the dir if the rig created it. Idempotent and final. */
  stop(): Promise<void>;
  /** Sends a signal (default SIGKILL) and returns at once; see waitForExit and restart. */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves when the current process has exited. */
  waitForExit(): Promise<Exit>;
  /** Ends the current process if it still runs (SIGTERM), then starts anew on the same files, sockets and ports. */
  restart(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const TOOL_TIMEOUT_SECONDS = 10;
// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
const MAX_UNIX_PATH_BYTES = 107;

export async function startOvsdbServer(opts: StartOptions): Promise<OvsdbServer> {
  const ownsDir = opts.dir === undefined;
  const dir = resolve(opts.dir ?? (await mkdtemp("/tmp/zo-")));
  if (ownsDir) claimDir(dir);
  let server: RigServer | undefined;
  try {
    socketPathIn(dir);
    await mkdir(dir, { recursive: true });
    const files = await prepareDatabases(dir, opts.schemas, opts.databases ?? []);
    server = new RigServer(dir, ownsDir, files, opts);
    await server.launch();
    return server;
  } catch (err) {
    if (server) await server.stop();
    else if (ownsDir) await removeOwnedDir(dir);
    throw err;
  }
}

function socketPathIn(dir: string): string {
  const path = join(dir, "db.sock");
  if (Buffer.byteLength(path) > MAX_UNIX_PATH_BYTES) {
    throw new Error(`unix socket path is longer than ${MAX_UNIX_PATH_BYTES} bytes: ${path}`);
  }
  return path;
}

interface DatabaseFile {
  name: string;
  path: string;
}

async function prepareDatabases(
  dir: string,
  schemas: string[],
  databases: string[],
): Promise<DatabaseFile[]> {
  const files: DatabaseFile[] = [];
  for (const schema of schemas) {
    const name = await schemaName(schema);
    const path = join(dir, `${name}.db`);
    if (!existsSync(path)) await runTool("ovsdb-tool", ["create", path, schema]);
    files.push({ name, path });
  }
  for (const database of databases) {
    const path = resolve(database);
    const name = (await runTool("ovsdb-tool", ["db-name", path])).trim();
    files.push({ name, path });
  }
  const names = files.map((f) => f.name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) throw new Error(`database ${duplicate} is given twice`);
  return files;
}

export async function schemaName(schemaPath: string): Promise<string> {
  const schema: unknown = JSON.parse(await readFile(schemaPath, "utf8"));
  const name = (schema as { name?: unknown }).name;
  if (typeof name !== "string") throw new Error(`${schemaPath} has no schema name`);
  return name;
}

class RigServer implements OvsdbServer {
  readonly unix: string;
  readonly dbNames: string[];
  readonly logFile: string;
  readonly unixctl: string;
  readonly socketPath: string;
  private readonly outputFile: string;
  private readonly env: NodeJS.ProcessEnv;
  private learnedTcpPort: number | undefined;
  private learnedSslPort: number | undefined;
  private daemon: Daemon | undefined;
  private stopping: Promise<void> | undefined;
  // restart() and stop() run one after the other, never interleaved.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly dir: string,
    private readonly ownsDir: boolean,
    private readonly files: DatabaseFile[],
    private readonly opts: StartOptions,
  ) {
    this.socketPath = socketPathIn(dir);
    this.unix = `unix:${this.socketPath}`;
    this.logFile = join(dir, "ovsdb-server.log");
    this.unixctl = join(dir, "ovsdb-server.ctl");
    this.outputFile = join(dir, "ovsdb-server.out");
    this.dbNames = files.map((f) => f.name);
    this.env = { ...process.env, OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir };
  }

  get pid(): number {
    if (!this.daemon) throw new Error("ovsdb-server was never started");
    return this.daemon.pid;
  }

  get running(): boolean {
    return this.daemon !== undefined && !this.daemon.hasExited();
  }

  get tcpPort(): number | undefined {
    return this.learnedTcpPort;
  }

  get sslPort(): number | undefined {
    return this.learnedSslPort;
  }

  get tcp(): string | undefined {
    return this.tcpPort === undefined ? undefined : `tcp:127.0.0.1:${this.tcpPort}`;
  }

  get ssl(): string | undefined {
    return this.sslPort === undefined ? undefined : `ssl:127.0.0.1:${this.sslPort}`;
  }

  private args(): string[] {
    const args = [
      "--no-chdir",
      `--pidfile=${join(this.dir, "ovsdb-server.pid")}`,
      `--unixctl=${this.unixctl}`,
      `--log-file=${this.logFile}`,
      `--remote=punix:${this.socketPath}`,
    ];
    // Port 0 on the first start: the kernel picks a free port, read back from the log, so no port can be
    // taken between choosing and binding it. Later starts reuse the port learnt.
    if (this.opts.tcp) args.push(`--remote=ptcp:${this.tcpPort ?? 0}:127.0.0.1`);
    const pki = this.opts.ssl;
    if (pki) {
      args.push(
        `--remote=pssl:${this.sslPort ?? 0}:127.0.0.1`,
        `--private-key=${pki.serverKey}`,
        `--certificate=${pki.serverCert}`,
        `--ca-cert=${pki.caCert}`,
      );
    }
    args.push(...(this.opts.extraArgs ?? []), ...this.files.map((f) => f.path));
    return args;
  }

  async launch(): Promise<void> {
    // A SIGKILLed server leaves its socket file behind.
    await rm(this.socketPath, { force: true });
    const logOffset = await fileSize(this.logFile);
    const firstPorts =
      (this.opts.tcp && this.tcpPort === undefined) || (this.opts.ssl && this.sslPort === undefined);
    this.daemon = spawnDaemon("ovsdb-server", this.args(), { env: this.env, outputFile: this.outputFile });
    const deadline = Date.now() + (this.opts.readyTimeoutMs ?? READY_TIMEOUT_MS);
    await this.untilReady(deadline, "its unix socket to accept connections", () =>
      canConnect({ path: this.socketPath }),
    );
    if (firstPorts) {
      await this.learnPorts(logOffset, deadline);
    }
    for (const port of [this.tcpPort, this.sslPort]) {
      if (port !== undefined) {
        await this.untilReady(deadline, `port ${port} to accept connections`, () =>
          canConnect({ host: "127.0.0.1", port }),
        );
      }
    }
  }

  private async untilReady(deadline: number, what: string, probe: () => Promise<boolean>): Promise<void> {
    for (;;) {
      const daemon = this.daemon!;
      if (daemon.hasExited()) {
        const exit = await daemon.exited;
        throw new Error(
          `ovsdb-server in ${this.dir} exited (code ${exit.code}, signal ${exit.signal}) while waiting for ${what}\n` +
            (await this.diagnostics()),
        );
      }
      if (await probe()) return;
      if (Date.now() > deadline) {
        throw new Error(
          `ovsdb-server in ${this.dir}: timed out waiting for ${what}\n${await this.diagnostics()}`,
        );
      }
      await sleep(25);
    }
  }

  private async learnPorts(logOffset: number, deadline: number): Promise<void> {
    const wanted = (this.opts.tcp ? 1 : 0) + (this.opts.ssl ? 1 : 0);
    let ports: number[] = [];
    await this.untilReady(deadline, `${wanted} "listening on port" lines in its log`, async () => {
      const log = (await readFile(this.logFile)).subarray(logOffset).toString("utf8");
      ports = [...log.matchAll(/\|socket_util\|INFO\|0:127\.0\.0\.1: listening on port (\d+)$/gm)].map((m) =>
        Number(m[1]),
      );
      return ports.length >= wanted;
    });
    const [first, second] = ports;
    if (wanted === 1) {
      if (this.opts.tcp) this.learnedTcpPort = first;
      else this.learnedSslPort = first;
      return;
    }
    // The log does not say which listener is which, so ask the first one a plain JSON-RPC echo.
    const firstIsPlain = await answersPlainJsonRpc(first!);
    this.learnedTcpPort = firstIsPlain ? first : second;
    this.learnedSslPort = firstIsPlain ? second : first;
  }

  private async diagnostics(): Promise<string> {
    const log = await tail(this.logFile, 20);
    const out = await tail(this.outputFile, 20);
    return `--- ${this.logFile} (tail) ---\n${log}\n--- ${this.outputFile} (tail) ---\n${out}`;
  }

  async dump(db: string): Promise<DatabaseDump> {
    const out = await runTool("ovsdb-client", [
      `--timeout=${TOOL_TIMEOUT_SECONDS}`,
      "dump",
      "-f",
      "json",
      this.unix,
      db,
    ]);
    return parseJsonDump(out);
  }

  appctl(...args: string[]): Promise<string> {
    return runTool("ovs-appctl", [`--timeout=${TOOL_TIMEOUT_SECONDS}`, "-t", this.unixctl, ...args]);
  }

  async transactRaw(db: string, ops: unknown[]): Promise<unknown> {
    const out = await runTool("ovsdb-client", [
      `--timeout=${TOOL_TIMEOUT_SECONDS}`,
      "transact",
      this.unix,
      JSON.stringify([db, ...ops]),
    ]);
    return JSON.parse(out);
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    this.daemon?.signal(signal);
  }

  async waitForExit(): Promise<Exit> {
    if (!this.daemon) throw new Error("ovsdb-server was never started");
    return waitForExit(this.daemon);
  }

  restart(): Promise<void> {
    return this.serialized(async () => {
      if (this.stopping) throw new Error(`ovsdb-server in ${this.dir} was stopped; it cannot be restarted`);
      await this.daemon?.terminate();
      try {
        await this.launch();
      } catch (err) {
        await this.daemon?.terminate();
        throw err;
      }
    });
  }

  stop(): Promise<void> {
    this.stopping ??= this.serialized(async () => {
      await this.daemon?.terminate();
      if (this.ownsDir) await removeOwnedDir(this.dir);
    });
    return this.stopping;
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }
}

function canConnect(target: { path: string } | { host: string; port: number }): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = connect(target);
    const done = (ok: boolean): void => {
      socket.destroy();
      resolvePromise(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** True if the port answers JSON-RPC in clear text; a TLS listener drops the connection or answers with an alert. */
function answersPlainJsonRpc(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = connect({ host: "127.0.0.1", port });
    let settled = false;
    const done = (plain: boolean): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolvePromise(plain);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once("connect", () =>
      socket.write(JSON.stringify({ id: "zo-rig-probe", method: "echo", params: [] })),
    );
    socket.once("data", (chunk: Buffer) => done(chunk.toString("utf8").trimStart().startsWith("{")));
    socket.once("error", () => done(false));
    socket.once("close", () => done(false));
  });
}

async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

async function tail(path: string, lines: number): Promise<string> {
  try {
    return (await readFile(path, "utf8")).trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(none)";
  }
}
