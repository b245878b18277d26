// The pod status the node simulator reports, computed from what it knows about the pod's sandbox and
// containers. Pure: the same inputs give the same patch, so an unchanged pod is never patched twice.

export type ContainerState =
  | { kind: "waiting"; reason: string; message?: string }
  | { kind: "running"; startedAt: string }
  | { kind: "terminated"; exitCode: number; reason: string; startedAt?: string; finishedAt: string };

export interface ContainerView {
  name: string;
  image: string;
  containerId?: string;
  state: ContainerState;
  lastTerminated?: Extract<ContainerState, { kind: "terminated" }>;
  restartCount: number;
  ready: boolean;
}

export interface PodView {
  phase: "Pending" | "Running" | "Succeeded" | "Failed";
  /** The sandbox exists and its network is set up. */
  sandboxReady: boolean;
  /** Why the sandbox is not ready (the CNI error), when known. */
  sandboxMessage?: string;
  podIPs: string[];
  hostIP: string;
  startTime: string;
  containers: ContainerView[];
}

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastProbeTime?: string | null;
}

/** Conditions the kubelet owns; any other condition on the pod (PodScheduled, readiness gates) is kept. */
export const KUBELET_CONDITIONS = ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"];

/** RFC 3339 at second precision, as the API server stores metav1.Time. */
export function apiTime(t: Date | string | undefined): string | undefined {
  if (t === undefined) return undefined;
  const d = typeof t === "string" ? new Date(t) : t;
  if (Number.isNaN(d.getTime())) return undefined;
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function apiState(s: ContainerState): object {
  switch (s.kind) {
    case "waiting":
      return { waiting: s.message ? { reason: s.reason, message: s.message } : { reason: s.reason } };
    case "running":
      return { running: { startedAt: s.startedAt } };
    case "terminated":
      return {
        terminated: {
          exitCode: s.exitCode,
          reason: s.reason,
          ...(s.startedAt ? { startedAt: s.startedAt } : {}),
          finishedAt: s.finishedAt,
        },
      };
  }
}

export interface ExistingCondition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: Date | string;
  lastProbeTime?: Date | string | null;
}

function condition(
  type: string,
  ok: boolean,
  existing: readonly ExistingCondition[],
  now: string,
  reason?: string,
  message?: string,
): Condition {
  const status = ok ? "True" : "False";
  const prev = existing.find((c) => c.type === type);
  // The transition time moves only when the status does, as the kubelet's status manager does it.
  const since = prev && prev.status === status ? (apiTime(prev.lastTransitionTime) ?? now) : now;
  const c: Condition = { type, status, lastProbeTime: null, lastTransitionTime: since };
  if (!ok && reason) c.reason = reason;
  if (!ok && message) c.message = message;
  return c;
}

/** The JSON merge patch body for the pod's status subresource. */
export function podStatusPatch(view: PodView, existing: readonly ExistingCondition[], now: Date): object {
  const at = apiTime(now) as string;
  const unready = view.containers.filter((c) => !c.ready).map((c) => c.name);
  const containersReady = unready.length === 0 && view.containers.length > 0;
  const notReadyMessage = `containers with unready status: [${unready.join(" ")}]`;
  const kept = existing
    .filter((c) => c.type !== undefined && !KUBELET_CONDITIONS.includes(c.type))
    .map((c) => ({
      ...c,
      lastTransitionTime: apiTime(c.lastTransitionTime),
      lastProbeTime: apiTime(c.lastProbeTime ?? undefined) ?? null,
    }));
  const conditions = [
    ...kept,
    condition("PodReadyToStartContainers", view.sandboxReady, existing, at, undefined, view.sandboxMessage),
    condition("Initialized", true, existing, at),
    condition("ContainersReady", containersReady, existing, at, "ContainersNotReady", notReadyMessage),
    condition("Ready", containersReady, existing, at, "ContainersNotReady", notReadyMessage),
  ];
  return {
    status: {
      phase: view.phase,
      conditions,
      hostIP: view.hostIP,
      hostIPs: [{ ip: view.hostIP }],
      podIP: view.podIPs[0] ?? null,
      podIPs: view.podIPs.length > 0 ? view.podIPs.map((ip) => ({ ip })) : null,
      startTime: view.startTime,
      containerStatuses: view.containers.map((c) => ({
        name: c.name,
        image: c.image,
        imageID: "",
        ...(c.containerId ? { containerID: c.containerId } : {}),
        ready: c.ready,
        started: c.state.kind === "running",
        restartCount: c.restartCount,
        state: apiState(c.state),
        lastState: c.lastTerminated ? apiState(c.lastTerminated) : {},
      })),
    },
  };
}
