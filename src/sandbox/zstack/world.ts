// `zovn sandbox up --zstack`: the simulated ZStack the sandbox's cluster runs against (docs/sandbox.md). ZStack's
// controller host runs NB, SB and northd (ovn-central.ts on topo.central; with --raft 3-member clusters, all
// members on that host) seeded with the simulator's content (content.ts) before northd starts; its two hypervisors are hosts on the underlay set up as ZStack sets up its
// hosts (br-phy holding the management IP, br-int on the userspace datapath, ovn-controller on ZStack's SB with
// the management IP as hostname, Geneve, ovn-monitor-all, br-flat on the flat network's link for the provider
// `flat`); each has a VM on the overlay switch and one on the flat switch, a netns whose veth's host end (ZStack's
// tap name) is on br-int with the VM port's name as iface-id, running a podserver. Everything is idempotent, as
// the rest of `up`.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { OvsdbClient } from "../../ovsdb/client.ts";
import { ipBatch, run } from "../command.ts";
import { spawnDetached } from "../daemon.ts";
import type { Layout } from "../layout.ts";
import { ensureNetns, netnsPath } from "../netns.ts";
import { ensureBrPhy, ensureNodeMountNamespace, ensureOvnController, ensureOvs, runOnNode } from "../node.ts";
import { localRemote } from "../ovn-central.ts";
import { liveDaemon, recordDaemon, type SandboxState } from "../state.ts";
import {
  centralRemote,
  FLAT_PROVIDER_BRIDGE,
  FLAT_UPLINK_IF,
  type Host,
  SB_PORT,
  type Topology,
  type ZStackNetworkPlan,
  type ZStackPlan,
  type ZStackVmPlan,
} from "../topology.ts";
import {
  FLAT,
  type HostPair,
  type InitialVm,
  initialContent,
  NB_DB,
  SIM_ROLE_KEY,
  vmMac,
  vmPortName,
} from "./content.ts";

/** The port each VM's podserver answers TCP on (`<vm name> <client ip:port> <payload>`). */
export const VM_TCP_PORT = 8080;
/** ZStack's VMs' MTU: Geneve over the 1500-byte underlay. */
const VM_MTU = 1400;

export function zstackPlan(topo: Topology): ZStackPlan {
  if (!topo.zstack) throw new Error(`sandbox "${topo.spec.name}" was not brought up with --zstack`);
  return topo.zstack;
}

function hostPair(plan: ZStackPlan): HostPair {
  const [a, b] = plan.hypervisors;
  if (!a || !b) throw new Error("the ZStack plan needs two hypervisors");
  return [a.ip, b.ip];
}

function hypervisorOf(plan: ZStackPlan, vm: ZStackVmPlan): Host {
  const h = plan.hypervisors.find((x) => x.name === vm.host);
  if (!h) throw new Error(`VM ${vm.name}: no hypervisor ${vm.host}`);
  return h;
}

/** The sandbox's VMs as ports of the initial content: on their switch, requesting their host. */
function initialVms(plan: ZStackPlan): InitialVm[] {
  return plan.vms.map((v) => ({
    vm: v.vm,
    spec: { network: v.network, ip4: v.ip, chassis: [hypervisorOf(plan, v).ip] },
  }));
}

/**
 * ZStack's NB content, written once: nothing when the overlay switch is there already (a second `up`); the
 * insert is guarded by a `wait` that no row of the simulator exists, so it can never be written twice. Resolves
 * true when this call wrote it.
 */
export async function seedZStack(layout: Layout, topo: Topology): Promise<boolean> {
  const plan = zstackPlan(topo);
  const client = new OvsdbClient({ remotes: localRemote(layout, topo, "nb"), database: NB_DB, monitor: {} });
  const timer = setTimeout(() => void client.close(), 60_000);
  try {
    await client.connect({ retry: true });
    const overlayIds = ["map", [[SIM_ROLE_KEY, "overlay-switch"]]];
    const where = [["external_ids", "includes", overlayIds]];
    const [found] = (await client.transactRaw([
      { op: "select", table: "Logical_Switch", where, columns: ["_uuid"] },
    ])) as [{ rows: unknown[] }];
    if (found.rows.length > 0) return false;
    const reply = (await client.transactRaw([
      { op: "wait", table: "Logical_Switch", where, columns: ["_uuid"], until: "==", rows: [], timeout: 0 },
      ...initialContent(hostPair(plan), initialVms(plan)),
    ])) as { error?: string; details?: string }[];
    const bad = reply.find((r) => r?.error);
    if (bad) throw new Error(`ZStack's NB content refused: ${bad.error} ${bad.details ?? ""}`);
    return true;
  } finally {
    clearTimeout(timer);
    await client.close();
  }
}

