// The ZStack simulator: an OVN that plays ZStack's, for tests of External mode. It runs its own NB, SB and
// ovn-northd (standalone servers, or 3-member Raft clusters), and fills NB the way ZStack does before the plugin
// ever starts: a VPC router with IPv4 and IPv6 router ports, NAT rules and a route; an overlay switch with
// other_config:subnet and exclude_ips, DHCP options and a router-type port; a flat switch with a localnet port;
// VM ports named like ZStack's NICs, with an extra address in port_security and requested-chassis (one VM
// migrating, so two chassis); the edge ports (dynamic, unknown, MAC-only localport, virtual, empty, disabled); a
// security group (port group, ACLs, address set); a load balancer; and a second switch with the same display
// name. Every row it writes carries SIM_ROLE_KEY, valued with the row's role, so a test finds ZStack's rows and
// can prove none was touched. A writer adds and removes VM ports and rewrites a switch while a test runs.
//
// Snapshots are `ovsdb-client dump -f json` of NB (wire JSON, every column): `foreignRows` keeps the rows that do
// not carry our ownership key, `diffDumps` lists every row and column that differs, byte for byte.

import { createHash } from "node:crypto";
import { mkdtemp, readFile } from "node:fs/promises";
import { join } from "node:path";
import { CONTROLLER, OWNER_KEY } from "../../src/ovn/ownership.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import type { DatabaseDump } from "./dump-format.ts";
import { claimDir, type Daemon, removeOwnedDir, spawnDaemon } from "./process.ts";
import { type RaftCluster, startRaftCluster } from "./raft.ts";
import { type OvsdbServer, SCHEMAS, startOvsdbServer } from "./server.ts";
import { type AfterHook, teardownFor } from "./teardown.ts";

export const NB_DB = "OVN_Northbound";
/** Every row the simulator writes carries this key; its value names the row's role ("overlay-switch", "vm1"...). */
export const SIM_ROLE_KEY = "zstack.sim/role";
/** ZStack's switches carry their display name here too (the `name` column holds the same text). */
export const SIM_NAME_KEY = "zstack.sim/display-name";
/** The display name the overlay switch and its twin share. */
export const SHARED_SWITCH_NAME = "l3-vpc-network";
/** The chassis names (ZStack: the hypervisors' management IPs) requested by the VM ports. */
export const HOSTS = ["192.168.200.11", "192.168.200.12"] as const;

export const OVERLAY = {
  cidr4: "10.60.0.0/24",
  gateway4: "10.60.0.1",
  cidr6: "fd60::/64",
  gateway6: "fd60::1",
};
export const FLAT = { cidr4: "192.168.100.0/24", network: "flat" };
export const TWIN = { cidr4: "10.61.0.0/24" };

/**
 * NB_Global columns that count northd's and the chassis' progress (nb_cfg handshakes); `sync()` moves them.
 * Snapshots are compared without them: they say how far northd got, not what anyone configured.
 */
export const NB_GLOBAL_COUNTERS = [
  "nb_cfg",
  "nb_cfg_timestamp",
  "sb_cfg",
  "sb_cfg_timestamp",
  "hv_cfg",
  "hv_cfg_timestamp",
] as const;

export interface ZStackSimOptions {
  /** NB and SB as 3-member Raft clusters (default: one standalone server each). */
  raft?: boolean;
  /** Also listen on tcp:127.0.0.1 (every member); the unix sockets are always there. */
  tcp?: boolean;
}

export interface VmPortSpec {
  /** Which of ZStack's switches: "overlay" (default), "flat", "twin", or a switch UUID. */
  readonly network?: "overlay" | "flat" | "twin" | string;
  readonly ip4: string;
  readonly ip6?: string;
  /** A further address in port_security only (a VIP the VM may also use). */
  readonly extraIp?: string;
  /** requested-chassis; two during a live migration. Default: the first host. */
  readonly chassis?: readonly string[];
}

export interface VmPort {
  readonly uuid: string;
  readonly name: string;
  readonly mac: string;
  readonly switchUuid: string;
}

