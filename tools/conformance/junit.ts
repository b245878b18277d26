// The test cases of a JUnit report as Ginkgo (e2e.test --ginkgo.junit-report) writes it: <testsuites>
// holding <testsuite>s holding <testcase>s, each with at most one <failure>, <error> or <skipped> child.
// Ginkgo names a spec "[It] <full text> [labels]" and adds cases for suite nodes ("[SynchronizedBeforeSuite]",
// "[ReportAfterSuite] ..."), which are kept apart so a setup failure is reported, not counted as a test.

import { childElements, parseXml, textOf, type XmlElement } from "./xml.ts";

export type Outcome = "passed" | "failed" | "skipped";

export interface TestCase {
  /** The spec's full text without Ginkgo's "[It] " prefix. */
  readonly name: string;
  /** True for a spec ("[It]" or no node prefix), false for a suite node such as "[SynchronizedBeforeSuite]". */
  readonly isSpec: boolean;
  readonly outcome: Outcome;
  /** The failure's, error's or skip's message ("" when there is none). */
  readonly message: string;
  /** The failure's or error's body: where and why, as Ginkgo prints it. */
  readonly detail: string;
  readonly seconds: number;
}

export interface JUnitReport {
  readonly cases: readonly TestCase[];
  /** The first suite's timestamp attribute, when the writer gave one. */
  readonly timestamp: string | undefined;
}

const SUITE_NODE =
  /^\[(SynchronizedBeforeSuite|BeforeSuite|SynchronizedAfterSuite|AfterSuite|ReportBeforeSuite|ReportAfterSuite|DeferCleanup \(Suite\))\]/;

export class JUnitError extends Error {}

/** Reads one JUnit document (its root is <testsuites> or a single <testsuite>). */
export function parseJUnit(doc: string): JUnitReport {
  const root = parseXml(doc);
  let suites: XmlElement[];
  if (root.name === "testsuites") suites = childElements(root, "testsuite");
  else if (root.name === "testsuite") suites = [root];
  else throw new JUnitError(`the root element is <${root.name}>, not <testsuites> or <testsuite>`);
  const cases: TestCase[] = [];
  for (const suite of suites) {
    for (const tc of childElements(suite, "testcase")) cases.push(toCase(tc));
  }
  return { cases, timestamp: suites[0]?.attributes.get("timestamp") };
}

/**
 * Ginkgo appends the spec's labels as " [a, b]"; the Kubernetes e2e framework writes each label into the
 * text as "[a]" too. The block is dropped when every label in it is already in the text, so names read and
 * match as Ginkgo's --ginkgo.focus sees them (the text, without labels).
 */
export function withoutLabelBlock(name: string): string {
  const m = /^(.*) \[([^[\]]+)\]$/s.exec(name);
  if (!m?.[1] || !m[2]) return name;
  const text = m[1];
  const labels = m[2].split(", ");
  return labels.every((l) => l !== "" && text.includes(`[${l}]`)) ? text : name;
}

function toCase(tc: XmlElement): TestCase {
  const raw = tc.attributes.get("name");
  if (raw === undefined) throw new JUnitError("a <testcase> without a name");
  const isSpec = !SUITE_NODE.test(raw);
  const name = withoutLabelBlock(raw.replace(/^\[It\] /, ""));
  const failure = childElements(tc, "failure")[0] ?? childElements(tc, "error")[0];
  const skipped = childElements(tc, "skipped")[0];
  const time = Number(tc.attributes.get("time") ?? "0");
  const seconds = Number.isFinite(time) && time >= 0 ? time : 0;
  if (failure) {
    return {
      name,
      isSpec,
      outcome: "failed",
      message: failure.attributes.get("message") ?? "",
      detail: textOf(failure),
      seconds,
    };
  }
  if (skipped) {
    return {
      name,
      isSpec,
      outcome: "skipped",
      message: skipped.attributes.get("message") ?? "",
      detail: "",
      seconds,
    };
  }
  // Ginkgo also writes status="..."; a report without a child element but a failing status still failed.
  const status = tc.attributes.get("status");
  if (status !== undefined && !["passed", "skipped", "pending"].includes(status)) {
    return { name, isSpec, outcome: "failed", message: `status ${status}`, detail: "", seconds };
  }
  if (status === "skipped" || status === "pending") {
    return { name, isSpec, outcome: "skipped", message: status, detail: "", seconds };
  }
  return { name, isSpec, outcome: "passed", message: "", detail: "", seconds };
}
