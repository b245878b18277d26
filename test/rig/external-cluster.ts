// A cluster of ours in External mode next to a simulated ZStack: a real apiserver with the Subnet CRD, the ZStack
// simulator (its NB, SB and northd) with its two hypervisors (netdev br-int, ovn-controller, VMs as network
// namespaces), the controller in-process with ovn.mode=external on ZStack's NB, and nodes of ours: each a test node
// (its own OVS on the userspace datapath and ovn-controller) plugged into the hypervisors' management network
// (br-phy holding the tunnel endpoint, as the hosts have it) and flat network (an uplink for the provider bridge),
// with the node agent's pieces wired as zstack-ovnkube-node wires them in External mode: its configuration read by
// the agent's own loader from the variables an operator sets (ZSTACK_OVN_MODE=external, ZSTACK_BRIDGE_MAPPINGS=
// flat:br-flat:eth1 or the Node's provider labels, ...), the provider mappings, NodeSetup (br-int, the provider
// bridge it creates, ovn-controller's settings), the SB chassis check that hands the chassis name k8s-<node> to
// ovn-controller, and the CNI handler with the pod watch. Each node has its Node object.
// Pods are created through the apiserver (spec.nodeName set: no scheduler runs) and attached by a CNI ADD through
// the agent's request path (dispatch, handler, PodAttacher). Everything is stopped when the test ends, passed or
// failed (teardownFor).

import { AgentCniHandler } from "../../src/agent/cni-handler.ts";
import { loadNodeConfig } from "../../src/agent/config.ts";
import { NodeProviders } from "../../src/agent/node-providers.ts";
import { NodePods } from "../../src/agent/pod-networks.ts";
import { mgmtRouteCidrs } from "../../src/agent/subnet-routes.ts";
import { dispatch } from "../../src/cni/dispatch.ts";
import { parseCidr } from "../../src/ipam/cidr.ts";
import type { ApiClient } from "../../src/k8s/api-client.ts";
import { type ChassisCheck, ChassisWatch } from "../../src/node/external-chassis.ts";
import { externalSb } from "../../src/node/external-sb.ts";
import { MGMT_PORT_ANNOTATION, parseMgmtPortAnnotation } from "../../src/node/mgmt-port.ts";
import { interfaceWithAddress, podMtu } from "../../src/node/mtu.ts";
import { NodeSetup } from "../../src/node/node-setup.ts";
import { INTEGRATION_BRIDGE } from "../../src/node/ovs-bridge.ts";
import { PodAttacher } from "../../src/node/pod-attachment.ts";
import { PROVIDER_BRIDGE_LABEL, PROVIDER_UPLINK_LABEL } from "../../src/node/provider-labels.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { type VswitchTables, vswitchModel } from "../../src/ovsdb/models/vswitch.generated.ts";
import { startInProcess, until, useApiserver } from "../integration/controller/harness.ts";
import type { DatabaseDump } from "./dump-format.ts";
import { type NetnsHandle, type OvsNode, startOvsNode } from "./ovs-node.ts";
import { type AfterHook, teardownFor } from "./teardown.ts";
import {
  type Hypervisor,
  spawnOvnController,
  useZStackHosts,
  type Vm,
  type ZStackHosts,
} from "./zstack-hosts.ts";
import { FLAT, useZStackSim, type VmPort, vmMac, vmPortName, type ZStackSim } from "./zstack-sim.ts";

/** The nodes' management addresses (tunnel endpoints), next to ZStack's hosts (sim.hosts) on 192.168.200.0/24. */
const NODE_IPS = ["192.168.200.21", "192.168.200.22"] as const;
/** The provider bridge the agent creates for ZStack's flat network, and its uplink. */
const FLAT_BRIDGE = "br-flat";
const FLAT_UPLINK = "eth1";
const CNI_CONFIG = JSON.stringify({ cniVersion: "1.1.0", name: "zstack-ovn", type: "zstack-ovn-cni" });

export interface OurNode {
  readonly name: string;
  /** The chassis ovn-controller registers in ZStack's SB: node.chassisPrefix (k8s-) + the node name. */
  readonly chassis: string;
  readonly ip: string;
  readonly node: OvsNode;
  readonly mtu: number;
  readonly setup: NodeSetup;
  /** The node's flat link's peer on the wire namespace's `flat` bridge (zs.wire). */
  readonly flatWirePort: string;
  /**
   * Gives the node its management port as zstack-ovnkube-node does, from the controller's Node annotation: routes
   * via it for the cluster and service CIDRs and `subnetCidrs` (the accepted Subnets'). Resolves with the
   * management address (no prefix) once the device is configured.
   */
  addMgmtPort(subnetCidrs: readonly string[]): Promise<string>;
}