export interface ZStackSim {
  /** Unix remotes of NB (all members with Raft), for our clients. */
  readonly nbRemotes: readonly string[];
  readonly nbTcpRemotes?: readonly string[];
  readonly sbRemotes: readonly string[];
  readonly nbCluster?: RaftCluster;
  /** The standalone NB server (without Raft). */
  readonly nbServer?: OvsdbServer;
  /** Role -> UUID of every row the simulator created at start-up. */
  readonly roles: ReadonlyMap<string, string>;
  uuid(role: string): string;
  readonly writer: ZStackWriter;
  /** `ovsdb-client dump` of NB from the server (the Raft leader), every table and column, _version dropped. */
  dump(): Promise<DatabaseDump>;
  /** Waits until northd has processed everything written so far (nb_cfg bumped, sb_cfg caught up). */
  sync(): Promise<void>;
  /** sync(), then the rows of the dump that are not ours: what "byte-identical" is checked against. */
  snapshot(): Promise<DatabaseDump>;
  stop(): Promise<void>;
}

const setOf = (xs: readonly unknown[]) => ["set", xs];
const mapOf = (m: Record<string, string>) => ["map", Object.entries(m)];
const named = (n: string) => ["named-uuid", n];
const byUuid = (u: string) => [["_uuid", "==", ["uuid", u]]];

/** 32 hex digits, as ZStack's UUIDs (no dashes); derived from a seed so runs are reproducible. */
export function zstackUuid(seed: string): string {
  return createHash("sha256").update(`zstack-sim/${seed}`).digest("hex").slice(0, 32);
}

/** A VM NIC's port name as ZStack's agent writes it: vnic<vm>.<dev>_<32-hex uuid>. */
export function vmPortName(vm: number, dev: number): string {
  return `vnic${vm}.${dev}_${zstackUuid(`nic/${vm}/${dev}`)}`;
}

export function vmMac(vm: number, dev = 0): string {
  const b = (n: number) => (n & 255).toString(16).padStart(2, "0");
  return `fa:a0:${b(vm >> 8)}:${b(vm)}:00:${b(dev)}`;
}

const ids = (role: string, extra: Record<string, string> = {}) => mapOf({ [SIM_ROLE_KEY]: role, ...extra });

function vmPortRow(vm: number, spec: VmPortSpec, role: string, dhcp?: string): Record<string, unknown> {
  const mac = vmMac(vm);
  const ips = [spec.ip4, ...(spec.ip6 ? [spec.ip6] : [])];
  const security = [...ips, ...(spec.extraIp ? [spec.extraIp] : [])];
  return {
    name: vmPortName(vm, 0),
    addresses: setOf([`${mac} ${ips.join(" ")}`]),
    port_security: setOf([`${mac} ${security.join(" ")}`]),
    options: mapOf({ "requested-chassis": (spec.chassis ?? [HOSTS[0]]).join(",") }),
    ...(dhcp ? { dhcpv4_options: named(dhcp) } : {}),
    external_ids: ids(role, { "zstack.sim/vm-nic": zstackUuid(`nic/${vm}/0`) }),
  };
}

