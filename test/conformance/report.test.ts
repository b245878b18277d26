import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { JUnitError, parseJUnit, type TestCase, withoutLabelBlock } from "../../tools/conformance/junit.ts";
import { headline, mergeRerun, renderReport, shortMessage, tally } from "../../tools/conformance/report.ts";
import {
  ginkgoArgs,
  knownFailure,
  parseSelection,
  place,
  type Selection,
  SelectionError,
} from "../../tools/conformance/selection.ts";
import { pinnedKubernetesVersion } from "../../tools/conformance-report.ts";

const sample = (f: string) => readFileSync(new URL(`samples/${f}`, import.meta.url), "utf8");
const committed = parseSelection(
  JSON.parse(readFileSync(new URL("selection.json", import.meta.url), "utf8")),
);
const run = {
  kubernetesVersion: "v1.37.1",
  command: "make conformance",
  dryRun: false,
  timestamp: "2026-11-26T23:30:00",
};

describe("parseJUnit", () => {
  it("reads Ginkgo's cases: the [It] prefix dropped, suite nodes kept apart, failures with message and detail", () => {
    const r = parseJUnit(sample("run.xml"));
    assert.equal(r.timestamp, "2026-11-26T23:30:00");
    assert.equal(r.cases.length, 13);
    assert.deepEqual(
      r.cases.filter((c) => !c.isSpec).map((c) => c.name),
      ["[SynchronizedBeforeSuite]", "[ReportAfterSuite] Kubernetes e2e suite report"],
    );
    const netpol = r.cases.find((c) => c.name.includes("NamespaceSelector"));
    assert.equal(netpol?.outcome, "failed");
    assert.equal(netpol?.message, "Had 2 wrong results in reachability matrix");
    assert.match(
      netpol?.detail ?? "",
      /got \. <&> \| `pipe`\nIn \[It\] at: test\/e2e\/network\/netpol\/test_helper.go:141$/,
    );
    const svc = r.cases.find((c) => c.name.startsWith("[sig-network] Services should serve a basic"));
    assert.deepEqual(svc && { outcome: svc.outcome, seconds: svc.seconds }, {
      outcome: "passed",
      seconds: 21.4,
    });
    const evicted = r.cases.find((c) => c.name.includes("evicted"));
    assert.equal(
      evicted?.message,
      "skipped - Test requires >= 2 Ready nodes, but there are only 1 Ready nodes",
    );
    assert.ok(r.cases.some((c) => c.name.includes("a 'default-deny-ingress' policy")));
  });

  it("drops Ginkgo's trailing label block only when the text already carries every label", () => {
    const w = withoutLabelBlock;
    assert.equal(w("[sig-network] Services x [Slow] [sig-network, Slow]"), "[sig-network] Services x [Slow]");
    assert.equal(w("[sig-network] Conntrack y [sig-network]"), "[sig-network] Conntrack y");
    assert.equal(w("[sig-network] Services z [Conformance]"), "[sig-network] Services z [Conformance]");
    assert.equal(w("[sig-network] a [sig-network, Other]"), "[sig-network] a [sig-network, Other]");
    const netpol = parseJUnit(sample("run.xml")).cases.find((c) => c.name.includes("NamespaceSelector"));
    assert.match(netpol?.name ?? "", /NamespaceSelector \[Feature:NetworkPolicy\]$/);
  });

  it("accepts a lone <testsuite> root and refuses any other root or a nameless case", () => {
    assert.equal(parseJUnit('<testsuite><testcase name="[It] x"/></testsuite>').cases[0]?.name, "x");
    assert.throws(() => parseJUnit("<html/>"), JUnitError);
    assert.throws(
      () => parseJUnit("<testsuites><testsuite><testcase/></testsuite></testsuites>"),
      JUnitError,
    );
  });

  it("treats a failing status without a <failure> child as a failure", () => {
    const [c] = parseJUnit('<testsuite><testcase name="[It] t" status="timedout"/></testsuite>').cases;
    assert.deepEqual(c && [c.outcome, c.message], ["failed", "status timedout"]);
  });
});