/**
 * Where `up --zstack` keeps ZStack's NB as ZStack left it before the plugin first started: `ovsdb-client -f json
 * dump` of OVN_Northbound (every table and column). In the central directory, so `down` removes it with the
 * database it describes.
 */
export function zstackBeforeDumpPath(layout: Layout): string {
  return join(layout.centralDir, "zstack-nb-before.json");
}

/**
 * Records ZStack's NB before our controller and node agents first start (after the seed, northd and ZStack's
 * hosts): waits until northd has caught up with everything written (nb_cfg bumped, sb_cfg caught up), has
 * assigned the dynamic port's address and has marked every VM port `up`, then writes the dump
 * (zstackBeforeDumpPath). The byte-identical check after `zovn uninstall` compares against it.
 */
export async function recordZStackNb(layout: Layout, topo: Topology, deadline: number): Promise<void> {
  const plan = zstackPlan(topo);
  const remote = localRemote(layout, topo, "nb");
  const client = new OvsdbClient({ remotes: remote, database: NB_DB, monitor: {} });
  const timer = setTimeout(() => void client.close(), Math.max(deadline - Date.now(), 60_000));
  try {
    await client.connect({ retry: true });
    const [, sel] = (await client.transactRaw([
      { op: "mutate", table: "NB_Global", where: [], mutations: [["nb_cfg", "+=", 1]] },
      { op: "select", table: "NB_Global", where: [], columns: ["nb_cfg"] },
    ])) as [unknown, { rows: { nb_cfg: number }[] }];
    const want = sel.rows[0]?.nb_cfg ?? 1;
    const vmPorts = plan.vms.map((v) => vmPortName(v.vm, 0));
    for (;;) {
      const [g, dyn, vms] = (await client.transactRaw([
        { op: "select", table: "NB_Global", where: [], columns: ["sb_cfg"] },
        {
          op: "select",
          table: "Logical_Switch_Port",
          where: [["external_ids", "includes", ["map", [[SIM_ROLE_KEY, "edge-dynamic"]]]]],
          columns: ["dynamic_addresses"],
        },
        {
          op: "select",
          table: "Logical_Switch_Port",
          where: [["up", "==", true]],
          columns: ["name"],
        },
      ])) as { rows: Record<string, unknown>[] }[];
      const caught = Number(g?.rows[0]?.sb_cfg ?? 0) >= want;
      const dynamic = dyn?.rows.every((r) => typeof r.dynamic_addresses === "string") ?? false;
      const up = new Set(vms?.rows.map((r) => r.name));
      if (caught && dynamic && vmPorts.every((n) => up.has(n))) break;
      if (Date.now() > deadline)
        throw new Error(
          `ZStack's NB not settled before recording it (northd caught up: ${caught}, dynamic address: ${dynamic}, VM ports up: ${vmPorts.filter((n) => up.has(n)).length}/${vmPorts.length})`,
        );
      await sleep(250);
    }
  } finally {
    clearTimeout(timer);
    await client.close();
  }
  const dump = await run("ovsdb-client", ["-f", "json", "dump", remote, NB_DB]);
  writeFileSync(zstackBeforeDumpPath(layout), dump);
}

/** `ovn-nbctl` query of one of ZStack's switches' OVN UUID (by role: the overlay switch's name is the twin's too). */
export async function zstackSwitchUuid(
  ovnCtl: (args: readonly string[]) => Promise<string>,
  network: ZStackNetworkPlan["network"],
): Promise<string> {
  const out = await ovnCtl([
    "--bare",
    "--columns=_uuid",
    "find",
    "Logical_Switch",
    `external_ids:"${SIM_ROLE_KEY}"=${network}-switch`,
  ]);
  const uuid = out.trim();
  if (!/^[0-9a-f-]{36}$/.test(uuid)) throw new Error(`ZStack's ${network} switch not found in NB (${uuid})`);
  return uuid;
}

/** A hypervisor: OVS (its own, in its mount namespace), br-phy with the management IP, br-int, ovn-controller. */
async function ensureHypervisor(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  host: Host,
): Promise<void> {
  const index = zstackPlan(topo).hypervisors.indexOf(host) + 1;
  await ensureNodeMountNamespace(layout, host);
  await ensureOvs({ layout, state }, host);
  await ensureBrPhy(layout, host);
  const flat = FLAT_PROVIDER_BRIDGE;
  await runOnNode(layout, host, "ovs-vsctl", [
    ...["--may-exist", "add-br", flat, "--", "set", "Bridge", flat, "datapath_type=netdev"],
    ...["--", "--may-exist", "add-port", flat, FLAT_UPLINK_IF],
    ...["--", "--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev"],
    ...["fail-mode=secure", "other-config:disable-in-band=true"],
    ...["--", "set", "Open_vSwitch", "."],
    `external_ids:system-id=zstack-host-${index}`,
    `external_ids:hostname="${host.ip}"`,
    `external_ids:ovn-remote="${centralRemote(topo, SB_PORT)}"`,
    "external_ids:ovn-encap-type=geneve",
    `external_ids:ovn-encap-ip="${host.ip}"`,
    "external_ids:ovn-monitor-all=true",
    "external_ids:ovn-bridge-datapath-type=netdev",
    `external_ids:ovn-bridge-mappings="${FLAT.network}:${flat}"`,
  ]);
  await ensureOvnController({ layout, state }, host);
}

