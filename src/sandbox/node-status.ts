// The Node object and status a sandbox node reports, as a kubelet would. Pure.

import { apiTime } from "./pod-status.ts";

export interface NodeFacts {
  name: string;
  ip: string;
  kubeletVersion: string;
  bootId: string;
  machineId: string;
  kernelVersion: string;
  osImage: string;
  architecture: string;
  cpus: number;
  memoryKi: number;
  /** When this simulator started: the Ready condition's transition time. */
  readySince: Date;
}

export const RUNTIME_VERSION = "zovn-sandbox://0.1.0";

export function nodeLabels(f: NodeFacts): Record<string, string> {
  return {
    "kubernetes.io/hostname": f.name,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": f.architecture,
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/arch": f.architecture,
  };
}

/** Node's JSON merge patch for the status subresource. */
export function nodeStatusPatch(f: NodeFacts, now: Date): object {
  const heartbeat = apiTime(now);
  const since = apiTime(f.readySince);
  const cond = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: heartbeat,
    lastTransitionTime: since,
  });
  const resources = {
    cpu: String(f.cpus),
    memory: `${f.memoryKi}Ki`,
    pods: "110",
    "ephemeral-storage": "20Gi",
  };
  return {
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        cond(
          "MemoryPressure",
          "False",
          "KubeletHasSufficientMemory",
          "kubelet has sufficient memory available",
        ),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond(
          "Ready",
          "True",
          "KubeletReady",
          "kubelet is posting ready status (zovn sandbox node simulator)",
        ),
      ],
      addresses: [
        { type: "InternalIP", address: f.ip },
        { type: "Hostname", address: f.name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: f.machineId,
        systemUUID: f.machineId,
        bootID: f.bootId,
        kernelVersion: f.kernelVersion,
        osImage: f.osImage,
        containerRuntimeVersion: RUNTIME_VERSION,
        kubeletVersion: f.kubeletVersion,
        operatingSystem: "linux",
        architecture: f.architecture,
      },
    },
  };
}

/** Lease renewTime is a metav1.MicroTime, which the API server parses only with exactly six fraction digits. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
