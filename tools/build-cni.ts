// Puts the CNI plugin together in one directory, as the node agent installs it (docs/cni.md):
//   zstack-ovn-cni       the Go forwarder (cmd/zstack-ovn-cni-forwarder, built and cached by hack/ensure-binaries.sh)
//   zstack-ovn-cni-shim  the TypeScript shim as a Node single executable (tools/build-sea.ts), which the
//                        forwarder runs only when no agent can answer
//
//   node --import tsx tools/build-cni.ts [--dir dist/cni]

import { chmod, copyFile, mkdir, rename } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CNI_BINARY_NAME, CNI_SHIM_NAME } from "../src/cni/install.ts";
import { resolveBinaries } from "../src/sandbox/binaries.ts";
import { buildSea } from "./build-sea.ts";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const DEFAULT_CNI_DIR = join(repo, "dist", "cni");

export interface CniPlugin {
  /** What a runtime runs: the forwarder. */
  forwarder: string;
  shim: string;
}

export async function buildCniPlugin(dir: string, log?: (line: string) => void): Promise<CniPlugin> {
  await mkdir(dir, { recursive: true });
  const shim = join(dir, CNI_SHIM_NAME);
  await buildSea({ outFile: shim, ...(log ? { log } : {}) });
  const forwarder = join(dir, CNI_BINARY_NAME);
  const tmp = `${forwarder}.tmp-${process.pid}`;
  await copyFile((await resolveBinaries()).CNI_FORWARDER, tmp);
  await chmod(tmp, 0o755);
  await rename(tmp, forwarder);
  log?.(`copied the forwarder to ${forwarder}`);
  return { forwarder, shim };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf("--dir");
  const dir = i > 0 && process.argv[i + 1] ? resolve(process.argv[i + 1] as string) : DEFAULT_CNI_DIR;
  buildCniPlugin(dir, (l) => process.stderr.write(`build-cni: ${l}\n`)).catch((err: unknown) => {
    process.stderr.write(`build-cni: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