describe("selection", () => {
  it("places the upstream names in the intended group or skip", () => {
    const where = (n: string) => {
      const p = place(committed, n);
      return p.kind === "unselected" ? p.kind : `${p.kind}:${p.group.id}`;
    };
    const cases: [string, string][] = [
      [
        "[sig-network] Services should serve a basic endpoint from pods [Conformance]",
        "selected:conformance",
      ],
      [
        "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]",
        "selected:conformance",
      ],
      [
        "[sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
        "selected:netpol",
      ],
      [
        "[sig-network] Netpol [LinuxOnly] NetworkPolicy between server and client using UDP should enforce policy based on Ports",
        "selected:netpol",
      ],
      [
        "[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy",
        "skipped-by-list:netpol",
      ],
      [
        "[sig-network] Services should have session affinity work for NodePort service [LinuxOnly]",
        "selected:services-networking",
      ],
      [
        "[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service",
        "selected:services-networking",
      ],
      ["[sig-network] DNS should provide DNS for services [Conformance]", "skipped-by-list:conformance"],
      [
        "[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]",
        "skipped-by-list:services-networking",
      ],
      ["[sig-network] Networking should check kube-proxy urls", "skipped-by-list:services-networking"],
      [
        "[sig-network] Services should be possible to connect to a service via ExternalIP when the external IP is not assigned to a node",
        "skipped-by-list:services-networking",
      ],
      [
        "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to create an internal type load balancer [Slow]",
        "unselected",
      ],
      [
        "[sig-network] [Feature:IPv6DualStack] should create pod, add ipv6 and ipv4 ip to pod ips",
        "unselected",
      ],
      ["[sig-apps] Deployment deployment should support rollover [Conformance]", "unselected"],
    ];
    for (const [n, want] of cases) assert.equal(where(n), want, n);
  });

  it("gives every skip a reason and turns groups and skips into repeated Ginkgo flags", () => {
    assert.ok(committed.skips.length > 0);
    for (const s of committed.skips) assert.ok(s.reason.length > 20, s.pattern.source);
    const args = ginkgoArgs(committed);
    assert.equal(args.filter((a) => a.startsWith("--ginkgo.focus=")).length, committed.groups.length);
    assert.equal(args.filter((a) => a.startsWith("--ginkgo.skip=")).length, committed.skips.length);
  });

  it("refuses patterns Go and JavaScript read differently, empty patterns and skips without a reason", () => {
    const base = { groups: [{ id: "g", title: "G", focus: "x" }], skips: [] as unknown[] };
    assert.throws(
      () => parseSelection({ ...base, skips: [{ pattern: "a(?=b)", reason: "r" }] }),
      SelectionError,
    );
    assert.throws(
      () => parseSelection({ ...base, skips: [{ pattern: "(a)\\1", reason: "r" }] }),
      SelectionError,
    );
    assert.throws(() => parseSelection({ ...base, skips: [{ pattern: "", reason: "r" }] }), SelectionError);
    assert.throws(() => parseSelection({ ...base, skips: [{ pattern: "a" }] }), SelectionError);
    assert.throws(() => parseSelection({ groups: [], skips: [] }), SelectionError);
    assert.throws(() => parseSelection({ ...base, groups: [...base.groups, ...base.groups] }), /used twice/);
  });
});

