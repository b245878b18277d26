// metav1.LabelSelector as the Kubernetes docs define it: every matchLabels pair and every matchExpressions
// requirement must hold (AND); an empty selector selects everything. Written from the API reference, not from
// src/policy, so the e2e matrix compares the controller with an independent reading of the API.

export type Labels = Readonly<Record<string, string>>;

export interface LabelSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

function requirementHolds(req: LabelSelectorRequirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, req.key);
  const values = req.values ?? [];
  switch (req.operator) {
    case "In":
      if (values.length === 0) throw new Error(`matchExpressions ${req.key} In: values must be non-empty`);
      return has && values.includes(labels[req.key] as string);
    case "NotIn":
      if (values.length === 0) throw new Error(`matchExpressions ${req.key} NotIn: values must be non-empty`);
      // A missing key satisfies NotIn (docs: "the key is not present or its value is not in the set").
      return !has || !values.includes(labels[req.key] as string);
    case "Exists":
      if (values.length > 0) throw new Error(`matchExpressions ${req.key} Exists: values must be empty`);
      return has;
    case "DoesNotExist":
      if (values.length > 0)
        throw new Error(`matchExpressions ${req.key} DoesNotExist: values must be empty`);
      return !has;
    default:
      throw new Error(`matchExpressions ${req.key}: unknown operator ${JSON.stringify(req.operator)}`);
  }
}

/** Whether `selector` selects an object with `labels`; an empty selector selects every object. */
export function selects(selector: LabelSelector, labels: Labels): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(labels, k) || labels[k] !== v) return false;
  }
  return (selector.matchExpressions ?? []).every((req) => requirementHolds(req, labels));
}