/** ZStack's NB before the plugin starts, as one transaction of raw operations. */
function initialContent(): unknown[] {
  const ops: unknown[] = [];
  const insert = (table: string, name: string, row: Record<string, unknown>) =>
    ops.push({ op: "insert", table, row, "uuid-name": name });
  const sg = zstackUuid("security-group/web");
  const vm1 = vmPortName(1, 0);
  const vm2 = vmPortName(2, 0);

  insert("NB_Global", "global", { external_ids: ids("nb-global") });
  // The VPC router: one port on the overlay network, one on the public network; SNAT for the overlay, a
  // floating IP for VM 1, and the default route.
  insert("Logical_Router_Port", "lrpOverlay", {
    name: `lrp-${zstackUuid("l3/overlay")}`,
    mac: "fa:a0:ff:00:00:01",
    networks: setOf([`${OVERLAY.gateway4}/24`, `${OVERLAY.gateway6}/64`]),
    external_ids: ids("router-port-overlay"),
  });
  insert("Logical_Router_Port", "lrpPublic", {
    name: `lrp-${zstackUuid("l3/public")}`,
    mac: "fa:a0:ff:00:00:02",
    networks: setOf(["172.20.0.10/24", "2001:db8:20::10/64"]),
    external_ids: ids("router-port-public"),
  });
  insert("NAT", "snat", {
    type: "snat",
    external_ip: "172.20.0.10",
    logical_ip: OVERLAY.cidr4,
    external_ids: ids("nat-snat"),
  });
  insert("NAT", "fip", {
    type: "dnat_and_snat",
    external_ip: "172.20.0.50",
    logical_ip: "10.60.0.11",
    external_ids: ids("nat-fip"),
  });
  insert("Logical_Router_Static_Route", "route", {
    ip_prefix: "0.0.0.0/0",
    nexthop: "172.20.0.1",
    external_ids: ids("route-default"),
  });
  insert("Logical_Router", "router", {
    name: `vpc-${zstackUuid("vpc")}`,
    ports: setOf([named("lrpOverlay"), named("lrpPublic")]),
    nat: setOf([named("snat"), named("fip")]),
    static_routes: named("route"),
    external_ids: ids("router"),
  });

  insert("DHCP_Options", "dhcp4", {
    cidr: OVERLAY.cidr4,
    options: mapOf({
      lease_time: "86400",
      router: OVERLAY.gateway4,
      server_id: OVERLAY.gateway4,
      server_mac: "fa:a0:ff:00:00:01",
      dns_server: "{10.60.0.1}",
      mtu: "1450",
    }),
    external_ids: ids("dhcp-v4"),
  });
  insert("DHCP_Options", "dhcp6", {
    cidr: OVERLAY.cidr6,
    options: mapOf({ server_id: "fa:a0:ff:00:00:01" }),
    external_ids: ids("dhcp-v6"),
  });

  // The overlay switch's ports: the router port, two VMs (VM 2 migrating), and the edge cases.
  insert("Logical_Switch_Port", "rp", {
    name: `rp-${zstackUuid("l3/overlay")}`,
    type: "router",
    addresses: setOf(["router"]),
    options: mapOf({ "router-port": `lrp-${zstackUuid("l3/overlay")}` }),
    external_ids: ids("router-type-port"),
  });
  insert(
    "Logical_Switch_Port",
    "vm1",
    vmPortRow(1, { ip4: "10.60.0.11", ip6: "fd60::11", extraIp: "10.60.0.111" }, "vm1", "dhcp4"),
  );
  insert(
    "Logical_Switch_Port",
    "vm2",
    vmPortRow(2, { ip4: "10.60.0.12", extraIp: "10.60.0.112", chassis: HOSTS }, "vm2", "dhcp4"),
  );
  insert("Logical_Switch_Port", "dynamic", {
    name: vmPortName(5, 0),
    addresses: setOf(["dynamic"]),
    external_ids: ids("edge-dynamic"),
  });
  insert("Logical_Switch_Port", "unknown", {
    name: vmPortName(6, 0),
    addresses: setOf(["unknown"]),
    external_ids: ids("edge-unknown"),
  });
  insert("Logical_Switch_Port", "localport", {
    name: `metadata-${zstackUuid("l3/overlay")}`,
    type: "localport",
    addresses: setOf(["fa:a0:ff:00:00:09"]),
    external_ids: ids("edge-localport"),
  });
  insert("Logical_Switch_Port", "virtual", {
    name: `vip-${zstackUuid("vip/1")}`,
    type: "virtual",
    options: mapOf({ "virtual-ip": "10.60.0.100", "virtual-parents": `${vm1},${vm2}` }),
    external_ids: ids("edge-virtual"),
  });
  insert("Logical_Switch_Port", "empty", { name: vmPortName(7, 0), external_ids: ids("edge-empty") });
  insert("Logical_Switch_Port", "disabled", {
    name: vmPortName(8, 0),
    enabled: false,
    addresses: setOf([`${vmMac(8)} 10.60.0.30`]),
    external_ids: ids("edge-disabled"),
  });
  insert("Load_Balancer", "lb", {
    name: `lb-${zstackUuid("lb/web")}`,
    protocol: "tcp",
    vips: mapOf({ "10.60.0.200:80": "10.60.0.11:8080,10.60.0.12:8080" }),
    external_ids: ids("load-balancer"),
  });
  insert("Logical_Switch", "overlay", {
    name: SHARED_SWITCH_NAME,
    ports: setOf(
      ["rp", "vm1", "vm2", "dynamic", "unknown", "localport", "virtual", "empty", "disabled"].map(named),
    ),
    load_balancer: named("lb"),
    other_config: mapOf({ subnet: OVERLAY.cidr4, exclude_ips: "10.60.0.2..10.60.0.9 10.60.0.250" }),
    external_ids: ids("overlay-switch", { [SIM_NAME_KEY]: SHARED_SWITCH_NAME }),
  });

  // The flat network: ZStack's IPAM only, no other_config:subnet; the localnet port leads to the provider bridge.
  insert("Logical_Switch_Port", "localnet", {
    name: `provnet-${zstackUuid("l2/flat")}`,
    type: "localnet",
    addresses: setOf(["unknown"]),
    options: mapOf({ network_name: FLAT.network }),
    external_ids: ids("localnet-port"),
  });
  insert("Logical_Switch_Port", "vm3", vmPortRow(3, { ip4: "192.168.100.21", chassis: [HOSTS[1]] }, "vm3"));
  insert("Logical_Switch", "flat", {
    name: "l2-flat-network",
    ports: setOf([named("localnet"), named("vm3")]),
    external_ids: ids("flat-switch", { [SIM_NAME_KEY]: "l2-flat-network" }),
  });

  // Another VPC network with the same display name.
  insert("Logical_Switch_Port", "vm4", vmPortRow(4, { ip4: "10.61.0.11" }, "vm4"));
  insert("Logical_Switch", "twin", {
    name: SHARED_SWITCH_NAME,
    ports: named("vm4"),
    other_config: mapOf({ subnet: TWIN.cidr4 }),
    external_ids: ids("twin-switch", { [SIM_NAME_KEY]: SHARED_SWITCH_NAME }),
  });

  // A security group: its members' addresses, its rules, its ports.
  insert("Address_Set", "sgAddrs", {
    name: `zs_sgm_${sg}_ip4`,
    addresses: setOf(["10.60.0.11", "10.60.0.12"]),
    external_ids: ids("sg-address-set"),
  });
  insert("ACL", "aclIn", {
    direction: "to-lport",
    priority: 1000,
    match: `outport == @zs_sg_${sg} && ip4 && ip4.src == $zs_sgm_${sg}_ip4 && tcp.dst == 22`,
    action: "allow-related",
    external_ids: ids("sg-acl-in"),
  });
  insert("ACL", "aclOut", {
    direction: "from-lport",
    priority: 1000,
    match: `inport == @zs_sg_${sg} && ip`,
    action: "allow-related",
    external_ids: ids("sg-acl-out"),
  });
  insert("ACL", "aclDrop", {
    direction: "to-lport",
    priority: 900,
    match: `outport == @zs_sg_${sg} && ip`,
    action: "drop",
    external_ids: ids("sg-acl-drop"),
  });
  insert("Port_Group", "sg", {
    name: `zs_sg_${sg}`,
    ports: setOf([named("vm1"), named("vm2")]),
    acls: setOf([named("aclIn"), named("aclOut"), named("aclDrop")]),
    external_ids: ids("security-group"),
  });
  return ops;
}

