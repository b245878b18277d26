// The stale UDP flows the node agent still has to delete from conntrack, and how much of them one round deletes.
// Rules never wait for deletions: the agent queues the flows a new ruleset made stale and a separate worker
// deletes them in rounds of at most FORGET_PER_ROUND invocations, grouped (groupUdpFlows) so that a Service with
// many ports, addresses and endpoints costs about one invocation per removed endpoint, not one per pair. A flow
// leaves the backlog once deleted (or DNATed again); the backlog holds at most BACKLOG_CAP flows, the oldest
// dropped first and counted, so repeated failures cannot make it grow without bound. Beside them, the targets
// whose un-NATed entries must go because a destination got its first endpoint (udp-first-endpoint.ts): a client
// is waiting on those, so a round takes them first, within the same cap. Whoever writes EndpointSlices can make
// a destination flap between no endpoint and one, and each OVS flush walks the whole conntrack table in
// ovs-vswitchd's main thread: a target is deleted at most once per UNNATED_MIN_INTERVAL_MS (a later request is
// deferred to then, never dropped, so a flow stuck in between is still cleared), all targets together at most
// UNNATED_PER_SECOND a second (bursts of one round), shared among the namespaces asking in turn (and beyond the
// cap the namespace with the most queued loses its own oldest), and a target whose deletion keeps failing is
// retried with backoff and given up after UNNATED_MAX_FAILURES.

import { type GroupedDeletion, groupUdpFlows, type UdpServiceFlow, udpFlowKey } from "./service-conntrack.ts";
import { type UnnatedUdpTarget, unnatedTargetKey } from "./udp-first-endpoint.ts";

/** `conntrack` invocations per round (about 35 ms each on a loaded node): a round ends within a few seconds. */
export const FORGET_PER_ROUND = 32;
/** Stale flows kept at most; beyond it the oldest are dropped (their entries then expire with the UDP timeout). */
export const BACKLOG_CAP = 16_384;
/** One target's un-NATed entries are deleted at most this often (the OVS recheck comes as late). */
export const UNNATED_MIN_INTERVAL_MS = 5_000;
/** Un-NATed deletions a second over all targets, in bursts of at most FORGET_PER_ROUND. */
export const UNNATED_PER_SECOND = 20;
/** Failed attempts after which a target is given up (its entries then stay until the flow stops). */
export const UNNATED_MAX_FAILURES = 5;

export interface UnnatedLimits {
  /** Default UNNATED_MIN_INTERVAL_MS; also the first retry's delay after a failure, doubling. */
  readonly minIntervalMs?: number;
  /** Default UNNATED_PER_SECOND. */
  readonly perSecond?: number;
  /** The most taken at once after a quiet spell; default FORGET_PER_ROUND. */
  readonly burst?: number;
  /** Default UNNATED_MAX_FAILURES. */
  readonly maxFailures?: number;
  /** Milliseconds; default Date.now. */
  readonly clock?: () => number;
}

interface PendingUnnated {
  readonly target: UnnatedUdpTarget;
  /** Not deleted before this time (the rate limit, or a failure's backoff). */
  notBefore: number;
  /** Bumped when queued again while its deletion runs: that deletion may have missed the new entries. */
  seq: number;
  failures: number;
}

/** Drops the oldest entries (the first in insertion order) beyond `cap`; returns how many. */
function dropOldest(m: Map<string, unknown>, cap: number): number {
  let dropped = 0;
  for (const k of m.keys()) {
    if (m.size <= cap) break;
    m.delete(k);
    dropped++;
  }
  return dropped;
}

export class ConntrackBacklog {
  /** Insertion order is age order: the first key is the oldest. */
  private readonly flows = new Map<string, UdpServiceFlow>();
  /** Targets of un-NATed entries to delete, oldest first; capped alike. */
  private readonly unnated = new Map<string, PendingUnnated>();
  /** When each target's last deletion started, oldest first; only those within the interval are kept. */
  private readonly lastDeleted = new Map<string, number>();
  /** The targets of the round under way: their seq and start time when taken. */
  private readonly taken = new Map<string, { seq: number; at: number }>();
  private readonly minIntervalMs: number;
  private readonly perSecond: number;
  private readonly burst: number;
  private readonly maxFailures: number;
  private readonly clock: () => number;
  private tokens: number;
  private tokensAt: number;
  /** Flows and targets dropped because the backlog was full, since start. */
  dropped = 0;
  /** Targets given up after UNNATED_MAX_FAILURES failed deletions, since start. */
  givenUp = 0;

