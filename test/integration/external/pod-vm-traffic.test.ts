// External mode end to end (issue 14's first acceptance point): pods of ours on ZStack's overlay switch, on its
// flat switch and on a VLAN switch, next to ZStack's VMs, talk TCP both ways with VMs on both of ZStack's
// hypervisors. The overlay traffic crosses a Geneve tunnel between our node's chassis (k8s-<node>) and ZStack's
// hosts' chassis; the flat and VLAN traffic leaves through the provider bridge the agent made for `flat` (localnet,
// no tunnel; the VLAN's frames tagged). Each side sees the other's own address (no NAT between pods and VMs). Two
// overlay pods on our two nodes talk to each other; ZStack's security group still keeps pods out of its member VM.
// While the plugin runs, and after the pods are gone, ZStack's NB rows differ from the snapshot taken before the
// controller first started only in the documented mutations. The rig: test/rig/external-cluster.ts (real
// apiserver, controller, node agent's pieces, OVS, OVN; the ZStack simulator and its hypervisors).

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { chassisMac } from "../../../src/node/chassis-mac.ts";
import { nodesMissingChassisMac } from "../../../src/ovn/chassis-mac-guard.ts";
import { OUR_LB_GROUPS } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import type { DatabaseDump } from "../../rig/dump-format.ts";
import { type ExternalPod, type OurNode, useExternalCluster } from "../../rig/external-cluster.ts";
import { diffDumps, FLAT, OVERLAY, onlyDocumentedMutations, ownedRows } from "../../rig/zstack-sim.ts";
import { createNamespace, createSubnet, readyCondition, until } from "../controller/harness.ts";
import { execIn, tcpTransfer } from "../node/one-node-cluster.ts";

const VLAN_TAG = 100;
const VLAN = { cidr4: "192.168.110.0/24", gateway4: "192.168.110.1" };
const VMS = [
  { network: "overlay", ip4: "10.60.0.21", host: 0 },
  { network: "overlay", ip4: "10.60.0.22", host: 1 },
  { network: "flat", ip4: "192.168.100.31", host: 0 },
  { network: "flat", ip4: "192.168.100.32", host: 1 },
  { network: "vlan", ip4: "192.168.110.41", host: 0 },
  { network: "vlan", ip4: "192.168.110.42", host: 1 },
  // ZStack's VM 1, in its security group.
  { network: "overlay", ip4: "10.60.0.11", host: 0, simVm: 1 },
] as const;
const FLAT_GATEWAY = "192.168.100.1";

/**
 * TCP from one namespace to a listener in another, retried while OVN settles (the far chassis installs the new
 * port's flows on its own time); returns the peer address the listener saw, after checking the payload arrived.
 */
async function tcp(from: string, to: string, ip: string, port: number, what: string): Promise<string> {
  const start = Date.now();
  let last = "";
  for (let i = 0; i < 30; i++) {
    const r = await tcpTransfer(from, to, ip, port, 64 * 1024);
    if (r.client.code === 0 && r.received === r.sent && r.peer) {
      console.log(`# ${what}: ${Date.now() - start} ms, ${i + 1} attempt(s), the listener saw ${r.peer}`);
      return r.peer;
    }
    last = `client exit ${r.client.code} ${r.client.stderr.trim()}; payload ${r.received === r.sent ? "intact" : "missing"}`;
    await sleep(500);
  }
  throw new Error(`${what}: no TCP exchange after 30 attempts: ${last}`);
}

/** Our pods' ports in a dump. */
function podPorts(dump: DatabaseDump): unknown[] {
  return Object.values(dump.Logical_Switch_Port ?? {}).filter((r) =>
    JSON.stringify(r.external_ids).includes('["zstack.io/kind","pod-port"]'),
  );
}

