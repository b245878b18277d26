// metav1.Condition, the status entry Kubernetes APIs use to say "Ready: False, because ...". Helpers keep
// lastTransitionTime meaning what its name says: it moves only when status changes.

export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  /** RFC 3339; when status last changed. */
  lastTransitionTime: string;
  /** CamelCase, machine-readable. */
  reason: string;
  message: string;
}

export type ConditionUpdate = Omit<Condition, "lastTransitionTime"> & { lastTransitionTime?: string };

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/**
 * Returns a new list with `update` in place of the condition of its type. lastTransitionTime is kept while
 * the status stays the same (reason and message may still change), and set to `now` when it changes.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  update: ConditionUpdate,
  now: Date = new Date(),
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === update.type);
  const prev = i >= 0 ? list[i] : undefined;
  // metav1.Time has second precision; a sub-second timestamp would not round-trip.
  const stamp = `${now.toISOString().slice(0, 19)}Z`;
  const next: Condition = {
    ...update,
    lastTransitionTime:
      prev && prev.status === update.status ? prev.lastTransitionTime : (update.lastTransitionTime ?? stamp),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}
