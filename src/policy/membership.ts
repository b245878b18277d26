// The port groups a pod's port belongs to, from the policies of its namespace: each policy selecting it, the
// isolation group of every direction such a policy has, and (ingress-isolated) its node's own-node group. The
// same rule the policy and isolation reconcilers converge to, so the port can join them in the transaction that
// inserts it and never exists in NB without its isolation.

import { isolationGroupId, nodeGroupId, policyGroupId } from "./nb-names.ts";
import type { PolicyModel } from "./policy-model.ts";
import { type PolicyPod, policySelects } from "./selection.ts";

/** Port group ids (external_ids zstack.io/id), sorted; none for a pod no policy can select. */
export function podPortGroupIds(
  policies: readonly PolicyModel[],
  pod: PolicyPod | undefined,
  node: string | undefined,
): string[] {
  if (!pod) return [];
  const out = new Set<string>();
  for (const m of policies) {
    if (!policySelects(m, pod)) continue;
    out.add(policyGroupId(m.key));
    if (m.ingress !== undefined) {
      out.add(isolationGroupId("ingress"));
      if (node) out.add(nodeGroupId(node));
    }
    if (m.egress !== undefined) out.add(isolationGroupId("egress"));
  }
  return [...out].sort();
}