/** A VM: its netns, the veth into its hypervisor's br-int, its address and its podserver. */
async function ensureVm(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  podserver: string,
  vm: ZStackVmPlan,
): Promise<void> {
  const host = hypervisorOf(zstackPlan(topo), vm);
  await ensureNetns([vm.netns]);
  const links = await run("ip", ["-n", host.netns, "-o", "link", "show"]);
  if (!links.includes(` ${vm.tap}@`)) {
    await ipBatch([`link add ${vm.tap} netns ${host.netns} type veth peer name eth0 netns ${vm.netns}`]);
  }
  await ipBatch(
    [
      "link set lo up",
      `link set eth0 address ${vmMac(vm.vm)} mtu ${VM_MTU}`,
      `address replace ${vm.ip}/${vm.prefixLen} dev eth0`,
      "link set eth0 up",
      `route replace default via ${vm.gateway} dev eth0`,
    ],
    vm.netns,
  );
  // The userspace datapath does not fill in checksums a veth left to offload.
  await run("nsenter", [`--net=${netnsPath(vm.netns)}`, "--", "ethtool", "-K", "eth0", "tx", "off"]);
  await ipBatch([`link set ${vm.tap} mtu ${VM_MTU} up`], host.netns);
  await runOnNode(layout, host, "ovs-vsctl", [
    ...["--may-exist", "add-port", "br-int", vm.tap, "--", "set", "Interface", vm.tap],
    `external_ids:iface-id=${vmPortName(vm.vm, 0)}`,
  ]);
  const name = `${vm.name}/podserver`;
  if (liveDaemon(state, name)) return;
  const log = `${layout.logDir}/${vm.name}/podserver.log`;
  const id = spawnDetached({
    place: { netns: vm.netns },
    command: podserver,
    args: ["--tcp", String(VM_TCP_PORT), "--name", vm.name],
    log,
  });
  recordDaemon(layout, state, { name, log, ...id });
}

/** Waits until each VM's port is installed by its host's ovn-controller (ovn-installed on the tap). */
async function waitVmsInstalled(layout: Layout, topo: Topology, deadline: number): Promise<void> {
  const plan = zstackPlan(topo);
  for (const vm of plan.vms) {
    const host = hypervisorOf(plan, vm);
    for (;;) {
      const v = await runOnNode(layout, host, "ovs-vsctl", [
        ...["--if-exists", "get", "Interface", vm.tap, "external_ids:ovn-installed"],
      ]).catch(() => "");
      if (v.trim() === '"true"') break;
      if (Date.now() > deadline)
        throw new Error(`ovn-controller on ${host.name} did not install VM ${vm.name}'s port`);
      await sleep(250);
    }
  }
}

/** ZStack's hypervisors and VMs, up with their ports installed. */
export async function startZStackHosts(
  layout: Layout,
  topo: Topology,
  state: SandboxState,
  podserver: string,
  deadline: number,
): Promise<void> {
  const plan = zstackPlan(topo);
  await Promise.all(plan.hypervisors.map((h) => ensureHypervisor(layout, topo, state, h)));
  for (const vm of plan.vms) await ensureVm(layout, topo, state, podserver, vm);
  await waitVmsInstalled(layout, topo, deadline);
}

/** The Subnets on ZStack's switches (by OVN UUID) and their namespaces, as one JSON manifest list. */
export function zstackSubnetManifests(
  networks: readonly { plan: ZStackNetworkPlan; switchUuid: string }[],
): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "List",
    items: networks.flatMap(({ plan, switchUuid }) => [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: plan.namespace } },
      {
        apiVersion: "network.zstack.io/v1",
        kind: "Subnet",
        metadata: { name: plan.subnet },
        spec: {
          cidr: plan.cidr,
          gateway: plan.gateway,
          externalLogicalSwitch: switchUuid,
          excludeIPs: [plan.vmRange],
          namespaces: [plan.namespace],
        },
      },
    ]),
  });
}
