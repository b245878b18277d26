// The live taken set of a foreign switch against a real NB: a second plain client plays ZStack and writes VM
// ports in every address form, exclude_ips, router ports, NAT and DHCP options; after every write the view must
// equal a recomputation from a fresh `ovsdb-client dump`, done here by separate code that reads the wire JSON.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp, type IpAddress, parseIp } from "../../../src/ipam/address.ts";
import { cidrContains, cidrLast, formatCidr, parseCidr } from "../../../src/ipam/cidr.ts";
import { formatRange } from "../../../src/ipam/range.ts";
import { ForeignSwitchHoldings, type HoldingsChange } from "../../../src/ovn/foreign-switch-holdings.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { type DatabaseDump, type OvsdbServer, SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";

const DB = "OVN_Northbound";
const CIDR4 = parseCidr("10.50.0.0/24");
const CIDR6 = parseCidr("fd50::/64");
const CIDRS = [CIDR4, CIDR6];

// ---- the independent recomputation, from the dump's wire JSON ----

const setOf = (v: unknown): unknown[] =>
  Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v];
const mapOf = (v: unknown): Record<string, string> =>
  Object.fromEntries(Array.isArray(v) && v[0] === "map" ? (v[1] as [string, string][]) : []);
const uuidsOf = (v: unknown): string[] => setOf(v).map((u) => (u as [string, string])[1]);
const strings = (v: unknown): string[] => setOf(v) as string[];

function asAddress(word: string): IpAddress | undefined {
  const m = /^([0-9a-fA-F:.]+)(?:\/(\d+))?$/.exec(word);
  if (!m || /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(word)) return undefined;
  try {
    return parseIp(m[1] as string);
  } catch {
    return undefined;
  }
}

function expected(dump: DatabaseDump, switchUuid: string): string[] {
  const out: string[] = [];
  const inside = (ip: IpAddress) => CIDRS.some((c) => cidrContains(c, ip));
  const hold = (ip: IpAddress | undefined, table: string, uuid: string, name: string, source: string) => {
    if (ip && inside(ip)) out.push(`${formatIp(ip)} ${table} ${uuid} ${name} ${source}`);
  };
  const words = (texts: string[], table: string, uuid: string, name: string, source: string) => {
    for (const t of texts) for (const w of t.split(" ")) hold(asAddress(w), table, uuid, name, source);
  };
  for (const c of CIDRS) {
    out.push(`${formatIp({ family: c.family, value: c.network })} subnet - ${formatCidr(c)} first`);
    out.push(`${formatIp(cidrLast(c))} subnet - ${formatCidr(c)} last`);
  }
  const ls = dump.Logical_Switch?.[switchUuid];
  // DHCP options count when they name the subnet's CIDR (with or without the switch) or a port uses them.
  const dhcpOfPorts = new Set(
    uuidsOf(ls?.ports).flatMap((pu) => {
      const p = dump.Logical_Switch_Port?.[pu];
      return p ? [...uuidsOf(p.dhcpv4_options), ...uuidsOf(p.dhcpv6_options)] : [];
    }),
  );
  for (const [u, d] of Object.entries(dump.DHCP_Options ?? {})) {
    if (d.cidr !== formatCidr(CIDR4) && d.cidr !== formatCidr(CIDR6) && !dhcpOfPorts.has(u)) continue;
    const o = mapOf(d.options);
    if (o.server_id) hold(asAddress(o.server_id), "DHCP_Options", u, d.cidr as string, "options:server_id");
    if (o.router) hold(asAddress(o.router), "DHCP_Options", u, d.cidr as string, "options:router");
  }
  if (!ls) return out.sort();
  const lsName = ls.name as string;
  for (const entry of (mapOf(ls.other_config).exclude_ips ?? "").split(" ").filter((e) => e)) {
    const [a, b] = entry.split("..");
    const lo = asAddress(a as string);
    const hi = b === undefined ? lo : asAddress(b);
    if (!lo || !hi || lo.family !== 4 || hi.family !== 4 || lo.value > hi.value) continue;
    let first = lo.value;
    let last = hi.value;
    if (first < CIDR4.network) first = CIDR4.network;
    if (last > cidrLast(CIDR4).value) last = cidrLast(CIDR4).value;
    if (first <= last)
      out.push(
        `${formatRange({ family: 4, first, last })} Logical_Switch ${switchUuid} ${lsName} other_config:exclude_ips ${entry}`,
      );
  }
  const routerPortNames = new Set<string>();
  for (const pu of uuidsOf(ls.ports)) {
    const p = dump.Logical_Switch_Port?.[pu];
    if (!p) continue;
    const name = p.name as string;
    const opts = mapOf(p.options);
    if (p.type === "router" && opts["router-port"]) routerPortNames.add(opts["router-port"]);
    words(strings(p.addresses), "Logical_Switch_Port", pu, name, "addresses");
    words(strings(p.dynamic_addresses), "Logical_Switch_Port", pu, name, "dynamic_addresses");
    words(strings(p.port_security), "Logical_Switch_Port", pu, name, "port_security");
    if (opts["virtual-ip"])
      hold(asAddress(opts["virtual-ip"]), "Logical_Switch_Port", pu, name, "options:virtual-ip");
  }
  const lrps = new Set<string>();
  for (const [u, r] of Object.entries(dump.Logical_Router_Port ?? {})) {
    if (!routerPortNames.has(r.name as string)) continue;
    lrps.add(u);
    words(strings(r.networks), "Logical_Router_Port", u, r.name as string, "networks");
  }
  for (const lr of Object.values(dump.Logical_Router ?? {})) {
    if (!uuidsOf(lr.ports).some((u) => lrps.has(u))) continue;
    for (const nu of uuidsOf(lr.nat)) {
      const n = dump.NAT?.[nu];
      if (n) hold(asAddress(n.external_ip as string), "NAT", nu, n.external_ip as string, "external_ip");
    }
  }
  return out.sort();
}

