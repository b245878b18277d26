// What this node's host path must do for the Services it knows: the typed service ports for the nft ruleset
// (src/node/service-nat.ts) and the healthCheckNodePort servers, computed from the Services and their
// EndpointSlices as they are now. Pure: the service proxy calls it with its informers' stores.

import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { formatIp } from "../ipam/address.ts";
import type { NatServicePort } from "../node/service-nat.ts";
import { selectEndpoints } from "../services/endpoints.ts";
import { type ClusterRanges, NO_RANGES, parseService } from "../services/service-model.ts";

/** The label an EndpointSlice names its Service with. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

export interface HealthCheckPlan {
  port: number;
  namespace: string;
  name: string;
  /** Distinct endpoints of the Service on this node, over all its ports. */
  localEndpoints: number;
}

export interface HostServicePlan {
  /** Sorted by key: the same Services give the same ruleset text. */
  ports: NatServicePort[];
  healthChecks: HealthCheckPlan[];
  /** healthCheckNodePorts claimed twice (the apiserver never allocates that): the first Service keeps it. */
  refused: { namespace: string; name: string; reason: string }[];
}

/** The key an EndpointSlice is filed under: its namespace and the Service it names. */
export function sliceServiceKey(slice: V1EndpointSlice): string | undefined {
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  return svc ? `${slice.metadata?.namespace ?? ""}/${svc}` : undefined;
}

/**
 * `node` is this node's name, `zone` its topology.kubernetes.io/zone label: the Cluster-policy endpoints follow
 * the EndpointSlices' topology hints for a client here, as kube-proxy on this node would choose them.
 */
export function planHostServices(
  services: readonly V1Service[],
  slicesOf: (namespace: string, name: string) => readonly V1EndpointSlice[],
  node: string,
  ranges: ClusterRanges = NO_RANGES,
  zone?: string,
): HostServicePlan {
  const ports: NatServicePort[] = [];
  const healthChecks: HealthCheckPlan[] = [];
  const refused: HostServicePlan["refused"] = [];
  const claimed = new Map<number, string>();
  const sorted = [...services].sort((a, b) =>
    `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(
      `${b.metadata?.namespace}/${b.metadata?.name}`,
    ),
  );
  for (const svc of sorted) {
    // Problems become Warning Events in the controller; the node realizes what can be realized.
    const { model } = parseService(svc, ranges);
    if (!model) continue;
    const slices = slicesOf(model.namespace, model.name);
    const localIps = new Set<string>();
    for (const p of model.ports) {
      const endpoints = selectEndpoints(slices, p, { topology: { node, zone } });
      const localEndpoints = selectEndpoints(slices, p, { node });
      // The health check answers whether this node has a ready endpoint, as kube-proxy's does: one that is only
      // serving while terminating still takes traffic here (above) but makes the check fail, so a load
      // balancer moves new connections away from the node (upstream e2e: "should fail health check node port
      // if there are only terminating endpoints").
      for (const e of selectEndpoints(slices, p, { node, readyOnly: true })) localIps.add(formatIp(e.ip));
      ports.push({
        key: `${model.namespace}/${model.name}/${p.protocol}/${p.port}`,
        protocol: p.protocol,
        port: p.port,
        nodePort: p.nodePort,
        clusterIPs: model.clusterIPs,
        externalIPs: [...model.externalIPs, ...model.loadBalancerIPs],
        firewalledIPs: model.loadBalancerIPs,
        sourceRanges: model.loadBalancerSourceRanges,
        affinityTimeoutSeconds: model.affinityTimeoutSeconds,
        endpoints: endpoints.map(({ ip, port }) => ({ ip, port })),
        localEndpoints: localEndpoints.map(({ ip, port }) => ({ ip, port })),
        internalTrafficLocal: model.internalTrafficLocal,
        externalTrafficLocal: model.externalTrafficLocal,
      });
    }
    const hc = model.healthCheckNodePort;
    if (hc !== undefined) {
      const owner = claimed.get(hc);
      if (owner !== undefined) {
        refused.push({
          namespace: model.namespace,
          name: model.name,
          reason: `healthCheckNodePort ${hc} is already served for ${owner}`,
        });
        continue;
      }
      claimed.set(hc, `${model.namespace}/${model.name}`);
      healthChecks.push({
        port: hc,
        namespace: model.namespace,
        name: model.name,
        localEndpoints: localIps.size,
      });
    }
  }
  ports.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { ports, healthChecks, refused };
}
