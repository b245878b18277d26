import { type Cidr, formatCidr, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { type RouteGuard, routeProblem } from "./subnet-routes.ts";

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
  return routeProblem(cidr, guard, "range", { what: "cluster network", cidrs: clusterCidrs });
}
