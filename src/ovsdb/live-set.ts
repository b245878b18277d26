// Large set values of cached rows change in place. Copying a switch's `ports` to add one port costs O(n) per
// monitor update (about 100 MB over 5,000 pods), so the cache toggles the elements of the live array instead, and
// the row it supersedes gets its value back lazily: a getter that rebuilds the old array from the live one by
// undoing the changes made since (Baker's "rerooting" of a persistent array, without the rerooting). A superseded
// row that shares a large array it did not change (another column changed) is pinned the same way, with an empty
// version, so a change at any later update cannot reach it through the shared array. Rows keep
// their contract: a row never changes. An array taken out of a row is the live value while that row is current,
// so it may change at the next update; code that keeps one across an await keeps the row instead, or a copy.

import { INDEXED_MIN, setAdjust, setHas } from "./set-index.ts";

/** At or above this many elements a set value is changed in place (below it, a copy is as cheap). */
export const IN_PLACE_MIN = INDEXED_MIN;

/** One superseded version of a live array: what `newer` was before the change recorded here. */
interface Version {
  /** The next version, or the live array itself for the newest superseded one. */
  newer: Version | unknown[];
  /** Elements pushed at the end by the change. */
  appended: number;
  /** Elements the change took out, as [original index, element] pairs in ascending index order. */
  removed: [number, unknown][];
  /** How many elements this version held. */
  readonly length: number;
  /** The rebuilt array, once someone asked for it. */
  value: readonly unknown[] | undefined;
}

/** The newest superseded version of each live array, which the next change links to its own. */
const heads = new WeakMap<readonly unknown[], Version>();
/** Superseded rows whose values have not been rebuilt yet, by column, for setSize. */
const pending = new WeakMap<object, Record<string, Version>>();

/**
 * Toggles `toggled` in the live array `live` (present elements leave, absent ones join at the end, in the order
 * of `toggled`; the same result as copying) and makes `oldRow[column]` rebuild the value as it was when read.
 * `toggled` is consumed. Returns whether anything changed.
 */
export function toggleInPlace(
  oldRow: object,
  column: string,
  live: unknown[],
  toggled: Set<unknown>,
): boolean {
  if (toggled.size === 0) {
    // Nothing changes (the diff cancels out), but the new row shares `live` with `oldRow` all the same.
    pinInPlace(oldRow, column, live);
    return false;
  }
  const length = live.length;
  const removed: [number, unknown][] = [];
  let anyRemoved = false;
  for (const a of toggled)
    if (setHas(live, a)) {
      anyRemoved = true;
      break;
    }
  if (anyRemoved) {
    // One compacting pass keeps the order of the rest and records each element taken out with its index.
    let w = 0;
    for (let i = 0; i < length; i++) {
      const e = live[i];
      if (toggled.has(e)) {
        removed.push([i, e]);
        toggled.delete(e);
      } else live[w++] = e;
    }
    live.length = w;
  }
  for (const a of toggled) live.push(a);
  setAdjust(live, toggled, removed);

  const v: Version = { newer: live, appended: toggled.size, removed, length, value: undefined };
  const prev = heads.get(live);
  if (prev) prev.newer = v;
  heads.set(live, v);
  pinTo(oldRow, column, v);
  return true;
}

/**
 * Pins `oldRow[column]`, the live array `live` that the row superseding `oldRow` shares without changing it, to
 * its present value: a later in-place change (at any later update) must not show through the older row. Costs
 * one small record per column and update, shared by every row pinned while the array does not change.
 */
export function pinInPlace(oldRow: object, column: string, live: unknown[]): void {
  let v = heads.get(live);
  // The newest version is "no change" and nothing changed since: it already stands for the present value.
  if (!(v && v.value === undefined && v.newer === live && v.appended === 0 && v.removed.length === 0)) {
    const pin: Version = { newer: live, appended: 0, removed: [], length: live.length, value: undefined };
    if (v) v.newer = pin;
    heads.set(live, pin);
    v = pin;
  }
  pinTo(oldRow, column, v);
}

/** Makes `oldRow[column]` the value of version `v`, rebuilt when first read. */
function pinTo(oldRow: object, column: string, v: Version): void {
  let cols = pending.get(oldRow);
  if (!cols) {
    cols = {};
    pending.set(oldRow, cols);
  }
  cols[column] = v;
  Object.defineProperty(oldRow, column, {
    enumerable: true,
    configurable: true,
    get() {
      const value = rebuild(v);
      Object.defineProperty(oldRow, column, { value, enumerable: true, writable: true, configurable: true });
      const c = pending.get(oldRow);
      if (c) delete c[column];
      return value;
    },
  });
}

/** The number of elements of a set column of `row`, without rebuilding a superseded value to count it. */
export function setSize(row: object, column: string): number {
  const v = pending.get(row)?.[column];
  if (v && v.value === undefined) return v.length;
  const value = (row as Record<string, unknown>)[column];
  return Array.isArray(value) ? value.length : value === null || value === undefined ? 0 : 1;
}

function rebuild(v: Version): readonly unknown[] {
  if (v.value) return v.value;
  const chain: Version[] = [];
  let cur: Version | unknown[] = v;
  let base: readonly unknown[] | undefined;
  while (base === undefined) {
    if (Array.isArray(cur)) base = cur;
    else {
      const c = cur as Version;
      if (c.value) base = c.value;
      else {
        chain.push(c);
        cur = c.newer;
      }
    }
  }
  const out = base.slice();
  for (let i = chain.length - 1; i >= 0; i--) {
    const c = chain[i] as Version;
    out.length -= c.appended;
    for (const [idx, e] of c.removed) out.splice(idx, 0, e);
  }
  v.value = out;
  // Older versions stop at this one; the chain to the live array is no longer needed from here.
  v.newer = out;
  v.appended = 0;
  v.removed = [];
  return out;
}

/** Whether `value` is large enough, and ours to change (the shared empties are frozen), to be changed in place. */
export function changeableInPlace(value: unknown): value is unknown[] {
  return Array.isArray(value) && value.length >= IN_PLACE_MIN && !Object.isFrozen(value);
}
