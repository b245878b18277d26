import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { NamedUuid } from "./datum.ts";
import { SchemaError } from "./errors.ts";
import {
  type DatabaseModel,
  defineModel,
  type InsertRow,
  type RowOf,
  type TableMap,
  type TablesOf,
  type UpdateRow,
  type Uuid,
} from "./model.ts";
import { type nb, nbModel, sbModel, type vswitch, vswitchModel } from "./models/index.ts";

describe("generated models", () => {
  test("each model carries its parsed schema and lists every table", () => {
    for (const [model, name, file] of [
      [nbModel, "OVN_Northbound", "/usr/share/ovn/ovn-nb.ovsschema"],
      [sbModel, "OVN_Southbound", "/usr/share/ovn/ovn-sb.ovsschema"],
      [vswitchModel, "Open_vSwitch", "/usr/share/openvswitch/vswitch.ovsschema"],
    ] as const) {
      assert.equal(model.name, name);
      assert.equal(model.schema.name, name);
      assert.deepEqual([...model.tables], [...model.schema.tables.keys()]);
      // The embedded copy is the installed schema; if not, `make models` is due.
      assert.deepEqual(model.schema.raw, JSON.parse(readFileSync(file, "utf8")));
    }
  });

  test("the NB model knows Logical_Switch_Port and its columns", () => {
    const lsp = nbModel.schema.tables.get("Logical_Switch_Port");
    assert.ok(lsp);
    assert.equal(lsp.columns.get("addresses")?.type.kind, "set");
    assert.ok(nbModel.tables.includes("Logical_Switch"));
    assert.ok(sbModel.tables.includes("Port_Binding"));
    assert.ok(vswitchModel.tables.includes("Bridge"));
  });

  test("a model is frozen", () => {
    assert.ok(Object.isFrozen(nbModel));
    assert.ok(Object.isFrozen(nbModel.tables));
  });

  test("defining a model from a malformed schema is a SchemaError", () => {
    assert.throws(() => defineModel({ name: "X", tables: { T: {} } }), SchemaError);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Compile-time checks: `tsc --noEmit` fails if an @ts-expect-error line compiles or another line does not.
// The function is never called.

type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;

function consume(..._values: unknown[]): void {}

/** Mirrors how a transaction API takes a table name and a row for it. */
function insertInto<T extends TableMap, K extends keyof T & string>(
  _model: DatabaseModel<T>,
  _table: K,
  _row: InsertRow<T[K]>,
): void {}

export function compileTimeChecks(): void {
  const port = new NamedUuid("port");

  // uuid columns, uuid sets and uuid map values take a NamedUuid or a UUID string.
  const ls: nb.LogicalSwitchInsert = {
    name: "ls0",
    ports: ["2b8e4a0c-6f0e-4f57-9a0a-6a3e1d2c3b4a", port],
    external_ids: { "k8s.ovn.org/network": "default" },
  };
  const lsp: InsertRow<nb.LogicalSwitchPort> = {
    name: "p0",
    addresses: ["0a:58:0a:80:00:05 10.128.0.5"],
    tag: 100,
    dhcpv4_options: new NamedUuid("dhcp"),
    ha_chassis_group: null,
    type: "",
  };
  const bridge: vswitch.BridgeInsert = {
    name: "br-int",
    flow_tables: { "0": port },
    ports: [port],
    fail_mode: "secure",
  };
  const qos: nb.QoSInsert = { bandwidth: { rate: 1000, burst: 100 }, direction: "to-lport" };
  const update: UpdateRow<nb.LogicalSwitchPort> = { tag: null, addresses: [], ha_chassis_group: port };
  insertInto(nbModel, "Logical_Switch", { ports: [port] });
  insertInto(vswitchModel, "Bridge", { name: "br-ex", datapath_type: "netdev" });

  // @ts-expect-error a plain string column does not take a NamedUuid
  const badName: nb.LogicalSwitchPortInsert = { name: port };
  // @ts-expect-error nor does a plain string set
  const badAddresses: nb.LogicalSwitchPortInsert = { addresses: [port] };
  // @ts-expect-error nor a string-valued map
  const badIds: nb.LogicalSwitchPortInsert = { external_ids: { a: port } };
  // @ts-expect-error a string column does not take a number
  const badType: nb.LogicalSwitchPortInsert = { name: 5 };
  // @ts-expect-error an optional integer column does not take a string
  const badTag: nb.LogicalSwitchPortInsert = { tag: "5" };
  // @ts-expect-error a set column takes an array, not a single element
  const badSet: nb.LogicalSwitchInsert = { ports: port };
  // @ts-expect-error an enumerated column takes only its literals
  const badEnum: nb.ACLInsert = { action: "permit" };
  // @ts-expect-error an enumerated map key takes only its literals
  const badKey: nb.QoSInsert = { bandwidth: { speed: 1 } };
  // @ts-expect-error _uuid is chosen by the server
  const badUuid: nb.LogicalSwitchInsert = { _uuid: "2b8e4a0c-6f0e-4f57-9a0a-6a3e1d2c3b4a" };
  // @ts-expect-error unknown columns are rejected
  const badColumn: nb.LogicalSwitchInsert = { nmae: "ls0" };
  // @ts-expect-error updates follow the same rules
  const badUpdate: UpdateRow<nb.LogicalSwitchPort> = { name: port };
  // @ts-expect-error the row must fit the named table
  insertInto(nbModel, "Logical_Switch", { addresses: [] });
  // @ts-expect-error the table must exist in the model
  insertInto(nbModel, "Bridge", {});

  // Reading: uuid columns are plain strings, and any string is a Uuid.
  const row = {} as nb.LogicalSwitch;
  const first: string | undefined = row.ports[0];
  const id: string = row._uuid;
  const asUuid: Uuid = "2b8e4a0c-6f0e-4f57-9a0a-6a3e1d2c3b4a";
  const optional: string | null = ({} as nb.LogicalSwitchPort).dhcpv4_options;
  const rate: number | undefined = ({} as nb.QoS).bandwidth.rate;

  const rowOf: Equal<RowOf<nb.NbTables, "Logical_Switch_Port">, nb.LogicalSwitchPort> = true;
  const tablesOf: Equal<TablesOf<typeof nbModel>, nb.NbTables> = true;
  const lspColumns: Equal<
    keyof nb.LogicalSwitchPort,
    | "_uuid"
    | "addresses"
    | "dhcpv4_options"
    | "dhcpv6_options"
    | "dynamic_addresses"
    | "enabled"
    | "external_ids"
    | "ha_chassis_group"
    | "mirror_rules"
    | "name"
    | "options"
    | "parent_name"
    | "port_security"
    | "tag"
    | "tag_request"
    | "type"
    | "up"
  > = true;
  const sflow: Equal<vswitch.VswitchTables["sFlow"], vswitch.SFlow> = true;
  // @ts-expect-error "Nope" is not a table of the model
  const table: (typeof nbModel.tables)[number] = "Nope";

  consume(
    ls,
    lsp,
    bridge,
    qos,
    update,
    badName,
    badAddresses,
    badIds,
    badType,
    badTag,
    badSet,
    badEnum,
    badKey,
  );
  consume(badUuid, badColumn, badUpdate, first, id, asUuid, optional, rate, rowOf, tablesOf, lspColumns);
  consume(sflow, table);
}
