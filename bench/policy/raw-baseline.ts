// The raw baseline of make bench-policy: the policy rows the controller produced (port groups with their ACLs,
// address sets), written straight to a fresh NB by a bare client in batches, timed until a separate NB reader
// sees them all. The pods' ports are copied first, untimed, so the port groups' (weak) member references hold.
import { performance } from "node:perf_hooks";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../src/ovsdb/transaction.ts";
import { SCHEMAS, startOvsdbServer } from "../../test/rig/ovsdb-server.ts";
import { PolicyWatch } from "./nb-watch.ts";

type Row<T extends keyof NbTables> = NbTables[T];

export interface PolicyRows {
  ports: Row<"Logical_Switch_Port">[];
  groups: Row<"Port_Group">[];
  acls: Row<"ACL">[];
  sets: Row<"Address_Set">[];
}

export interface RawResult {
  /** First transaction sent → the reader sees every row, ms. */
  writeMs: number;
  transactions: number;
}

function columns<R extends { _uuid: string }>(row: R): Omit<R, "_uuid"> {
  const { _uuid, ...rest } = row;
  return rest;
}

export async function rawPolicyBaseline(rows: PolicyRows, batch: number): Promise<RawResult> {
  const nb = await startOvsdbServer({ schemas: [SCHEMAS.nb] });
  const watch = new PolicyWatch(nb.unix);
  const writer = new OvsdbClient<NbTables>({ remotes: nb.unix, model: nbModel, monitor: {} });
  try {
    await watch.start();
    await writer.connect();
    // Untimed: one switch with every port, so the port groups' member uuids can be mapped.
    const sw = (
      await writer.transact((t) => {
        t.insert("Logical_Switch", { name: "bench" }, "sw");
      })
    ).uuids.get("sw") as string;
    const portUuid = new Map<string, string>();
    for (let i = 0; i < rows.ports.length; i += 500) {
      const chunk = rows.ports.slice(i, i + 500);
      const res = await writer.transact((t) => {
        const refs = chunk.map((p, j) =>
          t.insert("Logical_Switch_Port", { ...columns(p), dynamic_addresses: null }, `p${j}`),
        );
        t.mutate("Logical_Switch", byUuid(sw), [["ports", "insert", refs]]);
      });
      chunk.forEach((p, j) => {
        portUuid.set(p._uuid, res.uuids.get(`p${j}`) as string);
      });
    }

    const aclByUuid = new Map(rows.acls.map((a) => [a._uuid, a]));
    const expect = { groups: rows.groups.length, acls: rows.acls.length, sets: rows.sets.length };
    const allSeen = watch.when(
      "every raw row",
      () =>
        watch.count("Port_Group") >= expect.groups &&
        watch.count("ACL") >= expect.acls &&
        watch.count("Address_Set") >= expect.sets,
      600_000,
    );
    let transactions = 0;
    const t0 = performance.now();
    for (let i = 0; i < rows.sets.length; i += batch) {
      const chunk = rows.sets.slice(i, i + batch);
      await writer.transact((t) => {
        for (const s of chunk) t.insert("Address_Set", columns(s));
      });
      transactions++;
    }
    for (let i = 0; i < rows.groups.length; i += batch) {
      const chunk = rows.groups.slice(i, i + batch);
      await writer.transact((t) => {
        let n = 0;
        for (const g of chunk) {
          const acls = g.acls.flatMap((u) => {
            const a = aclByUuid.get(u);
            return a ? [t.insert("ACL", columns(a), `a${n++}`)] : [];
          });
          t.insert("Port_Group", {
            ...columns(g),
            ports: g.ports.flatMap((u) => portUuid.get(u) ?? []),
            acls,
          });
        }
      });
      transactions++;
    }
    return { writeMs: (await allSeen) - t0, transactions };
  } finally {
    await writer.close();
    await watch.close();
    await nb.stop();
  }
}
