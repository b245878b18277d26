// Where this checkout is, and how to start one of its TypeScript entry points as a separate process.

import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");

export const zovnEntry = `${repoRoot}/src/cli/zovn.ts`;

/** The V8 flags of the sandbox's own helper processes (kubelet simulator, port forwarders). */
export const SANDBOX_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=1"];

/**
 * node plus the tsx loader by absolute URL, so the child does not depend on its working directory. A small
 * young generation trims some 40 MB from each long-running sandbox process at no cost that matters here; the
 * product's processes pass their own flags (NODE_FLAGS in src/runtime-flags.ts).
 */
export function tsNodeCommand(flags: readonly string[] = SANDBOX_NODE_FLAGS): {
  command: string;
  args: string[];
} {
  return {
    command: process.execPath,
    args: [...flags, "--import", import.meta.resolve("tsx")],
  };
}
