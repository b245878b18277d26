// What the node agent implements to serve CNI requests. The CNI server has already validated the
// environment and the configuration and negotiated the version, so a handler sees typed requests only.
// A handler reports failure by throwing a CniError with the right code (error.ts); anything else it throws
// becomes code 199 (internal). Results are version-independent: the server encodes them per request.

import type { CniResult } from "./result.ts";
import type { CniVersion, GcAttachment, K8sArgs, PluginConfig } from "./spec.ts";

/** The pod an ADD or CHECK is for; the server refuses those without K8S_POD_NAMESPACE and K8S_POD_NAME. */
export interface PodArgs extends K8sArgs {
  podNamespace: string;
  podName: string;
}

interface RequestBase {
  /** The spec version this request negotiated; the reply is encoded in it. */
  cniVersion: CniVersion;
  config: PluginConfig;
  /** CNI_PATH, split; empty when the runtime set none. */
  cniPath: string[];
  /** Aborted when the shim goes away (the runtime killed it or gave up), so long waits can stop early. */
  signal: AbortSignal;
}

interface AttachmentBase extends RequestBase {
  containerId: string;
  ifname: string;
  /** Every CNI_ARGS pair, for keys beyond the Kubernetes ones. */
  args: Record<string, string>;
}

export interface AddRequest extends AttachmentBase {
  command: "ADD";
  netns: string;
  k8s: PodArgs;
  /** Set when another plugin ran before this one in the chain; the result must carry it forward. */
  prevResult?: CniResult;
}

export interface CheckRequest extends AttachmentBase {
  command: "CHECK";
  netns: string;
  k8s: PodArgs;
  /** The result of the ADD being checked; runtimes always pass it. */
  prevResult?: CniResult;
}

export interface DelRequest extends AttachmentBase {
  command: "DEL";
  /** "" when the runtime has already removed the netns. DEL must succeed all the same. */
  netns: string;
  /** DEL may come without pod identity; find the attachment by containerId and ifname. */
  k8s: K8sArgs;
  prevResult?: CniResult;
}

export interface GcRequest extends RequestBase {
  command: "GC";
  /** Attachments to keep; remove every other attachment of this network. */
  validAttachments: GcAttachment[];
}

export interface StatusRequest extends RequestBase {
  command: "STATUS";
}

export type CniRequest = AddRequest | CheckRequest | DelRequest | GcRequest | StatusRequest;

export interface CniHandler {
  /** Wires the pod into the network and returns what it set up. */
  add(req: AddRequest): Promise<CniResult>;
  /** Removes the attachment; idempotent, and success when everything is already gone. */
  del(req: DelRequest): Promise<void>;
  /** Throws (code 106 or another) when the attachment differs from what ADD set up. */
  check(req: CheckRequest): Promise<void>;
  /** Removes attachments of this network that are not in req.validAttachments. */
  gc(req: GcRequest): Promise<void>;
  /** Throws code 50 or 51 when the agent cannot serve ADD now. */
  status(req: StatusRequest): Promise<void>;
}