// ---- the ZStack writer: a second plain client, raw OVSDB operations ----

class Writer {
  private step = 0;
  checks = 0;
  constructor(
    private readonly c: OvsdbClient,
    private readonly srv: OvsdbServer,
    private readonly view: OvsdbClient<NbTables>,
  ) {}

  /** Runs the operations plus a step marker on NB_Global, and waits until the view's cache shows the marker. */
  async write(ops: unknown[]): Promise<unknown[]> {
    const step = String(++this.step);
    const reply = (await this.c.transactRaw([
      ...ops,
      {
        op: "mutate",
        table: "NB_Global",
        where: [],
        mutations: [["external_ids", "delete", ["set", ["step"]]]],
      },
      {
        op: "mutate",
        table: "NB_Global",
        where: [],
        mutations: [["external_ids", "insert", ["map", [["step", step]]]]],
      },
    ])) as { error?: string; details?: string; uuid?: [string, string] }[];
    const bad = reply.find((r) => r?.error);
    if (bad) throw new Error(`writer transaction failed: ${bad.error} ${bad.details ?? ""}`);
    await this.view.waitForRow("NB_Global", (g) => g.external_ids.step === step, {
      timeoutMs: 60_000,
      description: `with step ${step}`,
    });
    return reply.map((r) => r?.uuid?.[1]);
  }

  /** The view's set must equal the recomputation from a fresh dump. */
  async check(h: ForeignSwitchHoldings, label: string): Promise<void> {
    this.checks++;
    const want = expected(await this.srv.dump(DB), h.switchUuid);
    assert.deepEqual(h.holdings.listing(), want, label);
  }
}

