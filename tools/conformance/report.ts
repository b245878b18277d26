// docs/conformance.md from the e2e JUnit results and the selection: per group, what passed, failed, was
// skipped by the test itself at run time and was left out by the skip list; every failure with its
// message and, where the selection knows it, its cause and the plan that fixes it. A dry run (Ginkgo's
// --ginkgo.dry-run, which reports every spec it would run as passed) is counted as "selected, not yet
// run" and never as passed.

import type { TestCase } from "./junit.ts";
import { type Group, knownFailure, place, type Selection, type Skip } from "./selection.ts";

export interface RunInfo {
  readonly kubernetesVersion: string;
  readonly command: string;
  /** True when the JUnit files come from a dry run: nothing was executed. */
  readonly dryRun: boolean;
  /** When the run started, as the JUnit file says; undefined when it does not. */
  readonly timestamp: string | undefined;
  /** Specs run again after the full run (for example with a fix), whose results replace the full run's. */
  readonly rerun?: RerunInfo;
}

export interface RerunInfo {
  readonly command: string;
  readonly timestamp: string | undefined;
  readonly replaced: readonly Replacement[];
}

export interface Replacement {
  readonly name: string;
  /** The full run's outcome; undefined when the full run did not execute the spec (or filtered it out). */
  readonly before: TestCase["outcome"] | undefined;
  readonly after: TestCase["outcome"];
  readonly seconds: number;
}

/**
 * The full run's cases with the re-run's specs in place of every copy of the same specs: only a spec the
 * re-run executed replaces anything; the re-run's suite nodes and its filtered-out specs are ignored, so a
 * narrow re-run focus never hides the full run's results. Each replacement is listed for the report.
 */
export function mergeRerun(
  full: readonly TestCase[],
  rerun: readonly TestCase[],
): { cases: TestCase[]; replaced: Replacement[] } {
  const ran = new Map<string, TestCase>();
  for (const c of rerun) if (c.isSpec && !filteredOut(c)) ran.set(c.name, c);
  // The full run's outcome of each re-run spec: the copy that ran, when several files list it.
  const before = new Map<string, TestCase["outcome"] | undefined>();
  const cases = full.map((c) => {
    const r = c.isSpec ? ran.get(c.name) : undefined;
    if (!r) return c;
    if (!before.has(c.name) || !filteredOut(c)) before.set(c.name, filteredOut(c) ? undefined : c.outcome);
    return r;
  });
  const replaced: Replacement[] = [];
  for (const [name, r] of ran) {
    if (!before.has(name)) cases.push(r);
    replaced.push({ name, before: before.get(name), after: r.outcome, seconds: r.seconds });
  }
  replaced.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { cases, replaced };
}

export interface GroupCounts {
  readonly group: Group;
  /** Selected by the group's focus and not by a skip: what was (or would be) run. */
  selected: number;
  passed: number;
  failed: number;
  skippedAtRunTime: number;
  skippedByList: number;
}

export interface Tally {
  readonly groups: readonly GroupCounts[];
  readonly failures: readonly { readonly group: Group; readonly test: TestCase }[];
  readonly runtimeSkips: readonly { readonly group: Group; readonly test: TestCase }[];
  /** Every selected spec, by group id, in report order. */
  readonly selectedNames: ReadonlyMap<string, readonly string[]>;
  readonly skipUse: ReadonlyMap<Skip, number>;
  /** Suite nodes (setup and teardown) that failed: every spec may be affected. */
  readonly suiteFailures: readonly TestCase[];
  /** Specs Ginkgo ran that no group selects: the focus patterns and the run disagree. */
  readonly strays: readonly TestCase[];
  /** Specs a group selects that Ginkgo did not run at all (filtered out, not skipped by the test). */
  readonly notRun: readonly TestCase[];
}

/**
 * Counts the JUnit cases against the selection. A spec the run executed belongs to the first group whose
 * focus matches; Ginkgo's "skipped" then means skipped by the test itself, unless a skip-list pattern
 * matches, in which case our list left it out. Cases matching no group were never selected.
 */
