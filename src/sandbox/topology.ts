// The sandbox's names and address plan, derived from a few options. Pure: every other module asks here
// which netns, interface or address a host has, so the plan is written down exactly once.

import { FLAT, OVERLAY } from "./zstack/content.ts";

export type Encap = "vxlan" | "geneve";

export interface SandboxSpec {
  /** Instance name; every netns is named `${name}-...`, so a sweep by prefix touches only this sandbox. */
  name: string;
  nodes: number;
  /** Three-member Raft clusters for NB and SB instead of one standalone server each. */
  raft: boolean;
  encap: Encap;
  /** Run zstack-ovnkube-node on every node; it then owns the chassis settings instead of the sandbox. */
  nodeAgent?: boolean;
  /** Real nodes: containerd and a real kubelet on every node instead of the node simulator. */
  kubelet?: boolean;
  /**
   * Real nodes with the product installed by its Helm chart (OVN central, the controller and the node DaemonSet
   * with ovn-controller, the agent and the CNI as pods) instead of sandbox processes. Needs `kubelet`.
   */
  chart?: boolean;
  /**
   * External mode against a simulated ZStack (docs/sandbox.md, "`up --zstack`"): instead of our OVN central, a
   * ZStack controller host runs the simulator's NB, SB and northd with ZStack's content, two hypervisors run its
   * VMs, and the controller and the node agents use ZStack's NB and SB (`ovn.mode=external`). Geneve only. With
   * `raft`, ZStack's NB and SB are 3-member Raft clusters.
   */
  zstack?: boolean;
}

export const DEFAULT_SPEC: SandboxSpec = {
  name: "zsb",
  nodes: 3,
  raft: false,
  encap: "vxlan",
  nodeAgent: true,
};

export const UNDERLAY_PREFIX_LEN = 24;
/** Held by the external host; nodes route by default towards it, and it forwards nothing further. */
export const UNDERLAY_GATEWAY = "192.168.200.1";
export const SERVICE_CIDR = "10.96.0.0/16";
/** The controller's default cluster network (the default Subnet's); the sandbox passes no other. */
export const CLUSTER_CIDR = "10.244.0.0/16";
export const KUBERNETES_SERVICE_IP = "10.96.0.1";
/** The cluster DNS Service (`kube-system/kube-dns`) of the real-node sandbox, the kubelet's clusterDNS. */
export const CLUSTER_DNS_IP = "10.96.0.10";
export const CLUSTER_DOMAIN = "cluster.local";
export const APISERVER_PORT = 6443;
export const NB_PORT = 6641;
export const SB_PORT = 6642;
export const NB_RAFT_PORT = 6643;
export const SB_RAFT_PORT = 6644;
export const UNDERLAY_BRIDGE = "br-underlay";
/** The interface each host netns has on the underlay. */
export const HOST_UNDERLAY_IF = "eth0";
/**
 * The provider network the sandbox's underlay VLAN is on: each node maps it to br-phy (which holds eth0), so a
 * provider network Subnet's pods send VLAN-tagged frames onto the underlay.
 */
export const SANDBOX_PROVIDER = "physnet1";
/**
 * The underlay VLAN. The external host routes it at `gateway`, the address a provider network Subnet on this
 * VLAN names as its gateway. The machine's kernel has no 802.1Q support (no VLAN devices, no bridge VLAN
 * filtering), so the external host takes the VLAN through an OVS bridge of its own on a second underlay link.
 */
export const UNDERLAY_VLAN = {
  id: 100,
  cidr: "172.30.100.0/24",
  gateway: "172.30.100.1",
  prefixLen: 24,
} as const;
/** The external host's trunk to the underlay (all VLANs; untagged frames go nowhere on it). */
export const EXT_TRUNK_IF = "eth1";
/** Its name inside the underlay netns. */
export const EXT_TRUNK_PORT = "ext-trunk";
/** The external host's OVS bridge holding the trunk and the VLAN's access port. */
export const EXT_VLAN_BRIDGE = "br-vlan";
/** The external host's interface on the underlay VLAN (an OVS internal port, access VLAN UNDERLAY_VLAN.id). */
export const EXT_VLAN_IF = `vlan${UNDERLAY_VLAN.id}`;
export const MAX_NODES = 80;