/** A VM of ZStack's: its port (added by ZStack's writer) bound to a namespace on one of the hypervisors. */
export interface ZStackVm extends Vm {
  readonly port: VmPort;
  readonly network: VmSpec["network"];
  readonly spec: VmSpec;
}

export interface VmSpec {
  /** ZStack's overlay switch, its flat switch, or the VLAN switch of `vlanTag` (on the flat provider). */
  readonly network: "overlay" | "flat" | "vlan";
  readonly ip4: string;
  /** Index into the hypervisors (0 or 1). */
  readonly host: number;
  /**
   * Start the simulator's own VM of this number (1: VM 1, on the overlay switch, in ZStack's security group)
   * instead of adding a port: `network` and `ip4` must be that VM's.
   */
  readonly simVm?: number;
}

export interface ExternalPod {
  readonly namespace: string;
  readonly name: string;
  readonly node: OurNode;
  readonly netns: NetnsHandle;
  /** The address the CNI result gave, without prefix. */
  readonly ip: string;
  readonly gateway: string | undefined;
}

export interface ExternalCluster {
  readonly api: ApiClient;
  readonly sim: ZStackSim;
  readonly zs: ZStackHosts;
  readonly nodes: readonly OurNode[];
  readonly vms: readonly ZStackVm[];
  /** The UUID of the VLAN switch ZStack created (with `vlanTag`). */
  readonly vlanSwitch: string | undefined;
  /** ZStack's NB (sim.snapshot()) after its VMs were created and before the controller first started. */
  readonly zstackBefore: DatabaseDump;
  /**
   * Creates the pod through the apiserver on `node` and attaches it with a CNI ADD through the agent's request
   * path, which waits for the controller's annotation and for ovn-controller to install the port.
   */
  addPod(node: OurNode, namespace: string, name: string): Promise<ExternalPod>;
}

export interface ExternalClusterOptions {
  /** How many nodes of ours (1 or 2; default 1). */
  readonly nodes?: number;
  /** ZStack's VMs, created (port in NB, namespace on the host, installed) before the controller starts. */
  readonly vms?: readonly VmSpec[];
  /**
   * How each node (by index) maps ZStack's flat provider to br-flat with eth1: node.bridgeMappings
   * ("setting", the default) or its Node's provider labels ("labels").
   */
  readonly flatMappingBy?: readonly ("setting" | "labels")[];
  /** ZStack also has a VLAN network on the flat provider with this tag (created before the VMs). */
  readonly vlanTag?: number;
}