/** ZStack's writes while a test runs: raw OVSDB operations from a client of its own. */
export class ZStackWriter {
  private nextVm = 100;
  /** Transactions run, for diagnostics. */
  writes = 0;

  constructor(
    private readonly client: OvsdbClient,
    private readonly switchOf: (network: string) => string,
  ) {}

  async transact(ops: unknown[]): Promise<(string | undefined)[]> {
    this.writes++;
    const reply = (await this.client.transactRaw(ops)) as {
      error?: string;
      details?: string;
      uuid?: [string, string];
    }[];
    const bad = reply.find((r) => r?.error);
    if (bad) throw new Error(`ZStack writer: transaction failed: ${bad.error} ${bad.details ?? ""}`);
    return reply.map((r) => r?.uuid?.[1]);
  }

  /** A VM starts: its port is created on the switch, as ZStack's agent does (insert, then mutate the switch). */
  async addVmPort(spec: VmPortSpec): Promise<VmPort> {
    const vm = this.nextVm++;
    const switchUuid = this.switchOf(spec.network ?? "overlay");
    const row = vmPortRow(vm, spec, `vm${vm}`);
    const [uuid] = await this.transact([
      { op: "insert", table: "Logical_Switch_Port", row, "uuid-name": "p" },
      {
        op: "mutate",
        table: "Logical_Switch",
        where: byUuid(switchUuid),
        mutations: [["ports", "insert", named("p")]],
      },
    ]);
    return { uuid: uuid as string, name: row.name as string, mac: vmMac(vm), switchUuid };
  }

