// Row UUIDs chosen by the client: the same (namespace, name) always gives the same UUID, so an insert carrying it
// (Transaction.insert's `uuid` option) can be applied at most once. A retry after a lost reply is refused by the
// server with "duplicate uuid" instead of adding a second row, at the cost of one hash lookup on the server
// rather than a `wait` that scans the table.

import { createHash } from "node:crypto";

/**
 * A UUID in the RFC 9562 version 8 layout (custom: here SHA-256 of namespace and name), lower-case.
 * Different namespaces never share a UUID for the same name.
 */
export function stableUuid(namespace: string, name: string): string {
  const h = createHash("sha256").update(namespace).update("\0").update(name).digest();
  h[6] = ((h[6] as number) & 0x0f) | 0x80;
  h[8] = ((h[8] as number) & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
