// The node agent's answers to CNI requests: the pod's network comes from the controller's annotation, the
// wiring from PodAttacher. Errors carry the CNI code of the step that failed.

import { existsSync } from "node:fs";
import { CniError, CniErrorCode } from "../cni/error.ts";
import type {
  AddRequest,
  CheckRequest,
  CniHandler,
  DelRequest,
  GcRequest,
  StatusRequest,
} from "../cni/handler.ts";
import type { CniResult } from "../cni/result.ts";
import { type Cidr, cidrContainsCidr, formatCidr } from "../ipam/cidr.ts";
import { CheckFailedError, StepError, StepTimeoutError } from "../node/errors.ts";
import {
  type InterfaceName,
  InvalidNameError,
  type NetnsPath,
  parseInterfaceName,
  parseNetnsPath,
} from "../node/interface-name.ts";
import type {
  AddOutcome,
  AttachmentResult,
  AddRequest as AttachRequest,
  PodAttacher,
} from "../node/pod-attachment.ts";
import { HOST_NETNS_PATHS, hostNetnsProblem } from "../node/pod-netns.ts";
import type { Logger } from "../observability/log.ts";
import { POD_NETWORKS_ANNOTATION, type PodNetwork, samePodNetwork } from "../ovn/pod-port.ts";
import { type NodePods, type PodNetworkInfo, TimedOutError } from "./pod-networks.ts";

export interface AgentHandlerOptions {
  attacher: PodAttacher;
  pods: NodePods;
  log: Logger;
  /** Why the agent cannot serve ADD now, or undefined when it can. */
  notReady: () => string | undefined;
  annotationBudgetMs?: number;
  /** Called with each ADD's per-step timings (ms). */
  onAddTimings?: (t: Record<string, number>) => void;
  /**
   * The networks an annotation's routes may lead to: the cluster, service and join CIDRs, the only ones the
   * controller routes through its router port on a ZStack switch. A route to anything else was not written by
   * the controller and is refused. Unset: routes are checked only by the annotation's parser.
   */
  routeDestinations?: readonly Cidr[];
}

/** The CNI inputs that become ip and nsenter arguments, checked again here: the handler is the agent's edge. */
function sandboxNames(req: AddRequest | CheckRequest): { ifname: InterfaceName; netns: NetnsPath } {
  try {
    return { ifname: parseInterfaceName(req.ifname), netns: parseNetnsPath(req.netns) };
  } catch (e) {
    if (e instanceof InvalidNameError) throw new CniError(CniErrorCode.InvalidEnvironment, e.message);
    throw e;
  }
}

function podNetwork(
  req: AddRequest | CheckRequest,
  info: PodNetworkInfo,
  routeDestinations: readonly Cidr[] | undefined,
): PodNetwork {
  const { podNamespace: ns, podName: name } = req.k8s;
  if (info.network) {
    if (routeDestinations) {
      for (const [i, r] of info.network.routes.entries()) {
        if (routeDestinations.some((c) => cidrContainsCidr(c, r.dest))) continue;
        throw new CniError(
          CniErrorCode.InvalidPodNetwork,
          `pod ${ns}/${name}: ${POD_NETWORKS_ANNOTATION} default.routes[${i}].dest ${formatCidr(r.dest)} is outside the cluster, service and join networks (${routeDestinations.map(formatCidr).join(", ")}), the only ones zstack-ovnkube-controller routes; nothing was configured`,
        );
      }
    }
    return info.network;
  }
  throw new CniError(
    CniErrorCode.InvalidPodNetwork,
    `pod ${ns}/${name} has an invalid ${POD_NETWORKS_ANNOTATION} annotation, so nothing was configured: ${info.invalid.message}`,
  );
}

function attachRequest(
  req: AddRequest | CheckRequest,
  info: PodNetworkInfo,
  routeDestinations: readonly Cidr[] | undefined,
): AttachRequest {
  return {
    containerId: req.containerId,
    ...sandboxNames(req),
    podNamespace: req.k8s.podNamespace,
    podName: req.k8s.podName,
    podUid: info.uid,
    network: podNetwork(req, info, routeDestinations),
  };
}

function toResult(r: AttachmentResult): CniResult {
  return {
    interfaces: r.interfaces.map((i) => ({ ...i })),
    ips: r.ips.map((i) => ({ ...i })),
    routes: r.routes.map((x) => ({ ...x })),
  };
}

function classify(e: unknown): CniError {
  if (e instanceof CniError) return e;
  if (e instanceof StepTimeoutError) {
    return new CniError(
      e.step === "ovn-installed" ? CniErrorCode.OvnInstalledTimeout : CniErrorCode.StepTimeout,
      e.message,
    );
  }
  if (e instanceof StepError) {
    const code = e.step === "ovs-port" ? CniErrorCode.OvsPortFailed : CniErrorCode.InterfaceSetupFailed;
    return new CniError(code, e.message);
  }
  if (e instanceof CheckFailedError) return new CniError(CniErrorCode.CheckFailed, e.message);
  return new CniError(CniErrorCode.Internal, (e as Error).message ?? String(e));
}

