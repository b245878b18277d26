// Compares a client's cache with `ovsdb-client dump -f json` of the server, column by column,
// in a canonical order-independent form. Returns human-readable differences (empty when equal).

import type { Cache } from "../../../src/ovsdb/cache.ts";
import { canonicalValue, decodeValue, type Value } from "../../../src/ovsdb/datum.ts";
import type { DatabaseSchema } from "../../../src/ovsdb/schema.ts";
import type { DatabaseDump } from "../../rig/ovsdb-server.ts";

export function diffCacheAndDump(
  cache: Cache,
  schema: DatabaseSchema,
  dump: DatabaseDump,
  tables?: readonly string[],
): string[] {
  const out: string[] = [];
  for (const [tname, t] of schema.tables) {
    if (tables && !tables.includes(tname)) continue;
    const serverRows = dump[tname] ?? {};
    const tc = cache.table(tname);
    if (tc.size !== Object.keys(serverRows).length) {
      out.push(`${tname}: cache has ${tc.size} rows, server ${Object.keys(serverRows).length}`);
    }
    for (const [uuid, wire] of Object.entries(serverRows)) {
      const row = tc.get(uuid) as Record<string, Value> | undefined;
      if (!row) {
        out.push(`${tname} ${uuid}: missing from cache`);
        continue;
      }
      for (const [cname, c] of t.columns) {
        if (!(cname in wire)) continue;
        const want = JSON.stringify(canonicalValue(decodeValue(wire[cname], c.type), c.type));
        const got = JSON.stringify(canonicalValue(row[cname] as Value, c.type));
        if (want !== got) out.push(`${tname} ${uuid} .${cname}: cache ${got} server ${want}`);
      }
    }
    if (out.length > 20) break;
  }
  return out;
}
