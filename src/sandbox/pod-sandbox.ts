// The node simulator's container runtime: pod sandboxes (a netns per pod, networked through the CNI) and
// containers (process groups inside that netns). It runs inside the node's net and mount namespaces, so the
// netns files live in the node's private /run/netns and the CNI sees the node's standard directories.
// One JSON record per sandbox survives a simulator restart, so running pods are adopted, not recreated.

import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { type CniAttachment, cniAdd, cniDel } from "./cni-driver.ts";
import { run } from "./command.ts";
import type { ContainerProcess } from "./pod-command.ts";
import { identify, isAlive, type ProcessIdentity, terminate } from "./process-table.ts";

export const POD_IFNAME = "eth0";

export interface ContainerRecord {
  name: string;
  containerId: string;
  process: ProcessIdentity;
  startedAt: string;
  restartCount: number;
  exitFile: string;
  log: string;
  lastTermination?: { exitCode: number; reason: string; startedAt: string; finishedAt: string };
}

export interface SandboxRecord {
  uid: string;
  namespace: string;
  name: string;
  /** A fresh id per sandbox, as a runtime gives each pod sandbox its own container id. */
  containerId: string;
  hostNetwork: boolean;
  /** Name under the node's /run/netns; absent for hostNetwork pods. */
  netns?: string;
  ips: string[];
  createdAt: string;
  containers: Record<string, ContainerRecord>;
}

export interface RuntimeConfig {
  nodeIp: string;
  cniDriver: string;
  recordsDir: string;
  podLogsDir: string;
}

export function newContainerId(): string {
  return randomBytes(32).toString("hex");
}

function netnsPathOf(rec: SandboxRecord): string | undefined {
  return rec.netns ? `/run/netns/${rec.netns}` : undefined;
}

export function attachment(rec: SandboxRecord): CniAttachment {
  return {
    containerId: rec.containerId,
    netnsPath: netnsPathOf(rec) ?? "",
    ifname: POD_IFNAME,
    podNamespace: rec.namespace,
    podName: rec.name,
    podUid: rec.uid,
  };
}

export class PodRuntime {
  constructor(private readonly cfg: RuntimeConfig) {
    mkdirSync(cfg.recordsDir, { recursive: true });
  }

  loadRecords(): SandboxRecord[] {
    const out: SandboxRecord[] = [];
    for (const f of readdirSync(this.cfg.recordsDir)) {
      if (!f.endsWith(".json")) continue;
      try {
        out.push(JSON.parse(readFileSync(join(this.cfg.recordsDir, f), "utf8")) as SandboxRecord);
      } catch {
        rmSync(join(this.cfg.recordsDir, f), { force: true });
      }
    }
    return out;
  }