const ls = (uuid: string) => ["_uuid", "==", ["uuid", uuid]];
const addPort = (sw: string, row: Record<string, unknown>, tag = "p") => [
  { op: "insert", table: "Logical_Switch_Port", row, "uuid-name": tag },
  {
    op: "mutate",
    table: "Logical_Switch",
    where: [ls(sw)],
    mutations: [["ports", "insert", ["named-uuid", tag]]],
  },
];
const removePort = (sw: string, port: string) => [
  {
    op: "mutate",
    table: "Logical_Switch",
    where: [ls(sw)],
    mutations: [["ports", "delete", ["uuid", port]]],
  },
];
const setOfStrings = (xs: string[]) => ["set", xs];
const mapRow = (m: Record<string, string>) => ["map", Object.entries(m)];

async function rig(t: Parameters<typeof useOvsdbServer>[0]) {
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });
  const view = new OvsdbClient<NbTables>({ remotes: srv.unix, model: nbModel });
  const zstack = new OvsdbClient({ remotes: srv.unix, database: DB, monitor: {} });
  t.after(async () => {
    await view.close();
    await zstack.close();
  });
  await Promise.all([view.connect(), zstack.connect()]);
  await zstack.transactRaw([{ op: "insert", table: "NB_Global", row: {} }]);
  return { srv, view, writer: new Writer(zstack, srv, view) };
}

async function newSwitch(w: Writer, name: string, other: Record<string, string>): Promise<string> {
  const [uuid] = await w.write([
    { op: "insert", table: "Logical_Switch", row: { name, other_config: mapRow(other) } },
  ]);
  return uuid as string;
}

