// Kubernetes label selectors (matchLabels and matchExpressions with In, NotIn, Exists, DoesNotExist), parsed
// from the API into a typed value with a canonical text form: two selectors that select the same pods by the same
// terms have the same canonical text, so the policies that use them can share one address set.

import { InvalidInputError } from "../ipam/problem.ts";

export type SelectorOperator = "In" | "NotIn" | "Exists" | "DoesNotExist";

export interface Requirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  /** Sorted, without duplicates; empty for Exists and DoesNotExist. */
  readonly values: readonly string[];
}

/** All requirements must hold; an empty list selects everything. Sorted, so the canonical text is stable. */
export interface LabelSelector {
  readonly requirements: readonly Requirement[];
}

export type Labels = Readonly<Record<string, string>>;

const OPERATORS: readonly SelectorOperator[] = ["In", "NotIn", "Exists", "DoesNotExist"];
// A label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
const KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export const EVERYTHING: LabelSelector = { requirements: [] };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function labelKey(v: unknown, field: string): string {
  if (typeof v !== "string" || !KEY.test(v))
    throw new InvalidInputError(field, `${JSON.stringify(v)} is not a label key`);
  return v;
}

function labelValue(v: unknown, field: string): string {
  if (typeof v !== "string" || !VALUE.test(v))
    throw new InvalidInputError(field, `${JSON.stringify(v)} is not a label value`);
  return v;
}

/**
 * Parses a metav1.LabelSelector. `field` names it in errors (e.g. `spec.ingress[0].from[1].podSelector`).
 * @throws InvalidInputError naming the offending field
 */
export function parseLabelSelector(raw: unknown, field: string): LabelSelector {
  if (raw === undefined || raw === null) return EVERYTHING;
  if (!isRecord(raw)) throw new InvalidInputError(field, "must be an object");
  const reqs: Requirement[] = [];
  const ml = raw.matchLabels;
  if (ml !== undefined && ml !== null) {
    if (!isRecord(ml)) throw new InvalidInputError(`${field}.matchLabels`, "must be a map of labels");
    for (const [k, v] of Object.entries(ml)) {
      const f = `${field}.matchLabels[${JSON.stringify(k)}]`;
      reqs.push({ key: labelKey(k, f), operator: "In", values: [labelValue(v, f)] });
    }
  }
  const me = raw.matchExpressions;
  if (me !== undefined && me !== null) {
    if (!Array.isArray(me)) throw new InvalidInputError(`${field}.matchExpressions`, "must be a list");
    me.forEach((e: unknown, i) => {
      const f = `${field}.matchExpressions[${i}]`;
      if (!isRecord(e)) throw new InvalidInputError(f, "must be an object");
      const key = labelKey(e.key, `${f}.key`);
      const operator = e.operator as SelectorOperator;
      if (!OPERATORS.includes(operator))
        throw new InvalidInputError(
          `${f}.operator`,
          `${JSON.stringify(e.operator)} is not one of ${OPERATORS.join(", ")}`,
        );
      const rawValues = e.values ?? [];
      if (!Array.isArray(rawValues)) throw new InvalidInputError(`${f}.values`, "must be a list");
      const values = [
        ...new Set(rawValues.map((v: unknown, j) => labelValue(v, `${f}.values[${j}]`))),
      ].sort();
      if ((operator === "In" || operator === "NotIn") && values.length === 0)
        throw new InvalidInputError(`${f}.values`, `must not be empty for ${operator}`);
      if ((operator === "Exists" || operator === "DoesNotExist") && values.length > 0)
        throw new InvalidInputError(`${f}.values`, `must be empty for ${operator}`);
      reqs.push({ key, operator, values });
    });
  }
  return { requirements: canonicalOrder(reqs) };
}

function canonicalOrder(reqs: Requirement[]): Requirement[] {
  const text = (r: Requirement) => `${r.key}\u0000${r.operator}\u0000${r.values.join("\u0000")}`;
  const seen = new Map<string, Requirement>();
  for (const r of reqs) seen.set(text(r), r);
  return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

export function selectorMatches(sel: LabelSelector, labels: Labels | undefined): boolean {
  const l = labels ?? {};
  for (const r of sel.requirements) {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.operator) {
      case "In":
        if (!has || !r.values.includes(v as string)) return false;
        break;
      case "NotIn":
        if (has && r.values.includes(v as string)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}

/** A stable text of the selector: equal for selectors with the same requirements, whatever their order. */
export function canonicalSelector(sel: LabelSelector): string {
  return JSON.stringify(sel.requirements.map((r) => [r.key, r.operator, r.values]));
}