export class AgentCniHandler implements CniHandler {
  constructor(private readonly o: AgentHandlerOptions) {}

  private requireNetns(req: AddRequest | CheckRequest): void {
    const { netns } = sandboxNames(req);
    if (!existsSync(netns)) {
      throw new CniError(
        CniErrorCode.NetnsMissing,
        `network namespace ${netns} does not exist; the runtime must create it before ADD`,
      );
    }
    const hostPaths = [this.o.attacher.hostNetnsPath, ...HOST_NETNS_PATHS].filter(
      (p): p is string => typeof p === "string",
    );
    const why = hostNetnsProblem(netns, hostPaths);
    if (why)
      throw new CniError(
        CniErrorCode.InvalidEnvironment,
        `CNI_NETNS=${JSON.stringify(netns)} ${why}; a pod needs a network namespace of its own`,
      );
  }

  private async network(ns: string, name: string, uid: string | undefined, signal: AbortSignal) {
    try {
      return await this.o.pods.waitFor(ns, name, uid, this.o.annotationBudgetMs ?? 60_000, signal);
    } catch (e) {
      if (e instanceof TimedOutError) throw new CniError(CniErrorCode.PodAnnotationTimeout, e.message);
      throw e;
    }
  }

  async add(req: AddRequest): Promise<CniResult> {
    const why = this.o.notReady();
    if (why) throw new CniError(CniErrorCode.TryAgainLater, `zstack-ovnkube-node is not ready: ${why}`);
    this.requireNetns(req);
    const { podNamespace: ns, podName: name, podUid } = req.k8s;
    const info = await this.network(ns, name, podUid, req.signal);
    let out: AddOutcome;
    try {
      out = await this.o.attacher.add(attachRequest(req, info, this.o.routeDestinations), {
        signal: req.signal,
      });
    } catch (e) {
      throw classify(e);
    }
    await this.confirmNetwork(req, info);
    this.o.onAddTimings?.(out.timings);
    this.o.log.info(
      { pod: `${ns}/${name}`, containerId: req.containerId, timings: out.timings },
      "pod attached",
    );
    return toResult(out.result);
  }

  /**
   * Without the admission policy anyone who can create a pod can give it an annotation of their own, which the
   * controller replaces only once it gets to the pod. By the time OVN has bound the port the controller has
   * handled it, so the annotation is read again from the API server: if it is not the one the pod was wired
   * with, the attachment is undone and the runtime asked to try again (it then gets the controller's).
   */
  private async confirmNetwork(req: AddRequest, info: PodNetworkInfo): Promise<void> {
    const { podNamespace: ns, podName: name } = req.k8s;
    let why: string | undefined;
    try {
      const now = await this.o.pods.fetch(ns, name);
      if (!now || now.uid !== info.uid) why = "the pod was deleted or replaced";
      else if (!now.info) why = `its ${POD_NETWORKS_ANNOTATION} annotation was removed`;
      else if (!now.info.network || !info.network || !samePodNetwork(now.info.network, info.network))
        why = `its ${POD_NETWORKS_ANNOTATION} annotation changed`;
    } catch (e) {
      why = `its ${POD_NETWORKS_ANNOTATION} annotation could not be read again (${(e as Error).message})`;
    }
    if (why === undefined) return;
    await this.o.attacher
      .del({ containerId: req.containerId, ifname: sandboxNames(req).ifname })
      .catch((e) => {
        this.o.log.warn(
          { containerId: req.containerId, err: (e as Error).message },
          "undoing an attachment failed",
        );
      });
    throw new CniError(
      CniErrorCode.TryAgainLater,
      `pod ${ns}/${name}: ${why} while the pod was being attached, so the attachment was undone; ADD again`,
    );
  }

  async del(req: DelRequest): Promise<void> {
    try {
      const r = await this.o.attacher.del({ containerId: req.containerId, ifname: req.ifname });
      this.o.log.info({ containerId: req.containerId, ...r }, "pod detached");
    } catch (e) {
      throw classify(e);
    }
  }

  async check(req: CheckRequest): Promise<void> {
    this.requireNetns(req);
    const { podNamespace: ns, podName: name, podUid } = req.k8s;
    const info = this.o.pods.current(ns, name, podUid);
    if (!info)
      throw new CniError(
        CniErrorCode.PodNotFound,
        `pod ${ns}/${name} or its network annotation is not known`,
      );
    try {
      await this.o.attacher.check(attachRequest(req, info, this.o.routeDestinations));
    } catch (e) {
      throw classify(e);
    }
  }

  async gc(req: GcRequest): Promise<void> {
    const out = await this.o.attacher.gc(
      req.validAttachments.map((a) => ({ containerId: a.containerId, ifname: a.ifname })),
    );
    this.o.log.info({ ...out }, "garbage-collected attachments");
  }

  async status(_req: StatusRequest): Promise<void> {
    const why = this.o.notReady();
    if (why) throw new CniError(CniErrorCode.PluginNotAvailable, `zstack-ovnkube-node is not ready: ${why}`);
  }
}
