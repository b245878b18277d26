// Ownership of OVN rows by external_ids: every row this product creates carries an owner tag, and
// everything that deletes or rewrites rows selects by that tag, so rows of others (ZStack's) are never touched.

import type { Condition } from "./transaction.ts";

export type ExternalIds = Readonly<Record<string, string>>;

/** The external_ids key that names the component owning a row. */
export const OWNER_KEY = "zstack.io/owner";

export interface Owner {
  /** Component that created the row, e.g. "zstack-ovnkube-controller". */
  readonly controller: string;
  /** Extra keys that identify the owning object, e.g. { "zstack.io/pod-uid": uid }. */
  readonly keys?: ExternalIds;
}

export function ownerIds(owner: Owner): Record<string, string> {
  return { [OWNER_KEY]: owner.controller, ...owner.keys };
}

/** A where-condition that matches rows carrying all of the owner's ids. */
export function ownedWhere(owner: Owner): Condition {
  return ["external_ids", "includes", ownerIds(owner)];
}

/** Whether a cached row carries all of the owner's ids. */
export function isOwnedBy(row: { readonly external_ids?: ExternalIds }, owner: Owner): boolean {
  const ids = row.external_ids;
  if (!ids) return false;
  for (const [k, v] of Object.entries(ownerIds(owner))) if (ids[k] !== v) return false;
  return true;
}
