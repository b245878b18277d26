// Where this checkout is, and how to start one of its TypeScript entry points as a separate process.

import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");

export const zovnEntry = `${repoRoot}/src/cli/zovn.ts`;

/** node plus the tsx loader by absolute URL, so the child does not depend on its working directory. */
export function tsNodeCommand(): { command: string; args: string[] } {
  return { command: process.execPath, args: ["--import", import.meta.resolve("tsx")] };
}
