// Wiring a pod sandbox into OVN, the work behind CNI ADD, DEL, CHECK and GC. ADD: the veth pair with the pod
// end configured, then the OVS port bound to the pod's logical port, then the wait for ovn-controller's
// ovn-installed; each step is timed, a failing step is named, and a failed ADD removes what it made. DEL and
// GC select by container id, so they never touch a newer sandbox of the same pod. Operations on one
// container id run one at a time.

import { performance } from "node:perf_hooks";
import { formatIp, type IpAddress } from "../ipam/address.ts";
import { formatCidr } from "../ipam/cidr.ts";
import { formatInterfaceAddress, type PodNetwork, podPortName } from "../ovn/pod-port.ts";
import { type AddStep, CheckFailedError, StepError, StepTimeoutError } from "./errors.ts";
import type { InterfaceName, NetnsPath } from "./interface-name.ts";
import { KeyedLock } from "./keyed-lock.ts";
import { INTEGRATION_BRIDGE } from "./ovs-bridge.ts";
import { addPodPort, findPodPort, listPodPorts, removePodPorts, waitOvnInstalled } from "./ovs-port.ts";
import {
  ensurePodInterface,
  hostVethName,
  listHostVeths,
  readPodInterface,
  removeHostVeths,
  removePodInterface,
} from "./veth.ts";
import type { VswitchClient } from "./vswitch-db.ts";

/** What the controller assigned to the pod: the k8s.ovn.org/pod-networks annotation, parsed. */
export type { PodNetwork } from "../ovn/pod-port.ts";

export interface AttachmentRef {
  containerId: string;
  /** CNI_IFNAME. */
  ifname: string;
}

export interface AddRequest extends AttachmentRef {
  ifname: InterfaceName;
  /** CNI_NETNS. */
  netns: NetnsPath;
  podNamespace: string;
  podName: string;
  podUid: string;
  network: PodNetwork;
}

/** Same shape as the CNI result (interfaces, ips, routes), version-independent. */
export interface AttachmentResult {
  interfaces: { name: string; mac?: string; mtu?: number; sandbox?: string }[];
  ips: { address: string; gateway?: string; interface?: number }[];
  routes: { dst: string; gw?: string }[];
}

export type AddTimings = Record<AddStep, number> & { total: number };

export interface AddOutcome {
  result: AttachmentResult;
  /** Milliseconds per step. */
  timings: AddTimings;
  /** The OVS port name (the host end of the veth). */
  portName: string;
}

export interface PodAttacherConfig {
  client: VswitchClient;
  /** Default br-int. */
  bridge?: string;
  mtu: number;
  /** Userspace (netdev) datapath: the pod end's TX checksum offload is turned off. */
  userspaceDatapath: boolean;
  /** The node's netns path when it is not the agent's own (tests). */
  hostNetns?: string;
  /** Budget of the ovn-installed wait; default 30 s. */
  ovnInstalledBudgetMs?: number;
}

export interface GcOutcome {
  portsRemoved: string[];
  vethsRemoved: string[];
}

// The iface-id is the controller's port name; one definition for both sides.
export { podPortName } from "../ovn/pod-port.ts";

export class PodAttacher {
  private readonly lock = new KeyedLock();
  private readonly bridge: string;
  private readonly host: { netns?: string };

  constructor(private readonly cfg: PodAttacherConfig) {
    this.bridge = cfg.bridge ?? INTEGRATION_BRIDGE;
    this.host = cfg.hostNetns ? { netns: cfg.hostNetns } : {};
  }

  /** The netns the host ends live in (the node's); a pod's netns must never be this one. */
  get hostNetnsPath(): string {
    return this.host.netns ?? "/proc/self/ns/net";
  }

  add(req: AddRequest, opts: { signal?: AbortSignal } = {}): Promise<AddOutcome> {
    return this.lock.run(req.containerId, () => this.addLocked(req, opts.signal));
  }

  private async addLocked(req: AddRequest, signal: AbortSignal | undefined): Promise<AddOutcome> {
    const start = performance.now();
    const timings: AddTimings = { veth: 0, "ovs-port": 0, "ovn-installed": 0, total: 0 };
    let step: AddStep = "veth";
    let mark = start;
    const done = (s: AddStep) => {
      const now = performance.now();
      timings[s] = now - mark;
      mark = now;
    };
    try {
      const veth = await ensurePodInterface(
        {
          containerId: req.containerId,
          netns: req.netns,
          ifname: req.ifname,
          mac: req.network.mac,
          ips: req.network.ips,
          gateways: req.network.gateways,
          routes: req.network.routes,
          mtu: this.cfg.mtu,
          txChecksumOff: this.cfg.userspaceDatapath,
        },
        this.host,
      );
      done("veth");
      step = "ovs-port";
      const port = await addPodPort(this.cfg.client, {
        bridge: this.bridge,
        portName: veth.hostIfname,
        ifaceId: podPortName(req.podNamespace, req.podName),
        containerId: req.containerId,
        ifname: req.ifname,
        podNamespace: req.podNamespace,
        podName: req.podName,
        podUid: req.podUid,
        mac: req.network.mac,
      });
      done("ovs-port");
      step = "ovn-installed";
      const row = await waitOvnInstalled(
        this.cfg.client,
        port.interfaceUuid,
        this.cfg.ovnInstalledBudgetMs ?? 30_000,
        signal,
      );
      done("ovn-installed");
      timings.total = performance.now() - start;
      return {
        result: this.result(req, veth.hostIfname, row.mac_in_use ?? undefined),
        timings,
        portName: veth.hostIfname,
      };
    } catch (e) {
      // The runtime will call DEL after a failed ADD, but may not (or the agent may be asked again first):
      // leave nothing half-made behind.
      await Promise.allSettled([
        removePodPorts(this.cfg.client, [req.containerId], req.ifname),
        removePodInterface(req.containerId, this.host),
      ]);
      // The runtime gave up (or the agent is stopping): its reason is the answer, not a step failure.
      if (signal?.aborted && e === signal.reason) throw e;
      if (e instanceof StepError || e instanceof StepTimeoutError) throw e;
      throw new StepError(step, (e as Error).message, { cause: e });
    }
  }