export type HostRole = "control-plane" | "node" | "external" | "zstack-controller" | "hypervisor";

/** `up --zstack`: ZStack's controller host (NB, SB, northd) and its hypervisors' management IPs, clear of the nodes. */
export const ZSTACK_CONTROLLER_OCTET = 201;
/** `up --zstack --raft`: the further addresses of ZStack's controller host, one per Raft member after the first. */
export const ZSTACK_RAFT_MEMBER_OCTETS = [202, 203] as const;
export const ZSTACK_HOST_OCTETS = [211, 212] as const;
/**
 * `up --zstack`: ZStack's networks the sandbox's pods join, each by a Subnet for one namespace. `vmRange` is ZStack's
 * part of the network (its VMs, its IP range), given to the Subnet as excludeIPs: the pods get the rest
 * (docs/external-mode.md, "Conflicts"). The flat network has no router of ZStack's: its gateway answers nothing.
 */
export interface ZStackNetworkPlan {
  /** Which of ZStack's switches (the simulator's role `<network>-switch`). */
  network: "overlay" | "flat";
  subnet: string;
  namespace: string;
  cidr: string;
  gateway: string;
  vmRange: string;
  /**
   * Whether the demo checks the cluster's paths (node → pod, pod → node, pod → Service) to the switch's pods
   * (through our router port on it; on the flat switch too, with the nodes' chassis MACs; docs/external-mode.md).
   */
  clusterPath: boolean;
}

export const ZSTACK_NETWORKS: readonly ZStackNetworkPlan[] = [
  {
    network: "overlay",
    subnet: "zs-overlay",
    namespace: "zstack",
    cidr: OVERLAY.cidr4,
    gateway: OVERLAY.gateway4,
    vmRange: "10.60.0.2..10.60.0.127",
    clusterPath: true,
  },
  {
    network: "flat",
    subnet: "zs-flat",
    namespace: "zstack-flat",
    cidr: FLAT.cidr4,
    gateway: "192.168.100.1",
    vmRange: "192.168.100.2..192.168.100.127",
    clusterPath: true,
  },
];
/**
 * `up --zstack`: ZStack's flat network, a second Linux bridge in the underlay netns. ZStack's hosts and our nodes
 * have a second link on it (FLAT_UPLINK_IF), the uplink of their provider bridge for ZStack's provider `flat`.
 */
export const ZSTACK_FLAT_BRIDGE = "br-zsflat";
export const FLAT_UPLINK_IF = "eth1";
export const FLAT_PROVIDER_BRIDGE = "br-flat";

/** A VM of ZStack's in the sandbox: a netns whose veth's other end (ZStack's tap name) is on its host's br-int. */
export interface ZStackVmPlan {
  /** Short name in the CLI (`exec vm21`); the VM number is in it (port name, MAC). */
  name: string;
  vm: number;
  netns: string;
  /** The hypervisor's short name (zh1, zh2). */
  host: string;
  network: "overlay" | "flat";
  ip: string;
  prefixLen: number;
  gateway: string;
  /** The host end of the VM's veth, on br-int: vnic<vm>.0, as ZStack names its taps. */
  tap: string;
}

export interface ZStackPlan {
  controller: Host;
  hypervisors: Host[];
  vms: ZStackVmPlan[];
}

export interface Host {
  role: HostRole;
  /** Short name used in the CLI, logs and directories: cp, node1, ext. For nodes also the Kubernetes node name. */
  name: string;
  netns: string;
  /** The primary underlay address; for nodes it lives on br-phy. */
  ip: string;
  /** Further underlay addresses on the same interface. */
  extraIps: string[];
  /** Name of this host's veth end inside the underlay netns. */
  underlayPort: string;
}

