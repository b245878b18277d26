// Stand-in for the node agent under `up --no-node-agent`: ovn-controller's settings in the node's Open_vSwitch
// table. They belong to zstack-ovnkube-node (which also owns br-int); without it the sandbox writes them so
// that the chassis register.

import { centralRemote, type Host, SANDBOX_PROVIDER, SB_PORT, type Topology } from "./topology.ts";

export function chassisExternalIds(topo: Topology, node: Host): Record<string, string> {
  return {
    "ovn-remote": centralRemote(topo, SB_PORT),
    "ovn-encap-type": topo.spec.encap,
    "ovn-encap-ip": node.ip,
    "system-id": node.name,
    hostname: node.name,
    // Without the OVS kernel module br-int must use the userspace datapath too.
    "ovn-bridge-datapath-type": "netdev",
    // br-phy (sandbox/node.ts) carries the underlay and its VLAN for provider network Subnets.
    "ovn-bridge-mappings": `${SANDBOX_PROVIDER}:br-phy`,
  };
}

/** ovs-vsctl arguments writing the settings, run inside the node's namespaces. */
export function chassisConfigArgs(topo: Topology, node: Host): string[] {
  const args = ["set", "Open_vSwitch", "."];
  for (const [k, v] of Object.entries(chassisExternalIds(topo, node))) args.push(`external_ids:${k}="${v}"`);
  return args;
}
