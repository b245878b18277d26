// The ACL priority plan. OVN 23.03 has no ACL tiers, so bands of priority stand in for them; docs/network-policy.md
// maps each band to the tier it becomes on OVN >= 23.06. Priorities of from-lport ACLs with apply-after-lb are
// judged in their own stage, so the egress allow and its default deny must both carry the option.

/** 32000..30001: reserved for AdminNetworkPolicy (tier 1 on OVN >= 23.06). */
export const ADMIN_POLICY_BAND = { high: 32000, low: 30001 } as const;
/** 30000..20001: reserved for ZStack security groups in External mode. */
export const SECURITY_GROUP_BAND = { high: 30000, low: 20001 } as const;
/** Traffic from a pod's own node (kubelet probes, host-network pods): the Kubernetes docs say it is never cut. */
export const OWN_NODE_ALLOW = 2000;
/** ARP and IPv6 neighbour discovery of isolated pods. */
export const NEIGHBOUR_ALLOW = 1100;
/** Every allow of a NetworkPolicy rule. */
export const POLICY_ALLOW = 1001;
/** The default deny of a pod that a policy of that direction selects. */
export const DEFAULT_DENY = 1000;
/** 999..1: reserved for BaselineAdminNetworkPolicy (tier 3 on OVN >= 23.06). */
export const BASELINE_POLICY_BAND = { high: 999, low: 1 } as const;
