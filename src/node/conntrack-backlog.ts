// The stale UDP flows the node agent still has to delete from conntrack, and how much of them one round deletes.
// Rules never wait for deletions: the agent queues the flows a new ruleset made stale and a separate worker
// deletes them in rounds of at most FORGET_PER_ROUND invocations, grouped (groupUdpFlows) so that a Service with
// many ports, addresses and endpoints costs about one invocation per removed endpoint, not one per pair. A flow
// leaves the backlog once deleted (or DNATed again); the backlog holds at most BACKLOG_CAP flows, the oldest
// dropped first and counted, so repeated failures cannot make it grow without bound. Beside them, the targets
// whose un-NATed entries must go because a destination got its first endpoint (udp-first-endpoint.ts): a client
// is waiting on those, so a round takes them first, within the same cap.

import { type GroupedDeletion, groupUdpFlows, type UdpServiceFlow, udpFlowKey } from "./service-conntrack.ts";
import { type UnnatedUdpTarget, unnatedTargetKey } from "./udp-first-endpoint.ts";

/** `conntrack` invocations per round (about 35 ms each on a loaded node): a round ends within a few seconds. */
export const FORGET_PER_ROUND = 32;
/** Stale flows kept at most; beyond it the oldest are dropped (their entries then expire with the UDP timeout). */
export const BACKLOG_CAP = 16_384;

export class ConntrackBacklog {
  /** Insertion order is age order: the first key is the oldest. */
  private readonly flows = new Map<string, UdpServiceFlow>();
  /** Targets of un-NATed entries to delete, oldest first; capped alike. */
  private readonly unnated = new Map<string, UnnatedUdpTarget>();
  /** Flows and targets dropped because the backlog was full, since start. */
  dropped = 0;

  constructor(readonly cap = BACKLOG_CAP) {}

  get size(): number {
    return this.flows.size + this.unnated.size;
  }

  /** Queues targets (one already queued keeps its place); resolves with how many of the oldest were dropped. */
  addUnnated(targets: Iterable<UnnatedUdpTarget>): number {
    for (const t of targets) {
      const k = unnatedTargetKey(t);
      if (!this.unnated.has(k)) this.unnated.set(k, t);
    }
    let dropped = 0;
    for (const k of this.unnated.keys()) {
      if (this.unnated.size <= this.cap) break;
      this.unnated.delete(k);
      dropped++;
    }
    this.dropped += dropped;
    return dropped;
  }

  /** The targets of the next round: at most `max`, oldest first. */
  unnatedRound(max = FORGET_PER_ROUND): UnnatedUdpTarget[] {
    return [...this.unnated.values()].slice(0, Math.max(0, max));
  }

  /** The target's entries are deleted: it leaves the backlog (until queued again). */
  unnatedDone(t: UnnatedUdpTarget): void {
    this.unnated.delete(unnatedTargetKey(t));
  }

  /** The deletion failed: the target goes to the back. */
  unnatedFailed(t: UnnatedUdpTarget): void {
    const k = unnatedTargetKey(t);
    if (!this.unnated.delete(k)) return;
    this.unnated.set(k, t);
  }

  /** Queues flows (one already queued keeps its place); resolves with how many of the oldest were dropped. */
  add(flows: Iterable<UdpServiceFlow>): number {
    let dropped = 0;
    for (const f of flows) {
      const k = udpFlowKey(f);
      if (!this.flows.has(k)) this.flows.set(k, f);
    }
    for (const k of this.flows.keys()) {
      if (this.flows.size <= this.cap) break;
      this.flows.delete(k);
      dropped++;
    }
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
