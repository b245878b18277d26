// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: a candidate takes the Lease when
// it is free or its holder has not renewed it for leaseDuration; the leader renews it every retryPeriod and
// gives up leading if it could not renew for renewDeadline (shorter than leaseDuration, so it stops before
// anyone else may start). Every write carries the resourceVersion read just before, so two candidates can
// never both win. Expiry is measured on this process's clock from when it saw the Lease last change, so
// clock skew between machines does not matter; a candidate retries right when the Lease it watches runs out,
// not up to one retry period later. A graceful stop releases the Lease and a successor takes over
// on its next retry instead of waiting out the lease. Leadership is all or nothing: a leader whose work
// fails gives the Lease up, and one that finds the Lease held by someone else stops leading at once.

import { type Logger, silentLogger } from "../observability/log.ts";
import { type ApiClient, isConflict, isNotFound } from "./api-client.ts";

export interface LeaderElectionOptions {
  client: ApiClient;
  namespace: string;
  /** Lease name. */
  name: string;
  /** Unique per process; the pod name is the usual choice. */
  identity: string;
  /** How long a Lease stays valid after its last renewal. Default 15 s; whole seconds on the wire. */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it stops leading. Default 10 s. */
  renewDeadlineMs?: number;
  /** Pause between attempts, for candidates and for the leader's renewals. Default 2 s. */
  retryPeriodMs?: number;
  /**
   * Runs when this process becomes leader, for as long as it leads: `signal` aborts when leadership ends,
   * and the returned promise should settle soon after that, because the next term (or a graceful stop's
   * release of the Lease) waits for it. Rejecting, or resolving before `signal` aborts, means leading
   * failed: the term ends at once and the Lease is released.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** Runs when leadership ends, lost or given up. */
  onStoppedLeading?(): void;
  /** Runs when the observed holder changes (including to this process). */
  onNewLeader?(identity: string): void;
  logger?: Logger;
}

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

