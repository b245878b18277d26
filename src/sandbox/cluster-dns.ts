// The cluster DNS add-on of the real-node sandbox (`up --kubelet`): CoreDNS built here (hack/ensure-coredns.sh)
// as `kube-system/coredns`, behind the `kube-dns` Service at a fixed ClusterIP that every kubelet names as its
// clusterDNS. It serves cluster.local and the reverse zones from the Kubernetes API and forwards nothing, so no
// pod's query ever leaves the machine. The objects carry the sandbox's managed-by label.

import { setTimeout as sleep } from "node:timers/promises";
import { run } from "./command.ts";
import { CLUSTER_DNS_IP, CLUSTER_DOMAIN } from "./topology.ts";

export const DNS_NAMESPACE = "kube-system";
export const DNS_NAME = "coredns";
export const DNS_SERVICE = "kube-dns";
const MANAGED_BY = { "app.kubernetes.io/managed-by": "zovn-sandbox" };
/** The label kubeadm's CoreDNS and upstream e2e tests select the DNS pods by. */
const SELECTOR = { "k8s-app": "kube-dns" };

/**
 * The Corefile: the kubernetes plugin answers the cluster domain and the reverse zones (ClusterIPs and pod
 * addresses), `cache` keeps answers 30 s, `health` (:8080) and `ready` (:8181) are there for probes and
 * operators. No `forward`: a name outside the cluster gets SERVFAIL instead of a trip off the machine.
 */
export function corefile(domain: string = CLUSTER_DOMAIN): string {
  return [
    ".:53 {",
    "    errors",
    "    health {",
    "        lameduck 5s",
    "    }",
    "    ready",
    `    kubernetes ${domain} in-addr.arpa ip6.arpa {`,
    "        pods insecure",
    "        ttl 30",
    "    }",
    "    cache 30",
    "}",
    "",
  ].join("\n");
}

export interface ClusterDnsInput {
  /** registry.k8s.io/coredns/coredns:vX.Y.Z, imported into every node's containerd. */
  image: string;
  serviceIp?: string;
  domain?: string;
}

/** Every object of the add-on, in apply order. */
export function clusterDnsObjects(input: ClusterDnsInput): Record<string, unknown>[] {
  const ns = DNS_NAMESPACE;
  const labels = { ...SELECTOR, ...MANAGED_BY };
  const roleName = `zovn-sandbox:${DNS_NAME}`;
  return [
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: DNS_NAME, namespace: ns, labels: MANAGED_BY },
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: roleName, labels: MANAGED_BY },
      // What the kubernetes plugin watches: Services and their EndpointSlices for records, namespaces to
      // refuse names in a namespace that does not exist. `pods insecure` answers pod names from the query alone.
      rules: [
        { apiGroups: [""], resources: ["services", "namespaces"], verbs: ["list", "watch"] },
        { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: roleName, labels: MANAGED_BY },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: roleName },
      subjects: [{ kind: "ServiceAccount", name: DNS_NAME, namespace: ns }],
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: DNS_NAME, namespace: ns, labels: MANAGED_BY },
      data: { Corefile: corefile(input.domain) },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: DNS_NAME, namespace: ns, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: SELECTOR },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: DNS_NAME,
            priorityClassName: "system-cluster-critical",
            // Its own resolver would be the node's, which is empty here: it forwards nothing anyway.
            dnsPolicy: "Default",
            terminationGracePeriodSeconds: 5,
            containers: [
              {
                name: "coredns",
                image: input.image,
                // Imported into every node; there is no registry to pull from.
                imagePullPolicy: "Never",
                args: ["-conf", "/etc/coredns/Corefile"],
                ports: [
                  { name: "dns", containerPort: 53, protocol: "UDP" },
                  { name: "dns-tcp", containerPort: 53, protocol: "TCP" },
                ],
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] },
                },
                volumeMounts: [{ name: "config", mountPath: "/etc/coredns", readOnly: true }],
              },
            ],
            volumes: [{ name: "config", configMap: { name: DNS_NAME } }],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: DNS_SERVICE, namespace: ns, labels: { ...labels, "kubernetes.io/name": "CoreDNS" } },
      spec: {
        clusterIP: input.serviceIp ?? CLUSTER_DNS_IP,
        selector: SELECTOR,
        ports: [
          { name: "dns", port: 53, targetPort: 53, protocol: "UDP" },
          { name: "dns-tcp", port: 53, targetPort: 53, protocol: "TCP" },
        ],
      },
    },
  ];
}

/**
 * `kubectl apply` of the add-on (idempotent: an `up` over a running sandbox changes nothing), then waits until
 * the Deployment has an available replica and the Service has a ready endpoint.
 */
export async function ensureClusterDns(
  kubectl: string,
  adminKubeconfig: string,
  input: ClusterDnsInput,
  deadline: number,
): Promise<void> {
  const k = (args: string[], input?: string) =>
    run(kubectl, ["--kubeconfig", adminKubeconfig, ...args], input === undefined ? {} : { input });
  const list = { apiVersion: "v1", kind: "List", items: clusterDnsObjects(input) };
  await k(["apply", "-f", "-"], JSON.stringify(list));
  let last = "";
  for (;;) {
    last = await k([
      ...["get", "endpointslices", "-n", DNS_NAMESPACE, "-l", `kubernetes.io/service-name=${DNS_SERVICE}`],
      ...["-o", "jsonpath={.items[*].endpoints[?(@.conditions.ready==true)].addresses[*]}"],
    ]).catch((err: Error) => err.message);
    if (/^\d+\.\d+\.\d+\.\d+/.test(last.trim())) return;
    if (Date.now() > deadline) {
      const pods = await k([
        "get",
        "pods",
        "-n",
        DNS_NAMESPACE,
        "-l",
        "k8s-app=kube-dns",
        "-o",
        "wide",
      ]).catch((err: Error) => err.message);
      throw new Error(`the cluster DNS (${DNS_NAMESPACE}/${DNS_NAME}) has no ready endpoint:\n${pods}`);
    }
    await sleep(500);
  }
}