export async function useExternalCluster(
  t: AfterHook,
  opts: ExternalClusterOptions = {},
): Promise<ExternalCluster> {
  const td = teardownFor(t);
  const { api } = await useApiserver(td);
  const sim = await useZStackSim(td);
  const zs = await useZStackHosts(td, sim);

  // ZStack's VMs, as ZStack creates them: the port in NB (requested-chassis = the host's management IP), the NIC
  // on the host's br-int.
  const vlanSwitch = opts.vlanTag === undefined ? undefined : await sim.writer.addVlanNetwork(opts.vlanTag);
  const vms: ZStackVm[] = [];
  for (const [i, spec] of (opts.vms ?? []).entries()) {
    const host = zs.hosts[spec.host] as Hypervisor;
    if (spec.network === "vlan" && !vlanSwitch) throw new Error("a VM on the VLAN network needs vlanTag");
    const port: VmPort =
      spec.simVm === undefined
        ? await sim.writer.addVmPort({
            network: spec.network === "vlan" ? (vlanSwitch as string) : spec.network,
            ip4: spec.ip4,
            chassis: [sim.hosts[spec.host] as string],
          })
        : {
            uuid: sim.uuid(`vm${spec.simVm}`),
            name: vmPortName(spec.simVm, 0),
            mac: vmMac(spec.simVm),
            switchUuid: sim.uuid(`${spec.network}-switch`),
          };
    const tap = `vnic${spec.simVm ?? 200 + i}.0`;
    const vm = await zs.startVm(host, {
      name: port.name,
      mac: port.mac,
      ip: spec.ip4,
      prefix: 24,
      tap,
    });
    await zs.waitInstalled(vm, tap);
    vms.push({ ...vm, port, network: spec.network, spec });
  }
  const zstackBefore = await sim.snapshot();

  const ctl = await startInProcess(
    { api },
    { nbRemote: sim.nbRemotes.join(","), sbRemote: sim.sbRemotes.join(","), external: true },
  );
  td.after(() => ctl.stop());
  await ctl.synced;

  const handlers = new Map<string, AgentCniHandler>();
  const nodes: OurNode[] = [];
  for (let i = 0; i < (opts.nodes ?? 1); i++) nodes.push(await startNode(td, api, sim, zs, i));

  const addPod: ExternalCluster["addPod"] = async (node, namespace, name) => {
    await api.request(`/api/v1/namespaces/${namespace}/pods`, {
      method: "POST",
      body: {
        metadata: { name },
        spec: { nodeName: node.name, containers: [{ name: "c", image: "x" }] },
      },
    });
    const netns = await node.node.addNetns(name);
    const handler = handlers.get(node.name) as AgentCniHandler;
    const containerId = [...crypto.getRandomValues(new Uint8Array(32))]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    const reply = await dispatch(
      {
        env: {
          CNI_COMMAND: "ADD",
          CNI_CONTAINERID: containerId,
          CNI_NETNS: netns.path,
          CNI_IFNAME: "eth0",
          CNI_ARGS: `K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}`,
          CNI_PATH: "/opt/cni/bin",
        },
        stdin: CNI_CONFIG,
      },
      handler,
      new AbortController().signal,
    );
    if (reply.exitCode !== 0) throw new Error(`CNI ADD of ${namespace}/${name} failed: ${reply.stdout}`);
    const result = JSON.parse(reply.stdout) as { ips: { address: string; gateway?: string }[] };
    const first = result.ips[0];
    if (!first) throw new Error(`CNI ADD of ${namespace}/${name} gave no address: ${reply.stdout}`);
    return {
      namespace,
      name,
      node,
      netns,
      ip: first.address.split("/")[0] as string,
      gateway: first.gateway,
    };
  };

  async function startNode(
    td: AfterHook,
    api: ApiClient,
    sim: ZStackSim,
    zs: ZStackHosts,
    i: number,
  ): Promise<OurNode> {
    const name = `node${i + 1}`;
    const ip = NODE_IPS[i];
    if (!ip) throw new Error(`at most ${NODE_IPS.length} nodes`);
    const node = await startOvsNode();
    td.after(() => node.stop());
    // The machine: its management link with the address on br-phy (the userspace datapath's tunnel endpoint
    // must be on an OVS bridge, as on ZStack's hosts), and a link into the flat network, left to the agent.
    await zs.plug(node.netns.path, "eth0", "mgmt");
    const flatWirePort = await zs.plug(node.netns.path, FLAT_UPLINK, "flat");
    await node.exec("ip", ["link", "set", "eth0", "up"]);
    await node.exec("ip", ["link", "set", FLAT_UPLINK, "up"]);
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
    );
    await node.exec("ip", ["link", "set", "br-phy", "up"]);
    await node.exec("ip", ["address", "add", `${ip}/24`, "dev", "br-phy"]);
    const controller = await spawnOvnController(node);
    td.after(() => controller.terminate());

    // What an operator sets for External mode (docs/external-mode.md, docs/node-agent.md): ZStack's flat provider
    // mapped to br-flat with eth1 as its uplink, by the agent's setting or by the Node's provider labels.
    const byLabels = opts.flatMappingBy?.[i] === "labels";
    const mapping = { bridge: FLAT_BRIDGE, uplink: FLAT_UPLINK };
    const created = await api.request<{ metadata: { labels?: Record<string, string> } }>("/api/v1/nodes", {
      method: "POST",
      body: {
        metadata: {
          name,
          ...(byLabels
            ? {
                labels: {
                  [`${PROVIDER_BRIDGE_LABEL}${FLAT.network}`]: mapping.bridge,
                  [`${PROVIDER_UPLINK_LABEL}${FLAT.network}`]: mapping.uplink,
                },
              }
            : {}),
        },
      },
    });
    const cfg = loadNodeConfig(
      {
        ZSTACK_NODE_NAME: name,
        ZSTACK_OVN_MODE: "external",
        ZSTACK_OVN_SBDB_ADDRESS: sim.sbRemotes.join(","),
        ZSTACK_TUNNEL_TYPE: "geneve",
        ZSTACK_ENCAP_IP: ip,
        ZSTACK_DATAPATH_TYPE: "netdev",
        ...(byLabels
          ? {}
          : { ZSTACK_BRIDGE_MAPPINGS: `${FLAT.network}:${mapping.bridge}:${mapping.uplink}` }),
        ZSTACK_OVS_DB: node.ovsRemote,
      },
      [],
    );
    const vswitch = new OvsdbClient<VswitchTables>({ remotes: cfg.ovsDb, model: vswitchModel });
    td.after(() => vswitch.close());
    await vswitch.connect();
    const mtu =
      cfg.mtu ||
      podMtu({
        encapMtu: (await interfaceWithAddress(ip, { netns: node.netns.path })).mtu,
        encapType: cfg.tunnel,
      });
    // From here as zstack-ovnkube-node wires it (src/cli/zstack-ovnkube-node.ts), in External mode.
    const providers = new NodeProviders({ node: name, configured: cfg.providers });
    providers.update(created.metadata.labels);
    const bridgeMappings = providers.bridgeMappings;
    const chassisSettings = {
      ovnRemote: cfg.sbdbAddress,
      encapType: cfg.tunnel,
      encapIp: ip,
      systemId: cfg.chassisName,
      bridgeDatapathType: cfg.datapathType,
      hostname: cfg.nodeName,
      ...(bridgeMappings === undefined ? {} : { bridgeMappings }),
    };
    const setup = new NodeSetup({
      client: vswitch,
      hostNetns: node.netns.path,
      bridge: { name: INTEGRATION_BRIDGE, datapathType: cfg.datapathType },
      providers: providers.mappings,
      resyncIntervalMs: 0,
    });
    td.after(() => setup.stop());
    const sb = externalSb({ remotes: cfg.sbdbAddress }).client;
    td.after(() => sb.close());
    let check: ChassisCheck | undefined;
    const watch = new ChassisWatch({
      client: sb,
      self: {
        name: cfg.chassisName,
        hostname: cfg.nodeName,
        encapType: cfg.tunnel,
        encapSetting: "tunnel.type",
      },
      onChange: (c) => {
        check = c;
      },
      vswitch,
      onCleared: () => setup.update({ chassis: chassisSettings }),
    });
    td.after(() => watch.stop());
    setup.start();
    watch.start();
    await sb.connect({ retry: true });
    await until(
      `chassis ${cfg.chassisName} in ZStack's SB with the node as hostname`,
      () => {
        const c = sb.cache.table("Chassis").lookupOne("name", cfg.chassisName);
        return c?.hostname === name && c.encaps.length > 0 ? true : undefined;
      },
      120_000,
    );
    const notReady = () => check?.conflict ?? check?.encapMismatch;

    const pods = new NodePods(api, name, silentLogger);
    pods.start();
    td.after(() => pods.stop());
    await pods.informer.waitForSync();
    const attacher = new PodAttacher({
      client: vswitch,
      mtu,
      userspaceDatapath: cfg.datapathType === "netdev",
      hostNetns: node.netns.path,
      ovnInstalledBudgetMs: 60_000,
    });
    handlers.set(
      name,
      new AgentCniHandler({ attacher, pods, log: silentLogger, notReady, annotationBudgetMs: 120_000 }),
    );
    const addMgmtPort: OurNode["addMgmtPort"] = async (subnetCidrs) => {
      const ann = await until(
        `the management port annotation of ${name}`,
        async () => {
          const n = await api.request<{ metadata: { annotations?: Record<string, string> } }>(
            `/api/v1/nodes/${name}`,
          );
          return parseMgmtPortAnnotation(n.metadata.annotations?.[MGMT_PORT_ANNOTATION], {
            node: name,
            joinCidr: cfg.joinCIDR,
          });
        },
        120_000,
      );
      setup.update({
        mgmt: {
          bridge: INTEGRATION_BRIDGE,
          lspName: ann.name,
          mac: ann.mac,
          ip: ann.ip,
          gateway: ann.gateway,
          routeCidrs: mgmtRouteCidrs(
            [...cfg.clusterCIDRs, ...cfg.serviceCIDRs],
            subnetCidrs.map((c) => parseCidr(c)),
          ),
          mtu,
        },
      });
      await until(
        `${name}'s management port configured`,
        async () => setup.mgmtConfigured || undefined,
        120_000,
      );
      return ann.ip.split("/")[0] as string;
    };
    return { name, chassis: cfg.chassisName, ip, node, mtu, setup, flatWirePort, addMgmtPort };
  }

  return { api, sim, zs, nodes, vms, vlanSwitch, zstackBefore, addPod };
}
