// The sandbox underlay: a Linux bridge inside its own netns, and one veth per host (control-plane host, nodes,
// external host) with the host's end named eth0, plus the external host's trunk (eth1) for the underlay VLAN. Nothing is created in the machine's own netns: each veth is
// created directly inside the two namespaces it joins, so the machine never sees the names or addresses.

import { ipBatch, run } from "./command.ts";
import { ensureNetns, netnsPath } from "./netns.ts";
import {
  allHosts,
  controlPlanePodRoutes,
  EXT_TRUNK_IF,
  EXT_TRUNK_PORT,
  FLAT_UPLINK_IF,
  HOST_UNDERLAY_IF,
  type Host,
  type Topology,
  UNDERLAY_BRIDGE,
  UNDERLAY_GATEWAY,
  UNDERLAY_PREFIX_LEN,
  ZSTACK_FLAT_BRIDGE,
} from "./topology.ts";

async function linkNames(netns: string): Promise<Set<string>> {
  const out = await run("ip", ["-n", netns, "-o", "link", "show"]);
  const names = new Set<string>();
  for (const line of out.split("\n")) {
    const m = /^\d+:\s+([^:@\s]+)/.exec(line);
    if (m) names.add(m[1] as string);
  }
  return names;
}

/** Address commands for a host that keeps its underlay address on eth0 (all but the nodes, which use br-phy). */
export function hostAddressLines(host: Host, withDefaultRoute: boolean): string[] {
  const lines = ["link set lo up", `link set ${HOST_UNDERLAY_IF} up`];
  for (const ip of [host.ip, ...host.extraIps]) {
    lines.push(`address replace ${ip}/${UNDERLAY_PREFIX_LEN} dev ${HOST_UNDERLAY_IF}`);
  }
  if (withDefaultRoute) lines.push(`route replace default via ${UNDERLAY_GATEWAY} dev ${HOST_UNDERLAY_IF}`);
  return lines;
}

/** The control-plane host's addresses, its default route, and in real-node mode its routes to the pods. */
export function controlPlaneLines(topo: Topology): string[] {
  const lines = hostAddressLines(topo.controlPlane, true);
  const pods = controlPlanePodRoutes(topo);
  for (const cidr of pods?.cidrs ?? [])
    lines.push(`route replace ${cidr} via ${pods?.via} dev ${HOST_UNDERLAY_IF}`);
  return lines;
}

/**
 * The userspace datapath cannot complete checksums a kernel left to offload, so TCP and UDP from a veth with
 * TX offload on are dropped once they reach OVS. Every host end sends with full checksums.
 */
async function disableTxOffload(netns: string, ifname: string = HOST_UNDERLAY_IF): Promise<void> {
  await run("nsenter", [`--net=${netnsPath(netns)}`, "--", "ethtool", "-K", ifname, "tx", "off"]);
}

/** A host's flat network link's end in the underlay netns (`up --zstack`). */
function flatPort(h: Host): string {
  return `${h.underlayPort}f`;
}

/** Creates whatever is missing of the underlay and the hosts' links; the netns names must already be recorded. */
export async function ensureUnderlay(topo: Topology): Promise<void> {
  const hosts = allHosts(topo);
  await ensureNetns([topo.underlayNetns, ...hosts.map((h) => h.netns)]);
  const existing = await linkNames(topo.underlayNetns);
  const rootLines: string[] = [];
  for (const h of hosts) {
    if (existing.has(h.underlayPort)) continue;
    rootLines.push(
      `link add name ${h.underlayPort} netns ${topo.underlayNetns} type veth peer name ${HOST_UNDERLAY_IF} netns ${h.netns}`,
    );
  }
  // `up --zstack`: ZStack's flat network, a link per node and per hypervisor (eth1) on a bridge of its own.
  const flatHosts = topo.zstack ? [...topo.nodes, ...topo.zstack.hypervisors] : [];
  for (const h of flatHosts) {
    if (existing.has(flatPort(h))) continue;
    rootLines.push(
      `link add name ${flatPort(h)} netns ${topo.underlayNetns} type veth peer name ${FLAT_UPLINK_IF} netns ${h.netns}`,
    );
  }
  // The external host's trunk, for the underlay VLAN (external-vlan.ts puts it on an OVS bridge there).
  if (!existing.has(EXT_TRUNK_PORT))
    rootLines.push(
      `link add name ${EXT_TRUNK_PORT} netns ${topo.underlayNetns} type veth peer name ${EXT_TRUNK_IF} netns ${topo.external.netns}`,
    );
  await ipBatch(rootLines);
  const underlayLines = ["link set lo up"];
  if (!existing.has(UNDERLAY_BRIDGE))
    underlayLines.push(`link add ${UNDERLAY_BRIDGE} type bridge stp_state 0 forward_delay 0`);
  underlayLines.push(`link set ${UNDERLAY_BRIDGE} up`);
  for (const h of hosts) underlayLines.push(`link set ${h.underlayPort} master ${UNDERLAY_BRIDGE} up`);
  underlayLines.push(`link set ${EXT_TRUNK_PORT} master ${UNDERLAY_BRIDGE} up`);
  if (topo.zstack) {
    if (!existing.has(ZSTACK_FLAT_BRIDGE))
      underlayLines.push(`link add ${ZSTACK_FLAT_BRIDGE} type bridge stp_state 0 forward_delay 0`);
    underlayLines.push(`link set ${ZSTACK_FLAT_BRIDGE} up`);
    for (const h of flatHosts) underlayLines.push(`link set ${flatPort(h)} master ${ZSTACK_FLAT_BRIDGE} up`);
  }
  await ipBatch(underlayLines, topo.underlayNetns);

  await Promise.all([
    ipBatch(controlPlaneLines(topo), topo.controlPlane.netns),
    ipBatch([...hostAddressLines(topo.external, false), `link set ${EXT_TRUNK_IF} up`], topo.external.netns),
    // Nodes and ZStack's hypervisors keep their address on br-phy.
    ...[...topo.nodes, ...(topo.zstack?.hypervisors ?? [])].map((n) =>
      ipBatch(
        [
          "link set lo up",
          `link set ${HOST_UNDERLAY_IF} up`,
          ...(topo.zstack ? [`link set ${FLAT_UPLINK_IF} up`] : []),
        ],
        n.netns,
      ),
    ),
    ...(topo.zstack
      ? [ipBatch(hostAddressLines(topo.zstack.controller, true), topo.zstack.controller.netns)]
      : []),
  ]);
  await Promise.all([
    ...hosts.map((h) => disableTxOffload(h.netns)),
    disableTxOffload(topo.external.netns, EXT_TRUNK_IF),
    ...flatHosts.map((h) => disableTxOffload(h.netns, FLAT_UPLINK_IF)),
  ]);
}
