// What one call of the CNI plugin executable costs, for each way of building it, in the same run: CNI ADDs
// through the libcni driver (cni-driver --plugin-usage) against the agent's real CNI server with a handler
// that answers at once, so the figures are the plugin executable's alone. Per option and concurrency level it
// prints p50/p90 of the plugin's wall time, its CPU (user+sys), its peak RSS, and the driver process end to
// end (docs/cni.md, "Choosing the executable").
//
// Options: forwarder (the Go relay, what the agent installs); sea (the TypeScript shim as a Node single
// executable with its code cache); sea-snapshot (the same with a V8 startup snapshot, useSnapshot);
// node-snapshot-blob (node --snapshot-blob with the shim's snapshot; needs node on the host, run through a
// /bin/sh exec line, which adds about a millisecond).
//
//   node --import tsx tools/measure-startup.ts [--runs 100] [--levels 1,10,50]

import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { CNI_BINARY_NAME, writeConflist } from "../src/cni/install.ts";
import { CniServer } from "../src/cni/server.ts";
import { resolveBinaries } from "../src/sandbox/binaries.ts";
import { FakeHandler } from "../test/integration/cni/fake-handler.ts";
import { buildSea, bundleEntry, ENTRY } from "./build-sea.ts";

const OPTIONS = ["forwarder", "sea", "sea-snapshot", "node-snapshot-blob"] as const;
type Option = (typeof OPTIONS)[number];

interface Call {
  endToEnd: number;
  wall: number;
  cpu: number;
  rssMiB: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d));
    child.stderr.on("data", (d: Buffer) => (out += d));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd}: exit ${code}: ${out}`)),
    );
  });
}

async function buildOptions(dir: string): Promise<Record<Option, string>> {
  const bin = (o: Option) => {
    mkdirSync(join(dir, o), { recursive: true });
    return join(dir, o, CNI_BINARY_NAME);
  };
  const forwarder = bin("forwarder");
  copyFileSync((await resolveBinaries()).CNI_FORWARDER, forwarder);
  chmodSync(forwarder, 0o755);
  const sea = bin("sea");
  await buildSea({ outFile: sea });
  const seaSnapshot = bin("sea-snapshot");
  await buildSea({ outFile: seaSnapshot, snapshot: true });
  const bundle = join(dir, "shim.cjs");
  const blob = join(dir, "shim.blob");
  await bundleEntry(ENTRY, bundle, true);
  await run(process.execPath, ["--snapshot-blob", blob, "--build-snapshot", bundle]);
  const blobRunner = bin("node-snapshot-blob");
  writeFileSync(blobRunner, `#!/bin/sh\nexec ${process.execPath} --snapshot-blob ${blob}\n`, { mode: 0o755 });
  return { forwarder, sea, "sea-snapshot": seaSnapshot, "node-snapshot-blob": blobRunner };
}

function driverAdd(
  driver: string,
  binDir: string,
  confDir: string,
  cacheDir: string,
  id: string,
): Promise<Call> {
  const args = [
    "add",
    "--plugin-usage",
    "--container-id",
    id,
    "--netns",
    "/run/netns/zcni-measure",
    "--args",
    "K8S_POD_NAMESPACE=default;K8S_POD_NAME=measure-0",
    "--conf-dir",
    confDir,
    "--bin-dir",
    binDir,
    "--cache-dir",
    cacheDir,
  ];
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(driver, args, { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stdout.resume();
    child.stderr.on("data", (d: Buffer) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => {
      const endToEnd = performance.now() - t0;
      const line = err
        .trim()
        .split("\n")
        .findLast((l) => l.startsWith("plugin-usage "));
      if (code !== 0 || !line) {
        reject(new Error(`cni-driver add: exit ${code}: ${err.trim()}`));
        return;
      }
      const u = JSON.parse(line.slice("plugin-usage ".length)) as Record<string, number>;
      resolve({
        endToEnd,
        wall: u.wallMs as number,
        cpu: (u.userMs as number) + (u.sysMs as number),
        rssMiB: (u.maxRssKiB as number) / 1024,
      });
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: "string", default: "100" }, levels: { type: "string", default: "1,10,50" } },
  });
  const runs = Number(values.runs);
  const levels = (values.levels as string).split(",").map(Number);
  const dir = mkdtempSync(join(tmpdir(), "zcni-measure-"));
  const server = new CniServer({ socketPath: join(dir, "cni.sock"), handler: new FakeHandler() });
  try {
    const driver = (await resolveBinaries()).CNI_DRIVER;
    const bins = await buildOptions(dir);
    await server.listen();
    const confDir = join(dir, "net.d");
    await writeConflist(confDir, { socketPath: join(dir, "cni.sock") });
    const cacheDir = join(dir, "cache");
    let n = 0;
    const header = "p50 / p90 ms (RSS MiB)";
    process.stdout.write(
      `node ${process.version}; ${runs} calls per option and level, options interleaved\n`,
    );
    for (const level of levels) {
      const calls: Record<Option, Call[]> = {
        forwarder: [],
        sea: [],
        "sea-snapshot": [],
        "node-snapshot-blob": [],
      };
      const load = loadavg()[0]?.toFixed(2);
      for (let done = 0; done < runs; done += level) {
        for (const o of OPTIONS) {
          const binDir = join(bins[o], "..");
          const batch = await Promise.all(
            Array.from({ length: Math.min(level, runs - done) }, () =>
              driverAdd(driver, binDir, confDir, cacheDir, `m${++n}`),
            ),
          );
          calls[o].push(...batch);
        }
      }
      process.stdout.write(
        `\n${level} concurrent ADD(s); load average ${load} before, ${loadavg()[0]?.toFixed(2)} after; ${header}\n`,
      );
      process.stdout.write(
        `  ${"option".padEnd(20)}${"plugin wall".padStart(18)}${"plugin CPU".padStart(18)}${"peak RSS".padStart(16)}${"driver e2e".padStart(18)}\n`,
      );
      for (const o of OPTIONS) {
        const col = (k: keyof Call, digits = 1) => {
          const v = calls[o].map((c) => c[k]);
          return `${percentile(v, 50).toFixed(digits)} / ${percentile(v, 90).toFixed(digits)}`;
        };
        process.stdout.write(
          `  ${o.padEnd(20)}${col("wall").padStart(18)}${col("cpu").padStart(18)}${col("rssMiB", 0).padStart(16)}${col("endToEnd").padStart(18)}\n`,
        );
      }
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`measure-startup: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
