// Public API of the Kubernetes machinery controllers plug into: raw API access, informers, the workqueue,
// leader election and event recording.
export {
  ApiClient,
  ApiError,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  type Query,
  type RequestOptions,
  statusError,
} from "./api-client.ts";
export {
  EventRecorder,
  type EventRecorderOptions,
  type EventRecorderStats,
  type EventType,
  type InvolvedObject,
} from "./events.ts";
export {
  type DeleteInfo,
  dropManagedFields,
  Informer,
  type InformerHandlers,
  type InformerOptions,
  type InformerStats,
} from "./informer.ts";
export { type LeaderElectionOptions, LeaderElector, type Lease, microTime } from "./leader-election.ts";
export { type KubeObject, type ObjectMeta, objectKey, splitKey } from "./object-key.ts";
export {
  type ReconcileOutcome,
  type ReconcileResult,
  type ShutdownOptions,
  TerminalError,
  WorkQueue,
  type WorkQueueHooks,
  type WorkQueueOptions,
} from "./workqueue.ts";
