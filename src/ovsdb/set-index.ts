// Membership of large OVSDB set values in O(1). A Set built for one array stays true for it: whoever changes
// an array changes its Set too. The cache changes a large set in place (live-set.ts) and adjusts its Set by the
// elements toggled; a copied value gets the Set handed on (applyDiff). Either way a logical switch that grows to
// thousands of ports, one port per update, answers "is this port on it" without rescanning.

/** Below this many elements a linear scan is cheaper than keeping a Set. */
export const INDEXED_MIN = 64;

const sets = new WeakMap<readonly unknown[], Set<unknown>>();

/** Whether the array `values` holds `x`. */
export function setHas(values: readonly unknown[], x: unknown): boolean {
  if (values.length < INDEXED_MIN) return values.includes(x);
  let s = sets.get(values);
  if (!s) {
    s = new Set(values);
    sets.set(values, s);
  }
  return s.has(x);
}

/**
 * Records that `to` is `from` with `added` appended and `removed` taken out. An index built for `from` moves to
 * `to` (`from` is the superseded value; it falls back to scanning if asked again).
 */
export function handOn(
  from: readonly unknown[],
  to: readonly unknown[],
  added: readonly unknown[],
  removed: readonly unknown[],
): void {
  const s = sets.get(from);
  if (!s) return;
  sets.delete(from);
  if (to.length < INDEXED_MIN) return;
  for (const r of removed) s.delete(r);
  for (const a of added) s.add(a);
  sets.set(to, s);
}

/** Records that `values` was changed in place: `added` joined it and the elements of `removed` ([index, element]) left. */
export function setAdjust(
  values: readonly unknown[],
  added: Iterable<unknown>,
  removed: readonly (readonly [number, unknown])[],
): void {
  const s = sets.get(values);
  if (!s) return;
  for (const [, r] of removed) s.delete(r);
  for (const a of added) s.add(a);
}
