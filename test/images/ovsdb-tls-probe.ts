// Run inside a test's network namespace by central-tls.test.ts: connects to an OVSDB remote with the
// controller's own client (src/ovsdb), once, and prints one JSON line: {"ok":true,"dbs":[...]} or
// {"ok":false,"error":"..."}. Arguments: REMOTE CA [CERT KEY] (PEM file paths; no CERT/KEY: no client
// certificate at all, which an OVS server must refuse).

import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";

const [remote, ca, cert, key] = process.argv.slice(2);
if (!remote || !ca || (cert === undefined) !== (key === undefined)) {
  process.stderr.write("usage: ovsdb-tls-probe REMOTE CA [CERT KEY]\n");
  process.exit(2);
}
const client = new OvsdbClient<NbTables>({
  remotes: remote,
  model: nbModel,
  tls: { ca, ...(cert && key ? { cert, key } : {}) },
  backoff: { initialMs: 10 },
});
try {
  await client.connect();
  process.stdout.write(`${JSON.stringify({ ok: true, dbs: await client.listDbs() })}\n`);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ ok: false, error: (e as Error).message })}\n`);
} finally {
  await client.close();
}
