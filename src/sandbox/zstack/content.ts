// ZStack's OVN as the simulator writes it (docs/external-mode.md, "The ZStack simulator"): the NB content ZStack
// has before the plugin starts (a VPC router with IPv4 and IPv6 router ports, NAT rules and a route; an overlay
// switch with other_config:subnet and exclude_ips, DHCP options and a router-type port; a flat switch with a
// localnet port; VM ports named like ZStack's NICs, with an extra address in port_security and requested-chassis
// (one VM migrating, so two chassis); the edge ports (dynamic, unknown, MAC-only localport, virtual, empty,
// disabled); a security group (port group, ACLs, address set); a load balancer; and a second switch with the same
// display name), and ZStack's writes while the plugin runs (ZStackWriter). Every row carries SIM_ROLE_KEY, valued
// with the row's role. Shared by the test fixture (test/rig/zstack-sim.ts) and `zovn sandbox up --zstack`
// (src/sandbox/zstack/), which must not import from test/.

import { createHash } from "node:crypto";
import type { OvsdbClient } from "../../ovsdb/client.ts";

export const NB_DB = "OVN_Northbound";
/** Every row the simulator writes carries this key; its value names the row's role ("overlay-switch", "vm1"...). */
export const SIM_ROLE_KEY = "zstack.sim/role";
/** ZStack's switches carry their display name here too (the `name` column holds the same text). */
export const SIM_NAME_KEY = "zstack.sim/display-name";
/** The display name the overlay switch and its twin share. */
export const SHARED_SWITCH_NAME = "l3-vpc-network";
/** The chassis names (ZStack: the hypervisors' management IPs) requested by the VM ports. */
/** The chassis names (ZStack: the hypervisors' management IPs) requested by the VM ports, unless given. */
export const HOSTS = ["192.168.200.11", "192.168.200.12"] as const;
/** The two hypervisors' management IPs (the chassis hostnames), in the order the content refers to them. */
export type HostPair = readonly [string, string];

export const OVERLAY = {
  cidr4: "10.60.0.0/24",
  gateway4: "10.60.0.1",
  cidr6: "fd60::/64",
  gateway6: "fd60::1",
};
export const FLAT = { cidr4: "192.168.100.0/24", network: "flat" };
export const TWIN = { cidr4: "10.61.0.0/24" };

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

export function vmPortRow(
  vm: number,
  spec: VmPortSpec,
  role: string,
  hosts: HostPair = HOSTS,
  dhcp?: string,
): Record<string, unknown> {
  const mac = vmMac(vm);
  const ips = [spec.ip4, ...(spec.ip6 ? [spec.ip6] : [])];
  const security = [...ips, ...(spec.extraIp ? [spec.extraIp] : [])];
  return {
    name: vmPortName(vm, 0),
    addresses: setOf([`${mac} ${ips.join(" ")}`]),
    port_security: setOf([`${mac} ${security.join(" ")}`]),
    options: mapOf({ "requested-chassis": (spec.chassis ?? [hosts[0]]).join(",") }),
    ...(dhcp ? { dhcpv4_options: named(dhcp) } : {}),
    external_ids: ids(role, { "zstack.sim/vm-nic": zstackUuid(`nic/${vm}/0`) }),
  };
}

/** A further VM of ZStack's in the initial content: its number (port name, MAC, role `vm<n>`) and port. */
export interface InitialVm {
  readonly vm: number;
  readonly spec: VmPortSpec & { readonly network: "overlay" | "flat" };
}

/**
 * ZStack's NB before the plugin starts, as one transaction of raw operations: the content above, with VM ports
 * requesting `hosts`, and `extraVms` on the overlay and flat switches (the sandbox's VMs).
 */
export function initialContent(hosts: HostPair = HOSTS, extraVms: readonly InitialVm[] = []): unknown[] {
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
    vmPortRow(1, { ip4: "10.60.0.11", ip6: "fd60::11", extraIp: "10.60.0.111" }, "vm1", hosts, "dhcp4"),
  );
  insert(
    "Logical_Switch_Port",
    "vm2",
    vmPortRow(2, { ip4: "10.60.0.12", extraIp: "10.60.0.112", chassis: hosts }, "vm2", hosts, "dhcp4"),
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
  const extra = (network: "overlay" | "flat") =>
    extraVms.filter((v) => v.spec.network === network).map((v) => `vm${v.vm}`);
  for (const v of extraVms)
    insert(
      "Logical_Switch_Port",
      `vm${v.vm}`,
      vmPortRow(v.vm, v.spec, `vm${v.vm}`, hosts, v.spec.network === "overlay" ? "dhcp4" : undefined),
    );
  insert("Logical_Switch", "overlay", {
    name: SHARED_SWITCH_NAME,
    ports: setOf(
      [
        ...["rp", "vm1", "vm2", "dynamic", "unknown", "localport", "virtual", "empty", "disabled"],
        ...extra("overlay"),
      ].map(named),
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
  insert(
    "Logical_Switch_Port",
    "vm3",
    vmPortRow(3, { ip4: "192.168.100.21", chassis: [hosts[1]] }, "vm3", hosts),
  );
  insert("Logical_Switch", "flat", {
    name: "l2-flat-network",
    ports: setOf(["localnet", "vm3", ...extra("flat")].map(named)),
    external_ids: ids("flat-switch", { [SIM_NAME_KEY]: "l2-flat-network" }),
  });

  // Another VPC network with the same display name.
  insert("Logical_Switch_Port", "vm4", vmPortRow(4, { ip4: "10.61.0.11" }, "vm4", hosts));
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

/** ZStack's writes while the plugin runs: raw OVSDB operations from a client of its own. */
export class ZStackWriter {
  private nextVm = 100;
  /** Transactions run, for diagnostics. */
  writes = 0;

  constructor(
    private readonly client: OvsdbClient,
    private readonly switchOf: (network: string) => string,
    private readonly hosts: HostPair = HOSTS,
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
    const row = vmPortRow(vm, spec, `vm${vm}`, this.hosts);
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