  private result(req: AddRequest, hostIfname: string, hostMac: string | undefined): AttachmentResult {
    const gwFor = (ip: IpAddress) => req.network.gateways.find((g) => g.family === ip.family);
    return {
      interfaces: [
        { name: hostIfname, ...(hostMac ? { mac: hostMac } : {}) },
        { name: req.ifname, mac: req.network.mac, mtu: this.cfg.mtu, sandbox: req.netns },
      ],
      ips: req.network.ips.map((a) => {
        const gateway = gwFor(a.ip);
        return {
          address: formatInterfaceAddress(a),
          ...(gateway ? { gateway: formatIp(gateway) } : {}),
          interface: 1,
        };
      }),
      routes: [
        ...req.network.gateways.map((gw) => ({
          dst: gw.family === 6 ? "::/0" : "0.0.0.0/0",
          gw: formatIp(gw),
        })),
        ...req.network.routes.map((r) => ({ dst: formatCidr(r.dest), gw: formatIp(r.nextHop) })),
      ],
    };
  }

  /** Removes the container's port and veth. Succeeds when both are gone already. */
  del(ref: AttachmentRef): Promise<{ portsRemoved: string[]; vethRemoved: boolean }> {
    return this.lock.run(ref.containerId, () => this.removeLocked(ref));
  }

  private async removeLocked(ref: AttachmentRef): Promise<{ portsRemoved: string[]; vethRemoved: boolean }> {
    // Failures name their step, as in ADD, so DEL answers with the same CNI codes (105 OVS port, 104 veth).
    const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
      try {
        return await fn();
      } catch (e) {
        throw new StepError(name, (e as Error).message, { cause: e });
      }
    };
    const portsRemoved = await step("ovs-port", () =>
      removePodPorts(this.cfg.client, [ref.containerId], ref.ifname),
    );
    const vethRemoved = await step("veth", () => removePodInterface(ref.containerId, this.host));
    return { portsRemoved, vethRemoved };
  }

  /** Verifies the interface, its addresses and the OVS binding; throws CheckFailedError listing every difference. */
  check(req: AddRequest): Promise<void> {
    return this.lock.run(req.containerId, async () => {
      const problems: string[] = [];
      const port = findPodPort(this.cfg.client, req.containerId, req.ifname);
      const lsp = podPortName(req.podNamespace, req.podName);
      if (!port) problems.push(`no OVS port for container ${req.containerId}`);
      else {
        if (port.portName !== hostVethName(req.containerId))
          problems.push(`OVS port is ${port.portName}, expected ${hostVethName(req.containerId)}`);
        if (port.ifaceId !== lsp) problems.push(`OVS port is bound to ${port.ifaceId}, expected ${lsp}`);
        if (port.error) problems.push(`OVS cannot open ${port.portName}: ${port.error}`);
        if (!port.ovnInstalled) problems.push(`OVN has not installed ${lsp} on this chassis`);
      }
      const pod = await readPodInterface(req.netns, req.ifname);
      if (!pod) problems.push(`no interface ${req.ifname} in ${req.netns}`);
      else {
        if (pod.kind !== "veth") problems.push(`${req.ifname} is ${pod.kind ?? "not a veth"}`);
        if (pod.mac.toLowerCase() !== req.network.mac.toLowerCase())
          problems.push(`${req.ifname} has MAC ${pod.mac}, expected ${req.network.mac}`);
        if (pod.mtu !== this.cfg.mtu)
          problems.push(`${req.ifname} has MTU ${pod.mtu}, expected ${this.cfg.mtu}`);
        if (!pod.up) problems.push(`${req.ifname} is down`);
        for (const a of req.network.ips.map(formatInterfaceAddress))
          if (!pod.ips.includes(a)) problems.push(`${req.ifname} lacks address ${a}`);
        const gw = req.network.gateways.find((g) => g.family === 4);
        const gw4 = gw ? formatIp(gw) : undefined;
        if (gw4 && pod.gateway4 !== gw4)
          problems.push(`default route via ${pod.gateway4 ?? "nothing"}, expected ${gw4}`);
      }
      if (problems.length > 0) throw new CheckFailedError(problems);
    });
  }

  /**
   * Removes the ports and veths of every attachment not in `valid` (CNI GC's cni.dev/valid-attachments).
   * Attachments with an operation in flight are left alone: the runtime's list may predate their ADD.
   */
  async gc(valid: readonly AttachmentRef[]): Promise<GcOutcome> {
    const keep = new Set(valid.map((v) => v.containerId));
    for (const k of this.lock.busyKeys) keep.add(k);
    const stale = [...new Set(listPodPorts(this.cfg.client).map((p) => p.containerId))].filter(
      (id) => !keep.has(id),
    );
    const portsRemoved = await removePodPorts(this.cfg.client, stale);
    const keepNames = new Set([...keep].map(hostVethName));
    const vethsRemoved = (await listHostVeths(this.host)).filter((n) => !keepNames.has(n));
    if (vethsRemoved.length > 0) await removeHostVeths(vethsRemoved, this.host);
    return { portsRemoved, vethsRemoved };
  }
}
