import assert from "node:assert/strict";
import { test } from "node:test";
import { clusterDnsObjects, corefile } from "./cluster-dns.ts";
import { CLUSTER_DNS_IP, SERVICE_CIDR } from "./topology.ts";

type Obj = { kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };
const objects = clusterDnsObjects({ image: "registry.k8s.io/coredns/coredns:v1.14.7" }) as Obj[];
const byKind = (kind: string) => objects.find((o) => o.kind === kind) as Obj;

test("the Corefile serves the cluster domain and the reverse zones and forwards nothing off the machine", () => {
  const text = corefile();
  assert.match(text, /^ {4}kubernetes cluster\.local in-addr\.arpa ip6\.arpa \{$/m);
  assert.match(text, /^ {4}cache 30$/m);
  for (const plugin of ["forward", "proxy", "loop"])
    assert.doesNotMatch(text, new RegExp(`^\\s*${plugin}\\b`, "m"));
  assert.equal(corefile("example.internal").includes("kubernetes example.internal in-addr.arpa"), true);
});

test("kube-dns sits at the fixed address inside the service CIDR that the kubelets name", () => {
  const svc = byKind("Service") as Obj & { spec: { clusterIP: string; selector: Record<string, string> } };
  assert.equal(svc.metadata.name, "kube-dns");
  assert.equal(svc.metadata.namespace, "kube-system");
  assert.equal(svc.spec.clusterIP, CLUSTER_DNS_IP);
  const [net, len] = SERVICE_CIDR.split("/") as [string, string];
  const num = (ip: string) => ip.split(".").reduce((a, b) => a * 256 + Number(b), 0);
  const block = 2 ** (32 - Number(len));
  assert.equal(
    Math.floor(num(CLUSTER_DNS_IP) / block),
    Math.floor(num(net) / block),
    "inside the service CIDR",
  );
  assert.deepEqual(svc.spec.selector, { "k8s-app": "kube-dns" });
});

test("CoreDNS may only list and watch what the kubernetes plugin reads, and runs from the imported image", () => {
  const role = byKind("ClusterRole") as Obj & {
    rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
  };
  const granted = role.rules.flatMap((r) =>
    r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}/${res}:${v}`))),
  );
  assert.deepEqual(granted.sort(), [
    "/namespaces:list",
    "/namespaces:watch",
    "/services:list",
    "/services:watch",
    "discovery.k8s.io/endpointslices:list",
    "discovery.k8s.io/endpointslices:watch",
  ]);
  const binding = byKind("ClusterRoleBinding") as Obj & {
    subjects: Array<{ name: string; namespace: string }>;
  };
  assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: "coredns", namespace: "kube-system" }]);
  const deploy = byKind("Deployment") as Obj & {
    spec: { template: { spec: { serviceAccountName: string; containers: Array<Record<string, unknown>> } } };
  };
  const pod = deploy.spec.template.spec;
  assert.equal(pod.serviceAccountName, "coredns");
  assert.equal(pod.containers[0]?.image, "registry.k8s.io/coredns/coredns:v1.14.7");
  assert.equal(pod.containers[0]?.imagePullPolicy, "Never", "no registry is reachable");
  // Every object says who made it.
  for (const o of objects)
    assert.equal(
      (o.metadata as { labels?: Record<string, string> }).labels?.["app.kubernetes.io/managed-by"],
      "zovn-sandbox",
      `${o.kind} ${o.metadata.name}`,
    );
});
