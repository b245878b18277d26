// Public API of the node agent's networking: what the CNI server's handler and the agent's entry point use.
export { type ChassisConfig, chassisExternalIds, ensureChassisConfig } from "./chassis-config.ts";
export { type AddStep, CheckFailedError, StepError, StepTimeoutError } from "./errors.ts";
export {
  configureMgmtInterface,
  ensureMgmtOvsPort,
  MGMT_IFNAME,
  MGMT_PORT_ANNOTATION,
  type MgmtPortAnnotation,
  type MgmtPortSpec,
  parseMgmtPortAnnotation,
} from "./mgmt-port.ts";
export { ENCAP_OVERHEAD, type EncapType, interfaceWithAddress, podMtu } from "./mtu.ts";
export { NodeSetup, type NodeSetupConfig, type ReconcileReport } from "./node-setup.ts";
export { type BridgeSpec, type DatapathType, ensureBridge, INTEGRATION_BRIDGE } from "./ovs-bridge.ts";
export {
  addPodPort,
  CONTAINER_ID_KEY,
  findPodPort,
  IFACE_ID_KEY,
  listPodPorts,
  OVN_INSTALLED_KEY,
  type PodPortInfo,
  removePodPorts,
  waitOvnInstalled,
} from "./ovs-port.ts";
export {
  type AddOutcome,
  type AddRequest,
  type AddTimings,
  type AttachmentRef,
  type AttachmentResult,
  type GcOutcome,
  PodAttacher,
  type PodAttacherConfig,
  type PodNetwork,
  podPortName,
} from "./pod-attachment.ts";
export {
  applyEgressSnat,
  type EgressSnatSpec,
  enableForwarding,
  NFT_TABLE,
} from "./snat.ts";
export { spawnedTools } from "./tool.ts";
export { hostVethName, type PodRoute } from "./veth.ts";
export { NODE_AGENT, type VswitchClient } from "./vswitch-db.ts";
