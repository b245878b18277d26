// The external host's leg on the underlay VLAN: an ovsdb-server and ovs-vswitchd of its own (userspace datapath,
// files under the sandbox's directory) with a bridge holding its trunk (eth1) and an internal port on access
// VLAN UNDERLAY_VLAN.id that carries the VLAN's gateway address. A switch port plus a router, as a provider network
// expects to find upstream. OVS does the 802.1Q work because this machine's kernel cannot.

import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ipBatch, run } from "./command.ts";
import { runSelfDetaching } from "./daemon.ts";
import type { Layout } from "./layout.ts";
import { netnsPath } from "./netns.ts";
import { liveDaemon, recordDaemon, type SandboxState } from "./state.ts";
import { EXT_TRUNK_IF, EXT_VLAN_BRIDGE, EXT_VLAN_IF, type Topology, UNDERLAY_VLAN } from "./topology.ts";

const VSWITCH_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema";

/** The directory of the external host's OVS: database, sockets, pidfiles and logs. */
export function externalOvsDir(layout: Layout): string {
  return join(layout.root, "ext-ovs");
}

/** The external host's OVS database, for ovs-vsctl --db. */
export function externalOvsRemote(layout: Layout): string {
  return `unix:${join(externalOvsDir(layout), "db.sock")}`;
}

/** Starts what is missing: the two daemons, the bridge and its ports, the gateway address. */
export async function ensureExternalVlan(layout: Layout, topo: Topology, state: SandboxState): Promise<void> {
  const dir = externalOvsDir(layout);
  mkdirSync(dir, { recursive: true });
  // Control sockets and defaults under dir, never the machine's /var/run/openvswitch.
  const env = { ...process.env, OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVS_SYSCONFDIR: dir };
  const place = { netns: topo.external.netns };
  const db = join(dir, "conf.db");
  if (!existsSync(db)) await run("ovsdb-tool", ["create", db, VSWITCH_SCHEMA]);
  const remote = externalOvsRemote(layout);
  if (!liveDaemon(state, "ext/ovsdb-server")) {
    const log = join(dir, "ovsdb-server.log");
    const pidfile = join(dir, "ovsdb-server.pid");
    const args = [
      db,
      `--remote=p${remote}`,
      `--pidfile=${pidfile}`,
      `--log-file=${log}`,
      `--unixctl=${join(dir, "ovsdb-server.ctl")}`,
      "--detach",
      "--no-chdir",
    ];
    const id = await runSelfDetaching(place, "ovsdb-server", args, pidfile, env);
    recordDaemon(layout, state, { name: "ext/ovsdb-server", log, ...id });
    await run("ovs-vsctl", [`--db=${remote}`, "--no-wait", "init"]);
  }
  if (!liveDaemon(state, "ext/ovs-vswitchd")) {
    const log = join(dir, "ovs-vswitchd.log");
    const pidfile = join(dir, "ovs-vswitchd.pid");
    const args = [
      remote,
      `--pidfile=${pidfile}`,
      `--log-file=${log}`,
      `--unixctl=${join(dir, "ovs-vswitchd.ctl")}`,
      "--detach",
      "--no-chdir",
    ];
    const id = await runSelfDetaching(place, "ovs-vswitchd", args, pidfile, env);
    recordDaemon(layout, state, { name: "ext/ovs-vswitchd", log, ...id });
  }
  await run("ovs-vsctl", [
    `--db=${remote}`,
    "--timeout=30",
    "--may-exist",
    "add-br",
    EXT_VLAN_BRIDGE,
    "--",
    "set",
    "Bridge",
    EXT_VLAN_BRIDGE,
    "datapath_type=netdev",
    "--",
    "--may-exist",
    "add-port",
    EXT_VLAN_BRIDGE,
    EXT_TRUNK_IF,
    "--",
    "--may-exist",
    "add-port",
    EXT_VLAN_BRIDGE,
    EXT_VLAN_IF,
    `tag=${UNDERLAY_VLAN.id}`,
    "--",
    "set",
    "Interface",
    EXT_VLAN_IF,
    "type=internal",
  ]);
  // ovs-vswitchd creates the internal port's device a moment after the transaction.
  for (let i = 0; ; i++) {
    const links = await run("ip", ["-n", topo.external.netns, "-o", "link", "show"]);
    if (links.includes(`: ${EXT_VLAN_IF}:`)) break;
    if (i >= 100) throw new Error(`${EXT_VLAN_IF} did not appear on the external host`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await ipBatch(
    [
      `link set ${EXT_VLAN_IF} up`,
      `address replace ${UNDERLAY_VLAN.gateway}/${UNDERLAY_VLAN.prefixLen} dev ${EXT_VLAN_IF}`,
    ],
    topo.external.netns,
  );
  // What the external host sends into the userspace datapath must carry full checksums (see underlay.ts).
  await run("nsenter", [
    `--net=${netnsPath(topo.external.netns)}`,
    "--",
    "ethtool",
    "-K",
    EXT_VLAN_IF,
    "tx",
    "off",
  ]);
  // The trunk is OVS's: the host's own stack must not answer on it (ARP for its eth0 addresses would otherwise
  // be answered twice, once with the trunk's MAC). Per-netns settings, written inside the external host's netns.
  await run("nsenter", [
    `--net=${netnsPath(topo.external.netns)}`,
    "--",
    "sysctl",
    "-q",
    "-w",
    `net.ipv4.conf.${EXT_TRUNK_IF}.arp_ignore=8`,
    `net.ipv6.conf.${EXT_TRUNK_IF}.disable_ipv6=1`,
  ]);
}