  constructor(
    readonly cap = BACKLOG_CAP,
    limits: UnnatedLimits = {},
  ) {
    this.minIntervalMs = limits.minIntervalMs ?? UNNATED_MIN_INTERVAL_MS;
    this.perSecond = limits.perSecond ?? UNNATED_PER_SECOND;
    this.burst = Math.max(1, limits.burst ?? FORGET_PER_ROUND);
    this.maxFailures = limits.maxFailures ?? UNNATED_MAX_FAILURES;
    this.clock = limits.clock ?? Date.now;
    this.tokens = this.burst;
    this.tokensAt = this.clock();
  }

  get size(): number {
    return this.flows.size + this.unnated.size;
  }

  /**
   * Queues targets: a new one is due at once, or when its last deletion is UNNATED_MIN_INTERVAL_MS old; one
   * already queued keeps its place and time (one whose deletion is under way is done once more after it).
   * Resolves with how many of the oldest were dropped.
   */
  addUnnated(targets: Iterable<UnnatedUdpTarget>): number {
    const now = this.clock();
    this.forgetOldDeletions(now);
    for (const target of targets) {
      const k = unnatedTargetKey(target);
      const cur = this.unnated.get(k);
      if (cur) {
        if (this.taken.has(k)) cur.seq++;
        continue;
      }
      const last = this.lastDeleted.get(k);
      const notBefore = last === undefined ? now : Math.max(now, last + this.minIntervalMs);
      this.unnated.set(k, { target, notBefore, seq: 0, failures: 0 });
    }
    const dropped = this.dropFromLargestOwner();
    this.dropped += dropped;
    return dropped;
  }

  /**
   * Beyond the cap, drops the oldest targets of whichever owner has the most queued, so that a namespace
   * flooding the backlog loses its own targets, never another's few.
   */
  private dropFromLargestOwner(): number {
    if (this.unnated.size <= this.cap) return 0;
    const byOwner = new Map<string, string[]>();
    for (const [k, p] of this.unnated) {
      const o = p.target.owner ?? "";
      const list = byOwner.get(o);
      if (list) list.push(k);
      else byOwner.set(o, [k]);
    }
    const next = new Map<string, number>();
    let dropped = 0;
    while (this.unnated.size > this.cap) {
      let largest: string | undefined;
      let most = 0;
      for (const [o, list] of byOwner) {
        const left = list.length - (next.get(o) ?? 0);
        if (left > most) [largest, most] = [o, left];
      }
      if (largest === undefined) break;
      const i = next.get(largest) ?? 0;
      next.set(largest, i + 1);
      this.unnated.delete((byOwner.get(largest) as string[])[i] as string);
      dropped++;
    }
    return dropped;
  }

  /**
   * The targets of the next round: those due, at most `max` and as many as the rate allows, shared among their
   * owners in turn (each owner's oldest first), so one namespace's many targets cannot hold back another's.
   */
  unnatedRound(max = FORGET_PER_ROUND): UnnatedUdpTarget[] {
    const now = this.clock();
    this.refill(now);
    const n = Math.min(Math.max(0, max), Math.floor(this.tokens));
    const out: UnnatedUdpTarget[] = [];
    if (n === 0) return out;
    const due = new Map<string, [string, PendingUnnated][]>();
    for (const [k, p] of this.unnated) {
      if (p.notBefore > now || this.taken.has(k)) continue;
      const o = p.target.owner ?? "";
      const list = due.get(o) ?? [];
      if (list.length < n) list.push([k, p]);
      due.set(o, list);
    }
    for (let i = 0; out.length < n; i++) {
      let any = false;
      for (const list of due.values()) {
        const e = list[i];
        if (!e || out.length >= n) continue;
        any = true;
        this.taken.set(e[0], { seq: e[1].seq, at: now });
        out.push(e[1].target);
      }
      if (!any) break;
    }
    this.tokens -= out.length;
    return out;
  }

