// The informers the controller's reconcilers share, and the slim copies of the objects they keep: only the
// fields a reconciler reads, since pods are the bulk of the informer memory.

import type { V1EndpointSlice, V1NetworkPolicy, V1Service } from "@kubernetes/client-node";
import { SUBNET_PATH, type Subnet } from "../api/subnet.ts";
import type { ApiClient } from "../k8s/api-client.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import type { Logger } from "../observability/log.ts";
import type { WatchTrace } from "../observability/watch-trace.ts";

export interface PodLite extends KubeObject {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    /** Name of the owning StatefulSet. */
    statefulSet?: string;
    labels?: Record<string, string>;
  };
  spec: {
    nodeName?: string;
    hostNetwork?: boolean;
    /** Named container ports only (what NetworkPolicy named ports resolve against). */
    namedPorts?: { name: string; protocol: string; port: number }[];
  };
  status: { phase?: string };
}

export interface StatefulSetLite extends KubeObject {
  metadata: { name: string; namespace: string; deletionTimestamp?: string };
  spec: { replicas?: number; ordinals?: { start?: number } };
}

export interface NodeLite extends KubeObject {
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status: { addresses?: { type: string; address: string }[] };
}

export type ServiceObject = V1Service & KubeObject;
export type NetworkPolicyObject = V1NetworkPolicy & KubeObject;

export interface NamespaceLite extends KubeObject {
  metadata: { name: string; labels?: Record<string, string> };
}
export type EndpointSliceObject = V1EndpointSlice & KubeObject;

/** The label an EndpointSlice names its Service by. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
/** The endpointSlices informer's index: `<namespace>/<service name>`. */
export const SLICES_BY_SERVICE = "service";
/** The pods and network policies informers' index by namespace. */
export const BY_NAMESPACE = "namespace";
/** The pods informer's index by node name. */
export const PODS_BY_NODE = "node";

export interface ClusterInformers {
  readonly subnets: Informer<Subnet>;
  readonly nodes: Informer<NodeLite>;
  readonly pods: Informer<PodLite>;
  readonly statefulSets: Informer<StatefulSetLite>;
  readonly services: Informer<ServiceObject>;
  readonly endpointSlices: Informer<EndpointSliceObject>;
  readonly networkPolicies: Informer<NetworkPolicyObject>;
  readonly namespaces: Informer<NamespaceLite>;
}

/** The Service key (`<namespace>/<name>`) an EndpointSlice belongs to, if it names one. */
export function sliceServiceKey(s: EndpointSliceObject): string | undefined {
  const svc = s.metadata?.labels?.[SERVICE_NAME_LABEL];
  return svc ? `${s.metadata?.namespace}/${svc}` : undefined;
}

/** Keeps what the Service reconciler reads of a slice. */
function slimSlice(o: KubeObject): EndpointSliceObject {
  const s = o as unknown as EndpointSliceObject;
  const m = s.metadata ?? {};
  return {
    metadata: { name: m.name, namespace: m.namespace, ...(m.labels ? { labels: m.labels } : {}) },
    addressType: s.addressType,
    endpoints: (s.endpoints ?? []).map((e) => ({
      addresses: e.addresses,
      ...(e.conditions ? { conditions: e.conditions } : {}),
      ...(e.nodeName ? { nodeName: e.nodeName } : {}),
      ...(e.hints ? { hints: e.hints } : {}),
    })),
    ...(s.ports ? { ports: s.ports } : {}),
  } as EndpointSliceObject;
}

