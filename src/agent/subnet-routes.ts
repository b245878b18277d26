// The node's routes to pods on every Subnet: kubelet probes and node-local clients reach a pod through the
// management port, so each Subnet CIDR needs a route there, not only the cluster CIDRs. The agent follows the
// Subnet objects (level-triggered: every change recomputes the whole set from the informer's store) and routes
// only what the controller accepted for the spec as it is now. A Subnet anyone can create must never steer the
// node's own traffic: a CIDR that is not global unicast, that covers the join network, a service CIDR, a node
// address, the node's uplink network, the API server, a default gateway or another Subnet, or that is
// implausibly wide, is refused here even if it is marked Ready.

import { SUBNET_PATH, type Subnet, subnetCidrs, subnetReadyCondition } from "../api/subnet.ts";
import { compareIp, familyName, formatIp, type IpAddress } from "../ipam/address.ts";
import { type Cidr, cidrContains, formatCidr, overlaps, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import type { ApiClient } from "../k8s/api-client.ts";
import { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import type { Logger } from "../observability/log.ts";

/** What a Subnet route must stay clear of. */
export interface RouteGuard {
  readonly joinCidr: Cidr;
  readonly serviceCidrs: readonly Cidr[];
  /** The node's own addresses (the tunnel endpoint at least). */
  readonly nodeIps: readonly IpAddress[];
  /** Other addresses the node's own traffic needs, with what they are (the API server, a default gateway). */
  readonly hostIps?: readonly { readonly ip: IpAddress; readonly what: string }[];
  /** The networks the node's uplink is on: its neighbours (other nodes, the LAN gateway) live there. */
  readonly uplinkCidrs?: readonly Cidr[];
}

/** Wider prefixes than these are refused: a Subnet that size would take over the node's routing. */
export const MIN_ROUTE_PREFIX = { 4: 8, 6: 32 } as const;

export interface SubnetRoutePlan {
  /** Canonical order (family, then address, then prefix); no duplicates. */
  readonly cidrs: readonly Cidr[];
  readonly refused: readonly { readonly subnet: string; readonly reason: string }[];
}

/** Whether the controller accepted the Subnet's current spec: Ready is True for this generation. */
export function isAccepted(s: Subnet): boolean {
  const ready = subnetReadyCondition(s);
  if (ready?.status !== "True") return false;
  const generation = s.metadata.generation;
  return generation === undefined || ready.observedGeneration === generation;
}

function compareCidr(a: Cidr, b: Cidr): number {
  return (
    compareIp({ family: a.family, value: a.network }, { family: b.family, value: b.network }) ||
    a.prefix - b.prefix
  );
}

/** The CIDRs to route through the management port for these Subnets, and why any were left out. */
export function planSubnetRoutes(subnets: readonly Subnet[], guard: RouteGuard): SubnetRoutePlan {
  const refused: { subnet: string; reason: string }[] = [];
  const candidates: { subnet: string; cidr: Cidr }[] = [];
  for (const s of subnets) {
    if (!isAccepted(s)) continue;
    const name = s.metadata.name;
    const problem = (cidr: Cidr): string | undefined => {
      if (cidr.prefix < MIN_ROUTE_PREFIX[cidr.family])
        return `is wider than /${MIN_ROUTE_PREFIX[cidr.family]}, the widest ${familyName(cidr.family)} Subnet the node routes`;
      const special = specialRangeOverlapping(cidr);
      if (special) return `overlaps the ${special.name} ${formatCidr(special.range)}`;
      if (overlaps(cidr, guard.joinCidr)) return `overlaps the join network ${formatCidr(guard.joinCidr)}`;
      const svc = guard.serviceCidrs.find((c) => overlaps(cidr, c));
      if (svc) return `overlaps the service network ${formatCidr(svc)}`;
      const own = guard.nodeIps.find((ip) => cidrContains(cidr, ip));
      if (own) return `contains the node's own address ${formatIp(own)}`;
      const uplink = guard.uplinkCidrs?.find((c) => overlaps(cidr, c));
      if (uplink) return `overlaps the node's uplink network ${formatCidr(uplink)}`;
      const host = guard.hostIps?.find((h) => cidrContains(cidr, h.ip));
      if (host) return `contains ${host.what} ${formatIp(host.ip)}`;
      return undefined;
    };
    try {
      const texts = typeof s.spec?.cidr === "string" ? subnetCidrs(s.spec) : [];
      if (texts.length === 0) throw new InvalidInputError("spec.cidr", "is missing");
      const parsed = texts.map((t) => parseCidr(t.trim(), "spec.cidr"));
      const bad = parsed.map((c) => [c, problem(c)] as const).find(([, why]) => why);
      if (bad) {
        refused.push({ subnet: name, reason: `spec.cidr ${formatCidr(bad[0])} ${bad[1]}` });
        continue;
      }
      for (const cidr of parsed) candidates.push({ subnet: name, cidr });
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      refused.push({ subnet: name, reason: e.message });
    }
  }
  // Two Subnets claiming the same addresses: neither is routed, as the node cannot tell whose they are.
  const clash = new Set<string>();
  for (const [i, a] of candidates.entries())
    for (const b of candidates.slice(i + 1))
      if (a.subnet !== b.subnet && overlaps(a.cidr, b.cidr)) {
        for (const [x, y] of [
          [a, b],
          [b, a],
        ] as const) {
          if (clash.has(x.subnet)) continue;
          clash.add(x.subnet);
          refused.push({
            subnet: x.subnet,
            reason: `spec.cidr ${formatCidr(x.cidr)} overlaps Subnet ${y.subnet}'s ${formatCidr(y.cidr)}`,
          });
        }
      }
  const seen = new Set<string>();
  const cidrs = candidates
    .filter((c) => !clash.has(c.subnet))
    .map((c) => c.cidr)
    .filter((c) => {
      const k = formatCidr(c);
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    })
    .sort(compareCidr);
  return { cidrs, refused };
}

/** The management port's routes: the cluster and service CIDRs, then the Subnets', each prefix once. */
export function mgmtRouteCidrs(base: readonly Cidr[], subnets: readonly Cidr[]): Cidr[] {
  const seen = new Set<string>();
  return [...base, ...subnets].filter((c) => {
    const k = formatCidr(c);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function slim(o: KubeObject): Subnet {
  const s = o as Subnet;
  return {
    metadata: {
      name: s.metadata.name,
      ...(s.metadata.generation === undefined ? {} : { generation: s.metadata.generation }),
    },
    spec: { cidr: s.spec?.cidr, gateway: s.spec?.gateway } as Subnet["spec"],
    ...(s.status?.conditions ? { status: { conditions: s.status.conditions } } : {}),
  };
}

/** Follows the Subnets and reports the route set whenever it changes. */
export class SubnetRoutes {
  readonly informer: Informer<Subnet>;
  private last = "";
  private lastRefused = "";

  constructor(
    api: ApiClient,
    private guard: RouteGuard,
    private readonly onChange: (cidrs: readonly Cidr[]) => void,
    private readonly log: Logger,
  ) {
    this.informer = new Informer<Subnet>({
      client: api,
      path: SUBNET_PATH,
      transform: slim,
      logger: log.child({ informer: "subnets" }),
    });
    const recompute = () => this.recompute();
    this.informer.addHandlers({ onAdd: recompute, onUpdate: recompute, onDelete: recompute });
  }

  start(): void {
    this.informer.start();
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }

  /**
   * Replaces what routes must stay clear of (the node's addresses, gateways and uplink change at run time) and
   * recomputes at once, so a route that now captures one of them is withdrawn.
   */
  setGuard(guard: RouteGuard): void {
    this.guard = guard;
    if (this.informer.hasSynced()) this.recompute();
  }

  /** The route set for the Subnets known now. */
  plan(): SubnetRoutePlan {
    return planSubnetRoutes(this.informer.list(), this.guard);
  }

  private recompute(): void {
    // The informer replaces its store with a whole list before announcing it, so any event sees a full set.
    const plan = this.plan();
    const refused = JSON.stringify(plan.refused);
    if (refused !== this.lastRefused) {
      this.lastRefused = refused;
      for (const r of plan.refused) this.log.warn(r, "not routing a Subnet through the management port");
    }
    const key = plan.cidrs.map(formatCidr).join(",");
    if (key === this.last) return;
    this.last = key;
    this.onChange(plan.cidrs);
  }
}
