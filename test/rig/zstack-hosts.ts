// ZStack's hypervisors for the simulator: each a test node (netns, its own OVS on the userspace datapath, see
// ovs-node.ts) set up as ZStack sets up its hosts: br-phy carrying the management IP on the underlay link
// (userspace tunnelling needs the tunnel endpoint on an OVS bridge), br-int with datapath_type=netdev,
// ovn-controller bound to the simulator's SB with chassis hostname = the management IP, ovn-monitor-all=true and
// ovn-bridge-mappings=flat:br-flat. The hosts' links (eth0 on br-phy: the management network; eth1 on br-flat: the
// flat network) meet on a Linux bridge per network in a "wire" namespace, where further machines (nodes of ours)
// can be plugged in.
// VMs are network namespaces whose veth's host end (named like ZStack's tap, vnic<vm>.<dev>) is on br-int with
// the VM port's name as iface-id. Everything is removed with the nodes.

import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type NetnsHandle, type OvsNode, startOvsNode } from "./ovs-node.ts";
import { type Daemon, runTool, spawnDaemon } from "./process.ts";
import type { AfterHook } from "./teardown.ts";
import { teardownFor } from "./teardown.ts";
import { FLAT, type ZStackSim } from "./zstack-sim.ts";

export interface Hypervisor {
  readonly node: OvsNode;
  /** Management IP, also the chassis hostname. */
  readonly ip: string;
  readonly systemId: string;
}

export interface Vm {
  readonly netns: NetnsHandle;
  readonly ip: string;
  readonly host: Hypervisor;
}

export interface ZStackHosts {
  readonly hosts: readonly Hypervisor[];
  /** Binds a VM port of the simulator (by role or port name, MAC, address) to a new VM namespace on `host`. */
  startVm(
    host: Hypervisor,
    port: { name: string; mac: string; ip: string; prefix: number; tap: string },
  ): Promise<Vm>;
  /** Waits until ovn-controller on the VM's host installed the VM's port (ovn-installed). */
  waitInstalled(vm: Vm, tap: string): Promise<void>;
  /**
   * Plugs another machine (a node of ours) into one of the hosts' networks: a veth named `ifname` in the netns at
   * `netnsPath`, its peer on that network's bridge. Removed with the hosts (or with that netns). Resolves with the
   * peer's name on the bridge (in `wire`).
   */
  plug(netnsPath: string, ifname: string, network: Network): Promise<string>;
  /** The name of the "wire" namespace holding a Linux bridge per network (named as the network). */
  readonly wire: string;
  stop(): Promise<void>;
}

/** The hosts' two networks: management (the tunnels' underlay, br-phy) and flat (localnet, br-flat). */
export type Network = "mgmt" | "flat";
const NETWORKS: readonly Network[] = ["mgmt", "flat"];

/**
 * ovn-controller on a test node (its own run and log directory), bound to the node's OVS; it waits for its
 * settings (ovn-remote, system-id, encapsulation) in the Open_vSwitch row.
 */
export async function spawnOvnController(node: OvsNode): Promise<Daemon> {
  const dir = join(node.dir, "ovn-controller");
  await runTool("mkdir", ["-p", dir]);
  const env = {
    ...process.env,
    OVS_RUNDIR: node.ovs.dir,
    OVS_LOGDIR: node.ovs.dir,
    OVN_RUNDIR: dir,
    OVN_LOGDIR: dir,
  };
  return spawnDaemon(
    "nsenter",
    [
      `--net=${node.netns.path}`,
      "--",
      "ovn-controller",
      node.ovs.unix,
      "--no-chdir",
      `--pidfile=${join(dir, "ovn-controller.pid")}`,
      `--log-file=${join(dir, "ovn-controller.log")}`,
    ],
    { env, outputFile: join(dir, "ovn-controller.out") },
  );
}

const MTU = 1400;

