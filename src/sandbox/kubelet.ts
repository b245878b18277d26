// A real kubelet on a sandbox node (`up --kubelet`), in the node's network and mount namespaces, talking to
// the node's containerd. Every setting below was needed on these machines (cgroup v1, no systemd as PID 1,
// no CAP_SYS_RESOURCE); docs/sandbox.md says why for each.

import { readFileSync } from "node:fs";
import { CONTAINERD_SOCKET } from "./containerd.ts";

export const KUBELET_PORT = 10250;
export const KUBELET_HEALTHZ_PORT = 10248;

export interface KubeletConfigInput {
  /** The node's own cgroup below which the kubelet makes kubepods; it must exist in every hierarchy. */
  cgroupRoot: string;
  /** CA that signed the apiserver's kubelet client certificate. */
  clientCaFile: string;
  /** The kubelet cannot lower its own oom_score_adj without CAP_SYS_RESOURCE; it keeps what it has. */
  oomScoreAdj: number;
  /** The cluster DNS Service's address, the nameserver of every ClusterFirst pod. */
  clusterDns: string;
  clusterDomain: string;
}

/** A KubeletConfiguration (JSON is YAML, which the kubelet reads). */
export function kubeletConfig(input: KubeletConfigInput): Record<string, unknown> {
  return {
    kind: "KubeletConfiguration",
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    // The machine has cgroup v1, which kubelet 1.37 refuses unless told otherwise.
    failCgroupV1: false,
    cgroupDriver: "cgroupfs",
    cgroupRoot: input.cgroupRoot,
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${CONTAINERD_SOCKET}`,
    port: KUBELET_PORT,
    readOnlyPort: 0,
    healthzBindAddress: "127.0.0.1",
    healthzPort: KUBELET_HEALTHZ_PORT,
    // The apiserver's exec, logs and port-forward calls present its kubelet client certificate; the
    // kubelet asks the apiserver (SubjectAccessReview) whether that user may.
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: input.clientCaFile },
    },
    authorization: { mode: "Webhook" },
    rotateCertificates: false,
    serverTLSBootstrap: false,
    // Pods resolve through the sandbox's CoreDNS (cluster-dns.ts) only: nothing from the machine's
    // /etc/resolv.conf, so no query can leave the machine through a pod's resolver.
    resolvConf: "",
    clusterDNS: [input.clusterDns],
    clusterDomain: input.clusterDomain,
    oomScoreAdj: input.oomScoreAdj,
    // The images were imported from archives and no registry is reachable: never collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    // A shared build machine's disk and memory are not this node's to defend.
    evictionHard: { "memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%" },
    // Check the kernel settings the kubelet wants instead of writing them: in the sandbox they are the node's
    // fakes (already right); were they ever the machine's own, the kubelet fails rather than change them.
    protectKernelDefaults: true,
    registerNode: true,
    nodeStatusReportFrequency: "20s",
  };
}

export function kubeletArgs(opts: {
  config: string;
  kubeconfig: string;
  nodeName: string;
  nodeIp: string;
}): string[] {
  return [
    `--config=${opts.config}`,
    `--kubeconfig=${opts.kubeconfig}`,
    `--hostname-override=${opts.nodeName}`,
    // The apiserver reaches the kubelet (exec, logs) at the InternalIP it registers.
    `--node-ip=${opts.nodeIp}`,
    "--v=1",
  ];
}

export function currentOomScoreAdj(): number {
  const v = Number(readFileSync("/proc/self/oom_score_adj", "utf8").trim());
  return Number.isInteger(v) ? v : 0;
}
