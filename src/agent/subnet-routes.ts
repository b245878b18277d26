// The node's routes to pods on every Subnet: kubelet probes and node-local clients reach a pod through the
// management port, so each Subnet CIDR needs a route there, not only the cluster CIDRs. The agent follows the
// Subnet objects (level-triggered: every change recomputes the whole set from the informer's store) and routes
// only what the controller accepted for the spec as it is now. A Subnet anyone can create must never steer the
// node's own traffic: a CIDR that is not global unicast, that covers the join network, a service CIDR, a node
// address, the node's uplink network, the API server, a default gateway or another Subnet, or that is
// implausibly wide, is refused here even if it is marked Ready.

import { SUBNET_PATH, type Subnet, subnetCidrs, subnetReadyCondition } from "../api/subnet.ts";
import { compareIp, familyName, formatIp, type IpAddress } from "../ipam/address.ts";
import { type Cidr, cidrContains, cidrContainsCidr, formatCidr, overlaps, parseCidr } from "../ipam/cidr.ts";
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

interface Claim {
  readonly subnet: string;
  readonly cidr: Cidr;
}

/** The Subnets whose claims share addresses with another Subnet's, each once, with one such other claim. */
function overlappingClaims(claims: readonly Claim[]): (Claim & { other: Claim })[] {
  // Identical blocks are grouped, each Subnet once per block, so a block's group names distinct Subnets.
  const blocks = new Map<string, { cidr: Cidr; claims: Claim[]; subnets: Set<string> }>();
  for (const c of claims) {
    const key = formatCidr(c.cidr);
    const block = blocks.get(key) ?? { cidr: c.cidr, claims: [], subnets: new Set<string>() };
    blocks.set(key, block);
    if (block.subnets.has(c.subnet)) continue;
    block.subnets.add(c.subnet);
    block.claims.push(c);
  }
  const out: (Claim & { other: Claim })[] = [];
  const marked = new Set<string>();
  const mark = (c: Claim, against: readonly Claim[]) => {
    if (marked.has(c.subnet)) return;
    const other = against.find((x) => x.subnet !== c.subnet);
    if (!other) return;
    marked.add(c.subnet);
    out.push({ ...c, other });
  };
  // Two CIDR blocks either nest or are disjoint. In address order (wider first at equal addresses) the blocks
  // still open where a block starts form a chain that contains it, so each block meets only that chain: at
  // most one block per prefix length, instead of every other block.
  // A block claimed by two or more Subnets has all of them marked at once, so only single claims are visited
  // against the chain: the work is the number of blocks times the chain's depth (one block per prefix length).
  const open: { cidr: Cidr; claims: Claim[] }[] = [];
  for (const block of [...blocks.values()].sort((a, b) => compareCidr(a.cidr, b.cidr))) {
    for (const c of block.claims) mark(c, block.claims);
    while (open.length > 0 && !cidrContainsCidr(open[open.length - 1]!.cidr, block.cidr)) open.pop();
    for (const outer of open) {
      if (block.claims.length === 1) mark(block.claims[0]!, outer.claims);
      if (outer.claims.length === 1) mark(outer.claims[0]!, block.claims);
    }
    open.push(block);
  }
  return out;
}

