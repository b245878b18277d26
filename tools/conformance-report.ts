// The report generator of `make conformance` (docs/upstream-e2e.md).
//
//   conformance-report.ts args
//       prints e2e.test's --ginkgo.focus/--ginkgo.skip arguments for test/conformance/selection.json, one a line
//   conformance-report.ts report --junit PATH... --command CMD [--dry-run] [--out docs/conformance.md]
//       reads the JUnit files (PATH: a file, or a directory whose *.xml files are read) and writes the report
//   ... report ... --rerun PATH... --rerun-command CMD
//       tests that ran again after the full run (e.g. with their fix): their results replace the full run's,
//       and the report lists each with both outcomes and the re-run's command
//
// --selection FILE reads another selection; the Kubernetes version is the one fixtures/e2e/go.mod pins.

import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parseJUnit, type TestCase } from "./conformance/junit.ts";
import { mergeRerun, type RerunInfo, renderReport, tally } from "./conformance/report.ts";
import { ginkgoArgs, parseSelection } from "./conformance/selection.ts";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function fail(message: string): never {
  process.stderr.write(`conformance-report: ${message}\n`);
  process.exit(2);
}

/** The k8s.io/kubernetes version fixtures/e2e/go.mod pins (the release e2e.test is built from). */
export function pinnedKubernetesVersion(goMod: string): string {
  const m = /^\s*(?:require\s+)?k8s\.io\/kubernetes\s+(v\d+\.\d+\.\d+)\s*$/m.exec(goMod);
  if (!m?.[1]) throw new Error("fixtures/e2e/go.mod does not require k8s.io/kubernetes at a release version");
  return m[1];
}

function junitFiles(paths: readonly string[]): string[] {
  const files: string[] = [];
  for (const p of paths) {
    if (statSync(p).isDirectory()) {
      const xml = readdirSync(p)
        .filter((f) => f.endsWith(".xml"))
        .sort()
        .map((f) => join(p, f));
      if (xml.length === 0) fail(`no *.xml file in ${p}`);
      files.push(...xml);
    } else files.push(p);
  }
  return files;
}

function main(argv: string[]): void {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      selection: { type: "string", default: join(repo, "test/conformance/selection.json") },
      junit: { type: "string", multiple: true },
      rerun: { type: "string", multiple: true },
      "rerun-command": { type: "string" },
      out: { type: "string", default: join(repo, "docs/conformance.md") },
      command: { type: "string" },
      "dry-run": { type: "boolean", default: false },
    },
  });
  const selection = parseSelection(JSON.parse(readFileSync(values.selection, "utf8")));
  if (command === "args") {
    process.stdout.write(`${ginkgoArgs(selection).join("\n")}\n`);
    return;
  }
  if (command !== "report") fail(`unknown command '${command ?? ""}' (want args or report)`);
  if (!values.junit?.length) fail("report needs --junit FILE|DIR");
  if (!values.command) fail("report needs --command (the command line the report says was run)");
  const read = (paths: readonly string[]) => {
    const cases: TestCase[] = [];
    let timestamp: string | undefined;
    for (const file of junitFiles(paths)) {
      try {
        const r = parseJUnit(readFileSync(file, "utf8"));
        cases.push(...r.cases);
        timestamp ??= r.timestamp;
      } catch (err) {
        fail(`${file}: ${(err as Error).message}`);
      }
    }
    return { cases, timestamp };
  };
  const full = read(values.junit);
  const dryRun = values["dry-run"];
  let cases = full.cases;
  let rerun: RerunInfo | undefined;
  if (values.rerun?.length) {
    if (dryRun) fail("--rerun does not go with --dry-run");
    if (!values["rerun-command"]) fail("--rerun needs --rerun-command (what the re-run was)");
    const again = read(values.rerun);
    const merged = mergeRerun(full.cases, again.cases);
    cases = merged.cases;
    rerun = { command: values["rerun-command"], timestamp: again.timestamp, replaced: merged.replaced };
  }
  const timestamp = full.timestamp;
  const kubernetesVersion = pinnedKubernetesVersion(readFileSync(join(repo, "fixtures/e2e/go.mod"), "utf8"));
  const t = tally(selection, cases, dryRun);
  writeFileSync(
    values.out,
    renderReport(selection, t, {
      kubernetesVersion,
      command: values.command,
      dryRun,
      timestamp,
      ...(rerun ? { rerun } : {}),
    }),
  );
  for (const g of t.groups) {
    process.stderr.write(
      dryRun
        ? `conformance-report: ${g.group.title}: ${g.selected} selected, not yet run; ${g.skippedByList} left out by the skip list\n`
        : `conformance-report: ${g.group.title}: ${g.passed}/${g.selected} passed, ${g.failed} failed, ${g.skippedAtRunTime} skipped by the test, ${g.skippedByList} left out\n`,
    );
  }
  process.stderr.write(`conformance-report: wrote ${values.out}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  main(process.argv.slice(2));
