// Start-up time of the zstack-ovn-cni executable: runs its VERSION command N times with an empty
// environment, interleaved with `node -e 0` as the floor any Node program pays, and prints p50/p90.
//
//   node --import tsx tools/measure-startup.ts [--runs 150] [dist/zstack-ovn-cni]

import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

function main(argv: string[]): void {
  let runs = 150;
  let bin = "dist/zstack-ovn-cni";
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--runs") runs = Number(argv[++i]);
    else bin = argv[i] as string;
  }
  const cases: Record<string, [string, string[]]> = {
    [`${bin} (VERSION)`]: [bin, []],
    "node -e 0 (floor)": [process.execPath, ["-e", "0"]],
  };
  const times: Record<string, number[]> = {};
  for (const name of Object.keys(cases)) times[name] = [];
  for (let i = 0; i < runs; i++) {
    for (const [name, [cmd, args]] of Object.entries(cases)) {
      const started = process.hrtime.bigint();
      const r = spawnSync(cmd, args, { input: '{"cniVersion":"1.1.0"}', env: { CNI_COMMAND: "VERSION" } });
      if (r.status !== 0) throw new Error(`${name} failed (exit ${r.status}): ${r.stderr}`);
      times[name]?.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
  }
  const bytes = statSync(bin).size;
  process.stdout.write(`size: ${(bytes / 1e6).toFixed(1)} MB (${bytes} bytes)\n`);
  for (const [name, list] of Object.entries(times)) {
    list.sort((a, b) => a - b);
    process.stdout.write(
      `${name.padEnd(40)} p50 ${percentile(list, 50).toFixed(1)} ms  p90 ${percentile(list, 90).toFixed(1)} ms  (${runs} runs)\n`,
    );
  }
}

main(process.argv.slice(2));
