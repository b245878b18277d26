// How the node agent puts the CNI plugin in place: the executable into the CNI bin directory and the
// conflist into the CNI config directory. Both are written under a temporary name in the same directory
// and renamed, so a runtime never executes a half-copied binary or reads a half-written config.

import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { chmod, copyFile, mkdir, open, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { DEFAULT_SERVER_SOCKET } from "./protocol.ts";
import {
  type CniVersion,
  type ConfList,
  LATEST_VERSION,
  SUPPORTED_VERSIONS,
  versionAtLeast,
} from "./spec.ts";

export const CNI_BINARY_NAME = "zstack-ovn-cni";
/** The TypeScript shim the Go forwarder hands an invocation to when no agent can answer it (docs/cni.md). */
export const CNI_SHIM_NAME = "zstack-ovn-cni-shim";
export const CONFLIST_NAME = "10-zstack-ovn.conflist";
export const DEFAULT_NETWORK_NAME = "zstack-ovn";

function tempPath(dir: string, name: string): string {
  return join(dir, `.${name}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
}

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function sameContent(a: string, b: string): Promise<boolean> {
  const [sa, sb] = await Promise.all([stat(a), stat(b).catch(() => undefined)]);
  if (!sb || sa.size !== sb.size) return false;
  const [ha, hb] = await Promise.all([sha256(a), sha256(b)]);
  return ha === hb;
}

/** Writes `data` to dir/name by temp file, fsync and rename. */
async function writeAtomically(dir: string, name: string, data: string, mode: number): Promise<string> {
  await mkdir(dir, { recursive: true });
  const dest = join(dir, name);
  const tmp = tempPath(dir, name);
  try {
    const fh = await open(tmp, "wx", mode);
    try {
      await fh.writeFile(data);
      await fh.chmod(mode);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, dest);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  return dest;
}

export interface InstallResult {
  path: string;
  /** False when the same bytes were already installed and nothing was written. */
  changed: boolean;
}

/**
 * Copies the executable `src` into `binDir` as `name` (default zstack-ovn-cni), mode 0755. A runtime
 * running the old binary keeps its inode; the next invocation gets the new one.
 */
export async function installCniBinary(
  src: string,
  binDir: string,
  name = CNI_BINARY_NAME,
): Promise<InstallResult> {
  const dest = join(binDir, name);
  if (await sameContent(src, dest)) return { path: dest, changed: false };
  await mkdir(binDir, { recursive: true });
  const tmp = tempPath(binDir, name);
  try {
    await copyFile(src, tmp);
    await chmod(tmp, 0o755);
    const fh = await open(tmp, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, dest);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  return { path: dest, changed: true };
}

/** The ELF note a Go linker writes first (name "Go", type 4, the build ID): its header's type and name. */
const GO_BUILD_ID_NOTE = Buffer.from([4, 0, 0, 0, 0x47, 0x6f, 0, 0]);

/** Whether `path` is a Go executable, i.e. the forwarder: its build ID note sits in the first page or so. */
export async function isGoExecutable(path: string): Promise<boolean> {
  const fh = await open(path, "r");
  try {
    const head = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    const elf = bytesRead >= 4 && head.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
    return elf && head.subarray(0, bytesRead).includes(GO_BUILD_ID_NOTE);
  } finally {
    await fh.close();
  }
}

/**
 * Installs the CNI executable `src` as zstack-ovn-cni and, when `src` has the TypeScript shim beside it
 * (zstack-ovn-cni-shim, which the Go forwarder hands invocations no agent can answer to), the shim first,
 * so the forwarder is never in place without it. The Go forwarder without its shim is refused: every DEL or
 * CHECK while the agent is down would fail.
 */
export async function installCniPlugin(src: string, binDir: string): Promise<InstallResult[]> {
  const shim = join(dirname(src), CNI_SHIM_NAME);
  const out: InstallResult[] = [];
  if (await stat(shim).catch(() => undefined)) out.push(await installCniBinary(shim, binDir, CNI_SHIM_NAME));
  else if (await isGoExecutable(src))
    throw new Error(
      `ZSTACK_CNI_BINARY ${src} is the Go forwarder but its shim ${shim} is missing: without it a DEL or CHECK ` +
        "while the node agent is down fails; put the shim beside it (the image has both in /opt/cni/bin) or " +
        "point ZSTACK_CNI_BINARY at the TypeScript CNI executable",
    );
  out.push(await installCniBinary(src, binDir));
  return out;
}

export interface ConflistOptions {
  /** The agent's socket; omitted from the file when it is the default. */
  socketPath?: string;
  /** Pod MTU override; the agent derives it from the encapsulation interface when absent. */
  mtu?: number;
  /** The network name; default "zstack-ovn". */
  networkName?: string;
  /** The plugin type, i.e. the binary's name in the CNI bin directory; default zstack-ovn-cni. */
  pluginType?: string;
  /** The file name; default 10-zstack-ovn.conflist. */
  fileName?: string;
  /** The newest version offered (default 1.1.0); an older one keeps every runtime below it. */
  cniVersion?: CniVersion;
}

/**
 * What a runtime whose libcni predates `cniVersions` (before 1.2: containerd 1.6 and 1.7) reads: it takes
 * `cniVersion` alone and cannot parse a 1.1.0 result, so that field says 1.0.0 and newer runtimes pick 1.1.0
 * from `cniVersions`.
 */
export const COMPAT_CONFLIST_VERSION: CniVersion = "1.0.0";

export function buildConflist(opts: ConflistOptions = {}): ConfList {
  const plugin: Record<string, unknown> & { type: string } = { type: opts.pluginType ?? CNI_BINARY_NAME };
  if (opts.socketPath && opts.socketPath !== DEFAULT_SERVER_SOCKET) plugin.serverSocket = opts.socketPath;
  if (opts.mtu !== undefined) plugin.mtu = opts.mtu;
  const newest = opts.cniVersion ?? LATEST_VERSION;
  return {
    cniVersion: versionAtLeast(newest, COMPAT_CONFLIST_VERSION) ? COMPAT_CONFLIST_VERSION : newest,
    // Runtimes whose libcni knows cniVersions (1.2 and later) pick the newest version they share with us.
    cniVersions: SUPPORTED_VERSIONS.filter((v) => versionAtLeast(newest, v)),
    name: opts.networkName ?? DEFAULT_NETWORK_NAME,
    plugins: [plugin],
  };
}

/** Writes the conflist into `dir` atomically (mode 0644) and returns its path. */
export async function writeConflist(dir: string, opts: ConflistOptions = {}): Promise<string> {
  const text = `${JSON.stringify(buildConflist(opts), null, 2)}\n`;
  return writeAtomically(dir, basename(opts.fileName ?? CONFLIST_NAME), text, 0o644);
}