describe("the taken set of a foreign switch, live from a real NB", () => {
  test("follows VM ports, exclude_ips, router ports, NAT and DHCP options as ZStack writes them", async (t) => {
    const { view, writer } = await rig(t);
    const sw = await newSwitch(writer, "zs-l3-net", {
      subnet: "10.50.0.0/24",
      exclude_ips: "10.50.0.250..10.50.0.254",
    });
    // Another switch on the same CIDR (ZStack VPCs may overlap): nothing on it may count.
    const other = await newSwitch(writer, "zs-l3-net", { subnet: "10.50.0.0/24" });
    const h = new ForeignSwitchHoldings(view.cache, sw, { cidrs: CIDRS });
    t.after(() => h.close());
    const changes: HoldingsChange[] = [];
    h.onChange((c) => changes.push(c));
    const taken = (a: string) => h.isTaken(parseIp(a));
    await writer.check(h, "empty switch");
    assert.equal(taken("10.50.0.252"), true);
    assert.equal(taken("10.50.0.0") && taken("10.50.0.255") && taken("fd50::"), true);

    const [vm1] = await writer.write(
      addPort(sw, {
        name: "vnic1.0_0123456789abcdef0123456789abcdef",
        addresses: setOfStrings(["fa:16:3e:00:00:01 10.50.0.5 fd50::5"]),
        port_security: setOfStrings(["fa:16:3e:00:00:01 10.50.0.5 10.50.0.6"]),
        options: mapRow({ "requested-chassis": "hostA,hostB" }),
      }),
    );
    await writer.check(h, "VM port added");
    assert.deepEqual(
      h.holdersOf(parseIp("10.50.0.6")).map((x) => [x.name, x.source]),
      [["vnic1.0_0123456789abcdef0123456789abcdef", "port_security"]],
    );
    assert.ok(changes.some((c) => c.addresses.some((a) => formatIp(a) === "10.50.0.6")));

    await writer.write([
      ...addPort(
        sw,
        {
          name: "dyn",
          addresses: setOfStrings(["dynamic"]),
          dynamic_addresses: "0a:00:00:00:00:07 10.50.0.7",
        },
        "a",
      ),
      ...addPort(sw, { name: "unk", addresses: setOfStrings(["unknown"]) }, "b"),
      ...addPort(
        sw,
        { name: "maconly", type: "localport", addresses: setOfStrings(["fa:16:3e:00:00:09"]) },
        "c",
      ),
      ...addPort(
        sw,
        {
          name: "vip",
          type: "virtual",
          options: mapRow({ "virtual-ip": "10.50.0.8", "virtual-parents": "vm1" }),
        },
        "d",
      ),
      ...addPort(sw, { name: "empty", dhcpv4_options: ["named-uuid", "dh"] }, "e"),
      // Options for a wider block, found only through the port that uses them.
      {
        op: "insert",
        table: "DHCP_Options",
        row: { cidr: "10.50.0.0/16", options: mapRow({ server_id: "10.50.0.3" }) },
        "uuid-name": "dh",
      },
      ...addPort(
        sw,
        { name: "bad", addresses: setOfStrings(["fa:16:3e:00:00:0a 10.50.0.300 10.50.0.10", "garbage"]) },
        "f",
      ),
      ...addPort(other, { name: "other-vm", addresses: setOfStrings(["fa:16:3e:00:00:0b 10.50.0.11"]) }, "g"),
    ]);
    await writer.check(h, "edge ports");
    assert.equal(taken("10.50.0.7") && taken("10.50.0.8") && taken("10.50.0.10"), true);
    assert.equal(taken("10.50.0.11"), false, "a port on another switch does not count");
    assert.equal(taken("10.50.0.3"), true, "DHCP options used by a port of the switch");
    const withoutDyn = new ForeignSwitchHoldings(view.cache, sw, {
      cidrs: CIDRS,
      skipPort: (p) => p.name === "dyn",
    });
    assert.equal(withoutDyn.isTaken(parseIp("10.50.0.7")), false, "a skipped port (ours) is left out");
    assert.equal(withoutDyn.isTaken(parseIp("10.50.0.8")), true);
    withoutDyn.close();
    assert.equal(h.problems.length, 2, "10.50.0.300 and garbage are counted");

    await writer.write([
      {
        op: "update",
        table: "Logical_Switch_Port",
        where: [ls(vm1 as string)],
        row: { addresses: setOfStrings(["fa:16:3e:00:00:01 10.50.0.15"]) },
      },
    ]);
    await writer.check(h, "VM port changed");
    assert.equal(taken("10.50.0.15"), true);
    assert.equal(taken("fd50::5"), false);
    assert.equal(taken("10.50.0.5"), true, "port_security still shows it");

    await writer.write([
      {
        op: "mutate",
        table: "Logical_Switch",
        where: [ls(sw)],
        mutations: [["other_config", "delete", ["set", ["exclude_ips"]]]],
      },
      {
        op: "mutate",
        table: "Logical_Switch",
        where: [ls(sw)],
        mutations: [
          ["other_config", "insert", mapRow({ exclude_ips: "10.50.0.100 10.50.0.120..10.50.0.129" })],
        ],
      },
    ]);
    await writer.check(h, "exclude_ips changed");
    assert.equal(taken("10.50.0.252"), false);
    assert.equal(taken("10.50.0.125"), true);

    // A VPC router attached through a router-type port, with a NAT rule, and DHCP options for the subnet.
    const [, , , nat] = await writer.write([
      {
        op: "insert",
        table: "Logical_Router_Port",
        row: {
          name: "lrp-zs",
          mac: "fa:16:3e:00:01:01",
          networks: setOfStrings(["10.50.0.1/24", "fd50::1/64"]),
        },
        "uuid-name": "lrp",
      },
      {
        op: "insert",
        table: "Logical_Router_Port",
        row: { name: "lrp-pub", mac: "fa:16:3e:00:01:02", networks: setOfStrings(["172.20.0.2/24"]) },
        "uuid-name": "lrp2",
      },
      {
        op: "insert",
        table: "Logical_Router",
        row: {
          name: "vpc",
          ports: [
            "set",
            [
              ["named-uuid", "lrp"],
              ["named-uuid", "lrp2"],
            ],
          ],
          nat: ["named-uuid", "nat"],
        },
      },
      {
        op: "insert",
        table: "NAT",
        row: { type: "dnat_and_snat", external_ip: "10.50.0.200", logical_ip: "192.168.0.5" },
        "uuid-name": "nat",
      },
      ...addPort(
        sw,
        {
          name: "rp-zs",
          type: "router",
          addresses: setOfStrings(["router"]),
          options: mapRow({ "router-port": "lrp-zs" }),
        },
        "rp",
      ),
      {
        op: "insert",
        table: "DHCP_Options",
        row: {
          cidr: "10.50.0.0/24",
          options: mapRow({ server_id: "10.50.0.2", router: "10.50.0.1", lease_time: "3600" }),
        },
      },
      {
        op: "insert",
        table: "DHCP_Options",
        row: { cidr: "fd50::/64", options: mapRow({ server_id: "fa:16:3e:00:01:01" }) },
      },
    ]);
    await writer.check(h, "router, NAT and DHCP options");
    assert.equal(taken("10.50.0.1") && taken("fd50::1") && taken("10.50.0.200") && taken("10.50.0.2"), true);

    const lrp = view.cache.table("Logical_Router_Port").lookupOne("name", "lrp-zs");
    await writer.write([
      {
        op: "update",
        table: "Logical_Router_Port",
        where: [ls(lrp?._uuid as string)],
        row: { networks: setOfStrings(["10.50.0.254/24"]) },
      },
    ]);
    await writer.check(h, "router port networks changed");
    await writer.write([
      { op: "update", table: "NAT", where: [ls(nat as string)], row: { external_ip: "10.50.0.201" } },
    ]);
    await writer.check(h, "NAT changed on its own");
    assert.equal(taken("10.50.0.1"), true, "DHCP's router option still shows it");
    assert.equal(taken("10.50.0.254") && taken("10.50.0.201"), true);
    assert.equal(taken("10.50.0.200") || taken("fd50::1"), false);

    await writer.write(removePort(sw, vm1 as string));
    await writer.check(h, "VM port removed");
    assert.equal(taken("10.50.0.15") || taken("10.50.0.5"), false);

    const before = h.rebuilds;
    await writer.write(
      addPort(other, { name: "other-vm2", addresses: setOfStrings(["fa:16:3e:00:00:0c 10.50.0.12"]) }),
    );
    assert.equal(h.rebuilds, before, "a write to another switch does not rebuild this one");

    // A full resync of the cache (reconnect without resume) while ZStack writes: the view follows the reload.
    const snapshots = view.stats.fullSnapshots;
    await Promise.all([
      view.reconnect({ fullResync: true }),
      writer.write(
        addPort(sw, { name: "vm-during-resync", addresses: setOfStrings(["fa:16:3e:00:00:0d 10.50.0.13"]) }),
      ),
    ]);
    await writer.write([]);
    assert.ok(view.stats.fullSnapshots > snapshots, "the cache was reloaded");
    await writer.check(h, "after a full resync");
    assert.equal(taken("10.50.0.13"), true);

    await writer.write([{ op: "delete", table: "Logical_Switch", where: [ls(sw)] }]);
    await writer.check(h, "switch deleted");
    assert.equal(h.switchPresent, false);
  });

  test("random interleavings of ZStack writes: the view equals the dump after every step", async (t) => {
    const { view, writer } = await rig(t);
    // Offsets from 8 below the subnet, so some addresses fall outside it and on its edges.
    const addr = (o: number) => formatIp({ family: 4, value: CIDR4.network - 8n + BigInt(o) });
    const off = fc.integer({ min: 0, max: 40 });
    type Op =
      | { k: "add"; form: number; a: number; b: number }
      | { k: "remove"; pick: number }
      | { k: "change"; pick: number; form: number; a: number; b: number }
      | { k: "exclude"; ranges: [number, number][] }
      | { k: "networks"; a: number }
      | { k: "attach"; on: boolean }
      | { k: "nat"; a: number }
      | { k: "unnat"; pick: number }
      | { k: "renat"; pick: number; a: number }
      | { k: "dhcp"; a: number; b: number }
      | { k: "noise"; a: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({ k: fc.constant("add" as const), form: fc.nat(7), a: off, b: off }),
      },
      { weight: 2, arbitrary: fc.record({ k: fc.constant("remove" as const), pick: fc.nat() }) },
      {
        weight: 2,
        arbitrary: fc.record({
          k: fc.constant("change" as const),
          pick: fc.nat(),
          form: fc.nat(7),
          a: off,
          b: off,
        }),
      },
      fc.record({
        k: fc.constant("exclude" as const),
        ranges: fc.array(fc.tuple(off, off), { maxLength: 3 }),
      }),
      fc.record({ k: fc.constant("networks" as const), a: off }),
      fc.record({ k: fc.constant("attach" as const), on: fc.boolean() }),
      fc.record({ k: fc.constant("nat" as const), a: off }),
      fc.record({ k: fc.constant("unnat" as const), pick: fc.nat() }),
      fc.record({ k: fc.constant("renat" as const), pick: fc.nat(), a: off }),
      fc.record({ k: fc.constant("dhcp" as const), a: off, b: off }),
      fc.record({ k: fc.constant("noise" as const), a: off }),
    );
    const portRow = (name: string, form: number, a: number, b: number): Record<string, unknown> => {
      const mac = `fa:16:3e:00:${(a & 255).toString(16).padStart(2, "0")}:${(b & 255).toString(16).padStart(2, "0")}`;
      switch (form) {
        case 0:
          return { name, addresses: setOfStrings([`${mac} ${addr(a)}`]) };
        case 1:
          return { name, addresses: setOfStrings([`${mac} ${addr(a)} fd50::${a.toString(16)}`]) };
        case 2:
          return { name, addresses: setOfStrings(["dynamic"]), dynamic_addresses: `${mac} ${addr(a)}` };
        case 3:
          return {
            name,
            addresses: setOfStrings([`${mac} ${addr(a)}`]),
            port_security: setOfStrings([`${mac} ${addr(a)} ${addr(b)}`]),
          };
        case 4:
          return { name, type: "virtual", options: mapRow({ "virtual-ip": addr(a) }) };
        case 5:
          return { name, addresses: setOfStrings(["unknown", mac]) };
        case 6:
          return { name, addresses: setOfStrings([`${mac} ${addr(a)} not-an-ip`]) };
        default:
          return { name };
      }
    };
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 10 }), async (ops) => {
        run++;
        const sw = await newSwitch(writer, `zs-run${run}`, { subnet: "10.50.0.0/24" });
        const noise = await newSwitch(writer, `zs-noise${run}`, { subnet: "10.50.0.0/24" });
        const lrpName = `lrp-run${run}`;
        const [lrpUuid, lr] = await writer.write([
          {
            op: "insert",
            table: "Logical_Router_Port",
            row: { name: lrpName, mac: "fa:16:3e:00:02:01", networks: setOfStrings([`${addr(9)}/24`]) },
            "uuid-name": "lrp",
          },
          {
            op: "insert",
            table: "Logical_Router",
            row: { name: `vpc-run${run}`, ports: ["named-uuid", "lrp"] },
          },
        ]);
        const h = new ForeignSwitchHoldings(view.cache, sw, { cidrs: CIDRS });
        try {
          const ports: string[] = [];
          const nats: string[] = [];
          let routerLsp: string | undefined;
          let n = 0;
          const pick = <X>(xs: X[], i: number) => xs.splice(i % xs.length, 1)[0] as X;
          for (const op of ops) {
            n++;
            switch (op.k) {
              case "add": {
                const [u] = await writer.write(addPort(sw, portRow(`vnic${run}.${n}`, op.form, op.a, op.b)));
                ports.push(u as string);
                break;
              }
              case "remove":
                if (ports.length > 0) await writer.write(removePort(sw, pick(ports, op.pick)));
                break;
              case "change":
                if (ports.length > 0) {
                  const u = ports[op.pick % ports.length] as string;
                  const { name: _name, ...row } = portRow("", op.form, op.a, op.b);
                  const cleared = {
                    addresses: setOfStrings([]),
                    dynamic_addresses: setOfStrings([]),
                    port_security: setOfStrings([]),
                    options: mapRow({}),
                    type: "",
                    ...row,
                  };
                  await writer.write([
                    { op: "update", table: "Logical_Switch_Port", where: [ls(u)], row: cleared },
                  ]);
                }
                break;
              case "exclude": {
                const text = op.ranges
                  .map(([x, y]) => (x === y ? addr(x) : `${addr(Math.min(x, y))}..${addr(Math.max(x, y))}`))
                  .join(" ");
                await writer.write([
                  {
                    op: "update",
                    table: "Logical_Switch",
                    where: [ls(sw)],
                    row: { other_config: mapRow({ subnet: "10.50.0.0/24", exclude_ips: text }) },
                  },
                ]);
                break;
              }
              case "networks":
                await writer.write([
                  {
                    op: "update",
                    table: "Logical_Router_Port",
                    where: [ls(lrpUuid as string)],
                    row: { networks: setOfStrings([`${addr(op.a)}/24`]) },
                  },
                ]);
                break;
              case "attach":
                if (op.on && !routerLsp) {
                  const [u] = await writer.write(
                    addPort(sw, {
                      name: `rp-run${run}`,
                      type: "router",
                      addresses: setOfStrings(["router"]),
                      options: mapRow({ "router-port": lrpName }),
                    }),
                  );
                  routerLsp = u as string;
                } else if (!op.on && routerLsp) {
                  await writer.write(removePort(sw, routerLsp));
                  routerLsp = undefined;
                }
                break;
              case "nat": {
                const [u] = await writer.write([
                  {
                    op: "insert",
                    table: "NAT",
                    row: { type: "dnat_and_snat", external_ip: addr(op.a), logical_ip: "192.168.0.9" },
                    "uuid-name": "nat",
                  },
                  {
                    op: "mutate",
                    table: "Logical_Router",
                    where: [ls(lr as string)],
                    mutations: [["nat", "insert", ["named-uuid", "nat"]]],
                  },
                ]);
                nats.push(u as string);
                break;
              }
              case "unnat":
                if (nats.length > 0)
                  await writer.write([
                    {
                      op: "mutate",
                      table: "Logical_Router",
                      where: [ls(lr as string)],
                      mutations: [["nat", "delete", ["uuid", pick(nats, op.pick)]]],
                    },
                  ]);
                break;
              case "renat":
                if (nats.length > 0)
                  await writer.write([
                    {
                      op: "update",
                      table: "NAT",
                      where: [ls(nats[op.pick % nats.length] as string)],
                      row: { external_ip: addr(op.a) },
                    },
                  ]);
                break;
              case "dhcp":
                await writer.write([
                  {
                    op: "insert",
                    table: "DHCP_Options",
                    row: {
                      cidr: "10.50.0.0/24",
                      options: mapRow({ server_id: addr(op.a), router: addr(op.b) }),
                    },
                  },
                ]);
                break;
              case "noise":
                await writer.write(addPort(noise, portRow(`noise${run}.${n}`, 0, op.a, op.a)));
                break;
            }
            await writer.check(h, `run ${run} step ${n}: ${JSON.stringify(op)}`);
          }
        } finally {
          h.close();
        }
      }),
      { numRuns: 25 },
    );
    t.diagnostic(`${run} runs, ${writer.checks} comparisons with a dump`);
    assert.ok(writer.checks >= run);
  });
});
