// The selection of upstream e2e tests `make conformance` runs (test/conformance/selection.json): groups
// chosen by a focus pattern, a skip list where each pattern carries its reason, and the causes known for
// failures. The same patterns become Ginkgo's --ginkgo.focus/--ginkgo.skip arguments and classify the
// JUnit results, so what ran and what the report counts cannot drift apart.

export interface Group {
  readonly id: string;
  readonly title: string;
  readonly focus: RegExp;
}

export interface Skip {
  readonly pattern: RegExp;
  readonly reason: string;
}

export interface KnownFailure {
  /** Matches the test's name; undefined matches any. */
  readonly pattern: RegExp | undefined;
  /** Matches the failure's message; undefined matches any. At least one of the two is given. */
  readonly message: RegExp | undefined;
  readonly cause: string;
  readonly plan: string;
}

export interface Selection {
  readonly groups: readonly Group[];
  readonly skips: readonly Skip[];
  readonly knownFailures: readonly KnownFailure[];
}

export class SelectionError extends Error {}

/** What the selection makes of one test name. */
export type Placement =
  | { readonly kind: "unselected" }
  | { readonly kind: "skipped-by-list"; readonly group: Group; readonly skip: Skip }
  | { readonly kind: "selected"; readonly group: Group };

/**
 * Compiles a pattern that Go's RE2 (Ginkgo) and JavaScript must read the same way: no lookaround, no
 * backreference, no flags or named groups, all of which one of the two lacks or spells differently.
 */
export function compilePattern(source: string, where: string): RegExp {
  if (source === "") throw new SelectionError(`${where}: an empty pattern would match every test`);
  if (/\(\?/.test(source))
    throw new SelectionError(`${where}: '(?' groups read differently in Go and JavaScript`);
  if (/\\[1-9kpP]/.test(source)) {
    throw new SelectionError(
      `${where}: backreferences, \\k and \\p are not in the Go/JavaScript common subset`,
    );
  }
  try {
    return new RegExp(source);
  } catch (err) {
    throw new SelectionError(`${where}: ${(err as Error).message}`);
  }
}

function field(obj: Record<string, unknown>, key: string, where: string): string {
  const v = obj[key];
  if (typeof v !== "string" || v.trim() === "")
    throw new SelectionError(`${where}: "${key}" must be a non-empty string`);
  return v;
}

function list(obj: Record<string, unknown>, key: string, required: boolean): Record<string, unknown>[] {
  const v = obj[key];
  if (v === undefined && !required) return [];
  if (!Array.isArray(v) || v.some((e) => typeof e !== "object" || e === null || Array.isArray(e))) {
    throw new SelectionError(`"${key}" must be a list of objects`);
  }
  return v as Record<string, unknown>[];
}

/** Parses the selection file's JSON value; every pattern is compiled, every reason required. */
export function parseSelection(value: unknown): Selection {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new SelectionError("the selection must be a JSON object");
  }
  const obj = value as Record<string, unknown>;
  const ids = new Set<string>();
  const groups = list(obj, "groups", true).map((g, n) => {
    const where = `groups[${n}]`;
    const id = field(g, "id", where);
    if (!/^[a-z0-9-]+$/.test(id))
      throw new SelectionError(`${where}: id '${id}' must be lower-case letters, digits and '-'`);
    if (ids.has(id)) throw new SelectionError(`${where}: id '${id}' is used twice`);
    ids.add(id);
    return {
      id,
      title: field(g, "title", where),
      focus: compilePattern(field(g, "focus", where), `${where}.focus`),
    };
  });
  if (groups.length === 0) throw new SelectionError("no groups: nothing would run");
  const skips = list(obj, "skips", true).map((s, n) => ({
    pattern: compilePattern(field(s, "pattern", `skips[${n}]`), `skips[${n}].pattern`),
    reason: field(s, "reason", `skips[${n}]`),
  }));
  const knownFailures = list(obj, "knownFailures", false).map((k, n) => {
    const where = `knownFailures[${n}]`;
    const optional = (key: string) =>
      k[key] === undefined ? undefined : compilePattern(field(k, key, where), `${where}.${key}`);
    const pattern = optional("pattern");
    const message = optional("message");
    if (!pattern && !message) throw new SelectionError(`${where}: give "pattern", "message" or both`);
    return { pattern, message, cause: field(k, "cause", where), plan: field(k, "plan", where) };
  });
  return { groups, skips, knownFailures };
}

/** Where a test belongs: the first group whose focus matches, then the first skip that matches. */
export function place(selection: Selection, name: string): Placement {
  const group = selection.groups.find((g) => g.focus.test(name));
  if (!group) return { kind: "unselected" };
  const skip = selection.skips.find((s) => s.pattern.test(name));
  return skip ? { kind: "skipped-by-list", group, skip } : { kind: "selected", group };
}

/** The first known cause of a failing test (by its name and its failure message), if the selection names one. */
export function knownFailure(selection: Selection, name: string, message: string): KnownFailure | undefined {
  return selection.knownFailures.find(
    (k) => (!k.pattern || k.pattern.test(name)) && (!k.message || k.message.test(message)),
  );
}

/** e2e.test's arguments for the selection: Ginkgo ORs repeated focus and repeated skip flags. */
export function ginkgoArgs(selection: Selection): string[] {
  return [
    ...selection.groups.map((g) => `--ginkgo.focus=${g.focus.source}`),
    ...selection.skips.map((s) => `--ginkgo.skip=${s.pattern.source}`),
  ];
}