export interface Topology {
  spec: SandboxSpec;
  prefix: string;
  underlayNetns: string;
  controlPlane: Host;
  /** OVN central members; one unless spec.raft. */
  centralIps: string[];
  nodes: Host[];
  external: Host;
  /** Where the OVN databases and northd run: the control-plane host, or with `zstack` ZStack's controller. */
  central: Host;
  zstack?: ZStackPlan;
}

const NAME_RE = /^[a-z][a-z0-9]{1,9}$/;

/** The name becomes a directory and the netns prefix, so anything else could reach outside the instance. */
export function validateName(name: string): void {
  if (!NAME_RE.test(name))
    throw new Error(`sandbox name "${name}" must match ${NAME_RE} (it prefixes netns names)`);
}

export function validateSpec(spec: SandboxSpec): void {
  validateName(spec.name);
  if (!Number.isInteger(spec.nodes) || spec.nodes < 1 || spec.nodes > MAX_NODES) {
    throw new Error(`node count ${spec.nodes} must be an integer from 1 to ${MAX_NODES}`);
  }
  if (spec.encap !== "vxlan" && spec.encap !== "geneve") {
    throw new Error(`encap "${String(spec.encap)}" must be vxlan or geneve`);
  }
  if (spec.zstack) {
    const clash = [
      spec.kubelet && "--kubelet",
      spec.chart && "--chart",
      spec.nodeAgent === false && "--no-node-agent",
      spec.encap !== "geneve" && `--encap ${spec.encap} (ZStack's hosts use geneve)`,
    ].filter(Boolean);
    if (clash.length > 0)
      throw new Error(
        `--zstack runs the node simulator with the node agent on geneve against a simulated ZStack; it does not combine with ${clash.join(", ")}`,
      );
  }
}

function underlayIp(lastOctet: number): string {
  return `192.168.200.${lastOctet}`;
}

export function nodeName(index: number): string {
  return `node${index}`;
}

export function planTopology(spec: SandboxSpec): Topology {
  validateSpec(spec);
  const prefix = `${spec.name}-`;
  const zstack = spec.zstack ? planZStack(prefix, spec.raft) : undefined;
  const centralIps = zstack
    ? [zstack.controller.ip, ...zstack.controller.extraIps]
    : spec.raft
      ? [underlayIp(2), underlayIp(3), underlayIp(4)]
      : [underlayIp(2)];
  const controlPlane: Host = {
    role: "control-plane",
    name: "cp",
    netns: `${prefix}cp`,
    ip: underlayIp(2),
    extraIps: zstack ? [] : centralIps.slice(1),
    underlayPort: "cp",
  };
  const nodes: Host[] = [];
  for (let i = 1; i <= spec.nodes; i++) {
    const name = nodeName(i);
    nodes.push({
      role: "node",
      name,
      netns: `${prefix}${name}`,
      ip: underlayIp(10 + i),
      extraIps: [],
      underlayPort: name,
    });
  }
  const external: Host = {
    role: "external",
    name: "ext",
    netns: `${prefix}ext`,
    ip: underlayIp(100),
    extraIps: [UNDERLAY_GATEWAY],
    underlayPort: "ext",
  };
  return {
    spec,
    prefix,
    underlayNetns: `${prefix}underlay`,
    controlPlane,
    centralIps,
    nodes,
    external,
    central: zstack?.controller ?? controlPlane,
    ...(zstack ? { zstack } : {}),
  };
}

/**
 * ZStack's controller host, its two hypervisors, and on each a VM on the overlay switch and one on the flat. With
 * `raft` the controller host holds one address per member of ZStack's NB and SB clusters, as the control-plane
 * host does for our own `--raft`.
 */
