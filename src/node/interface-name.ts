// Names a CNI runtime hands the agent that end up as arguments of ip and nsenter: the pod's interface name
// (CNI_IFNAME) and the path of its network namespace (CNI_NETNS). Each is checked once, at the edge, and
// carried as a branded string, so code that builds ip lines can only be given a checked one.

import { posix } from "node:path";

/** A Linux interface name that the kernel and ip accept as is. */
export type InterfaceName = string & { readonly __brand: "InterfaceName" };

/** An absolute, normalized path to a network namespace file. */
export type NetnsPath = string & { readonly __brand: "NetnsPath" };

const hasControlChar = (s: string): boolean =>
  [...s].some((c) => (c.codePointAt(0) ?? 0) < 0x20 || c === "\x7f");

/** Why `name` is not a usable Linux interface name (IFNAMSIZ, dev_valid_name), or undefined when it is. */
export function interfaceNameProblem(name: string): string | undefined {
  if (name === "") return "is empty";
  if (Buffer.byteLength(name) > 15)
    return `is ${Buffer.byteLength(name)} bytes long; Linux allows at most 15`;
  if (name === "." || name === "..") return "may not be . or ..";
  if (/[/:\s]/.test(name) || hasControlChar(name))
    return "may not contain '/', ':', whitespace or control characters";
  // ip's batch reader would regroup or cut the argument at these.
  if (/["'#\\]/.test(name)) return "may not contain quotes, '#' or '\\'";
  // ethtool and others would read it as an option.
  if (name.startsWith("-")) return "may not start with '-'";
  return undefined;
}

export class InvalidNameError extends Error {
  constructor(
    readonly field: string,
    readonly value: string,
    problem: string,
  ) {
    super(`${field}=${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value)} ${problem}`);
    this.name = "InvalidNameError";
  }
}

/** @throws InvalidNameError naming `field` */
export function parseInterfaceName(text: string, field = "CNI_IFNAME"): InterfaceName {
  const why = interfaceNameProblem(text);
  if (why) throw new InvalidNameError(field, text, why);
  return text as InterfaceName;
}

// Runtimes use /var/run/netns/cni-<uuid>, /run/netns/<name>, /proc/<pid>/ns/net and the like.
const NETNS_PATH_RE = /^\/[A-Za-z0-9_.:@+=,/-]*$/;
const MAX_PATH_BYTES = 4095;

/** Why `path` is not an acceptable netns path, or undefined when it is. */
export function netnsPathProblem(path: string): string | undefined {
  if (path === "") return "is empty";
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return `is longer than ${MAX_PATH_BYTES} bytes`;
  if (!path.startsWith("/")) return "must be an absolute path";
  if (!NETNS_PATH_RE.test(path))
    return "may hold only letters, digits and '/', '_', '.', ':', '@', '+', '=', ',', '-'";
  if (posix.normalize(path) !== path || path.endsWith("/"))
    return "must be a normalized path (no '.', '..', '//' or trailing '/')";
  return undefined;
}

/** @throws InvalidNameError naming `field` */
export function parseNetnsPath(text: string, field = "CNI_NETNS"): NetnsPath {
  const why = netnsPathProblem(text);
  if (why) throw new InvalidNameError(field, text, why);
  return text as NetnsPath;
}
