// What `zovn sandbox up` prints last: where everything is and the commands to reach it.

import { CHART_NAMESPACE, centralNode } from "./chart-install.ts";
import { localRemote } from "./ovn-central.ts";
import {
  APISERVER_PORT,
  centralRemote,
  DEFAULT_SPEC,
  NB_PORT,
  SB_PORT,
  ZSTACK_NETWORKS,
} from "./topology.ts";
import type { UpResult } from "./up.ts";

export function upSummary(r: UpResult): string {
  const { topo, layout, state } = r;
  const cli = "bin/zovn sandbox" + (topo.spec.name === DEFAULT_SPEC.name ? "" : ` --name ${topo.spec.name}`);
  const lines = [
    "",
    `Sandbox "${topo.spec.name}" is up: ${topo.nodes.length} nodes Ready ${(r.readyMs / 1000).toFixed(1)}s after \`up\` started.`,
    `  apiserver    https://127.0.0.1:${state.apiserverPort} (relayed to https://${topo.controlPlane.ip}:${APISERVER_PORT} in netns ${topo.controlPlane.netns})`,
    `  kubeconfig   ${r.kubeconfig}`,
    `  kubectl      ${cli} kubectl get pods -A`,
    topo.spec.chart
      ? `  OVN NB/SB    the chart's ovn-nb-db / ovn-sb-db Services (hostNetwork pods on ${centralNode(topo)})`
      : `  OVN NB/SB    ${centralRemote(topo, NB_PORT)} / ${centralRemote(topo, SB_PORT)}`,
    topo.spec.chart
      ? `               from the chart's pods on ${centralNode(topo)}; ${cli} kubectl -n ${CHART_NAMESPACE} get pods -o wide`
      : `               from this machine: ovn-sbctl --db=${localRemote(layout, topo, "sb")} show`,
    ...topo.nodes.map(
      (n) => `  ${n.name.padEnd(12)} ${n.ip} (netns ${n.netns}); ${cli} exec ${n.name} -- ovs-vsctl show`,
    ),
    `  external     ${topo.external.ip} (netns ${topo.external.netns})`,
    ...(topo.zstack
      ? [
          `  ZStack       controller ${topo.centralIps.join(", ")} (netns ${topo.zstack.controller.netns}: its NB, SB, northd${topo.spec.raft ? ", each NB and SB a 3-member Raft cluster, a northd per member" : ""}; the OVN NB/SB above)`,
          ...topo.zstack.hypervisors.map(
            (h) =>
              `  ${h.name.padEnd(12)} ZStack hypervisor ${h.ip} (netns ${h.netns}); ${cli} exec ${h.name} -- ovs-vsctl show`,
          ),
          ...topo.zstack.vms.map(
            (v) =>
              `  ${v.name.padEnd(12)} ZStack VM ${v.ip} on ${v.host}, ${v.network} switch (netns ${v.netns}); ${cli} exec ${v.name} -- ip address`,
          ),
          ...ZSTACK_NETWORKS.map(
            (n) =>
              `  Subnet       ${n.subnet} on ZStack's ${n.network} switch for namespace ${n.namespace}; ${cli} demo`,
          ),
        ]
      : []),
    `  logs         ${layout.logDir}`,
    `  status       ${cli} status`,
    `  tear down    ${cli} down`,
    "",
  ];
  return `${lines.join("\n")}\n`;
}
