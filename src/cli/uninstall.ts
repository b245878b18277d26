// `zovn uninstall`: connects to a northbound database (ours in Standalone mode, ZStack's in External mode),
// prints every row of ours and every mutation of ours to rows not ours, and removes them in one transaction
// (src/ovn/uninstall.ts decides what). --dry-run prints and changes nothing.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { applyUninstall, describePlan, planUninstall, summarizePlan } from "../ovn/uninstall.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import type { OvsdbError } from "../ovsdb/errors.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { parseRemote } from "../ovsdb/transport.ts";

export const uninstallUsage = `usage: zovn uninstall --nb REMOTES [--dry-run] [--ovn-ssl-ca FILE --ovn-ssl-cert FILE --ovn-ssl-key FILE]
                      [--ovn-ssl-verify-hostname] [--timeout SECONDS]

  Removes every northbound row the plugin owns (external_ids "zstack.io/owner"), and every reference to one of
  them that it inserted into a row it does not own, in one transaction. Stop the controller first.

  --nb REMOTES     comma-separated tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH (all members of a cluster)
  --dry-run        print what would be removed, change nothing
  --timeout        seconds to wait for the database (default 30)`;

const ATTEMPTS = 5;

/** Exit codes: 0 done (or nothing to do), 1 failed, 2 usage, 3 refused (a row not ours would go with ours). */
export async function runUninstallCommand(argv: string[]): Promise<number> {
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (e) {
    process.stderr.write(`zovn uninstall: ${(e as Error).message}\n${uninstallUsage}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${uninstallUsage}\n`);
    return 0;
  }
  const problems: string[] = [];
  const remotes = (values.nb ?? "").split(",").filter((r) => r !== "");
  if (remotes.length === 0) problems.push("--nb is required");
  for (const r of remotes) {
    try {
      parseRemote(r);
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  const ssl = remotes.some((r) => r.startsWith("ssl:"));
  const files = { ca: values["ovn-ssl-ca"], cert: values["ovn-ssl-cert"], key: values["ovn-ssl-key"] };
  if (ssl)
    for (const [k, v] of Object.entries(files)) if (!v) problems.push(`ssl: remotes need --ovn-ssl-${k}`);
  const timeoutSec = Number(values.timeout ?? "30");
  if (!Number.isFinite(timeoutSec) || timeoutSec <= 0)
    problems.push(`--timeout ${values.timeout}: not a positive number`);
  if (problems.length > 0) {
    process.stderr.write(`${problems.map((p) => `zovn uninstall: ${p}`).join("\n")}\n${uninstallUsage}\n`);
    return 2;
  }
  const timeoutMs = timeoutSec * 1000;

  const client = new OvsdbClient<NbTables>({
    remotes,
    model: nbModel,
    connectTimeoutMs: timeoutMs,
    comment: "zovn uninstall",
    ...(ssl
      ? {
          tls: {
            ca: readFileSync(files.ca as string),
            cert: readFileSync(files.cert as string),
            key: readFileSync(files.key as string),
            verifyHostname: values["ovn-ssl-verify-hostname"] === true,
          },
        }
      : {}),
  });
  try {
    await client.connect();
    const plan = planUninstall(client.cache as never, client.schema);
    for (const line of describePlan(plan)) process.stdout.write(`${line}\n`);
    process.stdout.write(`${summarizePlan(plan)}\n`);
    if (plan.refusals.length > 0) {
      process.stderr.write("zovn uninstall: refused, nothing was changed (see the refuse lines)\n");
      return 3;
    }
    if (values["dry-run"]) {
      process.stdout.write("dry run: nothing was changed\n");
      return 0;
    }
    if (plan.empty) {
      process.stdout.write("nothing of ours in this database\n");
      return 0;
    }
    // A lost connection or a leader change during the commit: the plan is made again from the cache the
    // reconnect reloaded (the rows the first attempt removed, if it landed, are no longer in it) and sent again.
    for (let attempt = 1, next = plan; !next.empty; attempt++) {
      const txn = client.transaction();
      applyUninstall(txn as never, next);
      try {
        await txn.commit({ timeoutMs });
        break;
      } catch (e) {
        if (!(e as OvsdbError).retryable || attempt >= ATTEMPTS) throw e;
        process.stderr.write(
          `zovn uninstall: ${(e as Error).message}; planning again (attempt ${attempt + 1})\n`,
        );
        await client.whenReady(timeoutMs);
        next = planUninstall(client.cache as never, client.schema);
        if (next.refusals.length > 0) {
          for (const line of describePlan(next)) process.stderr.write(`${line}\n`);
          return 3;
        }
      }
    }
    // The cache follows the server: once it shows nothing of ours, the removal is confirmed.
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = planUninstall(client.cache as never, client.schema);
      if (left.empty) break;
      if (Date.now() > deadline) {
        for (const line of describePlan(left)) process.stderr.write(`left: ${line}\n`);
        process.stderr.write("zovn uninstall: rows of ours are still there after the transaction\n");
        return 1;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    process.stdout.write("removed; the database holds nothing of ours\n");
    return 0;
  } finally {
    await client.close();
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      nb: { type: "string" },
      "dry-run": { type: "boolean" },
      "ovn-ssl-ca": { type: "string" },
      "ovn-ssl-cert": { type: "string" },
      "ovn-ssl-key": { type: "string" },
      "ovn-ssl-verify-hostname": { type: "boolean" },
      timeout: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}
