// The part of ovsdb-server's built-in _Server database (ovsdb-server(5)) that a client reads to judge a member:
// whether it serves our database, whether it is clustered, connected, the leader, and how current it is.

import { Cache } from "./cache.ts";
import type { RowBase } from "./model.ts";
import { parseSchema } from "./schema.ts";

export interface ServerDatabaseRow extends RowBase {
  readonly name: string;
  readonly model: string;
  readonly connected: boolean;
  readonly leader: boolean;
  readonly index: number | null;
}

export const SERVER_SCHEMA = parseSchema({
  name: "_Server",
  version: "1.2.0",
  tables: {
    Database: {
      isRoot: true,
      columns: {
        name: { type: "string" },
        model: { type: { key: { type: "string", enum: ["set", ["standalone", "clustered", "relay"]] } } },
        connected: { type: "boolean" },
        leader: { type: "boolean" },
        index: { type: { key: { type: "integer" }, min: 0, max: 1 } },
      },
    },
  },
});

/**
 * The columns monitored: those above. Not `schema`, the whole database schema as text: the client reads the
 * schema once per connection with get_schema.
 */
export const SERVER_MONITOR_COLUMNS: readonly string[] = [
  ...(SERVER_SCHEMA.tables.get("Database")?.columns.keys() ?? []),
];

export function newServerCache(): Cache<{ Database: ServerDatabaseRow }> {
  return new Cache<{ Database: ServerDatabaseRow }>(SERVER_SCHEMA);
}
