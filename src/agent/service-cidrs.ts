// ServiceCIDR objects (networking.k8s.io/v1): the address ranges Service cluster IPs are allocated from, added at
// run time by an administrator. The node routes each through the management port like the configured service
// CIDR, so the node's own connections to a cluster IP from a new range take the Services path. The object is
// still input from the API: a range that would capture the node's own traffic is refused, as for Subnets.

import { formatIp } from "../ipam/address.ts";
import { type Cidr, cidrContains, formatCidr, overlaps, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { MIN_ROUTE_PREFIX, type RouteGuard } from "./subnet-routes.ts";

export const SERVICE_CIDR_PATH = "/apis/networking.k8s.io/v1/servicecidrs";

export interface ServiceCidrObject extends KubeObject {
  spec?: { cidrs?: unknown };
}

export interface ServiceCidrPlan {
  /** Canonical text order, each once. */
  cidrs: Cidr[];
  refused: { serviceCidr: string; reason: string }[];
}

/**
 * The ranges to route for these ServiceCIDRs. `guard.serviceCidrs` (the configured ones, already routed) are
 * not a reason to refuse; `clusterCidrs` (pods) are.
 */
export function planServiceCidrRoutes(
  objects: readonly ServiceCidrObject[],
  guard: RouteGuard,
  clusterCidrs: readonly Cidr[],
): ServiceCidrPlan {
  const refused: ServiceCidrPlan["refused"] = [];
  const byText = new Map<string, Cidr>();
  for (const o of objects) {
    const name = o.metadata?.name ?? "";
    const texts = o.spec?.cidrs;
    if (!Array.isArray(texts) || texts.length === 0) {
      refused.push({ serviceCidr: name, reason: "spec.cidrs is not a list of CIDRs" });
      continue;
    }
    texts.forEach((text, i) => {
      const field = `spec.cidrs[${i}]`;
      try {
        if (typeof text !== "string") throw new InvalidInputError(field, "is not a string");
        const cidr = parseCidr(text.trim(), field);
        const why = problem(cidr, guard, clusterCidrs);
        if (why) refused.push({ serviceCidr: name, reason: `${field} ${formatCidr(cidr)} ${why}` });
        else byText.set(formatCidr(cidr), cidr);
      } catch (e) {
        if (!(e instanceof InvalidInputError)) throw e;
        refused.push({ serviceCidr: name, reason: e.message });
      }
    });
  }
  const cidrs = [...byText.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, c]) => c);
  return { cidrs, refused };
}

function problem(cidr: Cidr, guard: RouteGuard, clusterCidrs: readonly Cidr[]): string | undefined {
  if (cidr.prefix < MIN_ROUTE_PREFIX[cidr.family])
    return `is wider than /${MIN_ROUTE_PREFIX[cidr.family]}, the widest range the node routes`;
  const special = specialRangeOverlapping(cidr);
  if (special) return `overlaps the ${special.name} ${formatCidr(special.range)}`;
  if (overlaps(cidr, guard.joinCidr)) return `overlaps the join network ${formatCidr(guard.joinCidr)}`;
  const pods = clusterCidrs.find((c) => overlaps(cidr, c));
  if (pods) return `overlaps the cluster network ${formatCidr(pods)}`;
  const own = guard.nodeIps.find((ip) => cidrContains(cidr, ip));
  if (own) return `contains the node's own address ${formatIp(own)}`;
  const uplink = guard.uplinkCidrs?.find((c) => overlaps(cidr, c));
  if (uplink) return `overlaps the node's uplink network ${formatCidr(uplink)}`;
  const host = guard.hostIps?.find((h) => cidrContains(cidr, h.ip));
  if (host) return `contains ${host.what} ${formatIp(host.ip)}`;
  return undefined;
}