export function tally(selection: Selection, cases: readonly TestCase[], dryRun: boolean): Tally {
  const groups = selection.groups.map((group) => ({
    group,
    selected: 0,
    passed: 0,
    failed: 0,
    skippedAtRunTime: 0,
    skippedByList: 0,
  }));
  const byId = new Map(groups.map((g) => [g.group.id, g]));
  const failures: { group: Group; test: TestCase }[] = [];
  const runtimeSkips: { group: Group; test: TestCase }[] = [];
  const skipUse = new Map<Skip, number>(selection.skips.map((s) => [s, 0]));
  const suiteFailures: TestCase[] = [];
  const strays: TestCase[] = [];
  const notRun: TestCase[] = [];
  const selectedNames = new Map<string, string[]>(selection.groups.map((g) => [g.id, []]));
  // Ginkgo lists every spec in each report file, those its filters left out too; several files (one run's, or
  // one e2e.test invocation per group) must not count a spec twice, and a copy that ran wins over a filtered one.
  const chosen = new Map<string, TestCase>();
  const counted = new Set<string>();
  for (const test of cases) {
    if (!test.isSpec) continue;
    const prior = chosen.get(test.name);
    if (!prior || (filteredOut(prior) && !filteredOut(test))) chosen.set(test.name, test);
  }
  for (const test of cases) {
    if (!test.isSpec) {
      if (test.outcome === "failed") suiteFailures.push(test);
      continue;
    }
    // The chosen copy, once (a re-run puts the same case in place of every copy).
    if (chosen.get(test.name) !== test || counted.has(test.name)) continue;
    counted.add(test.name);
    const p = place(selection, test.name);
    if (p.kind === "unselected") {
      if (test.outcome !== "skipped") strays.push(test);
      continue;
    }
    const counts = byId.get(p.group.id);
    if (!counts) continue;
    if (p.kind === "skipped-by-list") {
      counts.skippedByList++;
      skipUse.set(p.skip, (skipUse.get(p.skip) ?? 0) + 1);
      if (test.outcome !== "skipped") strays.push(test);
      continue;
    }
    if (dryRun) {
      // A dry run marks what it would run as passed and what its filters drop as skipped.
      if (test.outcome !== "skipped") {
        counts.selected++;
        selectedNames.get(p.group.id)?.push(test.name);
      }
      continue;
    }
    if (filteredOut(test)) {
      notRun.push(test);
      continue;
    }
    counts.selected++;
    selectedNames.get(p.group.id)?.push(test.name);
    if (test.outcome === "passed") counts.passed++;
    else if (test.outcome === "failed") {
      counts.failed++;
      failures.push({ group: p.group, test });
    } else {
      counts.skippedAtRunTime++;
      runtimeSkips.push({ group: p.group, test });
    }
  }
  return { groups, failures, runtimeSkips, selectedNames, skipUse, suiteFailures, strays, notRun };
}

/** Ginkgo writes a bare "skipped" for a spec its filters left out, "skipped - <why>" for Skip() in a test. */
function filteredOut(test: TestCase): boolean {
  return test.outcome === "skipped" && (test.message === "" || test.message === "skipped");
}

function sum(t: Tally, key: "selected" | "passed" | "failed" | "skippedAtRunTime" | "skippedByList"): number {
  return t.groups.reduce((n, g) => n + g[key], 0);
}

/** The one line the READMEs quote. */
export function headline(t: Tally, run: RunInfo): string {
  const listed = sum(t, "skippedByList");
  if (run.dryRun) {
    const per = t.groups.map((g) => `${g.group.title} ${g.selected}`).join(", ");
    return (
      `Upstream network e2e (Kubernetes ${run.kubernetesVersion}): ${sum(t, "selected")} tests selected, not yet run ` +
      `(${per}); ${listed} left out by the skip list, each with its reason.`
    );
  }
  const per = t.groups.map((g) => `${g.group.title} ${g.passed}/${g.selected}`).join(", ");
  const n = run.rerun?.replaced.length ?? 0;
  const rerun =
    n > 0 ? ` (${n} of these results from a re-run of ${n === 1 ? "that test" : "those tests"})` : "";
  return (
    `Upstream network e2e (Kubernetes ${run.kubernetesVersion}): ${sum(t, "passed")} of ${sum(t, "selected")} ` +
    `selected tests pass, ${sum(t, "failed")} fail, ${sum(t, "skippedAtRunTime")} skipped by the tests themselves (${per}); ` +
    `${listed} left out by the skip list, each with its reason${rerun}.`
  );
}

