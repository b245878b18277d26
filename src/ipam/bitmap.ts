// A bitmap with summary levels: a bit in level k+1 is set when the 32-bit word below it in level k is full.
// Finding the lowest free bit walks down from the single top word, so it costs one word per level
// (four levels for 2^20 bits) instead of a scan over the whole map.

import type { OccupancySet } from "./occupancy.ts";

const FULL = 0xffffffff;

export class Bitmap implements OccupancySet {
  readonly size: bigint;
  readonly #bits: number;
  /** levels[0] holds one bit per offset; the last level is a single word. */
  readonly #levels: Uint32Array[] = [];
  #count = 0;

  constructor(size: bigint) {
    if (size < 0n || size > 1n << 32n) throw new RangeError(`bitmap size ${size} is out of range`);
    this.size = size;
    this.#bits = Number(size);
    let bits = this.#bits;
    for (;;) {
      const words = Math.max(1, Math.ceil(bits / 32));
      const level = new Uint32Array(words);
      // Bits past the end are set so a search never lands on them.
      const used = bits - (words - 1) * 32;
      if (used < 32) level[words - 1] = (FULL << used) >>> 0;
      this.#levels.push(level);
      if (words === 1) break;
      bits = words;
    }
    for (let k = 0; k + 1 < this.#levels.length; k++) {
      const level = this.#levels[k]!;
      const last = level.length - 1;
      if (level[last] === FULL) this.#setBit(k + 1, last);
    }
  }

  get count(): bigint {
    return BigInt(this.#count);
  }

  has(offset: bigint): boolean {
    const i = this.#index(offset);
    if (i === undefined) return false;
    return ((this.#levels[0]![i >>> 5]! >>> (i & 31)) & 1) === 1;
  }

  add(offset: bigint): boolean {
    const i = this.#index(offset);
    if (i === undefined) throw new RangeError(`offset ${offset} is outside the bitmap of ${this.size}`);
    if (((this.#levels[0]![i >>> 5]! >>> (i & 31)) & 1) === 1) return false;
    this.#setBit(0, i);
    this.#count++;
    return true;
  }

  addRange(first: bigint, last: bigint): void {
    for (let o = first; o <= last; o++) this.add(o);
  }

  delete(offset: bigint): boolean {
    const i = this.#index(offset);
    if (i === undefined) return false;
    if (((this.#levels[0]![i >>> 5]! >>> (i & 31)) & 1) === 0) return false;
    this.#clearBit(0, i);
    this.#count--;
    return true;
  }

  lowestFree(): bigint | undefined {
    const top = this.#levels.length - 1;
    if (this.#levels[top]![0] === FULL) return undefined;
    let index = 0;
    for (let k = top; k >= 0; k--) {
      const word = this.#levels[k]![index]!;
      index = index * 32 + lowestZeroBit(word);
    }
    return BigInt(index);
  }

  #index(offset: bigint): number | undefined {
    return offset >= 0n && offset < this.size ? Number(offset) : undefined;
  }

  #setBit(level: number, index: number): void {
    for (let k = level, i = index; k < this.#levels.length; k++, i >>>= 5) {
      const words = this.#levels[k]!;
      const w = i >>> 5;
      words[w] = (words[w]! | (1 << (i & 31))) >>> 0;
      if (words[w] !== FULL) return;
    }
  }

  #clearBit(level: number, index: number): void {
    for (let k = level, i = index; k < this.#levels.length; k++, i >>>= 5) {
      const words = this.#levels[k]!;
      const w = i >>> 5;
      const wasFull = words[w] === FULL;
      words[w] = (words[w]! & ~(1 << (i & 31))) >>> 0;
      if (!wasFull) return;
    }
  }
}

function lowestZeroBit(word: number): number {
  const isolated = ~word & (word + 1);
  return 31 - Math.clz32(isolated);
}