  /**
   * When the next queued target is due (rate limit and backoff included), or undefined when none is queued
   * outside the round under way.
   */
  nextUnnatedAt(): number | undefined {
    let next: number | undefined;
    for (const [k, p] of this.unnated)
      if (!this.taken.has(k) && (next === undefined || p.notBefore < next)) next = p.notBefore;
    if (next === undefined) return undefined;
    const now = this.clock();
    this.refill(now);
    const tokenAt = this.tokens >= 1 ? now : now + Math.ceil(((1 - this.tokens) * 1000) / this.perSecond);
    return Math.max(next, tokenAt);
  }

  /** The target's entries are deleted: it leaves the backlog, unless queued again while its deletion ran. */
  unnatedDone(t: UnnatedUdpTarget): void {
    const k = unnatedTargetKey(t);
    const took = this.taken.get(k);
    this.taken.delete(k);
    const at = took?.at ?? this.clock();
    this.lastDeleted.delete(k);
    this.lastDeleted.set(k, at);
    const p = this.unnated.get(k);
    if (!p) return;
    if (took !== undefined && p.seq !== took.seq) {
      p.notBefore = at + this.minIntervalMs;
      p.failures = 0;
      return;
    }
    this.unnated.delete(k);
  }

  /**
   * The deletion failed: the target goes to the back, due again after a backoff (UNNATED_MIN_INTERVAL_MS
   * doubling); after UNNATED_MAX_FAILURES it is given up. Resolves with whether it was given up.
   */
  unnatedFailed(t: UnnatedUdpTarget): boolean {
    const k = unnatedTargetKey(t);
    this.taken.delete(k);
    const p = this.unnated.get(k);
    if (!p) return false;
    this.unnated.delete(k);
    p.failures++;
    if (p.failures >= this.maxFailures) {
      this.givenUp++;
      return true;
    }
    p.notBefore = this.clock() + this.minIntervalMs * 2 ** (p.failures - 1);
    this.unnated.set(k, p);
    return false;
  }

  private refill(now: number): void {
    const elapsed = Math.max(0, now - this.tokensAt);
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.perSecond) / 1000);
    this.tokensAt = now;
  }

  /** Deletions older than the interval no longer hold anything back. */
  private forgetOldDeletions(now: number): void {
    for (const [k, at] of this.lastDeleted) {
      if (at + this.minIntervalMs > now) break;
      this.lastDeleted.delete(k);
    }
  }

  /** Queues flows (one already queued keeps its place); resolves with how many of the oldest were dropped. */
  add(flows: Iterable<UdpServiceFlow>): number {
    for (const f of flows) {
      const k = udpFlowKey(f);
      if (!this.flows.has(k)) this.flows.set(k, f);
    }
    const dropped = dropOldest(this.flows, this.cap);
    this.dropped += dropped;
    return dropped;
  }

  /**
   * The next round: at most `max` grouped deletions, oldest first. Flows `live` DNATs again (their endpoint came
   * back) are no longer stale and leave the backlog.
   */
  round(live: ReadonlyMap<string, UdpServiceFlow>, max = FORGET_PER_ROUND): GroupedDeletion[] {
    for (const k of [...this.flows.keys()]) if (live.has(k)) this.flows.delete(k);
    return groupUdpFlows(this.flows, live).slice(0, Math.max(0, max));
  }

  /** The deletion succeeded: its flows are done and never redone. */
  done(d: GroupedDeletion): void {
    for (const k of d.covers) this.flows.delete(k);
  }

  /** The deletion failed: its flows go to the back, so one failing deletion does not hold up the others. */
  failed(d: GroupedDeletion): void {
    for (const k of d.covers) {
      const f = this.flows.get(k);
      if (!f) continue;
      this.flows.delete(k);
      this.flows.set(k, f);
    }
  }
}
