import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { SchemaError } from "./errors.ts";
import {
  type ColumnSchema,
  type DatabaseSchema,
  intersectSchema,
  parseSchema,
  strongReferrers,
} from "./schema.ts";

const SCHEMA_FILES = {
  nb: "/usr/share/ovn/ovn-nb.ovsschema",
  sb: "/usr/share/ovn/ovn-sb.ovsschema",
  vswitch: "/usr/share/openvswitch/vswitch.ovsschema",
};

function load(file: string): DatabaseSchema {
  return parseSchema(JSON.parse(readFileSync(file, "utf8")));
}

const nb = load(SCHEMA_FILES.nb);
const sb = load(SCHEMA_FILES.sb);
const vswitch = load(SCHEMA_FILES.vswitch);

function column(s: DatabaseSchema, table: string, name: string): ColumnSchema {
  const c = s.tables.get(table)?.columns.get(name);
  assert.ok(c, `${s.name} has ${table}.${name}`);
  return c;
}

/** A one-table schema around one column type, for the malformed-input cases. */
function withColumnType(type: unknown): unknown {
  return { name: "Test", version: "1.0.0", tables: { T: { columns: { c: { type } } } } };
}

describe("parsing the installed Debian schemas", () => {
  test("reads the name, version, checksum and every table of all three databases", () => {
    for (const [s, file] of [
      [nb, SCHEMA_FILES.nb],
      [sb, SCHEMA_FILES.sb],
      [vswitch, SCHEMA_FILES.vswitch],
    ] as const) {
      const raw = JSON.parse(readFileSync(file, "utf8"));
      assert.equal(s.name, raw.name);
      assert.equal(s.version, raw.version);
      assert.equal(s.cksum, raw.cksum);
      assert.deepEqual([...s.tables.keys()], Object.keys(raw.tables));
      for (const [tname, t] of s.tables) {
        assert.deepEqual([...t.columns.keys()], Object.keys(raw.tables[tname].columns), tname);
      }
      assert.deepEqual(s.raw, raw);
    }
    assert.equal(nb.name, "OVN_Northbound");
    assert.equal(sb.name, "OVN_Southbound");
    assert.equal(vswitch.name, "Open_vSwitch");
  });

  test("a port's addresses are an unbounded string set and its type a plain string", () => {
    const addresses = column(nb, "Logical_Switch_Port", "addresses").type;
    assert.equal(addresses.kind, "set");
    assert.equal(addresses.key.type, "string");
    assert.equal(addresses.min, 0);
    assert.equal(addresses.max, Number.POSITIVE_INFINITY);
    const type = column(nb, "Logical_Switch_Port", "type").type;
    assert.equal(type.kind, "scalar");
    assert.deepEqual(type.key, { type: "string" });
  });

  test("a port's tag is an optional integer between 1 and 4095", () => {
    const tag = column(nb, "Logical_Switch_Port", "tag").type;
    assert.equal(tag.kind, "optional");
    assert.deepEqual(tag.key, { type: "integer", minInteger: 1, maxInteger: 4095 });
    assert.equal(tag.min, 0);
    assert.equal(tag.max, 1);
  });

  test("external_ids is a string-to-string map", () => {
    const ids = column(nb, "Logical_Switch_Port", "external_ids").type;
    assert.equal(ids.kind, "map");
    assert.equal(ids.key.type, "string");
    assert.equal(ids.value?.type, "string");
  });

  test("a bridge's flow_tables maps integer keys 0..254 to strong references to Flow_Table", () => {
    const ft = column(vswitch, "Bridge", "flow_tables").type;
    assert.equal(ft.kind, "map");
    assert.deepEqual(ft.key, { type: "integer", minInteger: 0, maxInteger: 254 });
    assert.deepEqual(ft.value, { type: "uuid", refTable: "Flow_Table", refType: "strong" });
  });

  test("enumerations, reference strength, bounded sets, immutability and ephemerality are kept", () => {
    assert.deepEqual(column(nb, "ACL", "action").type.key.enum, [
      "allow",
      "allow-related",
      "allow-stateless",
      "drop",
      "reject",
    ]);
    assert.deepEqual(column(nb, "QoS", "action").type.key.enum, ["dscp"]);
    const dhcp = column(nb, "Logical_Switch_Port", "dhcpv4_options").type;
    assert.equal(dhcp.kind, "optional");
    assert.equal(dhcp.key.refType, "weak");
    assert.equal(dhcp.key.refTable, "DHCP_Options");
    const bands = column(nb, "Meter", "bands").type;
    assert.equal(bands.kind, "set");
    assert.equal(bands.min, 1);
    assert.equal(bands.key.refType, "strong");
    const trunks = column(vswitch, "Port", "trunks").type;
    assert.equal(trunks.kind, "set");
    assert.equal(trunks.max, 4096);
    assert.equal(column(nb, "ACL", "name").type.key.maxLength, 63);
    assert.equal(column(vswitch, "Bridge", "name").mutable, false);
    assert.equal(column(vswitch, "Bridge", "ports").mutable, true);
    assert.equal(column(nb, "Connection", "is_connected").ephemeral, true);
    assert.equal(column(nb, "Connection", "target").ephemeral, false);
  });

  test("root flags, indexes and row limits come from the tables", () => {
    assert.equal(nb.tables.get("Logical_Switch")?.isRoot, true);
    assert.equal(nb.tables.get("Logical_Switch_Port")?.isRoot, false);
    assert.equal(nb.tables.get("ACL")?.isRoot, false);
    assert.deepEqual(nb.tables.get("Logical_Switch_Port")?.indexes, [["name"]]);
    assert.deepEqual(nb.tables.get("Logical_Switch")?.indexes, []);
    assert.equal(nb.tables.get("NB_Global")?.maxRows, 1);
    assert.equal(nb.tables.get("Logical_Switch")?.maxRows, undefined);
    assert.equal(vswitch.tables.get("Bridge")?.isRoot, false);
    assert.equal(vswitch.tables.get("Open_vSwitch")?.isRoot, true);
    assert.deepEqual(vswitch.tables.get("Flow_Sample_Collector_Set")?.indexes, [["id", "bridge"]]);
  });

  test("strong referrers of a table are the columns that keep its rows alive", () => {
    const refs = strongReferrers(nb, "Logical_Switch_Port");
    assert.deepEqual(refs, [["Logical_Switch", "ports"]]);
    // A weak reference does not keep DHCP_Options rows alive.
    assert.deepEqual(strongReferrers(nb, "DHCP_Options"), []);
  });
});