/** Keeps only what the reconcilers read: pods are the bulk of the informer memory. */
function slimPod(o: KubeObject): PodLite {
  const p = o as unknown as {
    metadata: PodLite["metadata"] & Record<string, unknown>;
    spec?: PodLite["spec"];
    status?: PodLite["status"];
  };
  const m = p.metadata;
  const named: { name: string; protocol: string; port: number }[] = [];
  const containers = (p.spec as { containers?: unknown } | undefined)?.containers;
  if (Array.isArray(containers))
    for (const c of containers as {
      ports?: { name?: unknown; protocol?: unknown; containerPort?: unknown }[];
    }[])
      for (const port of Array.isArray(c?.ports) ? c.ports : [])
        if (typeof port?.name === "string" && typeof port.containerPort === "number")
          named.push({
            name: port.name,
            protocol: typeof port.protocol === "string" ? port.protocol : "TCP",
            port: port.containerPort,
          });
  const labels = m.labels as Record<string, string> | undefined;
  const sts = (m.ownerReferences as { kind: string; name: string; controller?: boolean }[] | undefined)?.find(
    (o) => o.kind === "StatefulSet" && o.controller !== false,
  );
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      ...(sts ? { statefulSet: sts.name } : {}),
      ...(m.annotations ? { annotations: m.annotations } : {}),
      ...(labels ? { labels } : {}),
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
    },
    spec: {
      nodeName: p.spec?.nodeName,
      hostNetwork: p.spec?.hostNetwork,
      ...(named.length > 0 ? { namedPorts: named } : {}),
    },
    status: { phase: p.status?.phase },
  };
}

function slimStatefulSet(x: KubeObject): StatefulSetLite {
  const s = x as StatefulSetLite;
  return {
    metadata: {
      name: s.metadata.name,
      namespace: s.metadata.namespace,
      ...(s.metadata.deletionTimestamp ? { deletionTimestamp: s.metadata.deletionTimestamp } : {}),
    },
    spec: {
      replicas: s.spec?.replicas,
      ...(s.spec?.ordinals?.start !== undefined ? { ordinals: { start: s.spec.ordinals.start } } : {}),
    },
  };
}

/**
 * New (not yet started) informers on `api`: one set per term, read through the term's fenced client. With a
 * trace, each informer records its watch events' arrival there under its resource name.
 */
export function clusterInformers(api: ApiClient, log: Logger, trace?: WatchTrace): ClusterInformers {
  const traced = (resource: string) => (trace ? { onWatchEvent: trace.recorder(resource) } : {});
  return {
    subnets: new Informer<Subnet>({
      client: api,
      path: SUBNET_PATH,
      logger: log.child({ informer: "subnets" }),
      ...traced("subnets"),
    }),
    nodes: new Informer<NodeLite>({
      client: api,
      path: "/api/v1/nodes",
      logger: log.child({ informer: "nodes" }),
      ...traced("nodes"),
    }),
    pods: new Informer<PodLite>({
      client: api,
      path: "/api/v1/pods",
      transform: slimPod,
      indexers: {
        [BY_NAMESPACE]: (p) => [p.metadata.namespace],
        [PODS_BY_NODE]: (p) => (p.spec.nodeName ? [p.spec.nodeName] : []),
      },
      logger: log.child({ informer: "pods" }),
      ...traced("pods"),
    }),
    statefulSets: new Informer<StatefulSetLite>({
      client: api,
      path: "/apis/apps/v1/statefulsets",
      transform: slimStatefulSet,
      logger: log.child({ informer: "statefulsets" }),
      ...traced("statefulsets"),
    }),
    services: new Informer<ServiceObject>({
      client: api,
      path: "/api/v1/services",
      logger: log.child({ informer: "services" }),
      ...traced("services"),
    }),
    endpointSlices: new Informer<EndpointSliceObject>({
      client: api,
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      transform: slimSlice,
      indexers: {
        [SLICES_BY_SERVICE]: (s) => {
          const k = sliceServiceKey(s);
          return k ? [k] : [];
        },
      },
      logger: log.child({ informer: "endpointslices" }),
      ...traced("endpointslices"),
    }),
    networkPolicies: new Informer<NetworkPolicyObject>({
      client: api,
      path: "/apis/networking.k8s.io/v1/networkpolicies",
      indexers: { [BY_NAMESPACE]: (p) => [p.metadata?.namespace ?? ""] },
      logger: log.child({ informer: "networkpolicies" }),
      ...traced("networkpolicies"),
    }),
    namespaces: new Informer<NamespaceLite>({
      client: api,
      path: "/api/v1/namespaces",
      transform: (o) => {
        const m = (o as NamespaceLite).metadata;
        return { metadata: { name: m.name, ...(m.labels ? { labels: m.labels } : {}) } } as NamespaceLite;
      },
      logger: log.child({ informer: "namespaces" }),
      ...traced("namespaces"),
    }),
  };
}

/** The informer key of a pod. */
export function podKey(p: PodLite): string {
  return `${p.metadata.namespace}/${p.metadata.name}`;
}
