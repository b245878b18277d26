// The external_ids every NB row we create carries. `zstack.io/id` is the row's stable identity, so a reconcile can
// find "its" row again after a restart without relying on names that others may also use.

import { OWNER_KEY } from "../ovsdb/ownership.ts";
import { stableUuid } from "../ovsdb/stable-uuid.ts";

export { OWNER_KEY };
export const ID_KEY = "zstack.io/id";
export const KIND_KEY = "zstack.io/kind";
export const CONTROLLER = "zstack-ovnkube-controller";

export const POD_UID_KEY = "zstack.io/pod-uid";
export const POD_KEY = "zstack.io/pod";
export const SUBNET_KEY = "zstack.io/subnet";
export const NODE_KEY = "zstack.io/node";
/** On a node's management port: which of its addresses is the service SNAT address (not the node's own). */
export const SERVICE_SNAT_IP_KEY = "zstack.io/service-snat-ip";
/** The StatefulSet owning a pod: its port outlives the pod while the StatefulSet still wants that ordinal. */
export const STATEFULSET_KEY = "zstack.io/statefulset";
/**
 * One key per address a pod port holds, valued with its Subnet: an insert waits until no port of that Subnet
 * has the key, so NB refuses a second port with an address whatever the allocator believed (OVSDB conditions
 * match whole set elements, so `addresses` itself, "MAC IP...", cannot be searched by address).
 */
export const ADDRESS_KEY_PREFIX = "zstack.io/ip/";
export function addressKey(ip: string): string {
  return `${ADDRESS_KEY_PREFIX}${ip}`;
}
/**
 * The value of the address keys on join switch ports (management and service SNAT addresses): not a valid
 * Subnet name, so a join address and a pod address of a Subnet never guard each other.
 */
export const JOIN_ADDRESS_SCOPE = "@join";
/** The Service (`<namespace>/<name>`) a load balancer realizes. */
export const SERVICE_KEY = "zstack.io/service";

export type Kind =
  | "cluster-router"
  | "join-switch"
  | "subnet-switch"
  | "router-port"
  | "switch-router-port"
  | "localnet-port"
  | "localnet-source-guard"
  | "external-source-guard"
  | "external-localnet-group"
  | "external-localnet-acl"
  | "mgmt-port"
  | "mgmt-source-guard"
  | "pod-port"
  | "node-pods"
  | "egress-policy"
  | "node-reply-policy"
  | "egress-route"
  | "inside-set"
  | "external-pods-set"
  | "external-pods-policy"
  | "service-lb"
  | "chassis-vars"
  | "network-policy"
  | "network-policy-acl"
  | "network-policy-named"
  | "network-policy-peer"
  | "network-policy-isolation";

export function ownedIds(kind: Kind, id: string, extra: Record<string, string> = {}): Record<string, string> {
  return { [OWNER_KEY]: CONTROLLER, [KIND_KEY]: kind, [ID_KEY]: id, ...extra };
}

/**
 * The UUID a row of this kind and id is inserted with where the server takes chosen UUIDs (Transaction.insert's
 * `uuid`): the same for every attempt, so a second insert is refused, and never reused by another kind or id.
 */
export function rowUuid(kind: Kind, id: string): string {
  return stableUuid(`${CONTROLLER}/${kind}`, id);
}

export function isOurs(row: { readonly external_ids: Readonly<Record<string, string>> }): boolean {
  return row.external_ids[OWNER_KEY] === CONTROLLER;
}

export function idOf(row: { readonly external_ids: Readonly<Record<string, string>> }): string | undefined {
  return isOurs(row) ? row.external_ids[ID_KEY] : undefined;
}