describe("schema rules from RFC 7047", () => {
  test("a schema that marks no table as root treats every table as root", () => {
    const s = parseSchema({
      name: "Old",
      version: "1.0.0",
      tables: { A: { columns: { x: { type: "integer" } } }, B: { columns: {} } },
    });
    assert.equal(s.tables.get("A")?.isRoot, true);
    assert.equal(s.tables.get("B")?.isRoot, true);
  });

  test("a single-atom enum and a missing version are accepted", () => {
    const s = parseSchema(withColumnType({ key: { type: "string", enum: "only" } }));
    assert.deepEqual(s.tables.get("T")?.columns.get("c")?.type.key.enum, ["only"]);
    assert.equal(s.version, "1.0.0");
    assert.equal(s.cksum, undefined);
  });

  test("min and max select the column kind", () => {
    const kind = (type: unknown) =>
      parseSchema(withColumnType(type)).tables.get("T")?.columns.get("c")?.type.kind;
    assert.equal(kind("string"), "scalar");
    assert.equal(kind({ key: "string" }), "scalar");
    assert.equal(kind({ key: "string", min: 0 }), "optional");
    assert.equal(kind({ key: "string", min: 0, max: 2 }), "set");
    assert.equal(kind({ key: "string", min: 1, max: "unlimited" }), "set");
    assert.equal(kind({ key: "string", value: "integer", min: 1, max: 1 }), "map");
  });
});

