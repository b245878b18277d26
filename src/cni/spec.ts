// The CNI spec's inputs (0.4.0, 1.0.0, 1.1.0): the CNI_* environment, the plugin configuration on stdin,
// the configuration list on disk, and version negotiation. Everything here is pure: text in, typed values
// or a CniError naming the field and the fix out.

import { interfaceNameProblem, netnsPathProblem } from "../node/interface-name.ts";
import { CniError, CniErrorCode } from "./error.ts";
import { type CniResult, parseResult } from "./result.ts";

export const SUPPORTED_VERSIONS = ["0.4.0", "1.0.0", "1.1.0"] as const;
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];
/** The newest version we speak: what we write into conflists and answer with when the input names none. */
export const LATEST_VERSION: CniVersion = "1.1.0";

export const CNI_COMMANDS = ["ADD", "DEL", "CHECK", "VERSION", "GC", "STATUS"] as const;
export type CniCommand = (typeof CNI_COMMANDS)[number];

export function isSupportedVersion(v: unknown): v is CniVersion {
  return typeof v === "string" && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** a >= b, for supported versions (the list is in ascending order). */
export function versionAtLeast(a: CniVersion, b: CniVersion): boolean {
  return SUPPORTED_VERSIONS.indexOf(a) >= SUPPORTED_VERSIONS.indexOf(b);
}

/** The lowest spec version that defines each command. */
export const COMMAND_SINCE: Record<CniCommand, CniVersion> = {
  ADD: "0.4.0",
  DEL: "0.4.0",
  CHECK: "0.4.0",
  VERSION: "0.4.0",
  GC: "1.1.0",
  STATUS: "1.1.0",
};

// ---------------------------------------------------------------------------------------------------------
// Environment

/** The environment variables a runtime sets; other variables never cross to the agent. */
export type CniEnvVars = Partial<Record<string, string>>;

/** Which CNI_* variables each command requires (SPEC.md, section 2). */
export const REQUIRED_ENV: Record<CniCommand, readonly string[]> = {
  ADD: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  CHECK: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  DEL: ["CNI_CONTAINERID", "CNI_IFNAME"],
  GC: ["CNI_PATH"],
  STATUS: [],
  VERSION: [],
};

export interface K8sArgs {
  podNamespace?: string;
  podName?: string;
  podInfraContainerId?: string;
  podUid?: string;
}

export interface CniArgs {
  k8s: K8sArgs;
  /** Every KEY=VALUE pair of CNI_ARGS, including the ones in `k8s` and IgnoreUnknown. */
  all: Record<string, string>;
}

export interface CniEnv {
  command: CniCommand;
  /** "" where the command does not carry it (GC, STATUS, VERSION). */
  containerId: string;
  /** "" where absent; DEL may come without a netns once the runtime has already removed it. */
  netns: string;
  ifname: string;
  args: CniArgs;
  /** CNI_PATH split on ':'; empty entries dropped. */
  path: string[];
}

function envError(message: string): CniError {
  return new CniError(CniErrorCode.InvalidEnvironment, message);
}

export function parseCniCommand(env: CniEnvVars): CniCommand {
  const command = env.CNI_COMMAND;
  if (command === undefined || command === "")
    throw envError(`CNI_COMMAND is not set; set it to one of ${CNI_COMMANDS.join(", ")}`);
  if (!(CNI_COMMANDS as readonly string[]).includes(command))
    throw envError(`CNI_COMMAND=${JSON.stringify(command)} is not one of ${CNI_COMMANDS.join(", ")}`);
  return command as CniCommand;
}

const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const NETWORK_NAME = CONTAINER_ID;

export { interfaceNameProblem };

export function parseCniArgs(text: string | undefined): CniArgs {
  const all: Record<string, string> = {};
  for (const pair of (text ?? "").split(";")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    if (eq <= 0)
      throw envError(
        `CNI_ARGS holds ${JSON.stringify(pair)}, which is not KEY=VALUE; separate pairs with ';'`,
      );
    all[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const k8s: K8sArgs = {};
  if (all.K8S_POD_NAMESPACE) k8s.podNamespace = all.K8S_POD_NAMESPACE;
  if (all.K8S_POD_NAME) k8s.podName = all.K8S_POD_NAME;
  if (all.K8S_POD_INFRA_CONTAINER_ID) k8s.podInfraContainerId = all.K8S_POD_INFRA_CONTAINER_ID;
  if (all.K8S_POD_UID) k8s.podUid = all.K8S_POD_UID;
  return { k8s, all };
}

/** Checks the variables `command` requires and parses them all; a problem names the variable (code 4). */
export function parseCniEnv(env: CniEnvVars, command: CniCommand = parseCniCommand(env)): CniEnv {
  const missing = REQUIRED_ENV[command].filter((name) => !env[name]);
  if (missing.length > 0)
    throw envError(
      `CNI_COMMAND=${command} needs ${missing.join(", ")}, but ${missing.length > 1 ? "they are" : "it is"} not set`,
    );
  const containerId = env.CNI_CONTAINERID ?? "";
  const ifname = env.CNI_IFNAME ?? "";
  const attachment = REQUIRED_ENV[command].includes("CNI_CONTAINERID");
  if (attachment && !CONTAINER_ID.test(containerId))
    throw envError(
      `CNI_CONTAINERID=${JSON.stringify(containerId)} must start with a letter or digit and hold only letters, digits, '_', '.' and '-'`,
    );
  const ifnameProblem = attachment ? interfaceNameProblem(ifname) : undefined;
  if (ifnameProblem) throw envError(`CNI_IFNAME=${JSON.stringify(ifname)} ${ifnameProblem}`);
  const netns = env.CNI_NETNS ?? "";
  // DEL may come with an empty netns; whatever is given is checked, as it becomes an nsenter argument.
  const netnsProblem = netns !== "" ? netnsPathProblem(netns) : undefined;
  if (netnsProblem) throw envError(`CNI_NETNS=${JSON.stringify(netns.slice(0, 200))} ${netnsProblem}`);
  return {
    command,
    containerId,
    netns,
    ifname,
    args: parseCniArgs(env.CNI_ARGS),
    path: (env.CNI_PATH ?? "").split(":").filter((p) => p !== ""),
  };
}

// ---------------------------------------------------------------------------------------------------------
// The plugin configuration on stdin

export interface GcAttachment {
  containerId: string;
  ifname: string;
}

/** The plugin configuration a runtime passes on stdin: our plugin's entry of the conflist plus runtime keys. */
export interface PluginConfig {
  cniVersion: CniVersion;
  name: string;
  type: string;
  /** Where the node agent listens; the shim forwards to DEFAULT_SERVER_SOCKET when absent. */
  serverSocket?: string;
  /** Overrides the MTU the agent derives from the encapsulation interface. */
  mtu?: number;
  runtimeConfig?: Record<string, unknown>;
  prevResult?: CniResult;
  /** GC only: `cni.dev/valid-attachments`; an absent key means no attachment is still valid. */
  validAttachments?: GcAttachment[];
  /** The whole object as received, for plugin keys this module does not model. */
  raw: Record<string, unknown>;
}

function configError(field: string, problem: string): CniError {
  return new CniError(CniErrorCode.InvalidNetworkConfig, `network config field "${field}" ${problem}`);
}

/** Decodes stdin: undecodable JSON is code 6, anything but a JSON object is code 7. */
export function decodeConfig(stdin: string): Record<string, unknown> {
  if (stdin.trim() === "")
    throw new CniError(
      CniErrorCode.DecodeFailure,
      "stdin is empty; the runtime must pass the network configuration as JSON on stdin",
    );
  let value: unknown;
  try {
    value = JSON.parse(stdin);
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodeFailure,
      `stdin is not valid JSON: ${(err as Error).message}`,
      `the first bytes were ${JSON.stringify(stdin.slice(0, 80))}`,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `stdin holds JSON ${Array.isArray(value) ? "array" : typeof value === "object" ? "null" : typeof value}, not the network configuration object`,
    );
  return value as Record<string, unknown>;
}

/** The spec version a configuration asks for; missing or unsupported is code 1. */
export function configVersion(config: Record<string, unknown>): CniVersion {
  const v = config.cniVersion;
  if (isSupportedVersion(v)) return v;
  if (v === undefined)
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `network config has no "cniVersion" (which the spec reads as 0.1.0); set it to one of ${SUPPORTED_VERSIONS.join(", ")}`,
    );
  throw new CniError(
    CniErrorCode.IncompatibleVersion,
    `cniVersion ${JSON.stringify(v)} is not supported; use one of ${SUPPORTED_VERSIONS.join(", ")}`,
  );
}

/** The longest path a unix socket address holds (sun_path is 108 bytes, NUL-terminated). */
export const MAX_SOCKET_PATH_BYTES = 107;

export function socketPathProblem(path: unknown): string | undefined {
  if (typeof path !== "string") return `must be a string, got ${JSON.stringify(path)}`;
  if (!path.startsWith("/")) return `must be an absolute path, got ${JSON.stringify(path)}`;
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES)
    return `is ${Buffer.byteLength(path)} bytes long; a unix socket path holds at most ${MAX_SOCKET_PATH_BYTES}`;
  return undefined;
}

function parseValidAttachments(value: unknown): GcAttachment[] {
  const field = "cni.dev/valid-attachments";
  if (!Array.isArray(value))
    throw configError(field, `must be a list of {containerID, ifname}, got ${JSON.stringify(value)}`);
  return value.map((a: unknown, i) => {
    const o = (typeof a === "object" && a !== null ? a : {}) as Record<string, unknown>;
    if (
      typeof o.containerID !== "string" ||
      o.containerID === "" ||
      typeof o.ifname !== "string" ||
      o.ifname === ""
    )
      throw configError(
        `${field}[${i}]`,
        `must be {"containerID": "...", "ifname": "..."}, got ${JSON.stringify(a)}`,
      );
    return { containerId: o.containerID, ifname: o.ifname };
  });
}

/** Validates the fields this plugin reads (code 7 naming the field); the version is checked by configVersion. */
export function parsePluginConfig(config: Record<string, unknown>, command?: CniCommand): PluginConfig {
  const cniVersion = configVersion(config);
  const { name, type } = config;
  if (typeof name !== "string" || name === "")
    throw configError("name", `is missing; set the network name in the conflist, e.g. "name": "zstack-ovn"`);
  if (!NETWORK_NAME.test(name))
    throw configError(
      "name",
      `${JSON.stringify(name)} must start with a letter or digit and hold only letters, digits, '_', '.' and '-'`,
    );
  if (typeof type !== "string" || type === "" || type.includes("/"))
    throw configError(
      "type",
      `must name the plugin binary, e.g. "type": "zstack-ovn-cni", got ${JSON.stringify(type)}`,
    );
  if (Array.isArray(config.plugins))
    throw configError(
      "plugins",
      "is present: stdin holds a whole configuration list, but a runtime passes one plugin's entry of it",
    );
  const out: PluginConfig = { cniVersion, name, type, raw: config };
  if (config.serverSocket !== undefined) {
    const problem = socketPathProblem(config.serverSocket);
    if (problem) throw configError("serverSocket", `${problem}; remove it to use the default`);
    out.serverSocket = config.serverSocket as string;
  }
  if (config.mtu !== undefined) {
    const mtu = config.mtu;
    if (typeof mtu !== "number" || !Number.isInteger(mtu) || mtu < 68 || mtu > 65535)
      throw configError(
        "mtu",
        `must be an integer from 68 to 65535, got ${JSON.stringify(mtu)}; remove it to derive the MTU`,
      );
    out.mtu = mtu;
  }
  if (config.runtimeConfig !== undefined && config.runtimeConfig !== null) {
    const rc = config.runtimeConfig;
    if (typeof rc !== "object" || Array.isArray(rc))
      throw configError("runtimeConfig", `must be an object, got ${JSON.stringify(rc)}`);
    out.runtimeConfig = rc as Record<string, unknown>;
  }
  if (config.prevResult !== undefined && config.prevResult !== null)
    out.prevResult = parseResult(config.prevResult);
  if (command === "GC") {
    // libcni also writes the key under its original, misspelt name (containernetworking/cni#1101).
    const valid = config["cni.dev/valid-attachments"] ?? config["cni.dev/attachments"];
    out.validAttachments = valid === undefined ? [] : parseValidAttachments(valid);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// The configuration list on disk

export interface ConfList {
  cniVersion: string;
  cniVersions?: string[];
  name: string;
  disableCheck?: boolean;
  disableGC?: boolean;
  plugins: Array<Record<string, unknown> & { type: string }>;
}

/** Parses a .conflist file's text, checking the keys the spec defines (code 6/7). */
export function parseConfList(text: string): ConfList {
  const o = decodeConfig(text);
  if (typeof o.cniVersion !== "string" || o.cniVersion === "")
    throw configError("cniVersion", `must be a version string such as "${LATEST_VERSION}"`);
  if (typeof o.name !== "string" || !NETWORK_NAME.test(o.name))
    throw configError(
      "name",
      "must start with a letter or digit and hold only letters, digits, '_', '.' and '-'",
    );
  if (
    o.cniVersions !== undefined &&
    (!Array.isArray(o.cniVersions) || o.cniVersions.some((v) => typeof v !== "string"))
  )
    throw configError("cniVersions", "must be a list of version strings");
  for (const key of ["disableCheck", "disableGC"] as const)
    if (o[key] !== undefined && typeof o[key] !== "boolean") throw configError(key, "must be true or false");
  if (!Array.isArray(o.plugins) || o.plugins.length === 0)
    throw configError("plugins", "must be a non-empty list of plugin objects");
  o.plugins.forEach((p: unknown, i) => {
    const po = p as Record<string, unknown> | null;
    if (typeof po !== "object" || po === null || typeof po.type !== "string" || po.type === "")
      throw configError(`plugins[${i}].type`, "must name the plugin binary");
  });
  return o as unknown as ConfList;
}

// ---------------------------------------------------------------------------------------------------------
// VERSION

export interface VersionReply {
  cniVersion: string;
  supportedVersions: string[];
}

const SEMVER = /^\d+\.\d+\.\d+$/;

/**
 * The VERSION answer. The spec echoes the input's cniVersion (libcni sends its own newest); stdin that
 * names none, or is not JSON, gets our newest, since VERSION only probes and must not fail.
 */
export function versionReply(stdin: string): VersionReply {
  let requested: unknown;
  try {
    requested = (JSON.parse(stdin) as { cniVersion?: unknown } | null)?.cniVersion;
  } catch {
    requested = undefined;
  }
  return {
    cniVersion: typeof requested === "string" && SEMVER.test(requested) ? requested : LATEST_VERSION,
    supportedVersions: [...SUPPORTED_VERSIONS],
  };
}

/** The version an error reply carries: the requested one when we speak it, else our newest. */
export function replyVersion(stdin: string): CniVersion {
  try {
    const v = (JSON.parse(stdin) as { cniVersion?: unknown } | null)?.cniVersion;
    return isSupportedVersion(v) ? v : LATEST_VERSION;
  } catch {
    return LATEST_VERSION;
  }
}