  /**
   * ZStack creates a VLAN L2 network on the flat provider: a switch (no other_config:subnet, ZStack's IPAM only)
   * with a localnet port tagged `tag`. Returns the switch's UUID (VM ports join it with `network: <uuid>`).
   */
  async addVlanNetwork(tag: number): Promise<string> {
    const [, ls] = await this.transact([
      {
        op: "insert",
        table: "Logical_Switch_Port",
        row: {
          name: `provnet-${zstackUuid(`l2/vlan/${tag}`)}`,
          type: "localnet",
          addresses: setOf(["unknown"]),
          options: mapOf({ network_name: FLAT.network }),
          tag,
          external_ids: ids(`vlan${tag}-localnet-port`),
        },
        "uuid-name": "ln",
      },
      {
        op: "insert",
        table: "Logical_Switch",
        row: {
          name: `l2-vlan-network-${tag}`,
          ports: named("ln"),
          external_ids: ids(`vlan${tag}-switch`, { [SIM_NAME_KEY]: `l2-vlan-network-${tag}` }),
        },
        "uuid-name": "ls",
      },
    ]);
    return ls as string;
  }

  /** A VM stops: its port leaves the switch (and NB with it). */
  async removeVmPort(port: VmPort): Promise<void> {
    await this.transact([
      {
        op: "mutate",
        table: "Logical_Switch",
        where: byUuid(port.switchUuid),
        mutations: [["ports", "delete", ["uuid", port.uuid]]],
      },
    ]);
  }

  /**
   * ZStack rewrites a switch's own columns (other_config, external_ids), whole, as an `update`; the ports column
   * is left alone, as ZStack's port sync only ever mutates it. `revision` is written to external_ids.
   */
  async rewriteSwitch(switchUuid: string, revision: number): Promise<void> {
    const [sel] = (await this.client.transactRaw([
      {
        op: "select",
        table: "Logical_Switch",
        where: byUuid(switchUuid),
        columns: ["other_config", "external_ids"],
      },
    ])) as { rows: { other_config: unknown; external_ids: [string, [string, string][]] }[] }[];
    const row = sel?.rows[0];
    if (!row) throw new Error(`ZStack writer: switch ${switchUuid} is gone`);
    const extIds = Object.fromEntries(row.external_ids[1]);
    extIds["zstack.sim/revision"] = String(revision);
    await this.transact([
      {
        op: "update",
        table: "Logical_Switch",
        where: byUuid(switchUuid),
        row: { other_config: row.other_config, external_ids: mapOf(extIds) },
      },
    ]);
  }
}

/** Rows of the dump that are not ours (owner key valued with our controller): ZStack's, and anything else. */
export function foreignRows(dump: DatabaseDump): DatabaseDump {
  const out: DatabaseDump = {};
  for (const [table, rows] of Object.entries(dump)) {
    out[table] = {};
    for (const [uuid, row] of Object.entries(rows)) if (!carriesOwner(row)) out[table][uuid] = row;
  }
  return out;
}

/** "Table uuid" of every row in the dump that is ours by its owner key. */
export function ownedRows(dump: DatabaseDump): string[] {
  const out: string[] = [];
  for (const [table, rows] of Object.entries(dump))
    for (const [uuid, row] of Object.entries(rows)) if (carriesOwner(row)) out.push(`${table} ${uuid}`);
  return out;
}

function carriesOwner(row: Record<string, unknown>): boolean {
  const ext = row.external_ids;
  return (
    Array.isArray(ext) &&
    ext[0] === "map" &&
    (ext[1] as [string, string][]).some(([k, v]) => k === OWNER_KEY && v === CONTROLLER)
  );
}

/**
 * Every difference between two dumps, one line each: a row only in one of them, or a column whose wire JSON
 * differs (set and map elements come sorted from the server, so equal content is equal text). `ignore` leaves
 * columns out per table (NB_Global's counters).
 */
export function diffDumps(
  before: DatabaseDump,
  after: DatabaseDump,
  ignore: Readonly<Record<string, readonly string[]>> = { NB_Global: NB_GLOBAL_COUNTERS },
): string[] {
  const out: string[] = [];
  const tables = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const table of [...tables].sort()) {
    const a = before[table] ?? {};
    const b = after[table] ?? {};
    const skip = new Set(ignore[table] ?? []);
    for (const uuid of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const ra = a[uuid];
      const rb = b[uuid];
      if (!ra) out.push(`${table} ${uuid}: added`);
      else if (!rb) out.push(`${table} ${uuid}: removed`);
      else
        for (const col of [...new Set([...Object.keys(ra), ...Object.keys(rb)])].sort()) {
          if (skip.has(col)) continue;
          const ja = JSON.stringify(ra[col]);
          const jb = JSON.stringify(rb[col]);
          if (ja !== jb) out.push(`${table} ${uuid} ${col}: ${ja} -> ${jb}`);
        }
    }
  }
  return out;
}

