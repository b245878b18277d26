// The raw baseline of make bench-policy: the policy rows the controller produced (port groups with their ACLs,
// address sets), written straight to a fresh NB by a bare client in batches, timed until a separate NB reader
// sees them all. The pods' ports are copied first, untimed, so the port groups' (weak) member references hold.
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../src/ovsdb/models/nb.generated.ts";
import { byUuid, type Transaction } from "../../src/ovsdb/transaction.ts";
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
  /** The reader sees the first row → it sees every row, ms (the controller's figure is timed the same way). */
  writeMs: number;
  transactions: number;
}

function columns<R extends { _uuid: string }>(row: R): Omit<R, "_uuid"> {
  const { _uuid, ...rest } = row;
  return rest;
}

export async function rawPolicyBaseline(
  rows: PolicyRows,
  batch: number,
  inFlight: number,
): Promise<RawResult> {
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
    // Built first and sent `inFlight` at a time, as the controller's start-up bulk write does.
    const pending: Transaction<NbTables>[] = [];
    for (let i = 0; i < rows.sets.length; i += batch) {
      const t = writer.transaction();
      for (const s of rows.sets.slice(i, i + batch)) t.insert("Address_Set", columns(s));
      pending.push(t);
    }
    for (let i = 0; i < rows.groups.length; i += batch) {
      const t = writer.transaction();
      let n = 0;
      for (const g of rows.groups.slice(i, i + batch)) {
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
      pending.push(t);
    }
    const transactions = pending.length;
    // Timed as the controller is: from the first row the reader sees to the last.
    watch.mark();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        for (let t = pending.shift(); t; t = pending.shift()) await t.commit();
      }),
    );
    const last = await allSeen;
    return { writeMs: last - (watch.first ?? last), transactions };
  } finally {
    await writer.close();
    await watch.close();
    await nb.stop();
  }
}