/** Our rows in a full dump (owner key), and the Service load-balancer groups, ours by their names. */
function oursIn(dump: DatabaseDump): Set<string> {
  const ours = new Set(ownedRows(dump).map((r) => r.split(" ")[1] as string));
  for (const [u, r] of Object.entries(dump.Load_Balancer_Group ?? {}))
    if (OUR_LB_GROUPS.includes(String(r.name))) ours.add(u);
  return ours;
}

test("External mode: pods on ZStack's overlay, flat and VLAN switches and ZStack's VMs on both hosts talk TCP both ways, without NAT, and ZStack's rows change only as documented", async (t) => {
  const started = Date.now();
  const c = await useExternalCluster(t, {
    nodes: 2,
    flatMappingBy: ["setting", "labels"],
    vms: VMS,
    vlanTag: VLAN_TAG,
  });
  const { api, sim } = c;
  const [node1, node2] = c.nodes;
  assert.ok(node1 && node2);
  console.log(
    `# simulator, 2 hosts, ${c.vms.length} VMs, apiserver, controller and 2 nodes up in ${Date.now() - started} ms`,
  );
  for (const n of c.nodes) {
    assert.equal(n.chassis, `k8s-${n.name}`);
    assert.equal(n.mtu, 1400, "Geneve over the 1500-byte management network");
    // The provider bridge exists as the agent made it, with the uplink the configuration names.
    assert.match(await n.node.vsctl("list-ports", "br-flat"), /^eth1$/m);
  }

  const overlay = sim.uuid("overlay-switch");
  const flat = sim.uuid("flat-switch");
  const vlan = c.vlanSwitch as string;
  const subnets = [
    ["zs-overlay", "ovl", { cidr: OVERLAY.cidr4, gateway: OVERLAY.gateway4, externalLogicalSwitch: overlay }],
    ["zs-flat", "flt", { cidr: FLAT.cidr4, gateway: FLAT_GATEWAY, externalLogicalSwitch: flat }],
    ["zs-vlan", "vln", { cidr: VLAN.cidr4, gateway: VLAN.gateway4, externalLogicalSwitch: vlan }],
  ] as const;
  for (const [name, ns, spec] of subnets) {
    await createNamespace(api, ns);
    await createSubnet(api, name, { ...spec, namespaces: [ns] });
  }
  for (const [name] of subnets)
    await until(
      `Subnet ${name} Ready`,
      async () => {
        const s = await api.request<Subnet>(`${SUBNET_PATH}/${name}`);
        return readyCondition(s)?.reason === "Ready" ? s : undefined;
      },
      120_000,
    );

  // The controller follows ZStack's SB for the chassis MAC guard: real ovn-controllers (OVN 23.03) publish their
  // node's ovn-bridge-mappings and ovn-chassis-mac-mappings in the Chassis row's other_config, where the guard
  // reads them; with both nodes' chassis MACs there, the flat and VLAN Subnets got their router ports (Ready above).
  const sbRows = new OvsdbClient({ remotes: sim.sbRemotes, database: "OVN_Southbound", monitor: {} });
  t.after(() => sbRows.close());
  await sbRows.connect({ retry: true });
  const [chassisConfig] = (await sbRows.transactRaw([
    {
      op: "select",
      table: "Chassis",
      where: [],
      columns: ["name", "hostname", "other_config", "external_ids"],
    },
  ])) as [{ rows: { name: string; hostname: string; other_config: unknown; external_ids: unknown }[] }];
  const asMap = (v: unknown) => Object.fromEntries((v as ["map", [string, string][]])[1]);
  const views = chassisConfig.rows.map((r) => ({
    name: r.name,
    hostname: r.hostname,
    other_config: asMap(r.other_config),
    external_ids: asMap(r.external_ids),
  }));
  for (const n of c.nodes) {
    const row = views.find((v) => v.name === n.chassis);
    assert.equal(row?.hostname, n.name, `${n.chassis}'s hostname is the node name`);
    assert.match(row?.other_config["ovn-bridge-mappings"] ?? "", /(^|,)flat:/, `${n.chassis}'s other_config`);
    assert.equal(row?.other_config["ovn-chassis-mac-mappings"], `flat:${chassisMac(n.chassis)}`);
  }
  assert.deepEqual(
    [...nodesMissingChassisMac(views, new Set(c.nodes.map((n) => n.name)), [FLAT.network])],
    [],
    "no node of ours maps flat without a chassis MAC",
  );

  // One pod per network; the flat one on the second node, which maps `flat` by its Node labels.
  const t0 = Date.now();
  const podO = await c.addPod(node1, "ovl", "web-ovl");
  const podF = await c.addPod(node2, "flt", "web-flat");
  const podV = await c.addPod(node1, "vln", "web-vlan");
  // A second overlay pod, on the other node: pods of ours on ZStack's switch talk across our nodes too.
  const podO2 = await c.addPod(node2, "ovl", "web-ovl-2");
  console.log(`# four pods attached through the agent's CNI path in ${Date.now() - t0} ms`);
  const vmIps = new Set(c.vms.map((v) => v.ip));
  assert.match(podO.ip, /^10\.60\.0\.\d+$/);
  assert.match(podF.ip, /^192\.168\.100\.\d+$/);
  assert.match(podV.ip, /^192\.168\.110\.\d+$/);
  for (const p of [podO, podF, podV, podO2])
    assert.ok(!vmIps.has(p.ip), `${p.name} has a VM's address, ${p.ip}`);
  assert.equal(podO.gateway, OVERLAY.gateway4, "ZStack's router port is the overlay pod's gateway");

  // Each pod's port is bound in ZStack's SB to its node's chassis (requested-chassis is the node name, which
  // ovn-controller matches against our chassis' hostname).
  const sb = new OvsdbClient({ remotes: sim.sbRemotes, database: "OVN_Southbound", monitor: {} });
  t.after(() => sb.close());
  await sb.connect({ retry: true });
  const [bindings, chassis] = (await sb.transactRaw([
    { op: "select", table: "Port_Binding", where: [], columns: ["logical_port", "chassis"] },
    { op: "select", table: "Chassis", where: [], columns: ["_uuid", "name"] },
  ])) as [
    { rows: { logical_port: string; chassis: unknown }[] },
    { rows: { _uuid: unknown; name: string }[] },
  ];
  const chassisName = new Map(chassis.rows.map((r) => [JSON.stringify(r._uuid), r.name]));
  for (const p of [podO, podF, podV, podO2]) {
    const b = bindings.rows.find((r) => r.logical_port === `${p.namespace}_${p.name}`);
    assert.equal(chassisName.get(JSON.stringify(b?.chassis)), p.node.chassis, `${p.name}'s port binding`);
  }

  const podOn = { overlay: podO, flat: podF, vlan: podV } as const;
  let port = 7100;
  // A node's links: eth0 (on br-phy) carries the tunnels, eth1 (the flat provider bridge's uplink) the flat
  // network and its VLANs. Packets each sends while a pair talks say which way the pair's traffic went.
  const sent = async (n: OurNode, dev: string) => {
    const [l] = JSON.parse(await n.node.exec("ip", ["-s", "-j", "link", "show", dev])) as {
      stats64: { tx: { packets: number } };
    }[];
    return l?.stats64.tx.packets ?? 0;
  };
  for (const vm of c.vms.filter((v) => v.spec.simVm === undefined)) {
    const pod: ExternalPod = podOn[vm.network];
    const n = pod.node;
    const links = [await sent(n, "eth0"), await sent(n, "eth1")];
    const where = `${vm.network}, pod on ${n.name}, VM on ${vm.host.systemId}`;
    // Pod -> VM: the VM sees the pod's own address.
    assert.equal(
      await tcp(pod.netns.path, vm.netns.path, vm.ip, port++, `pod ${pod.ip} -> VM ${vm.ip} (${where})`),
      pod.ip,
    );
    // VM -> pod: the pod sees the VM's own address.
    assert.equal(
      await tcp(vm.netns.path, pod.netns.path, pod.ip, port++, `VM ${vm.ip} -> pod ${pod.ip} (${where})`),
      vm.ip,
    );
    const [tunnel, flatLink] = [
      (await sent(n, "eth0")) - (links[0] ?? 0),
      (await sent(n, "eth1")) - (links[1] ?? 0),
    ];
    console.log(`# ${where}: ${n.name} sent ${tunnel} packets on eth0 (tunnels), ${flatLink} on eth1 (flat)`);
    // Two exchanges of 64 KiB are dozens of packets each way; the other link carries only chatter (ARP, the
    // pods' IPv6 router solicitations flooded on their switches), a small fraction of that.
    const [via, other] = vm.network === "overlay" ? [tunnel, flatLink] : [flatLink, tunnel];
    assert.ok(via >= 20 && other * 5 <= via, `${where}: ${tunnel} on eth0, ${flatLink} on eth1`);
    if (vm.network === "vlan") {
      // Tagged on the wire: the node's datapath pushes the VLAN's tag towards the uplink.
      const flows = await n.node.appctl("dpctl/dump-flows");
      assert.match(flows, new RegExp(`push_vlan\\(vid=${VLAN_TAG},`), "the VLAN pod's frames leave tagged");
    }
  }

  // Pod <-> pod on ZStack's overlay switch, node1 <-> node2 (a Geneve tunnel between our two chassis).
  assert.equal(
    await tcp(podO.netns.path, podO2.netns.path, podO2.ip, port++, `pod ${podO.ip} -> pod ${podO2.ip}`),
    podO.ip,
  );
  assert.equal(
    await tcp(podO2.netns.path, podO.netns.path, podO.ip, port++, `pod ${podO2.ip} -> pod ${podO.ip}`),
    podO2.ip,
  );

  // ZStack's security groups still hold for its VMs: VM 1 is in a group that admits only its members (TCP 22 from
  // its address set), which pods are not; it reaches the pod (its egress is allowed, the reply is related), the
  // pod does not reach it.
  const sgVm = c.vms.find((v) => v.spec.simVm === 1);
  assert.ok(sgVm);
  assert.equal(
    await tcp(
      sgVm.netns.path,
      podO.netns.path,
      podO.ip,
      port++,
      `VM ${sgVm.ip} (security group) -> pod ${podO.ip}`,
    ),
    sgVm.ip,
  );
  const refused = await tcpTransfer(podO.netns.path, sgVm.netns.path, sgVm.ip, 22, 1024);
  assert.notEqual(refused.client.code, 0, "ZStack's security group drops the pod's connection to VM 1");
  assert.equal(refused.peer, undefined);

  // The overlay pod's node has Geneve tunnels to both of ZStack's hosts; the flat and VLAN pods found the VMs on
  // their own link (ARP answered by the VMs' MACs: one L2 network, no router between).
  const tunnels = await node1.node.vsctl("--columns=options", "find", "Interface", "type=geneve");
  for (const h of c.zs.hosts) assert.match(tunnels, new RegExp(`remote_ip="${h.ip.replaceAll(".", "\\.")}"`));
  for (const pod of [podF, podV]) {
    const neigh = (await execIn(pod.netns.path, "ip", ["neigh", "show", "dev", "eth0"])).stdout;
    for (const vm of c.vms.filter((v) => podOn[v.network] === pod))
      assert.match(neigh, new RegExp(`^${vm.ip.replaceAll(".", "\\.")} lladdr ${vm.port.mac}`, "m"));
  }

  // The cluster's paths to pods on the flat switch (a localnet port): our router port is on it too, distributed,
  // and each node's chassis MAC (ovn-chassis-mac-mappings, written by the agent) replaces its MAC on the flat
  // network (and its VLANs). The flat pod is on node2, the VLAN pod (also a localnet switch, on the same provider
  // network) on node1; a backend pod of ours (the default Subnet) on node1; the nodes' management ports (routes via
  // them for the cluster, service and Subnet CIDRs, as the agent sets them).
  await createNamespace(api, "be");
  const backend = await c.addPod(node1, "be", "backend");
  const mgmt = new Map<OurNode, string>();
  for (const n of c.nodes) mgmt.set(n, await n.addMgmtPort([OVERLAY.cidr4, FLAT.cidr4, VLAN.cidr4]));
  for (const n of c.nodes) {
    const ids = await n.node.vsctl("get", "Open_vSwitch", ".", "external_ids:ovn-chassis-mac-mappings");
    assert.equal(ids.trim(), `"flat:${chassisMac(n.chassis)}"`, `${n.name}'s chassis MAC mapping`);
  }
  const flatRoutes = (await execIn(podF.netns.path, "ip", ["-4", "route", "show"])).stdout;
  console.log(`# ${podF.name}'s routes:\n${flatRoutes}`);
  assert.match(
    flatRoutes,
    /^100\.64\.0\.0\/16 via 192\.168\.100\.\d+ /m,
    "the join CIDR via our router port",
  );
  // Node -> flat/VLAN pod (kubelet probes): on the same node and on the other; the pod sees the management address.
  for (const [n, pod] of [
    [node1, podV],
    [node1, podF],
    [node2, podF],
    [node2, podV],
  ] as const)
    assert.equal(
      await tcp(
        n.node.netns.path,
        pod.netns.path,
        pod.ip,
        port++,
        `${n.name} -> flat pod ${pod.ip} on ${pod.node.name}`,
      ),
      mgmt.get(n),
    );
  // Flat/VLAN pod -> each node's management address, its own and the other's. Towards the other node the request
  // crosses a tunnel and the answer comes back routed onto the flat network (the other node's chassis MAC, through
  // both localnet ports): it crosses them statelessly (our group on the localnet ports; without it, the localnet
  // port's conntrack zone, there because of the Service group, saw a SYN-ACK without its SYN and dropped it).
  for (const pod of [podF, podV])
    for (const n of c.nodes)
      assert.equal(
        await tcp(
          pod.netns.path,
          n.node.netns.path,
          mgmt.get(n) as string,
          port++,
          `${pod.name} ${pod.ip} on ${pod.node.name} -> ${n.name} ${mgmt.get(n)}`,
        ),
        pod.ip,
      );
  // The group of ours holding each flat/VLAN switch's localnet port (by a weak reference: ZStack's rows unchanged).
  {
    const d = await sim.dump();
    const lsps = d.Logical_Switch_Port ?? {};
    for (const sw of [flat, vlan]) {
      const ports = JSON.stringify(d.Logical_Switch?.[sw]?.ports ?? []);
      const localnet = Object.entries(lsps)
        .filter(([u, r]) => r.type === "localnet" && ports.includes(u))
        .map(([u]) => u);
      assert.equal(localnet.length, 1, `one localnet port on ${sw}`);
      const holders = Object.values(d.Port_Group ?? {}).filter(
        (g) =>
          JSON.stringify(g.external_ids).includes('["zstack.io/kind","external-localnet-group"]') &&
          JSON.stringify(g.ports).includes(localnet[0] as string),
      );
      assert.equal(holders.length, 1, `our localnet group holds ${sw}'s localnet port`);
    }
  }
  // Flat pod on node2 -> a Service whose backend (a pod on our default Subnet) is on node1: DNAT on ZStack's flat
  // switch (our cluster-IP group), through our router port; the backend sees the pod's own address.
  const svc = await api.request<{ spec: { clusterIP: string } }>("/api/v1/namespaces/be/services", {
    method: "POST",
    body: { metadata: { name: "web" }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
  });
  await api.request("/apis/discovery.k8s.io/v1/namespaces/be/endpointslices", {
    method: "POST",
    body: {
      metadata: { name: "web-1", labels: { "kubernetes.io/service-name": "web" } },
      addressType: "IPv4",
      endpoints: [{ addresses: [backend.ip], conditions: { ready: true }, nodeName: node1.name }],
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    },
  });
  const vip = svc.spec.clusterIP;
  await until(
    `pod ${podF.ip} -> Service ${vip}:80 -> ${backend.ip}:8080 on ${node1.name}`,
    async () => {
      const server = execIn(
        backend.netns.path,
        "timeout",
        ["5", "nc", "-n", "-v", "-l", backend.ip, "8080"],
        {
          timeoutMs: 7_000,
        },
      );
      await sleep(200);
      const cl = await execIn(podF.netns.path, "nc", ["-N", "-w", "3", vip, "80"], { input: "hello\n" });
      const got = await server;
      if (cl.code !== 0 || got.stdout !== "hello\n") return undefined;
      return /Connection received on (\S+)/.exec(got.stderr)?.[1] === podF.ip ? true : undefined;
    },
    120_000,
  );
  console.log(`# flat pod ${podF.ip} -> Service ${vip} -> backend ${backend.ip} on ${node1.name}: ok`);
  // VMs <-> flat pods still work with our router port on the switch.
  for (const vm of c.vms.filter((v) => v.network === "flat")) {
    assert.equal(
      await tcp(podF.netns.path, vm.netns.path, vm.ip, port++, `pod ${podF.ip} -> VM ${vm.ip}`),
      podF.ip,
    );
    assert.equal(
      await tcp(vm.netns.path, podF.netns.path, podF.ip, port++, `VM ${vm.ip} -> pod ${podF.ip}`),
      vm.ip,
    );
  }
  // What the flat network's switch (the wire's Linux bridge) learned: our router port's MAC never (its frames
  // leave each node with that node's chassis MAC), each node's chassis MAC only on that node's port.
  const lrps = (await sim.dump()).Logical_Router_Port ?? {};
  const rtoeMacs = Object.values(lrps)
    .filter((r) => String(r.name).startsWith("zovn-rtoe-"))
    .map((r) => String(r.mac));
  assert.equal(rtoeMacs.length, 3, "a router port of ours on each of the three switches");
  // A host on the physical flat network (an address on the wire's bridge itself) asks for our router port's
  // address: nobody answers (every chassis bound to the switch runs our router's pipeline, ZStack's hypervisors
  // too, which have no chassis MAC and would answer with the router port's own MAC from their uplinks; the
  // localnet group's guard drops the request). The same host reaches the flat pod, so the silence is the guard's.
  const flatRtoe = Object.values(lrps).find((r) => r.name === "zovn-rtoe-zs-flat");
  const rtoeIp = String((flatRtoe?.networks as unknown as string[] | string | undefined)?.toString())
    .split(",")[0]
    ?.split("/")[0] as string;
  assert.match(
    rtoeIp,
    /^192\.168\.100\.\d+$/,
    `the flat router port's address (${JSON.stringify(flatRtoe)})`,
  );
  const wireNs = `/run/netns/${c.zs.wire}`;
  const PHYS = "192.168.100.250";
  assert.equal((await execIn(wireNs, "ip", ["addr", "add", `${PHYS}/24`, "dev", "flat"])).code, 0);
  const ping = (ip: string) => execIn(wireNs, "ping", ["-c", "3", "-W", "1", "-i", "0.3", ip]);
  await until(
    `the physical host ${PHYS} reaches flat pod ${podF.ip}`,
    async () => ((await ping(podF.ip)).code === 0 ? true : undefined),
    60_000,
  );
  const asked = await ping(rtoeIp);
  assert.notEqual(asked.code, 0, `the router port ${rtoeIp} answered the physical network: ${asked.stdout}`);
  const neigh = (await execIn(wireNs, "ip", ["neigh", "show", rtoeIp, "dev", "flat"])).stdout;
  console.log(
    `# the physical host's neighbour entry for our router port ${rtoeIp}: ${neigh.trim() || "(none)"}`,
  );
  assert.doesNotMatch(
    neigh,
    /lladdr/,
    `an ARP answer for our router port reached the physical network: ${neigh}`,
  );
  await execIn(wireNs, "ip", ["addr", "del", `${PHYS}/24`, "dev", "flat"]);
  const fdb = (await execIn(`/run/netns/${c.zs.wire}`, "bridge", ["fdb", "show", "br", "flat"])).stdout;
  console.log(`# the flat network's fdb:\n${fdb}`);
  const learned = (mac: string) =>
    [...fdb.matchAll(new RegExp(`^${mac} dev (\\S+)`, "gm"))].map((m) => m[1]).filter((d) => d !== "flat");
  for (const mac of rtoeMacs)
    assert.deepEqual(learned(mac), [], `router port MAC ${mac} learned on the wire`);
  for (const n of c.nodes)
    assert.deepEqual(learned(chassisMac(n.chassis)), [n.flatWirePort], `${n.name}'s chassis MAC`);

  // While the plugin runs: ZStack's rows differ only by the documented mutations: the three switches' `ports`
  // grew by our pods' ports and our router port, and their `load_balancer_group` by our cluster-IP Service group
  // (the flat and VLAN switches, with a localnet port each, too).
  await sim.sync();
  const during = await sim.dump();
  const ours = oursIn(during);
  assert.deepEqual(onlyDocumentedMutations(c.zstackBefore, during, ours), []);
  assert.equal(podPorts(during).length, 5);
  const changed = diffDumps(c.zstackBefore, during)
    .filter((l) => !/^\S+ \S+: added$/.test(l))
    .map((l) => l.split(":")[0]);
  assert.deepEqual(
    changed.sort(),
    [
      `Logical_Switch ${flat} load_balancer_group`,
      `Logical_Switch ${flat} ports`,
      `Logical_Switch ${overlay} load_balancer_group`,
      `Logical_Switch ${overlay} ports`,
      `Logical_Switch ${vlan} load_balancer_group`,
      `Logical_Switch ${vlan} ports`,
    ].sort(),
  );

  // The pods go (CNI DEL is the runtime's; their ports leave with the pods), then the Subnets (our router ports
  // leave ZStack's switches): ZStack's rows are as they were before the controller started, but for the Service
  // group, ours by its name.
  for (const p of [podO, podF, podV, podO2, backend])
    await api.request(`/api/v1/namespaces/${p.namespace}/pods/${p.name}`, {
      method: "DELETE",
      query: { gracePeriodSeconds: 0 },
    });
  await until(
    "the pods' ports gone",
    async () => {
      const d = await sim.dump();
      return podPorts(d).length === 0 && onlyDocumentedMutations(c.zstackBefore, d, oursIn(d)).length === 0
        ? true
        : undefined;
    },
    120_000,
  );
  for (const [name] of subnets) await api.request(`${SUBNET_PATH}/${name}`, { method: "DELETE" });
  await until(
    "ZStack's rows as before",
    async () =>
      diffDumps(c.zstackBefore, await sim.snapshot()).every((l) => /^Load_Balancer_Group \S+: added$/.test(l))
        ? true
        : undefined,
    120_000,
  );
  const after = await sim.dump();
  assert.deepEqual(
    Object.values(after.Port_Group ?? {}).filter((g) =>
      JSON.stringify(g.external_ids).includes('"external-localnet-group"'),
    ),
    [],
    "our localnet groups went with their Subnets",
  );
  console.log(`# done in ${Date.now() - started} ms`);
});
