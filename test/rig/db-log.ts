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

/**
 * The write records of a standalone database file by the comment each carries (our clients put their component
 * and identity there; "" for a transaction without one).
 */
export async function writeRecordsByComment(server: OvsdbServer, db: string): Promise<Map<string, number>> {
  const out = await runTool("ovsdb-tool", ["show-log", join(server.dir, `${db}.db`)]);
  const by = new Map<string, number>();
  for (const line of out.split("\n")) {
    const m = /^record (\d+):(.*)$/.exec(line);
    if (!m || m[1] === "0") continue;
    const comment = /"((?:[^"\\]|\\.)*)"\s*$/.exec(m[2] ?? "")?.[1] ?? "";
    by.set(comment, (by.get(comment) ?? 0) + 1);
  }
  return by;
}

/** The comment of each write record of a standalone database file, in the order the server committed them. */
export async function writeRecordComments(server: OvsdbServer, db: string): Promise<string[]> {
  const out = await runTool("ovsdb-tool", ["show-log", join(server.dir, `${db}.db`)]);
  const comments: string[] = [];
  for (const line of out.split("\n")) {
    const m = /^record (\d+):(.*)$/.exec(line);
    if (!m || m[1] === "0") continue;
    comments.push(/"((?:[^"\\]|\\.)*)"\s*$/.exec(m[2] ?? "")?.[1] ?? "");
  }
  return comments;
}