/**
 * The differences between two dumps (a snapshot taken before the plugin started, and a dump while it runs) that
 * are not documented mutations (docs/external-mode.md, "What the plugin writes on ZStack's rows"): each must be a
 * row of ours (`ours`: UUIDs), or a column of a ZStack row that only grew, by UUIDs of ours or `zsvc_` map entries.
 */
export function onlyDocumentedMutations(
  before: DatabaseDump,
  during: DatabaseDump,
  ours: Set<string>,
): string[] {
  const bad: string[] = [];
  for (const line of diffDumps(before, during)) {
    const added = /^\S+ (\S+): added$/.exec(line);
    if (added && ours.has(added[1] as string)) continue;
    const m = /^(\S+) (\S+) (\S+): (.*) -> (.*)$/.exec(line);
    if (!m) {
      bad.push(line);
      continue;
    }
    const [, table, uuid, column] = m as unknown as [string, string, string, string];
    const a = before[table]?.[uuid]?.[column];
    const b = during[table]?.[uuid]?.[column];
    if (Array.isArray(b) && b[0] === "map") {
      const was = new Map((a as ["map", [string, string][]])[1]);
      const added = (b[1] as [string, string][]).filter(([k, v]) => was.get(k) !== v);
      const kept = [...was].every(([k, v]) =>
        (b[1] as [string, string][]).some(([k2, v2]) => k2 === k && v2 === v),
      );
      if (!kept || added.some(([k]) => !k.startsWith("zsvc_"))) bad.push(line);
      continue;
    }
    const was = new Set(uuidsOf(a));
    const now = uuidsOf(b);
    const grew =
      [...was].every((u) => now.includes(u)) && now.filter((u) => !was.has(u)).every((u) => ours.has(u));
    if (!grew) bad.push(line);
  }
  return bad;
}

const uuidsOf = (v: unknown): string[] =>
  (Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v]).map((u) =>
    Array.isArray(u) ? (u[1] as string) : String(u),
  );

