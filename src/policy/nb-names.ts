// The NB names and ids of NetworkPolicy rows. Port_Group and Address_Set names are unique (indexed) in NB, so a
// retried insert of one cannot make a second; ACL matches refer to them as `@name` and `$name`, so they hold only
// letters, digits and `_`: a hash of the identity, never the identity's text.

import { createHash } from "node:crypto";
import type { Family } from "../ipam/address.ts";
import type { Direction, Protocol } from "./policy-model.ts";

/** Every NB name this module makes starts with this; nothing else of ours or others' does. */
export const POLICY_NAME_PREFIX = "zovn_np_";
export const ISOLATED_INGRESS = "zovn_np_isolated_ingress";
export const ISOLATED_EGRESS = "zovn_np_isolated_egress";
/** external_ids key on every row realizing one policy: its `<namespace>/<name>`. */
export const POLICY_KEY = "zstack.io/network-policy";
/** external_ids key on a shared peer address set: its canonical peer key. */
export const PEER_KEY = "zstack.io/policy-peer";

function hash16(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

export function isolationGroup(direction: Direction): string {
  return direction === "ingress" ? ISOLATED_INGRESS : ISOLATED_EGRESS;
}

export function policyGroupName(policyKey: string): string {
  return `${POLICY_NAME_PREFIX}${hash16(policyKey)}`;
}

export function nodeGroupName(node: string): string {
  return `${POLICY_NAME_PREFIX}node_${hash16(node)}`;
}

export function peerSetName(peerKey: string, family: Family): string {
  return `${POLICY_NAME_PREFIX}peer_${hash16(peerKey)}_v${family}`;
}

/** The set of pod addresses a named port resolves to, for one policy (and, in egress, one rule). */
export function namedSetName(
  policyKey: string,
  direction: Direction,
  rule: number | undefined,
  name: string,
  protocol: Protocol,
  port: number,
  family: Family,
): string {
  const id = [policyKey, direction, rule ?? "", name, protocol, port].join("\u0000");
  return `${POLICY_NAME_PREFIX}named_${hash16(id)}_v${family}`;
}

/** Row ids (external_ids zstack.io/id). */
export const policyGroupId = (policyKey: string) => `np/${policyKey}`;
export const policyAclId = (policyKey: string, direction: string, match: string) =>
  `np-acl/${policyKey}/${hash16(`${direction}\u0000${match}`)}`;
export const namedSetId = (policyKey: string, setName: string) => `np-named/${policyKey}/${setName}`;
export const peerSetId = (setName: string) => `np-peer/${setName}`;
export const isolationGroupId = (direction: Direction) => `np-isolation/${direction}`;
export const nodeGroupId = (node: string) => `np-node/${node}`;
