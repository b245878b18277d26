// Counting what a server really wrote: the records of a standalone database file, read with `ovsdb-tool show-log`.
// Record 0 is the schema; every committed write transaction appends one record (until the file is compacted).
import { join } from "node:path";
import { runTool } from "./process.ts";
import type { OvsdbServer } from "./server.ts";

export async function writeRecords(server: OvsdbServer, db: string): Promise<number> {
  const out = await runTool("ovsdb-tool", ["show-log", join(server.dir, `${db}.db`)]);
  const records = out.split("\n").filter((l) => l.startsWith("record ")).length;
  return Math.max(0, records - 1);
}
