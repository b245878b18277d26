// What the CNI integration tests share: the plugin build (forwarder and SEA shim), running an executable with exact env and stdin, and a
// logger that keeps records for assertions.

import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../../src/observability/log.ts";
import { buildCniPlugin } from "../../../tools/build-cni.ts";
import { claimDir } from "../../rig/process.ts";

/**
 * Builds the CNI plugin (the Go forwarder with the SEA shim beside it) into a private temp dir (removed at
 * exit) and returns the path of what a runtime runs: the forwarder.
 */
export async function buildShim(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "zcni-sea-"));
  claimDir(dir);
  return (await buildCniPlugin(dir)).forwarder;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, or undefined when it is empty or not JSON. */
  json: Record<string, unknown> | undefined;
}

/** Runs `cmd` with exactly `env` (nothing inherited) and `stdin`; kills it after timeoutMs. */
export function runWith(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  stdin: string,
  timeoutMs = 30_000,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      let json: Record<string, unknown> | undefined;
      try {
        json = stdout.trim() ? (JSON.parse(stdout) as Record<string, unknown>) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(stdin);
  });
}

export interface LogRecord {
  level: string;
  msg: string | undefined;
  fields: Record<string, unknown>;
}

/** A Logger that keeps every record, bindings of children included. */
export function recordingLogger(records: LogRecord[], bindings: Record<string, unknown> = {}): Logger {
  const at =
    (level: string) =>
    (obj: object, msg?: string): void => {
      records.push({ level, msg, fields: { ...bindings, ...obj } });
    };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (more) => recordingLogger(records, { ...bindings, ...more }),
  };
}

/** The first `ips[].address` of a CNI result, or undefined. */
export function firstAddress(result: Record<string, unknown> | undefined): string | undefined {
  const ips = result?.ips;
  return Array.isArray(ips) ? (ips[0] as { address?: string } | undefined)?.address : undefined;
}
