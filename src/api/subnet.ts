// The Subnet custom resource (network.zstack.io/v1, cluster-scoped, deploy/crds/subnet.network.zstack.io.yaml):
// TypeScript shapes of its spec and status, and readings of the spec that every consumer needs the same way.
// The apiserver has already validated the fields (docs/subnet-crd.md), so these helpers only split them.

import type { KubeObject, ObjectMeta } from "../k8s/object-key.ts";
import { type Condition, type ConditionUpdate, findCondition, setCondition } from "./condition.ts";

export const SUBNET_GROUP = "network.zstack.io";
export const SUBNET_VERSION = "v1";
export const SUBNET_PLURAL = "subnets";
export const SUBNET_KIND = "Subnet";
export const SUBNET_API_VERSION = `${SUBNET_GROUP}/${SUBNET_VERSION}`;
/** The collection path, for an Informer. */
export const SUBNET_PATH = `/apis/${SUBNET_GROUP}/${SUBNET_VERSION}/${SUBNET_PLURAL}`;

export type SubnetProtocol = "IPv4" | "IPv6" | "Dual";
export type SubnetPhase = "Pending" | "Active" | "Failed";

/** The condition the controller keeps on every Subnet. */
export const SUBNET_READY = "Ready";

export interface SubnetSpec {
  /** One CIDR, or for Dual an IPv4 and an IPv6 CIDR separated by a comma. */
  cidr: string;
  /** One address, or for Dual one per family separated by a comma. */
  gateway: string;
  /** Single addresses, or inclusive ranges written "a-b" or "a..b". */
  excludeIPs?: string[];
  /** External mode: the existing logical switch to use instead of creating one. */
  externalLogicalSwitch?: string;
  vlanID?: number;
  provider?: string;
  /** Defaulted to IPv4 by the apiserver. */
  protocol?: SubnetProtocol;
  /** Namespaces whose pods take their addresses from this subnet. */
  namespaces?: string[];
  /** The default pod subnet for namespaces no subnet names. */
  default?: boolean;
}

export interface SubnetStatus {
  phase?: SubnetPhase;
  message?: string;
  observedGeneration?: number;
  conditions?: Condition[];
  /** Free addresses; for Dual the smaller of the two families. Approximate beyond 2^53. */
  availableIPs?: number;
  usedIPs?: number;
  /** Addresses the subnet can hand out at most. */
  portCapacity?: number;
  logicalSwitch?: string;
  /** External mode: the OVN UUID of ZStack's switch the Subnet is bound to (its pods' ports are there). */
  logicalSwitchUUID?: string;
}

export interface Subnet extends KubeObject {
  apiVersion?: typeof SUBNET_API_VERSION;
  kind?: typeof SUBNET_KIND;
  metadata: ObjectMeta & { name: string };
  spec: SubnetSpec;
  status?: SubnetStatus;
}

/** A Subnet to create: metadata.name and spec; the rest is filled in. */
export function newSubnet(name: string, spec: SubnetSpec, labels?: Record<string, string>): Subnet {
  return {
    apiVersion: SUBNET_API_VERSION,
    kind: SUBNET_KIND,
    metadata: { name, ...(labels ? { labels } : {}) },
    spec,
  };
}

export function subnetProtocol(spec: SubnetSpec): SubnetProtocol {
  return spec.protocol ?? "IPv4";
}

/** The CIDRs, in the order written. */
export function subnetCidrs(spec: SubnetSpec): string[] {
  return spec.cidr.split(",");
}

/** The gateways, in the order written. */
export function subnetGateways(spec: SubnetSpec): string[] {
  return spec.gateway.split(",");
}

export interface ExcludeRange {
  /** First address, as written. */
  start: string;
  /** Last address (inclusive), as written; equal to start for a single address. */
  end: string;
}

/** Splits an excludeIPs entry into its two ends ("a", "a-b" and "a..b" forms). */
export function parseExcludeEntry(entry: string): ExcludeRange {
  const dots = entry.indexOf("..");
  if (dots >= 0) return { start: entry.slice(0, dots), end: entry.slice(dots + 2) };
  const dash = entry.indexOf("-");
  if (dash >= 0) return { start: entry.slice(0, dash), end: entry.slice(dash + 1) };
  return { start: entry, end: entry };
}

export function subnetReadyCondition(subnet: Subnet): Condition | undefined {
  return findCondition(subnet.status?.conditions, SUBNET_READY);
}

/**
 * The status for a Subnet the controller has just reconciled: phase and Ready condition agree, and
 * observedGeneration records which spec they describe.
 */
export function subnetStatus(
  subnet: Subnet,
  outcome: { phase: SubnetPhase; reason: string; message: string },
  extra: Omit<SubnetStatus, "phase" | "message" | "conditions" | "observedGeneration"> = {},
  now: Date = new Date(),
): SubnetStatus {
  const ready: ConditionUpdate = {
    type: SUBNET_READY,
    status: outcome.phase === "Active" ? "True" : outcome.phase === "Failed" ? "False" : "Unknown",
    reason: outcome.reason,
    message: outcome.message,
    ...(subnet.metadata.generation === undefined ? {} : { observedGeneration: subnet.metadata.generation }),
  };
  return {
    ...subnet.status,
    ...extra,
    phase: outcome.phase,
    message: outcome.message,
    ...(subnet.metadata.generation === undefined ? {} : { observedGeneration: subnet.metadata.generation }),
    conditions: setCondition(subnet.status?.conditions, ready, now),
  };
}