export async function startZStackHosts(sim: ZStackSim): Promise<ZStackHosts> {
  const nodes: OvsNode[] = [];
  const daemons: Daemon[] = [];
  const stop = async () => {
    for (const d of daemons.splice(0).reverse()) await d.terminate();
    for (const n of nodes.splice(0).reverse()) await n.stop();
  };
  try {
    for (let i = 0; i < sim.hosts.length; i++) nodes.push(await startOvsNode());
    // The management network and the flat network: a Linux bridge each in a "wire" namespace, one link per host
    // (and per further machine plugged in: a node of ours).
    const wire = await (nodes[0] as OvsNode).addNetns("wire");
    for (const net of NETWORKS) {
      await runTool("ip", ["-n", wire.name, "link", "add", net, "type", "bridge"]);
      await runTool("ip", ["-n", wire.name, "link", "set", net, "up"]);
    }
    let plugged = 0;
    const plug: ZStackHosts["plug"] = async (netnsPath, ifname, network) => {
      const end = `p${plugged++}`;
      await runTool("ip", [
        "-n",
        wire.name,
        "link",
        "add",
        end,
        "type",
        "veth",
        "peer",
        "name",
        ifname,
        "netns",
        netnsPath,
      ]);
      await runTool("ip", ["-n", wire.name, "link", "set", end, "master", network, "up"]);
      return end;
    };
    for (const node of nodes) {
      await plug(node.netns.path, "eth0", "mgmt");
      await plug(node.netns.path, "eth1", "flat");
    }
    const hosts: Hypervisor[] = [];
    for (const [i, node] of nodes.entries()) {
      const ip = sim.hosts[i] as string;
      const systemId = `zstack-host-${i + 1}`;
      await node.exec("ip", ["link", "set", "eth0", "up"]);
      await node.exec("ip", ["link", "set", "eth1", "up"]);
      await node.vsctl(
        "add-br",
        "br-phy",
        "--",
        "set",
        "Bridge",
        "br-phy",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-phy",
        "eth0",
        "--",
        "add-br",
        "br-flat",
        "--",
        "set",
        "Bridge",
        "br-flat",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-flat",
        "eth1",
        "--",
        "add-br",
        "br-int",
        "--",
        "set",
        "Bridge",
        "br-int",
        "datapath_type=netdev",
        "fail-mode=secure",
        "other-config:disable-in-band=true",
      );
      await node.exec("ip", ["link", "set", "br-phy", "up"]);
      await node.exec("ip", ["address", "add", `${ip}/24`, "dev", "br-phy"]);
      await node.vsctl(
        "set",
        "Open_vSwitch",
        ".",
        `external_ids:system-id=${systemId}`,
        `external_ids:hostname=${ip}`,
        `external_ids:ovn-remote=${sim.sbRemotes.join(",")}`,
        "external_ids:ovn-encap-type=geneve",
        `external_ids:ovn-encap-ip=${ip}`,
        "external_ids:ovn-monitor-all=true",
        `external_ids:ovn-bridge-mappings=${FLAT.network}:br-flat`,
        "external_ids:ovn-bridge-datapath-type=netdev",
      );
      daemons.push(await spawnOvnController(node));
      hosts.push({ node, ip, systemId });
    }

    const startVm: ZStackHosts["startVm"] = async (host, port) => {
      const ns = await host.node.addNetns(port.tap.replace(/[^a-z0-9]/g, ""));
      await host.node.exec("ip", [
        "link",
        "add",
        port.tap,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        ns.name,
      ]);
      const inVm = (args: string[]) => host.node.execIn(ns.path, "ip", args);
      await inVm(["link", "set", "eth0", "address", port.mac, "mtu", String(MTU)]);
      await inVm(["address", "add", `${port.ip}/${port.prefix}`, "dev", "eth0"]);
      await inVm(["link", "set", "eth0", "up"]);
      // The userspace datapath does not fill in checksums a veth left to offload.
      await host.node.execIn(ns.path, "ethtool", ["-K", "eth0", "tx", "off"]);
      await host.node.exec("ip", ["link", "set", port.tap, "mtu", String(MTU), "up"]);
      await host.node.vsctl(
        "add-port",
        "br-int",
        port.tap,
        "--",
        "set",
        "Interface",
        port.tap,
        `external_ids:iface-id=${port.name}`,
      );
      return { netns: ns, ip: port.ip, host };
    };

    const waitInstalled: ZStackHosts["waitInstalled"] = async (vm, tap) => {
      for (let i = 0; ; i++) {
        const ids = await vm.host.node.vsctl(
          "--if-exists",
          "get",
          "Interface",
          tap,
          "external_ids:ovn-installed",
        );
        if (ids.trim() === '"true"') return;
        if (i > 1200) throw new Error(`ovn-controller on ${vm.host.systemId} never installed ${tap}`);
        await sleep(100);
      }
    };
    return { hosts, startVm, waitInstalled, plug, wire: wire.name, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function useZStackHosts(t: AfterHook, sim: ZStackSim): Promise<ZStackHosts> {
  const hosts = await startZStackHosts(sim);
  teardownFor(t).after(() => hosts.stop());
  return hosts;
}