export async function startZStackSim(opts: ZStackSimOptions = {}): Promise<ZStackSim> {
  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    const errors: unknown[] = [];
    for (const s of stops.splice(0).reverse()) {
      try {
        await s();
      } catch (e) {
        errors.push(e);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, "ZStack simulator: stop failed");
  };
  try {
    let nbServer: OvsdbServer | undefined;
    let nbCluster: RaftCluster | undefined;
    let nbRemotes: string[];
    let sbRemotes: string[];
    let nbTcpRemotes: string[] | undefined;
    let runDir: string;
    if (opts.raft) {
      nbCluster = await startRaftCluster({ schema: SCHEMAS.nb, tcp: opts.tcp });
      const nbc = nbCluster;
      stops.push(() => nbc.stop());
      const sbCluster = await startRaftCluster({ schema: SCHEMAS.sb });
      stops.push(() => sbCluster.stop());
      nbRemotes = nbCluster.remotes;
      nbTcpRemotes = nbCluster.tcpRemotes;
      sbRemotes = sbCluster.remotes;
      runDir = await mkdtemp("/tmp/zs-");
      claimDir(runDir);
      const dir = runDir;
      stops.push(() => removeOwnedDir(dir));
    } else {
      nbServer = await startOvsdbServer({ schemas: [SCHEMAS.nb], tcp: opts.tcp });
      const nbs = nbServer;
      stops.push(() => nbs.stop());
      const sb = await startOvsdbServer({ schemas: [SCHEMAS.sb] });
      stops.push(() => sb.stop());
      nbRemotes = [nbServer.unix];
      nbTcpRemotes = nbServer.tcp ? [nbServer.tcp] : undefined;
      sbRemotes = [sb.unix];
      runDir = nbServer.dir;
    }

    // ZStack's own session: writes raw operations, monitors only NB_Global (for sync()).
    const client = new OvsdbClient({ remotes: nbRemotes, database: NB_DB, monitor: { NB_Global: true } });
    stops.push(() => client.close());
    await client.connect({ retry: true });
    const created = (await client.transactRaw(initialContent())) as {
      error?: string;
      uuid?: [string, string];
    }[];
    const failed = created.find((r) => r?.error);
    if (failed) throw new Error(`ZStack simulator: initial content refused: ${JSON.stringify(failed)}`);

    const northd = startNorthd(runDir, nbRemotes, sbRemotes);
    stops.push(() => northd.terminate());

    const dumpNow = async (): Promise<DatabaseDump> =>
      nbServer ? nbServer.dump(NB_DB) : (await (nbCluster as RaftCluster).leader(60_000)).server.dump(NB_DB);

    const roles = new Map<string, string>();
    for (const [table, rows] of Object.entries(await dumpNow())) {
      for (const [uuid, row] of Object.entries(rows)) {
        const ext = row.external_ids as ["map", [string, string][]] | undefined;
        const role = ext?.[1]?.find(([k]) => k === SIM_ROLE_KEY)?.[1];
        if (role === undefined) continue;
        if (roles.has(role)) throw new Error(`ZStack simulator: role ${role} twice (${table})`);
        roles.set(role, uuid);
      }
    }
    const uuid = (role: string): string => {
      const u = roles.get(role);
      if (u === undefined) throw new Error(`ZStack simulator: no row with role ${role}`);
      return u;
    };
    const switchOf = (network: string): string =>
      network === "overlay" || network === "flat" || network === "twin" ? uuid(`${network}-switch`) : network;
    const writer = new ZStackWriter(client, switchOf);

    let cfg = 0;
    const sync = async (): Promise<void> => {
      const [, sel] = (await client.transactRaw([
        { op: "mutate", table: "NB_Global", where: [], mutations: [["nb_cfg", "+=", 1]] },
        { op: "select", table: "NB_Global", where: [], columns: ["nb_cfg"] },
      ])) as [unknown, { rows: { nb_cfg: number }[] }];
      cfg = sel.rows[0]?.nb_cfg ?? cfg + 1;
      const want = cfg;
      try {
        await client.waitForRow(
          "NB_Global",
          (g) => Number((g as unknown as { sb_cfg: number }).sb_cfg) >= want,
          { timeoutMs: 120_000, description: `sb_cfg >= ${want} (northd caught up)` },
        );
      } catch (err) {
        const log = await readFile(join(runDir, "zstack-northd.log"), "utf8").catch(() => "(no log)");
        throw new Error(`${(err as Error).message}; ovn-northd's log ends with:\n${log.slice(-3000)}`);
      }
    };
    await sync();
    // northd assigns the dynamic port's address; the snapshot is taken only once it is there.
    for (let i = 0; ; i++) {
      const d = await dumpNow();
      const dyn = d.Logical_Switch_Port?.[uuid("edge-dynamic")]?.dynamic_addresses;
      if (typeof dyn === "string" && dyn.length > 0) break;
      if (i > 600) throw new Error("ZStack simulator: northd never set the dynamic port's dynamic_addresses");
      await new Promise((r) => setTimeout(r, 100));
    }

    return {
      nbRemotes,
      ...(nbTcpRemotes ? { nbTcpRemotes } : {}),
      sbRemotes,
      ...(nbCluster ? { nbCluster } : {}),
      ...(nbServer ? { nbServer } : {}),
      roles,
      uuid,
      writer,
      dump: dumpNow,
      sync,
      snapshot: async () => {
        await sync();
        return foreignRows(await dumpNow());
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll().catch(() => {});
    throw err;
  }
}

function startNorthd(dir: string, nb: readonly string[], sb: readonly string[]): Daemon {
  return spawnDaemon(
    "ovn-northd",
    [
      `--ovnnb-db=${nb.join(",")}`,
      `--ovnsb-db=${sb.join(",")}`,
      `--unixctl=${join(dir, "zstack-northd.ctl")}`,
      `--log-file=${join(dir, "zstack-northd.log")}`,
      "--no-chdir",
    ],
    { env: { ...process.env, OVN_RUNDIR: dir }, outputFile: join(dir, "zstack-northd.out") },
  );
}

/** Starts the simulator, stopped (daemons ended, directories removed) when the test ends, passed or failed. */
export async function useZStackSim(t: AfterHook, opts: ZStackSimOptions = {}): Promise<ZStackSim> {
  const sim = await startZStackSim(opts);
  teardownFor(t).after(() => sim.stop());
  return sim;
}
