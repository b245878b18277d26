// Where this checkout is, and how to start one of its TypeScript entry points as a separate process.

import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");

export const zovnEntry = `${repoRoot}/src/cli/zovn.ts`;

/**
 * node plus the tsx loader by absolute URL, so the child does not depend on its working directory. A small
 * young generation trims some 40 MB from each long-running sandbox process at no cost that matters here.
 */
export function tsNodeCommand(): { command: string; args: string[] } {
  return {
    command: process.execPath,
    args: ["--max-semi-space-size=1", "--import", import.meta.resolve("tsx")],
  };
}
