// Where the controller's CPU went during part B's churn: its V8 CPU profile (bench/services.ts --profile)
// restricted to the churn window the bench prints, as self time by function and file, and inclusive time of a
// few stages, each also per endpoint change.
//   node --import tsx bench/services/profile-window.ts FILE.cpuprofile --from=µs --to=µs [--changes=500] [--top=40]
// The window is on the monotonic clock (process.hrtime in the bench), the one V8 stamps profile samples with.

import { readFileSync } from "node:fs";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Stages whose inclusive time is reported: a function name and, optionally, a file it must be in. */
const STAGES: readonly [string, string, RegExp][] = [
  ["Service reconcile", "reconcile", /service-reconciler/],
  ["  desired rows (desiredOf)", "desiredOf", /service-reconciler/],
  ["  planRows", "planRows", /service-reconciler/],
  ["  nb-diff plan", "plan", /nb-diff/],
  ["  transaction commit", "commit", /transaction/],
  ["NB update handling", "", /ovsdb\/(session|cache|client|monitor)/],
  ["watch event (informer)", "", /k8s\/(informer|watch|api-client)/],
  ["logging", "", /pino|logger|log\.ts/],
  ["metrics", "", /prom-client/],
];

function main(): void {
  const args = process.argv.slice(2);
  const opt = (n: string) => args.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3);
  const file = args.find((a) => !a.startsWith("--"));
  if (!file) throw new Error("usage: profile-window.ts FILE.cpuprofile --from=µs --to=µs [--changes=N]");
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const from = Number(opt("from") ?? p.startTime);
  const to = Number(opt("to") ?? p.endTime);
  const changes = Number(opt("changes") ?? "1");
  const top = Number(opt("top") ?? "40");
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const self = new Map<string, number>();
  const files = new Map<string, number>();
  const stage = new Map<string, number>();
  const inclusive = new Map<string, number>();
  /** --callers=NAME: the three frames above each sample of a function named NAME. */
  const callersOf = opt("callers");
  const callers = new Map<string, number>();
  let total = 0;
  let idle = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < from || t > to) continue;
    // The sample stands for the time until the next one.
    const dt = p.timeDeltas[i + 1] ?? 0;
    const leaf = byId.get(p.samples[i] as number);
    if (!leaf) continue;
    total += dt;
    const name = leaf.callFrame.functionName || "(anonymous)";
    if (name === "(idle)") {
      idle += dt;
      continue;
    }
    const where = `${name} ${short(leaf.callFrame.url)}:${leaf.callFrame.lineNumber + 1}`;
    self.set(where, (self.get(where) ?? 0) + dt);
    const f = short(leaf.callFrame.url) || name;
    files.set(f, (files.get(f) ?? 0) + dt);
    const hit = new Set<string>();
    const seen = new Set<string>();
    const stack: string[] = [];
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const cf = byId.get(id)?.callFrame;
      if (!cf) break;
      const fn = `${cf.functionName || "(anonymous)"} ${short(cf.url)}`;
      stack.push(fn);
      if (!seen.has(fn)) {
        seen.add(fn);
        inclusive.set(fn, (inclusive.get(fn) ?? 0) + dt);
      }
      for (const [label, fn, url] of STAGES)
        if ((fn === "" || cf.functionName === fn) && url.test(cf.url)) hit.add(label);
    }
    for (const label of hit) stage.set(label, (stage.get(label) ?? 0) + dt);
    const at =
      callersOf === undefined ? -1 : stack.findIndex((f) => f === callersOf || f.startsWith(`${callersOf} `));
    if (at >= 0) {
      const chain = stack.slice(at, at + Number(opt("depth") ?? "4")).join(" < ");
      callers.set(chain, (callers.get(chain) ?? 0) + dt);
    }
  }
  const ms = (us: number) => (us / 1000).toFixed(1);
  const per = (us: number) => (us / 1000 / changes).toFixed(3);
  const busy = total - idle;
  const out = [
    `window ${ms(to - from)} ms (profile ${ms(p.endTime - p.startTime)} ms); sampled ${ms(total)} ms, busy ${ms(busy)} ms = ${per(busy)} ms per change (${changes} changes)`,
    "stages (inclusive ms, ms per change):",
    ...STAGES.map(
      ([label]) =>
        `  ${label.padEnd(30)} ${ms(stage.get(label) ?? 0).padStart(8)} ${per(stage.get(label) ?? 0)}`,
    ),
    "files (self ms, ms per change):",
    ...sorted(files, top).map(([k, v]) => `  ${ms(v).padStart(8)} ${per(v)}  ${k}`),
    "functions (self ms, ms per change):",
    ...sorted(self, top).map(([k, v]) => `  ${ms(v).padStart(8)} ${per(v)}  ${k}`),
    "functions (inclusive ms, ms per change):",
    ...sorted(inclusive, top).map(([k, v]) => `  ${ms(v).padStart(8)} ${per(v)}  ${k}`),
    ...(callersOf === undefined
      ? []
      : [
          `callers of ${callersOf}:`,
          ...sorted(callers, top).map(([k, v]) => `  ${ms(v).padStart(8)} ${per(v)}  ${k}`),
        ]),
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

function sorted(m: Map<string, number>, n: number): [string, number][] {
  return [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
}

/** The path below the repository or node_modules, or the URL as it is. */
function short(url: string): string {
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) return url.slice(nm + "node_modules/".length);
  const src = url.search(/\/(src|bench|test)\//);
  return src >= 0 ? url.slice(src + 1) : url.replace(/^node:/, "node:");
}

main();