describe("malformed schemas", () => {
  const cases: [string, unknown, RegExp][] = [
    ["not an object", [], /^schema: not a JSON object/],
    ["no name", { version: "1.0.0", tables: {} }, /missing or invalid name/],
    ["a name that is not an identifier", { name: "bad-name", tables: {} }, /missing or invalid name/],
    ["no tables", { name: "X" }, /schema X: missing tables/],
    ["a table without columns", { name: "X", tables: { T: {} } }, /schema X: table T has no columns/],
    [
      "a column that is not an object",
      { name: "X", tables: { T: { columns: { c: "string" } } } },
      /schema X: T\.c is not an object/,
    ],
    ["an unknown atomic type", withColumnType("text"), /^T\.c: unknown atomic type "text"/],
    ["an unknown key type", withColumnType({ key: "float" }), /^T\.c\.key: unknown atomic type "float"/],
    [
      "a value type without a type",
      withColumnType({ key: "string", value: {} }),
      /^T\.c\.value: a base type/,
    ],
    ["a column type that is a number", withColumnType(7), /^T\.c: a column type must be/],
    ["min 2", withColumnType({ key: "string", min: 2, max: 3 }), /^T\.c: min must be 0 or 1/],
    ["max 0", withColumnType({ key: "string", min: 0, max: 0 }), /^T\.c: max must be/],
    [
      "a max that is not a number",
      withColumnType({ key: "string", min: 1, max: "lots" }),
      /^T\.c: max must be/,
    ],
    [
      "a reference to an unknown table",
      withColumnType({ key: { type: "uuid", refTable: "Nowhere" } }),
      /schema Test: T\.c refers to unknown table Nowhere/,
    ],
  ];
  for (const [what, json, message] of cases) {
    test(`${what} is a SchemaError naming the place`, () => {
      assert.throws(
        () => parseSchema(json),
        (e: unknown) => e instanceof SchemaError && message.test(e.message),
      );
    });
  }
});

describe("intersectSchema", () => {
  const client = parseSchema({
    name: "Db",
    version: "2.0.0",
    tables: {
      Kept: {
        columns: {
          both: { type: { key: "string", min: 0, max: "unlimited" } },
          newInClient: { type: "string" },
        },
        isRoot: true,
      },
      OnlyInClient: { columns: { x: { type: "integer" } }, isRoot: true },
    },
  });
  const server = parseSchema({
    name: "Db",
    version: "1.0.0",
    tables: {
      Kept: {
        columns: { both: { type: { key: "string", min: 0, max: 4 } }, onlyOnServer: { type: "boolean" } },
        isRoot: true,
        indexes: [["both"]],
      },
      OnlyOnServer: { columns: { y: { type: "integer" } }, isRoot: true },
    },
  });
  const merged = intersectSchema(client, server);

  test("drops a table the server lacks and ignores one the client does not model", () => {
    assert.deepEqual([...merged.tables.keys()], ["Kept"]);
  });

  test("drops a column the server lacks and ignores one the client does not model", () => {
    assert.deepEqual([...(merged.tables.get("Kept")?.columns.keys() ?? [])], ["both"]);
  });

  test("the server's column types, table facts and version win", () => {
    assert.equal(merged.tables.get("Kept")?.columns.get("both")?.type.max, 4);
    assert.deepEqual(merged.tables.get("Kept")?.indexes, [["both"]]);
    assert.equal(merged.version, "1.0.0");
  });

  test("intersecting a real schema with itself changes nothing", () => {
    const self = intersectSchema(nb, nb);
    assert.deepEqual([...self.tables.keys()], [...nb.tables.keys()]);
    for (const [name, t] of nb.tables) assert.deepEqual(self.tables.get(name)?.columns, t.columns);
  });
});
