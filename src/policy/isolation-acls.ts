// The rows shared by all policies: a port group per direction holding every pod that some policy of that
// direction selects, with the default deny (ARP and neighbour discovery still pass), and per node a port group of
// its ingress-isolated pods whose one ACL lets the node itself in (its management IP is the source of kubelet
// probes and of host traffic), as the Kubernetes documentation requires.

import { type Family, formatIp, type IpAddress } from "../ipam/address.ts";
import type { DesiredRow } from "../ovn/nb-diff.ts";
import { NODE_KEY, ownedIds } from "../ovn/ownership.ts";
import { DEFAULT_DENY, NEIGHBOUR_ALLOW, OWN_NODE_ALLOW } from "./acl-priority.ts";
import { isolationGroup, isolationGroupId, nodeGroupId, nodeGroupName } from "./nb-names.ts";
import type { Direction } from "./policy-model.ts";

function acl(groupId: string, suffix: string, row: Record<string, unknown>): DesiredRow {
  const id = `${groupId}/${suffix}`;
  return {
    table: "ACL",
    id,
    row: { ...row, external_ids: ownedIds("network-policy-isolation", id) },
    parent: { table: "Port_Group", id: groupId, column: "acls" },
  };
}

/** The isolation group of a direction and its two ACLs (ports are the reconciler's). */
export function isolationRows(direction: Direction): DesiredRow[] {
  const name = isolationGroup(direction);
  const id = isolationGroupId(direction);
  const ingress = direction === "ingress";
  const dir = ingress ? "to-lport" : "from-lport";
  const port = ingress ? "outport" : "inport";
  // Egress ACLs are judged after load balancing; the deny must be in that stage too (its priorities are its own).
  const options = ingress ? {} : { "apply-after-lb": "true" };
  return [
    { table: "Port_Group", id, row: { name, external_ids: ownedIds("network-policy-isolation", id) } },
    acl(id, "deny", {
      direction: dir,
      priority: DEFAULT_DENY,
      action: "drop",
      match: `${port} == @${name} && ip`,
      options,
    }),
    acl(id, "neighbour", {
      direction: dir,
      priority: NEIGHBOUR_ALLOW,
      action: "allow",
      match: `${port} == @${name} && (arp || nd)`,
      options,
    }),
  ];
}

/** The own-node group of a node and its allow from the node's management IPs (none: no ACL, nothing opened). */
export function nodeRows(node: string, mgmtIps: readonly IpAddress[]): DesiredRow[] {
  const name = nodeGroupName(node);
  const id = nodeGroupId(node);
  const rows: DesiredRow[] = [
    {
      table: "Port_Group",
      id,
      row: { name, external_ids: ownedIds("network-policy-isolation", id, { [NODE_KEY]: node }) },
    },
  ];
  const terms = ([4, 6] as Family[]).flatMap((f) => {
    const ips = mgmtIps.filter((ip) => ip.family === f).map(formatIp);
    return ips.length === 0 ? [] : [`${f === 4 ? "ip4" : "ip6"}.src == {${ips.join(", ")}}`];
  });
  if (terms.length > 0)
    rows.push(
      acl(id, "allow", {
        direction: "to-lport",
        priority: OWN_NODE_ALLOW,
        action: "allow-related",
        match: `outport == @${name} && ${terms.length === 1 ? terms[0] : `(${terms.join(" || ")})`}`,
        options: {},
      }),
    );
  return rows;
}
