// Locating the Go binaries the sandbox runs. hack/ensure-binaries.sh builds them into a cache outside the
// repository on first use and prints KEY=/abs/path lines; an environment variable of the same KEY wins.

import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./repo.ts";

export const BINARY_KEYS = [
  "KUBE_APISERVER",
  "KUBE_CONTROLLER_MANAGER",
  "KUBE_SCHEDULER",
  "KUBECTL",
  "KUBELET",
  "ETCD",
  "CNI_DRIVER",
  "PODSERVER",
  "CNITOOL",
  "CNI_FORWARDER",
  "HELM",
] as const;

export type BinaryKey = (typeof BINARY_KEYS)[number];
export type Binaries = Record<BinaryKey, string>;

export function parseBinaryLines(text: string): Partial<Binaries> {
  const out: Partial<Binaries> = {};
  for (const line of text.split("\n")) {
    const m = /^([A-Z_]+)=(\/.+)$/.exec(line.trim());
    if (m && (BINARY_KEYS as readonly string[]).includes(m[1] as string))
      out[m[1] as BinaryKey] = m[2] as string;
  }
  return out;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function ensureScript(args: string[]): Promise<{ code: number | null; stdout: string }> {
  const script = join(repoRoot, "hack", "ensure-binaries.sh");
  return new Promise((resolve, reject) => {
    const child = spawn(script, args, { stdio: ["ignore", "pipe", args.length > 0 ? "ignore" : "inherit"] });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout }));
  });
}

/**
 * Returns every binary's path, building missing ones (progress on this process's stderr). The cached case
 * asks `--print` first, which needs neither Go nor the build lock.
 */
export async function resolveBinaries(): Promise<Binaries> {
  const fromEnv: Partial<Binaries> = {};
  for (const key of BINARY_KEYS) {
    const v = process.env[key];
    if (v) fromEnv[key] = v;
  }
  let found: Partial<Binaries> = { ...fromEnv };
  if (BINARY_KEYS.some((k) => !found[k])) {
    let res = await ensureScript(["--print"]);
    if (res.code !== 0) res = await ensureScript([]);
    if (res.code !== 0)
      throw new Error(`hack/ensure-binaries.sh failed (exit ${res.code}); see its messages above`);
    found = { ...parseBinaryLines(res.stdout), ...fromEnv };
  }
  const missing = BINARY_KEYS.filter((k) => !found[k] || !executable(found[k] as string));
  if (missing.length > 0)
    throw new Error(`missing binaries: ${missing.map((k) => `${k}=${found[k] ?? "?"}`).join(", ")}`);
  return found as Binaries;
}