describe("tally and renderReport", () => {
  const withCause: Selection = parseSelection({
    ...JSON.parse(readFileSync(new URL("selection.json", import.meta.url), "utf8")),
    knownFailures: [
      {
        pattern: "change the type from ExternalName",
        cause: "reaches the Service by its DNS name; the sandbox runs no cluster DNS",
        plan: "a CoreDNS add-on in the real-node sandbox",
      },
    ],
  });

  it("counts the sample run per group, the skip list apart from the tests' own skips", () => {
    const t = tally(withCause, parseJUnit(sample("run.xml")).cases, false);
    const counts = Object.fromEntries(
      t.groups.map((g) => [
        g.group.id,
        [g.selected, g.passed, g.failed, g.skippedAtRunTime, g.skippedByList],
      ]),
    );
    assert.deepEqual(counts, {
      conformance: [3, 2, 1, 0, 0],
      netpol: [2, 1, 1, 0, 0],
      "services-networking": [2, 1, 0, 1, 2],
    });
    assert.equal(t.failures.length, 2);
    assert.equal(t.suiteFailures.length, 0);
    assert.equal(t.strays.length, 0);
    // Ginkgo's bare "skipped" is a spec its filters left out, not a test that skipped itself.
    assert.deepEqual(
      t.notRun.map((c) => c.name),
      [
        "[sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]",
      ],
    );
    assert.match(renderReport(withCause, t, run), /## Selected here, not run\n[\s\S]*preserve source pod IP/);
  });

  it("finds a known cause by the failure's message as well as by the test's name", () => {
    const sel = parseSelection({
      groups: [{ id: "g", title: "G", focus: "x" }],
      skips: [],
      knownFailures: [
        { message: "name resolution", cause: "no cluster DNS", plan: "CoreDNS" },
        { pattern: "y", message: "timeout", cause: "both", plan: "p" },
      ],
    });
    assert.equal(
      knownFailure(sel, "x a", "nc: Temporary failure in name resolution")?.cause,
      "no cluster DNS",
    );
    assert.equal(knownFailure(sel, "x y", "a timeout")?.cause, "both");
    assert.equal(knownFailure(sel, "x z", "a timeout"), undefined);
    assert.throws(
      () =>
        parseSelection({
          groups: sel.groups.map((g) => ({ ...g, focus: "x" })),
          skips: [],
          knownFailures: [{ cause: "c", plan: "p" }],
        }),
      SelectionError,
    );
  });

  it("writes the version, command, headline, each failure with its message and cause, and every skip with its reason", () => {
    const t = tally(withCause, parseJUnit(sample("run.xml")).cases, false);
    const md = renderReport(withCause, t, run);
    assert.match(md, /Kubernetes version: \*\*v1\.37\.1\*\*/);
    assert.match(md, /- Command: `make conformance`/);
    assert.match(
      md,
      /<!-- headline -->Upstream network e2e \(Kubernetes v1\.37\.1\): 4 of 7 selected tests pass, 2 fail, 1 skipped/,
    );
    assert.match(md, /Cause: reaches the Service by its DNS name/);
    assert.match(md, /Fix: a CoreDNS add-on/);
    assert.match(md, /Cause: not yet analysed/);
    assert.match(md, /Had 2 wrong results in reachability matrix/);
    assert.match(md, /Test requires >= 2 Ready nodes/);
    for (const s of withCause.skips) assert.ok(md.includes(s.reason.replace(/\|/g, "\\|")), s.reason);
    assert.doesNotMatch(md, /selected, not yet run/);
  });

  it("a re-run's executed specs replace the full run's, are counted once, and are listed with both outcomes", () => {
    const full = parseJUnit(sample("run.xml")).cases;
    const failed = full.filter((c) => c.isSpec && c.outcome === "failed");
    assert.ok(failed.length >= 2);
    const [first, second] = failed as [TestCase, TestCase];
    const again: TestCase[] = [
      { ...first, outcome: "passed", message: "", detail: "", seconds: 12.5 },
      { ...second, outcome: "skipped", message: "", detail: "", seconds: 0 }, // filtered out: ignored
      { ...first, name: "[SynchronizedBeforeSuite]", isSpec: false, outcome: "failed", seconds: 1 },
      {
        name: "[sig-network] Services new one",
        isSpec: true,
        outcome: "passed",
        message: "",
        detail: "",
        seconds: 3,
      },
    ];
    const { cases, replaced } = mergeRerun(full, again);
    assert.equal(cases.length, full.length + 1);
    assert.deepEqual(
      replaced.map((r) => [r.name, r.before, r.after]),
      [
        [first.name, "failed", "passed"],
        ["[sig-network] Services new one", undefined, "passed"],
      ].sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
    );
    const before = tally(withCause, full, false);
    const after = tally(withCause, cases, false);
    const total = (t: typeof before, k: "passed" | "failed" | "selected") =>
      t.groups.reduce((n, g) => n + g[k], 0);
    assert.equal(total(after, "failed"), total(before, "failed") - 1);
    assert.equal(total(after, "passed"), total(before, "passed") + 2);
    const md = renderReport(withCause, after, {
      ...run,
      rerun: { command: "e2e.test --ginkgo.focus=X", timestamp: "2026-11-27T06:00:00", replaced },
    });
    assert.match(
      md,
      /- Re-run: 2 tests ran again \(started 2026-11-27T06:00:00\) with `e2e\.test --ginkgo\.focus=X`/,
    );
    assert.match(md, /## Re-run\n/);
    assert.ok(md.includes(`| ${first.name.replace(/\|/g, "\\|")} | failed | passed | 12.5 |`));
    assert.match(md, /\| \[sig-network\] Services new one \| not run \| passed \| 3\.0 \|/);
    assert.match(
      md,
      /each with its reason \(2 of these results from a re-run of those tests\)\.<!-- \/headline -->/,
    );
    // Without a re-run nothing of it appears.
    assert.doesNotMatch(renderReport(withCause, before, run), /Re-run|re-run/);
  });

  it("several JUnit files (one e2e.test per group): a spec that ran in one counts once, over its filtered-out copies", () => {
    const full = parseJUnit(sample("run.xml")).cases;
    const ran = full.filter((c) => c.isSpec && c.outcome !== "skipped");
    assert.ok(ran.length >= 2);
    const filtered = (c: TestCase): TestCase => ({
      ...c,
      outcome: "skipped",
      message: "",
      detail: "",
      seconds: 0,
    });
    // The second invocation's file lists the first's specs as filtered out, before and after the real copies.
    const files = [...full.map(filtered), ...full, ...full.map(filtered)];
    const once = tally(withCause, full, false);
    const split = tally(withCause, files, false);
    assert.deepEqual(
      split.groups.map((g) => [g.selected, g.passed, g.failed, g.skippedAtRunTime, g.skippedByList]),
      once.groups.map((g) => [g.selected, g.passed, g.failed, g.skippedAtRunTime, g.skippedByList]),
    );
    assert.equal(split.failures.length, once.failures.length);
    assert.equal(split.notRun.length, once.notRun.length);
    // A re-run replaces every copy with one case object: still counted once.
    const [first] = ran as [TestCase];
    const rerun = mergeRerun(files, [{ ...first, outcome: "passed", message: "", detail: "" }]);
    const after = tally(withCause, rerun.cases, false);
    assert.deepEqual(
      after.groups.map((g) => g.selected),
      once.groups.map((g) => g.selected),
    );
    assert.deepEqual(
      rerun.replaced.map((r) => [r.name, r.before]),
      [[first.name, first.outcome]],
    );
  });

  it("counts a dry run as selected, not yet run, and never as passed", () => {
    const t = tally(committed, parseJUnit(sample("dry-run.xml")).cases, true);
    assert.deepEqual(
      t.groups.map((g) => [g.group.id, g.selected, g.passed, g.skippedByList]),
      [
        ["conformance", 1, 0, 1],
        ["netpol", 2, 0, 0],
        ["services-networking", 0, 0, 0],
      ],
    );
    const md = renderReport(committed, t, { ...run, dryRun: true });
    assert.match(md, /3 tests selected, not yet run/);
    assert.match(md, /<summary>NetworkPolicy \(test\/e2e\/network\/netpol\): 2<\/summary>/);
    assert.match(
      md,
      /- `\[sig-network\] Services should serve a basic endpoint from pods {2}\[Conformance\]`/,
    );
    assert.doesNotMatch(md, /tests pass|\| Passed \||\| Failed \|/);
  });

  it("reports a failed suite node and a spec that ran outside the selection", () => {
    const cases: TestCase[] = [
      {
        name: "[SynchronizedBeforeSuite]",
        isSpec: false,
        outcome: "failed",
        message: "no nodes Ready",
        detail: "",
        seconds: 1,
      },
      {
        name: "[sig-apps] Deployment x",
        isSpec: true,
        outcome: "passed",
        message: "",
        detail: "",
        seconds: 1,
      },
    ];
    const md = renderReport(committed, tally(committed, cases, false), run);
    assert.match(md, /## Suite setup and teardown failures[\s\S]*no nodes Ready/);
    assert.match(md, /## Ran outside the selection[\s\S]*`\[sig-apps\] Deployment x` \(passed\)/);
  });

  it("cuts a long message and says so", () => {
    const long = Array.from({ length: 40 }, (_, i) => `line ${i}`).join("\n");
    const short = shortMessage(long);
    assert.equal(short.split("\n").length, 13);
    assert.match(short, /cut; the full text is in the JUnit file/);
    assert.equal(shortMessage("one line"), "one line");
  });

  it("keeps every distinct selected spec in exactly one count, for any mix of names and outcomes", () => {
    const names = fc.constantFrom(
      "[sig-network] Services a [Conformance]",
      "[sig-network] Services b",
      "[sig-network] Netpol c",
      "[sig-network] DNS d [Conformance]",
      "[sig-network] Networking e [Feature:SCTPConnectivity]",
      "[sig-apps] f",
      "[sig-network] LoadBalancers g",
    );
    const testCase = fc.record({
      name: names,
      isSpec: fc.boolean(),
      outcome: fc.constantFrom("passed" as const, "failed" as const, "skipped" as const),
      message: fc.string({ maxLength: 10 }),
      detail: fc.constant(""),
      seconds: fc.constant(0),
    });
    fc.assert(
      fc.property(fc.array(testCase, { maxLength: 30 }), fc.boolean(), (cases, dryRun) => {
        const t = tally(committed, cases, dryRun);
        const specs = new Map<string, TestCase>();
        // One copy per name: the first, unless a later copy ran and the first was only filtered out.
        const filtered = (c: TestCase) =>
          c.outcome === "skipped" && (c.message === "" || c.message === "skipped");
        for (const c of cases) {
          const prior = specs.get(c.name);
          if (c.isSpec && (!prior || (filtered(prior) && !filtered(c)))) specs.set(c.name, c);
        }
        let placed = 0;
        for (const g of t.groups) {
          if (dryRun) assert.equal(g.passed + g.failed + g.skippedAtRunTime, 0);
          else assert.equal(g.selected, g.passed + g.failed + g.skippedAtRunTime);
          placed += g.selected + g.skippedByList;
        }
        const inGroups = [...specs.values()].filter((c) => place(committed, c.name).kind !== "unselected");
        const dryRunDropped = dryRun
          ? inGroups.filter((c) => place(committed, c.name).kind === "selected" && c.outcome === "skipped")
              .length
          : 0;
        assert.equal(placed + t.notRun.length + dryRunDropped, inGroups.length);
        if (dryRun) assert.equal(t.notRun.length, 0);
        assert.equal(t.failures.length, dryRun ? 0 : t.groups.reduce((n, g) => n + g.failed, 0));
        const line = headline(t, { ...run, dryRun });
        if (dryRun) assert.doesNotMatch(line, /pass|fail/);
      }),
      { numRuns: 300 },
    );
  });
});

describe("docs/conformance.md", () => {
  it("has a headline that README.md quotes word for word", () => {
    const doc = readFileSync(new URL("../../docs/conformance.md", import.meta.url), "utf8");
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const line = /<!-- headline -->(.+)<!-- \/headline -->/.exec(doc)?.[1];
    assert.ok(line, "docs/conformance.md has no headline");
    assert.ok(readme.includes(line), `README.md does not quote the headline: ${line}`);
  });
});

describe("pinnedKubernetesVersion", () => {
  it("reads the committed fixtures/e2e/go.mod and refuses a go.mod without the pin", () => {
    const goMod = readFileSync(new URL("../../fixtures/e2e/go.mod", import.meta.url), "utf8");
    assert.match(pinnedKubernetesVersion(goMod), /^v1\.\d+\.\d+$/);
    assert.throws(() => pinnedKubernetesVersion("module x\n\nrequire k8s.io/api v0.37.1\n"));
  });
});