// Markdown table cells and inline code: a '|' or a backtick in a test name or message must not break them.
function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
}
function code(text: string): string {
  const t = text.replace(/\r?\n/g, " ");
  const ticks = "`".repeat(Math.max(1, ...Array.from(t.matchAll(/`+/g), (m) => m[0].length + 1)));
  const pad = t.startsWith("`") || t.endsWith("`") ? " " : "";
  return `${ticks}${pad}${t}${pad}${ticks}`;
}
function fence(text: string): string {
  const longest = Math.max(2, ...Array.from(text.matchAll(/`{3,}/g), (m) => m[0].length));
  const f = "`".repeat(longest + 1);
  return `${f}text\n${text.replace(/\s+$/, "")}\n${f}`;
}

/** The first lines of a failure's message: Ginkgo's messages can run to pages of pod dumps. */
export function shortMessage(message: string, maxLines = 12, maxChars = 1500): string {
  const lines = message.replace(/\r\n/g, "\n").trim().split("\n");
  let out = lines.slice(0, maxLines).join("\n");
  if (out.length > maxChars) out = `${out.slice(0, maxChars)}…`;
  if (lines.length > maxLines || out.length < message.trim().length)
    out += "\n[… cut; the full text is in the JUnit file]";
  return out;
}

export function renderReport(selection: Selection, t: Tally, run: RunInfo): string {
  const out: string[] = [];
  const p = (...lines: string[]) => out.push(...lines);
  p(
    "# Upstream conformance: the Kubernetes network e2e suites",
    "",
    "<!-- Generated by tools/conformance-report.ts from the e2e JUnit output and test/conformance/selection.json;",
    "     do not edit by hand: change the selection or rerun `make conformance` (docs/upstream-e2e.md). -->",
    "",
    `- Kubernetes version: **${run.kubernetesVersion}** (e2e.test built from the \`k8s.io/kubernetes\` module at that version)`,
    `- Command: ${code(run.command)}`,
    run.dryRun
      ? "- Status: **selected, not yet run**: these are the tests `e2e.test --ginkgo.dry-run` selects with the focus and skip below; none has run, so none is counted as passed."
      : `- Status: run${run.timestamp ? ` (started ${run.timestamp})` : ""} against the real-node sandbox (\`zovn sandbox up --kubelet\`).`,
    ...(run.rerun && run.rerun.replaced.length > 0 && !run.dryRun
      ? [
          `- Re-run: ${run.rerun.replaced.length} test${run.rerun.replaced.length === 1 ? "" : "s"} ran again${run.rerun.timestamp ? ` (started ${run.rerun.timestamp})` : ""} with ${code(run.rerun.command)}; their results replace the full run's in every count below ([Re-run](#re-run)).`,
        ]
      : []),
    "",
    "Headline (the line the README quotes):",
    "",
    `<!-- headline -->${headline(t, run)}<!-- /headline -->`,
    "",
    "## Per group",
    "",
    "A test counts in the first group whose focus matches its name.",
    "",
  );
  if (run.dryRun) {
    p("| Group | Focus | Selected, not yet run | Left out by the skip list |", "|---|---|---:|---:|");
    for (const g of t.groups) {
      p(
        `| ${cell(g.group.title)} | ${cell(code(g.group.focus.source))} | ${g.selected} | ${g.skippedByList} |`,
      );
    }
    p(`| **Total** | | **${sum(t, "selected")}** | **${sum(t, "skippedByList")}** |`);
  } else {
    p(
      "| Group | Focus | Selected | Passed | Failed | Skipped by the test | Left out by the skip list |",
      "|---|---|---:|---:|---:|---:|---:|",
    );
    for (const g of t.groups) {
      p(
        `| ${cell(g.group.title)} | ${cell(code(g.group.focus.source))} | ${g.selected} | ${g.passed} | ${g.failed} | ${g.skippedAtRunTime} | ${g.skippedByList} |`,
      );
    }
    p(
      `| **Total** | | **${sum(t, "selected")}** | **${sum(t, "passed")}** | **${sum(t, "failed")}** | **${sum(t, "skippedAtRunTime")}** | **${sum(t, "skippedByList")}** |`,
    );
  }
  p("");

  if (t.suiteFailures.length > 0) {
    p(
      "## Suite setup and teardown failures",
      "",
      "These ran outside any one test and may have failed or skipped many of them.",
      "",
    );
    for (const s of t.suiteFailures)
      p(`- ${code(s.name)}`, "", fence(shortMessage(s.message || s.detail)), "");
  }

  if (!run.dryRun) {
    p("## Failures", "");
    if (t.failures.length === 0) p("None.", "");
    for (const g of t.groups) {
      const fs = t.failures.filter((f) => f.group.id === g.group.id);
      if (fs.length === 0) continue;
      p(`### ${g.group.title} (${fs.length})`, "");
      for (const { test } of fs) {
        const known = knownFailure(selection, test.name, `${test.message}\n${test.detail}`);
        p(`- ${code(test.name)}`);
        p(
          known
            ? `  - Cause: ${known.cause}`
            : "  - Cause: not yet analysed (add it to `knownFailures` in test/conformance/selection.json).",
        );
        if (known) p(`  - Fix: ${known.plan}`);
        p("", fence(shortMessage(test.message || test.detail || "(no message)")), "");
      }
    }
    p("## Skipped by the tests themselves", "");
    if (t.runtimeSkips.length === 0) p("None.", "");
    else {
      p("Selected and started, then skipped by the test's own check (its message says why).", "");
      p("| Test | Message |", "|---|---|");
      for (const { test } of t.runtimeSkips)
        p(`| ${cell(test.name)} | ${cell(shortMessage(test.message, 2, 300))} |`);
      p("");
    }
  }

  if (run.rerun && run.rerun.replaced.length > 0 && !run.dryRun) {
    p(
      "## Re-run",
      "",
      `These tests ran again after the full run, with ${code(run.rerun.command)}; the counts above use the re-run's result.`,
      "",
      "| Test | Full run | Re-run | Seconds |",
      "|---|---|---|---:|",
    );
    for (const r of run.rerun.replaced)
      p(`| ${cell(r.name)} | ${r.before ?? "not run"} | ${r.after} | ${r.seconds.toFixed(1)} |`);
    p("");
  }

  p(
    "## Skip list",
    "",
    "Each pattern is passed to e2e.test as `--ginkgo.skip`; a test in a group above that matches one is left out for the reason given.",
    "",
    "| Pattern | Reason | Tests left out |",
    "|---|---|---:|",
  );
  for (const s of selection.skips)
    p(`| ${cell(code(s.pattern.source))} | ${cell(s.reason)} | ${t.skipUse.get(s) ?? 0} |`);
  p("");

  p("## Selected tests", "");
  for (const g of t.groups) {
    const names = [...(t.selectedNames.get(g.group.id) ?? [])].sort();
    p(`<details><summary>${g.group.title}: ${names.length}</summary>`, "");
    for (const n of names) p(`- ${code(n)}`);
    p("", "</details>", "");
  }

  if (t.notRun.length > 0) {
    p(
      "## Selected here, not run",
      "",
      "A group selects these but Ginkgo left them out (a narrower focus than test/conformance/selection.json, a pattern Go reads differently, or a run stopped before it reached them); they are in no count above.",
      "",
    );
    for (const s of t.notRun) p(`- ${code(s.name)}`);
    p("");
  }

  if (t.strays.length > 0) {
    p(
      "## Ran outside the selection",
      "",
      "Ginkgo ran these though no group selects them or a skip matches them: the run and test/conformance/selection.json disagree.",
      "",
    );
    for (const s of t.strays) p(`- ${code(s.name)} (${s.outcome})`);
    p("");
  }
  return `${out
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`;
}
