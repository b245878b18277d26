// CNI errors: the spec's well-known codes, ours from 100 up, and the error JSON a plugin prints on stdout.
// Anything in the agent that fails a CNI request throws a CniError; the server turns it into this JSON.

/** Codes 1-99 are the spec's (SPEC.md, "Error"); 100 and up are this plugin's own, listed in docs/cni.md. */
export const CniErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironment: 4,
  IoFailure: 5,
  DecodeFailure: 6,
  InvalidNetworkConfig: 7,
  TryAgainLater: 11,
  /** STATUS only: the plugin cannot serve ADD. */
  PluginNotAvailable: 50,
  /** STATUS only: the plugin cannot serve ADD, and running pods may have limited connectivity. */
  PluginNotAvailableLimitedConnectivity: 51,

  /** ADD waited its budget for the pod's network annotation from the controller. */
  PodAnnotationTimeout: 100,
  /** ADD waited its budget for ovn-controller to set ovn-installed on the OVS interface. */
  OvnInstalledTimeout: 101,
  /** CNI_NETNS names no network namespace (ADD, CHECK). */
  NetnsMissing: 102,
  /** The pod does not exist (anymore) in the API server. */
  PodNotFound: 103,
  /** Creating or configuring the veth pair, addresses, routes or MTU failed. */
  InterfaceSetupFailed: 104,
  /** Adding, binding or removing the OVS port failed. */
  OvsPortFailed: 105,
  /** CHECK found the attachment differs from what ADD set up. */
  CheckFailed: 106,
  /** The shim and the agent speak different versions of their socket protocol. */
  AgentProtocolMismatch: 107,
  /** A step ran out of its time budget; the message names the step. */
  StepTimeout: 108,
  /** The pod's k8s.ovn.org/pod-networks annotation holds an invalid value; the message names the field. */
  InvalidPodNetwork: 109,
  /** The agent failed in a way it did not classify; the details carry the cause. */
  Internal: 199,
} as const;

export type CniErrorCodeValue = (typeof CniErrorCode)[keyof typeof CniErrorCode];

/** The error result structure, as printed on stdout. */
export interface CniErrorJson {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details?: string,
  ) {
    super(message);
    this.name = "CniError";
  }

  toErrorJson(cniVersion: string): CniErrorJson {
    const out: CniErrorJson = { cniVersion, code: this.code, msg: this.message };
    if (this.details) out.details = this.details;
    return out;
  }
}

/** Wraps an unexpected throw so the runtime still gets an error JSON; a CniError passes through unchanged. */
export function asCniError(err: unknown): CniError {
  if (err instanceof CniError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new CniError(CniErrorCode.Internal, "internal error in the zstack-ovn node agent", message);
}

/** The stdout text of an error: one JSON object and a newline. Every supported version uses the same shape. */
export function formatCniError(err: CniError, cniVersion: string): string {
  return `${JSON.stringify(err.toErrorJson(cniVersion))}\n`;
}
