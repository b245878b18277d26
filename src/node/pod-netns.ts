// The pod's network namespace must be a namespace of its own. CNI_NETNS names a file, and /proc/1/ns/net,
// /proc/self/ns/net or a bind mount of either is the node's namespace under another name: configured as a pod,
// the node's own interface would get the pod's address and default route. Namespaces are compared by identity
// (device and inode of the nsfs file), which no choice of path can disguise.

import { statSync } from "node:fs";
import type { NetnsPath } from "./interface-name.ts";

/** The node's namespace as the agent sees it (its own) and as init sees it, whichever differ. */
export const HOST_NETNS_PATHS: readonly string[] = ["/proc/self/ns/net", "/proc/1/ns/net"];

function identity(path: string): string | undefined {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.dev}:${s.ino}`;
  } catch {
    return undefined;
  }
}

/**
 * Why `netns` cannot be a pod's namespace: it is one of `hostPaths` under another name, or it cannot be
 * inspected (so it cannot be told apart from them). Undefined when it is a namespace of its own.
 */
export function hostNetnsProblem(netns: NetnsPath, hostPaths: readonly string[]): string | undefined {
  const id = identity(netns);
  if (id === undefined)
    return "cannot be inspected, so it cannot be told apart from the node's own namespace";
  const host = hostPaths.find((h) => identity(h) === id);
  return host === undefined ? undefined : `is the node's own network namespace (the same as ${host})`;
}