function planZStack(prefix: string, raft: boolean): ZStackPlan {
  const host = (role: HostRole, name: string, octet: number): Host => ({
    role,
    name,
    netns: `${prefix}${name}`,
    ip: underlayIp(octet),
    extraIps: [],
    underlayPort: name,
  });
  const hypervisors = ZSTACK_HOST_OCTETS.map((o, i) => host("hypervisor", `zh${i + 1}`, o));
  // vm21, vm22 on the overlay switch; vm31, vm32 on the flat switch; one of each on each hypervisor.
  const vms = ZSTACK_NETWORKS.flatMap((net, n) =>
    hypervisors.map((h, i): ZStackVmPlan => {
      const vm = 21 + 10 * n + i;
      const base = net.cidr.split(".").slice(0, 3).join(".");
      return {
        name: `vm${vm}`,
        vm,
        netns: `${prefix}vm${vm}`,
        host: h.name,
        network: net.network,
        ip: `${base}.${vm}`,
        prefixLen: 24,
        gateway: net.gateway,
        tap: `vnic${vm}.0`,
      };
    }),
  );
  const controller = host("zstack-controller", "zs", ZSTACK_CONTROLLER_OCTET);
  if (raft) controller.extraIps = ZSTACK_RAFT_MEMBER_OCTETS.map(underlayIp);
  return { controller, hypervisors, vms };
}

/** Every host on the underlay: control-plane, nodes, external, and with `zstack` ZStack's controller and hosts. */
export function allHosts(topo: Topology): Host[] {
  const zs = topo.zstack ? [topo.zstack.controller, ...topo.zstack.hypervisors] : [];
  return [topo.controlPlane, ...topo.nodes, topo.external, ...zs];
}

/** Every netns of the instance: the underlay, the hosts', and ZStack's VMs'. */
export function allNetns(topo: Topology): string[] {
  return [
    topo.underlayNetns,
    ...allHosts(topo).map((h) => h.netns),
    ...(topo.zstack?.vms ?? []).map((v) => v.netns),
  ];
}

/** The chassis name a node registers: the node name, or in External mode (`zstack`) k8s-<node>. */
export function chassisOf(topo: Topology, node: Host): string {
  return topo.spec.zstack ? `k8s-${node.name}` : node.name;
}

export function findHost(topo: Topology, name: string): Host | undefined {
  const aliases: Record<string, string> = { "control-plane": "cp", external: "ext" };
  const wanted = aliases[name] ?? name;
  return allHosts(topo).find((h) => h.name === wanted);
}

/** `tcp:IP:PORT,...` for every central member, the form ovn-controller and ovn-nbctl take. */
export function centralRemote(topo: Topology, port: number): string {
  return topo.centralIps.map((ip) => `tcp:${ip}:${port}`).join(",");
}

/**
 * Real-node mode: the control-plane host reaches the pod network and the Services the way a control-plane
 * host that is not itself a node does, by a route through a node (the first). That node's agent admits the
 * control-plane host's addresses (`podAccessFrom`) and masquerades them to its management port address, so
 * the answer of a pod on any node returns through it. The apiserver needs this for its proxy to pods and
 * Services (`pods/proxy`, `services/proxy`, `kubectl proxy`). The simulator mode keeps no such route.
 */
export function controlPlanePodRoutes(topo: Topology): { cidrs: string[]; via: string } | undefined {
  const first = topo.nodes[0];
  if (!topo.spec.kubelet || !topo.spec.nodeAgent || !first) return undefined;
  return { cidrs: [CLUSTER_CIDR, SERVICE_CIDR], via: first.ip };
}

/** The control-plane host's addresses as /32 sources for the nodes' `podAccessFrom`. */
export function controlPlaneSources(topo: Topology): string[] {
  return [topo.controlPlane.ip, ...topo.controlPlane.extraIps].map((ip) => `${ip}/32`);
}

export function apiserverUrl(topo: Topology): string {
  return `https://${topo.controlPlane.ip}:${APISERVER_PORT}`;
}
