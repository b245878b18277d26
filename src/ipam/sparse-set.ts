// Taken offsets of a huge block as disjoint, non-touching intervals in a treap (a search tree balanced by
// random priorities). Because touching intervals are always joined, the lowest free offset is either 0 or
// just past the first interval, so allocation costs one walk down the left spine: O(log n) in the number
// of intervals, whatever the size of the block.

import type { OccupancySet } from "./occupancy.ts";

interface Node {
  start: bigint;
  end: bigint;
  priority: number;
  left: Node | undefined;
  right: Node | undefined;
}

export class SparseSet implements OccupancySet {
  readonly size: bigint;
  #root: Node | undefined;
  #count = 0n;
  // A fixed-seed xorshift keeps the tree shape, and so every test run, reproducible.
  #seed = 0x2545f491;

  constructor(size: bigint) {
    if (size < 0n) throw new RangeError(`set size ${size} is negative`);
    this.size = size;
  }

  get count(): bigint {
    return this.#count;
  }

  has(offset: bigint): boolean {
    let n = this.#root;
    while (n) {
      if (offset < n.start) n = n.left;
      else if (offset > n.end) n = n.right;
      else return true;
    }
    return false;
  }

  add(offset: bigint): boolean {
    this.#check(offset);
    if (this.has(offset)) return false;
    this.#insert(offset, offset);
    return true;
  }

  addRange(first: bigint, last: bigint): void {
    if (first > last) return;
    this.#check(first);
    this.#check(last);
    this.#insert(first, last);
  }

  delete(offset: bigint): boolean {
    const [left, right] = split(this.#root, offset + 1n);
    const holder = rightmost(left);
    if (!holder || holder.end < offset) {
      this.#root = merge(left, right);
      return false;
    }
    let rest = removeRightmost(left);
    if (holder.start < offset) rest = merge(rest, this.#node(holder.start, offset - 1n));
    if (offset < holder.end) rest = merge(rest, this.#node(offset + 1n, holder.end));
    this.#root = merge(rest, right);
    this.#count--;
    return true;
  }

  lowestFree(): bigint | undefined {
    if (this.size === 0n) return undefined;
    const first = leftmost(this.#root);
    if (!first || first.start > 0n) return 0n;
    return first.end + 1n < this.size ? first.end + 1n : undefined;
  }

  /** The taken intervals in order, for tests and diagnostics. */
  *intervals(): Generator<readonly [bigint, bigint]> {
    const stack: Node[] = [];
    let n = this.#root;
    while (n || stack.length > 0) {
      while (n) {
        stack.push(n);
        n = n.left;
      }
      const top = stack.pop()!;
      yield [top.start, top.end];
      n = top.right;
    }
  }

  #check(offset: bigint): void {
    if (offset < 0n || offset >= this.size) {
      throw new RangeError(`offset ${offset} is outside the set of ${this.size}`);
    }
  }

  /** Adds [first, last], absorbing every interval it overlaps or touches. */
  #insert(first: bigint, last: bigint): void {
    let start = first;
    let end = last;
    let alreadyTaken = 0n;
    let [left, right] = split(this.#root, first);
    const before = rightmost(left);
    if (before && before.end + 1n >= first) {
      left = removeRightmost(left);
      alreadyTaken += overlap(before, first, last);
      start = before.start;
      if (before.end > end) end = before.end;
    }
    const [absorbed, after] = split(right, last + 2n);
    for (const n of inOrder(absorbed)) {
      alreadyTaken += overlap(n, first, last);
      if (n.end > end) end = n.end;
    }
    this.#root = merge(merge(left, this.#node(start, end)), after);
    this.#count += last - first + 1n - alreadyTaken;
  }

  #node(start: bigint, end: bigint): Node {
    let x = this.#seed;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#seed = x >>> 0;
    return { start, end, priority: this.#seed, left: undefined, right: undefined };
  }
}

function overlap(n: Node, first: bigint, last: bigint): bigint {
  const lo = n.start > first ? n.start : first;
  const hi = n.end < last ? n.end : last;
  return hi >= lo ? hi - lo + 1n : 0n;
}

/** Splits into intervals starting before `key` and those starting at or after it. */
function split(n: Node | undefined, key: bigint): [Node | undefined, Node | undefined] {
  if (!n) return [undefined, undefined];
  if (n.start < key) {
    const [l, r] = split(n.right, key);
    n.right = l;
    return [n, r];
  }
  const [l, r] = split(n.left, key);
  n.left = r;
  return [l, n];
}

/** Joins two trees where every interval of `a` lies before every interval of `b`. */
function merge(a: Node | undefined, b: Node | undefined): Node | undefined {
  if (!a) return b;
  if (!b) return a;
  if (a.priority > b.priority) {
    a.right = merge(a.right, b);
    return a;
  }
  b.left = merge(a, b.left);
  return b;
}

function leftmost(n: Node | undefined): Node | undefined {
  while (n?.left) n = n.left;
  return n;
}

function rightmost(n: Node | undefined): Node | undefined {
  while (n?.right) n = n.right;
  return n;
}

function removeRightmost(n: Node | undefined): Node | undefined {
  if (!n) return undefined;
  if (!n.right) return n.left;
  n.right = removeRightmost(n.right);
  return n;
}

function* inOrder(n: Node | undefined): Generator<Node> {
  if (!n) return;
  yield* inOrder(n.left);
  yield n;
  yield* inOrder(n.right);
}