/** metav1.MicroTime's wire format; the apiserver refuses the millisecond form Date.toISOString() gives. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly log: Logger;
  private running: Promise<void> | undefined;
  private stopped = false;
  private release = true;
  private leading = false;
  private wake: (() => void) | undefined;
  private observed: { holder: string; renewTime: string; at: number; durationMs: number } | undefined;
  private lastLeader = "";
  /** Terms in a row that ended because leading failed. */
  private failedTerms = 0;

  constructor(private readonly opts: LeaderElectionOptions) {
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    if (this.leaseDurationMs < 1000 || this.leaseDurationMs % 1000 !== 0)
      throw new Error(
        `leaseDurationMs=${this.leaseDurationMs}: must be a whole number of seconds, at least 1000`,
      );
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new Error(
        `renewDeadlineMs=${this.renewDeadlineMs}: must be less than leaseDurationMs=${this.leaseDurationMs}`,
      );
    if (this.retryPeriodMs * 1.2 > this.renewDeadlineMs)
      throw new Error(
        `retryPeriodMs=${this.retryPeriodMs}: must be at most renewDeadlineMs/1.2 (${this.renewDeadlineMs / 1.2})`,
      );
    if (!opts.identity) throw new Error("leader election needs a non-empty identity");
    this.log = (opts.logger ?? silentLogger).child({
      lease: `${opts.namespace}/${opts.name}`,
      identity: opts.identity,
    });
  }

  /** Starts campaigning in the background; returns at once. */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.run();
  }

  /**
   * Stops campaigning. A leader first ends its leadership (aborts the signal, waits for onStartedLeading's
   * promise, calls onStoppedLeading) and then releases the Lease unless release is false, which leaves the
   * Lease to expire as if this process had crashed.
   */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    this.release = opts.release ?? true;
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The holder this process last saw in the Lease ("" when free or not read yet). */
  get leader(): string {
    return this.lastLeader;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const started = Date.now();
      if (!(await this.tryAcquireOrRenew(this.renewDeadlineMs))) {
        // Retry every retryPeriod, but no later than just after the Lease we observe runs out: a dead
        // leader's Lease is taken when it expires, not up to one retry period after.
        let wait = this.retryPeriodMs * (1 + 0.2 * Math.random());
        const o = this.observed;
        if (o && o.holder !== "") wait = Math.min(wait, Math.max(0, o.at + o.durationMs - Date.now()) + 20);
        await this.pause(wait);
        continue;
      }
      await this.lead(started);
    }
  }

  /**
   * One term. Leadership is all or nothing: the term ends, and onStartedLeading's signal aborts, as soon as
   * any of these happens, whichever first: onStartedLeading fails or returns while still leading; a renewal
   * shows that someone else holds the Lease; renewals fail for renewDeadline; stop() is called. A failed term
   * gives the Lease up (another replica may do better) and campaigns again only after a backoff that grows
   * with consecutive failed terms.
   */
  private async lead(acquiredAt: number): Promise<void> {
    this.leading = true;
    this.log.info({}, "became leader");
    const leadership = new AbortController();
    let failure: { err: unknown } | undefined;
    const task = (async () => this.opts.onStartedLeading(leadership.signal))().then(
      () => {
        if (leadership.signal.aborted) return;
        failure = { err: new Error("onStartedLeading returned while still leading") };
        this.wake?.();
      },
      (err: unknown) => {
        if (leadership.signal.aborted) return;
        failure = { err };
        this.wake?.();
      },
    );
    // When the renewal that made us leader was stamped; every later one is measured from its own start, the
    // renewTime it writes, never from when its reply came back.
    let lastRenew = acquiredAt;
    while (!this.stopped && !failure) {
      await this.pause(
        Math.min(this.retryPeriodMs, Math.max(0, lastRenew + this.renewDeadlineMs - Date.now())),
      );
      if (this.stopped || failure) break;
      const started = Date.now();
      const left = lastRenew + this.renewDeadlineMs - started;
      // One deadline for the whole attempt (its GET and its PUT together): leadership ends when it passes, even
      // with a request still in flight, so a standby that takes the expired Lease never finds us still writing.
      const outcome = left <= 0 ? "deadline" : await this.beforeDeadline(this.tryAcquireOrRenew(left), left);
      if (outcome === true) {
        lastRenew = started;
        continue;
      }
      const holder = this.observed?.holder ?? "";
      if (holder !== "" && holder !== this.opts.identity) {
        this.log.error({ leader: holder }, "the lease is held by someone else; stopping leading");
        break;
      }
      if (outcome === "deadline" || Date.now() - lastRenew >= this.renewDeadlineMs) {
        this.log.error(
          { renewDeadlineMs: this.renewDeadlineMs },
          "could not renew the lease in time; stopping leading",
        );
        break;
      }
    }
    if (failure) this.log.error({ err: failure.err }, "leading failed; giving up leadership");
    leadership.abort(new Error("leadership ended"));
    await task;
    this.leading = false;
    try {
      this.opts.onStoppedLeading?.();
    } catch (err) {
      this.log.error({ err }, "onStoppedLeading failed");
    }
    if (failure || (this.stopped && this.release)) await this.releaseLease();
    if (!failure) {
      this.failedTerms = 0;
      return;
    }
    this.failedTerms++;
    const backoff = Math.min(this.retryPeriodMs * 2 ** this.failedTerms, 4 * this.leaseDurationMs);
    this.log.info({ backoffMs: backoff, failedTerms: this.failedTerms }, "campaigning again after a backoff");
    await this.pause(backoff);
  }

  /** The attempt's outcome, or "deadline" once `ms` have passed without one. */
  private beforeDeadline(attempt: Promise<boolean>, ms: number): Promise<boolean | "deadline"> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<"deadline">((resolve) => {
      timer = setTimeout(() => resolve("deadline"), ms);
    });
    return Promise.race([attempt, deadline]).finally(() => clearTimeout(timer));
  }

  private pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  private path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
  }

  private observe(spec: LeaseSpec): void {
    const holder = spec.holderIdentity ?? "";
    const renewTime = spec.renewTime ?? "";
    if (!this.observed || this.observed.holder !== holder || this.observed.renewTime !== renewTime) {
      this.observed = {
        holder,
        renewTime,
        at: Date.now(),
        durationMs: (spec.leaseDurationSeconds ?? this.leaseDurationMs / 1000) * 1000,
      };
    }
    if (holder !== this.lastLeader) {
      this.lastLeader = holder;
      if (holder) {
        this.log.info({ leader: holder }, "new leader observed");
        try {
          this.opts.onNewLeader?.(holder);
        } catch (err) {
          this.log.error({ err }, "onNewLeader failed");
        }
      }
    }
  }

  /** One attempt; true when this process holds the Lease afterwards. */
  private async tryAcquireOrRenew(timeoutMs: number): Promise<boolean> {
    const now = new Date();
    const me = this.opts.identity;
    const ownSpec = (prev?: LeaseSpec): LeaseSpec => ({
      holderIdentity: me,
      leaseDurationSeconds: this.leaseDurationMs / 1000,
      acquireTime: prev?.holderIdentity === me && prev.acquireTime ? prev.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions:
        prev === undefined
          ? 0
          : (prev.leaseTransitions ?? 0) + (prev.holderIdentity === me || !prev.holderIdentity ? 0 : 1),
    });
    try {
      let lease: Lease;
      try {
        lease = await this.opts.client.request<Lease>(this.path(this.opts.name), { timeoutMs });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        const created = await this.opts.client.request<Lease>(this.path(), {
          method: "POST",
          timeoutMs,
          body: {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec: ownSpec(),
          },
        });
        this.observe(created.spec ?? {});
        return true;
      }
      const spec = lease.spec ?? {};
      this.observe(spec);
      const holder = spec.holderIdentity ?? "";
      const observed = this.observed;
      if (holder && holder !== me && observed && Date.now() < observed.at + observed.durationMs) return false;
      const updated = await this.opts.client.request<Lease>(this.path(this.opts.name), {
        method: "PUT",
        timeoutMs,
        body: { ...lease, spec: ownSpec(spec) },
      });
      this.observe(updated.spec ?? {});
      return true;
    } catch (err) {
      // A conflict means someone else wrote first: an ordinary lost race, not worth a warning.
      if (isConflict(err)) this.log.debug({}, "lost a race for the lease");
      else this.log.warn({ err }, "lease request failed");
      return false;
    }
  }

  /** Gives the Lease up so that a successor does not wait out leaseDuration. */
  private async releaseLease(): Promise<void> {
    try {
      const lease = await this.opts.client.request<Lease>(this.path(this.opts.name), {
        timeoutMs: this.renewDeadlineMs,
      });
      if (lease.spec?.holderIdentity !== this.opts.identity) return;
      const now = microTime(new Date());
      await this.opts.client.request<Lease>(this.path(this.opts.name), {
        method: "PUT",
        timeoutMs: this.renewDeadlineMs,
        body: {
          ...lease,
          spec: {
            ...lease.spec,
            holderIdentity: null,
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
          },
        },
      });
      this.log.info({}, "released the lease");
    } catch (err) {
      this.log.warn({ err }, "could not release the lease; a successor waits for it to expire");
    }
  }
}