  save(rec: SandboxRecord): void {
    const file = join(this.cfg.recordsDir, `${rec.uid}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(rec, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  private forget(rec: SandboxRecord): void {
    rmSync(join(this.cfg.recordsDir, `${rec.uid}.json`), { force: true });
  }

  /** False once the netns is gone (deleted by hand, or lost with a node restart): the pod needs a new sandbox. */
  sandboxIntact(rec: SandboxRecord): boolean {
    const path = netnsPathOf(rec);
    return path === undefined || existsSync(path);
  }

  /**
   * Creates the sandbox: netns with loopback up, then CNI ADD. If ADD fails the half-made sandbox is torn
   * down (CNI DEL, netns removed) before the error is rethrown, as a runtime does.
   */
  async createSandbox(pod: {
    uid: string;
    namespace: string;
    name: string;
    hostNetwork: boolean;
  }): Promise<SandboxRecord> {
    const rec: SandboxRecord = {
      uid: pod.uid,
      namespace: pod.namespace,
      name: pod.name,
      containerId: newContainerId(),
      hostNetwork: pod.hostNetwork,
      ips: [],
      createdAt: new Date().toISOString(),
      containers: {},
    };
    if (pod.hostNetwork) {
      rec.ips = [this.cfg.nodeIp];
      this.save(rec);
      return rec;
    }
    rec.netns = `cni-${randomUUID()}`;
    this.save(rec);
    try {
      await run("ip", ["netns", "add", rec.netns]);
      await run("ip", ["-n", rec.netns, "link", "set", "lo", "up"]);
      const { ips } = await cniAdd(this.cfg.cniDriver, attachment(rec));
      rec.ips = ips;
      this.save(rec);
      return rec;
    } catch (err) {
      await this.removeNetwork(rec).catch(() => undefined);
      throw err;
    }
  }

  /** CNI DEL (errors are returned, not thrown: the netns goes regardless) and the netns removed. */
  private async removeNetwork(rec: SandboxRecord): Promise<Error | undefined> {
    let delError: Error | undefined;
    if (!rec.hostNetwork) {
      try {
        await cniDel(this.cfg.cniDriver, attachment(rec));
      } catch (err) {
        delError = err as Error;
      }
      if (rec.netns && existsSync(`/run/netns/${rec.netns}`)) await run("ip", ["netns", "del", rec.netns]);
    }
    this.forget(rec);
    return delError;
  }

  startContainer(
    rec: SandboxRecord,
    name: string,
    proc: ContainerProcess,
    restartCount: number,
  ): ContainerRecord {
    const dir = join(this.cfg.podLogsDir, `${rec.namespace}_${rec.name}_${rec.uid}`);
    mkdirSync(dir, { recursive: true });
    const containerId = newContainerId();
    const exitFile = join(dir, `${name}.${containerId.slice(0, 12)}.exit`);
    const log = join(dir, `${name}.log`);
    const out = openSync(log, "a");
    // sh stays as the group leader and records the exit code, which a detached process's parent would
    // otherwise lose when this simulator restarts. It ignores the SIGTERM sent to the group (set after the
    // program started, so the program keeps the default) and waits: the grace period lasts as long as the
    // program, not the shell, is alive, so a container that drains after SIGTERM is not cut off at once.
    const script = '"$@" & c=$!; trap "" TERM; wait "$c"; echo $? > "$ZSB_EXIT_FILE"';
    const inner = ["sh", "-c", script, "sh", proc.command, ...proc.args];
    const path = netnsPathOf(rec);
    const [command, args] = path
      ? ["nsenter", [`--net=${path}`, "--", ...inner]]
      : [inner[0] as string, inner.slice(1)];
    try {
      const child = spawn(command, args, {
        detached: true,
        stdio: ["ignore", out, out],
        env: {
          PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
          ...proc.env,
          ZSB_EXIT_FILE: exitFile,
        },
      });
      child.unref();
      const id = child.pid === undefined ? undefined : identify(child.pid);
      const record: ContainerRecord = {
        name,
        containerId,
        process: id ?? { pid: child.pid ?? -1, startTime: -1 },
        startedAt: new Date().toISOString(),
        restartCount,
        exitFile,
        log,
        ...(rec.containers[name]?.lastTermination
          ? { lastTermination: rec.containers[name].lastTermination }
          : {}),
      };
      rec.containers[name] = record;
      this.save(rec);
      return record;
    } finally {
      closeSync(out);
    }
  }

  containerRunning(c: ContainerRecord): boolean {
    return isAlive(c.process);
  }

  /** The exit code a finished container left, or undefined when it was killed before it could write one. */
  exitCode(c: ContainerRecord): number | undefined {
    try {
      const n = Number(readFileSync(c.exitFile, "utf8").trim());
      return Number.isInteger(n) ? n : undefined;
    } catch {
      return undefined;
    }
  }

  /** SIGTERM to each container's process group, SIGKILL after the grace period. */
  async stopContainers(rec: SandboxRecord, graceMs: number): Promise<void> {
    const live = Object.values(rec.containers)
      .map((c) => c.process)
      .filter(isAlive);
    for (const p of live) {
      try {
        process.kill(-p.pid, "SIGTERM");
      } catch {
        // the group may already be gone
      }
    }
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && live.some(isAlive)) await new Promise((r) => setTimeout(r, 100));
    for (const p of live.filter(isAlive)) {
      try {
        process.kill(-p.pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
    await terminate(live, 1000);
  }

  /** Stops the containers and removes the sandbox; resolves to the CNI DEL error, if DEL failed. */
  async destroySandbox(rec: SandboxRecord, graceMs: number): Promise<Error | undefined> {
    await this.stopContainers(rec, graceMs);
    return this.removeNetwork(rec);
  }
}
