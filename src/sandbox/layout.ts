// Where an instance keeps its files. Everything lives under one root per instance, so `down` can check that
// nothing is still mounted below it before deleting it, and logs sit in one directory printed at start.

import { join } from "node:path";

export const DEFAULT_BASE_DIR = "/var/lib/zstack-ovn-sandbox";

export interface NodeDirs {
  root: string;
  /** Per-node private directories bound over the standard paths inside the node's mount namespace. */
  run: string;
  cniConf: string;
  cniBin: string;
  cniCache: string;
  ovsEtc: string;
  ovsLib: string;
  /** The node simulator's own files: its config, kubeconfig and one record per pod sandbox. */
  kubelet: string;
  podRecords: string;
  logs: string;
  ovsLogs: string;
  ovnLogs: string;
  podLogs: string;
  /** Real-node mode (`up --kubelet`): containerd's and the kubelet's own directories, and /var/log/containers. */
  containerdRoot: string;
  containerdOpt: string;
  kubeletRoot: string;
  containerLogLinks: string;
  /** Files holding the kernel settings the kubelet expects, bound over /proc/sys inside the node. */
  sysctlFakes: string;
}

export interface Layout {
  root: string;
  stateFile: string;
  lockFile: string;
  logDir: string;
  pkiDir: string;
  /** Holds the files that persist node mount namespaces; bound onto itself with private propagation. */
  nsDir: string;
  etcdDir: string;
  kubeDir: string;
  centralDir: string;
  cpLogDir: string;
  node(name: string): NodeDirs;
  mountNsFile(node: string): string;
}

export function layoutFor(name: string, baseDir: string = DEFAULT_BASE_DIR): Layout {
  const root = join(baseDir, name);
  const logDir = join(root, "logs");
  return {
    root,
    stateFile: join(root, "state.json"),
    lockFile: join(root, "lock"),
    logDir,
    pkiDir: join(root, "pki"),
    nsDir: join(root, "ns"),
    etcdDir: join(root, "cp", "etcd"),
    kubeDir: join(root, "cp", "kube"),
    centralDir: join(root, "cp", "ovn"),
    cpLogDir: join(logDir, "cp"),
    node(node: string): NodeDirs {
      const dir = join(root, "nodes", node);
      const logs = join(logDir, node);
      return {
        root: dir,
        run: join(dir, "run"),
        cniConf: join(dir, "cni-net.d"),
        cniBin: join(dir, "cni-bin"),
        cniCache: join(dir, "cni-cache"),
        ovsEtc: join(dir, "openvswitch-etc"),
        ovsLib: join(dir, "openvswitch-lib"),
        kubelet: join(dir, "kubelet"),
        podRecords: join(dir, "kubelet", "pods"),
        logs,
        ovsLogs: join(logs, "openvswitch"),
        ovnLogs: join(logs, "ovn"),
        podLogs: join(logs, "pods"),
        containerdRoot: join(dir, "containerd"),
        containerdOpt: join(dir, "containerd-opt"),
        kubeletRoot: join(dir, "kubelet-root"),
        containerLogLinks: join(logs, "containers"),
        sysctlFakes: join(dir, "sysctl"),
      };
    },
    mountNsFile(node: string): string {
      return join(root, "ns", `${node}.mnt`);
    },
  };
}

/**
 * The kernel settings the kubelet (container manager) insists on, with the values it wants. Unless
 * `protectKernelDefaults` (which only turns a difference into a fatal error) it writes them, and they are
 * machine-wide: kernel.panic_on_oops=1 would reboot a shared machine on the next oops. Inside a real node
 * these /proc/sys files are covered by files holding the expected values, so it finds nothing to change.
 */
export const KUBELET_SYSCTLS: ReadonlyArray<readonly [string, number]> = [
  ["vm/overcommit_memory", 1],
  ["vm/panic_on_oom", 0],
  ["kernel/panic", 10],
  ["kernel/panic_on_oops", 1],
  ["kernel/keys/root_maxkeys", 1000000],
  ["kernel/keys/root_maxbytes", 25000000],
];

/** The standard paths a node's processes see, and which private directory backs each. */
export function nodeBinds(
  dirs: NodeDirs,
  realNode = false,
): Array<{ source: string; target: string; file?: boolean }> {
  const real = realNode
    ? [
        { source: dirs.kubeletRoot, target: "/var/lib/kubelet" },
        { source: dirs.containerdRoot, target: "/var/lib/containerd" },
        { source: dirs.podLogs, target: "/var/log/pods" },
        { source: dirs.containerLogLinks, target: "/var/log/containers" },
        ...KUBELET_SYSCTLS.map(([key]) => ({
          source: join(dirs.sysctlFakes, key.replaceAll("/", ".")),
          target: `/proc/sys/${key}`,
          file: true,
        })),
      ]
    : [];
  return [
    ...real,
    { source: dirs.run, target: "/run" },
    { source: dirs.cniConf, target: "/etc/cni/net.d" },
    { source: dirs.cniBin, target: "/opt/cni/bin" },
    { source: dirs.cniCache, target: "/var/lib/cni" },
    { source: dirs.ovsEtc, target: "/etc/openvswitch" },
    { source: dirs.ovsLib, target: "/var/lib/openvswitch" },
    { source: dirs.ovsLogs, target: "/var/log/openvswitch" },
    { source: dirs.ovnLogs, target: "/var/log/ovn" },
  ];
}
