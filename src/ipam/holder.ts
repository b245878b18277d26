// Who holds an address. Every port on the switch counts, ours or not; only ours are ever released.

export interface Holder {
  /** Identifies the holder: a pod UID or LSP name for our ports, the LSP name for a foreign port. */
  readonly owner: string;
  /** A port this controller does not manage (e.g. a ZStack VM on an External-mode switch). */
  readonly foreign: boolean;
}

export function sameHolder(a: Holder, b: Holder): boolean {
  return a.owner === b.owner && a.foreign === b.foreign;
}

export function describeHolder(h: Holder): string {
  return h.foreign ? `foreign port ${JSON.stringify(h.owner)}` : JSON.stringify(h.owner);
}

export function describeHolders(hs: readonly Holder[]): string {
  return hs.map(describeHolder).join(" and ");
}