/** The CIDRs to route through the management port for these Subnets, and why any were left out. */
export function planSubnetRoutes(subnets: readonly Subnet[], guard: RouteGuard): SubnetRoutePlan {
  const refused: { subnet: string; reason: string }[] = [];
  const candidates: { subnet: string; cidr: Cidr }[] = [];
  for (const s of subnets) {
    if (!isAccepted(s)) continue;
    // A provider network subnet is not behind the cluster router: its pods are on the underlay, reached through
    // the underlay's router like any outside address; a route into the management port would lose them.
    if (typeof s.spec?.provider === "string" && s.spec.provider !== "") continue;
    const name = s.metadata.name;
    const problem = (cidr: Cidr): string | undefined =>
      routeProblem(cidr, guard, `${familyName(cidr.family)} Subnet`, {
        what: "service network",
        cidrs: guard.serviceCidrs,
      });
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
  for (const c of overlappingClaims(candidates)) {
    clash.add(c.subnet);
    refused.push({
      subnet: c.subnet,
      reason: `spec.cidr ${formatCidr(c.cidr)} overlaps Subnet ${c.other.subnet}'s ${formatCidr(c.other.cidr)}`,
    });
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

/** What of a Subnet its routes depend on; an event that leaves it unchanged (status usage, say) changes nothing. */
export function routeInputs(s: Subnet): string {
  return JSON.stringify([s.metadata.name, s.spec?.cidr, s.spec?.provider ?? "", isAccepted(s)]);
}

function slim(o: KubeObject): Subnet {
  const s = o as Subnet;
  return {
    metadata: {
      name: s.metadata.name,
      ...(s.metadata.generation === undefined ? {} : { generation: s.metadata.generation }),
    },
    spec: {
      cidr: s.spec?.cidr,
      gateway: s.spec?.gateway,
      ...(typeof s.spec?.provider === "string" ? { provider: s.spec.provider } : {}),
    } as Subnet["spec"],
    ...(s.status?.conditions ? { status: { conditions: s.status.conditions } } : {}),
  };
}

/** Follows the Subnets and reports the route set whenever it changes. */
export class SubnetRoutes {
  readonly informer: Informer<Subnet>;
  private last = "";
  private lastRefused = "";
  /** How many times the route set was computed. */
  readonly stats = { plans: 0 };
  private scheduled = false;
  private stopped = false;

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
    const recompute = () => this.schedule();
    // Status updates (usage counts, messages) are most events, and a whole recompute each would add up.
    const onUpdate = (prev: Subnet, next: Subnet) => {
      if (routeInputs(prev) !== routeInputs(next)) this.schedule();
    };
    this.informer.addHandlers({ onAdd: recompute, onUpdate, onDelete: recompute });
  }

  start(): void {
    this.informer.start();
  }

  stop(): Promise<void> {
    this.stopped = true;
    return this.informer.stop();
  }

  /**
   * Replaces what routes must stay clear of (the node's addresses, gateways and uplink change at run time) and
   * recomputes, so a route that now captures one of them is withdrawn.
   */
  setGuard(guard: RouteGuard): void {
    this.guard = guard;
    if (this.informer.hasSynced()) this.schedule();
  }

  /** The route set for the Subnets known now. */
  plan(): SubnetRoutePlan {
    this.stats.plans++;
    return planSubnetRoutes(this.informer.list(), this.guard);
  }

  /** One recompute for all the events of a tick: a relist announces every Subnet at once. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.stopped) this.recompute();
    });
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

/**
 * Why the node must not route `cidr` through the management port, or undefined: too wide, a special range, the
 * join network, `avoid` (the networks this kind of range must stay clear of), the node's own or uplink addresses,
 * or a host address the node needs (API server, gateway). `widest` names the kind of range in the message.
 */
export function routeProblem(
  cidr: Cidr,
  guard: RouteGuard,
  widest: string,
  avoid: { what: string; cidrs: readonly Cidr[] },
): string | undefined {
  if (cidr.prefix < MIN_ROUTE_PREFIX[cidr.family])
    return `is wider than /${MIN_ROUTE_PREFIX[cidr.family]}, the widest ${widest} the node routes`;
  const special = specialRangeOverlapping(cidr);
  if (special) return `overlaps the ${special.name} ${formatCidr(special.range)}`;
  if (overlaps(cidr, guard.joinCidr)) return `overlaps the join network ${formatCidr(guard.joinCidr)}`;
  const other = avoid.cidrs.find((c) => overlaps(cidr, c));
  if (other) return `overlaps the ${avoid.what} ${formatCidr(other)}`;
  const own = guard.nodeIps.find((ip) => cidrContains(cidr, ip));
  if (own) return `contains the node's own address ${formatIp(own)}`;
  const uplink = guard.uplinkCidrs?.find((c) => overlaps(cidr, c));
  if (uplink) return `overlaps the node's uplink network ${formatCidr(uplink)}`;
  const host = guard.hostIps?.find((h) => cidrContains(cidr, h.ip));
  if (host) return `contains ${host.what} ${formatIp(host.ip)}`;
  return undefined;
}
