// Leader election between electors in one process against a real apiserver: one leader at a time, takeover
// after a crash once the lease expires, immediate takeover after a graceful release, a leader cut off
// from the apiserver stepping down before anyone else can take over, and leadership being all or nothing (a
// leader whose work fails, or who finds the Lease taken, stops leading at once). Assertions are about order
// and causality (who held the Lease when, what the apiserver recorded), never about elapsed time.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CoordinationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { LeaderElector, type Lease, microTime } from "../../../src/k8s/leader-election.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { eventually } from "./cluster-objects.ts";
import { startTcpProxy } from "./tcp-proxy.ts";

const LEASE_MS = 3000;
const RENEW_DEADLINE_MS = 2000;
const RETRY_MS = 250;
const NS = "election";

let kube: KubeApiserver;
const electors: LeaderElector[] = [];

interface Candidate {
  elector: LeaderElector;
  startedAt: number[];
  stoppedAt: number[];
  signalAborted: boolean;
  /** What happened to this candidate, in order ("started", "stopped", "leader x", "lease request"). */
  log: string[];
}

/** An ApiClient that notes each Lease request of its elector in the candidate's log. */
class RecordingClient extends ApiClient {
  constructor(
    kc: ApiClient["kubeConfig"],
    private readonly log: string[],
  ) {
    super(kc);
  }
  override request<T>(path: string, opts: Parameters<ApiClient["request"]>[1] = {}): Promise<T> {
    if (path.includes("/leases")) this.log.push("lease request");
    return super.request<T>(path, opts);
  }
}

function candidate(
  identity: string,
  lease: string,
  opts: { server?: string; leaseMs?: number; work?: (signal: AbortSignal) => Promise<void> } = {},
): Candidate {
  const c: Candidate = {
    elector: undefined as unknown as LeaderElector,
    startedAt: [],
    stoppedAt: [],
    signalAborted: false,
    log: [],
  };
  c.elector = new LeaderElector({
    client: new RecordingClient(opts.server ? kube.kubeConfigAt(opts.server) : kube.kubeConfig, c.log),
    namespace: NS,
    name: lease,
    identity,
    leaseDurationMs: opts.leaseMs ?? LEASE_MS,
    renewDeadlineMs: RENEW_DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    onStartedLeading: (signal) => {
      c.startedAt.push(Date.now());
      c.log.push("started");
      signal.addEventListener("abort", () => {
        c.signalAborted = true;
      });
      if (opts.work) return opts.work(signal);
      return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    },
    onStoppedLeading: () => {
      c.stoppedAt.push(Date.now());
      c.log.push("stopped");
    },
    onNewLeader: (id) => c.log.push(`leader ${id}`),
  });
  electors.push(c.elector);
  c.elector.start();
  return c;
}

async function holder(lease: string): Promise<string> {
  return (await readLease(lease)).spec?.holderIdentity ?? "";
}

function readLease(lease: string) {
  return kube.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: NS, name: lease });
}

/** The Lease's renewTime (or acquireTime) as epoch ms. */
function leaseTime(t: Date | string | undefined): number {
  return t === undefined ? Number.NaN : new Date(t).getTime();
}

before(async () => {
  kube = await startKubeApiserver();
  await kube.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
});

after(async () => {
  await Promise.all(electors.map((e) => e.stop({ release: false })));
  await kube?.stop();
});

describe("leader election", () => {
  it("of two electors exactly one leads, and both agree who it is", async () => {
    const a = candidate("a", "one-leader");
    const b = candidate("b", "one-leader");
    await eventually("someone leads", () => a.elector.isLeader() || b.elector.isLeader());
    const deadline = Date.now() + 2 * LEASE_MS;
    while (Date.now() < deadline) {
      assert.ok(!(a.elector.isLeader() && b.elector.isLeader()), "two leaders at once");
      await sleep(20);
    }
    const leader = a.elector.isLeader() ? "a" : "b";
    assert.equal(await holder("one-leader"), leader);
    assert.equal(a.elector.leader, leader);
    assert.equal(b.elector.leader, leader);
    assert.equal(a.startedAt.length + b.startedAt.length, 1, "leadership never changed hands");
  });

  it("after the leader stops renewing (a crash), the other takes over once the lease has expired", async () => {
    const a = candidate("a", "crash");
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "crash");
    await eventually("b saw a lead", () => b.log.includes("leader a"));
    assert.equal(b.elector.isLeader(), false);

    await a.elector.stop({ release: false });
    // a's last renewal, as the apiserver stored it; nobody may take the Lease before it expires.
    const lastRenew = leaseTime((await readLease("crash")).spec?.renewTime);
    await eventually("b leads", () => b.elector.isLeader(), 10 * LEASE_MS);
    assert.equal(await holder("crash"), "b");
    const lease = await readLease("crash");
    const acquired = leaseTime(lease.spec?.acquireTime);
    console.log(
      `# b acquired the lease ${acquired - lastRenew} ms after a's last renewal (lease ${LEASE_MS} ms)`,
    );
    assert.ok(acquired >= lastRenew + LEASE_MS, "b took the Lease only after a's last renewal had expired");
    assert.equal(lease.spec?.leaseTransitions, 1);
  });

  it("on a graceful stop the leader releases the lease and the other takes over before it would have expired", async () => {
    // A long lease, so that "before it would have expired" can only be the release's doing.
    const leaseMs = 60_000;
    const a = candidate("a", "graceful", { leaseMs });
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "graceful", { leaseMs });
    await eventually("b saw a lead", () => b.log.includes("leader a"));
    await a.elector.stop();
    assert.ok(a.signalAborted, "the leader's work was told to stop before the release");
    assert.equal(a.stoppedAt.length, 1);
    const released = await readLease("graceful");
    assert.equal(released.spec?.holderIdentity ?? "", "", "the Lease was released");
    const lastRenewByA = leaseTime(released.spec?.renewTime);
    await eventually("b leads", () => b.elector.isLeader(), 2 * leaseMs);
    const acquired = leaseTime((await readLease("graceful")).spec?.acquireTime);
    assert.ok(acquired < lastRenewByA + leaseMs, "b took over before a's lease would have expired");
  });

  it("a leader cut off from the apiserver stops leading before anyone else starts", async () => {
    const proxy = await startTcpProxy(kube.port);
    after(() => proxy.close());
    const a = candidate("a", "partition", { server: `https://127.0.0.1:${proxy.port}` });
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "partition");
    await eventually("b saw a lead", () => b.log.includes("leader a"));
    proxy.refuse();
    proxy.cut();
    await eventually("b leads", () => b.elector.isLeader(), 10 * LEASE_MS);
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.stoppedAt.length, 1, "the cut-off leader stepped down");
    assert.ok(
      (a.stoppedAt[0] as number) < (b.startedAt[0] as number),
      "the old leader stopped before the new one started",
    );
  });

  it("a leader whose work fails stops leading and releases the Lease, so the other takes over before it expires", async () => {
    const leaseMs = 60_000;
    let failLeading: (err: Error) => void = () => {};
    const a = candidate("a", "failing", {
      leaseMs,
      work: () =>
        new Promise<void>((_resolve, reject) => {
          failLeading = reject;
        }),
    });
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "failing", { leaseMs });
    await eventually("b saw a lead", () => b.log.includes("leader a"));
    const lastRenewByA = leaseTime((await readLease("failing")).spec?.renewTime);
    failLeading(new Error("informers did not sync"));
    // Well inside the lease: only a release lets b in this soon.
    await eventually("b leads", () => b.elector.isLeader(), leaseMs / 2);
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.stoppedAt.length, 1, "a's leadership ended");
    assert.ok(a.signalAborted, "a's work was told that leadership ended");
    assert.ok((a.stoppedAt[0] as number) <= (b.startedAt[0] as number), "a stopped before b started");
    const acquired = leaseTime((await readLease("failing")).spec?.acquireTime);
    assert.ok(acquired < lastRenewByA + leaseMs, "a released the Lease instead of letting it run out");
  });

  it("a leader that finds the Lease held by someone else stops leading before its next Lease request", async () => {
    const a = candidate("a", "taken", { leaseMs: 60_000 });
    await eventually("a leads", () => a.elector.isLeader());
    // Someone else writes itself into the Lease, as a replica with a skewed view of expiry might.
    const api = new ApiClient(kube.kubeConfig);
    const path = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/taken`;
    const lease = await api.request<Lease>(path);
    await api.request(path, {
      method: "PUT",
      body: {
        ...lease,
        spec: { ...lease.spec, holderIdentity: "intruder", renewTime: microTime(new Date()) },
      },
    });
    api.close();
    await eventually("a stopped leading", () => a.stoppedAt.length === 1, 30_000);
    assert.equal(a.elector.isLeader(), false);
    const seen = a.log.indexOf("leader intruder");
    assert.ok(seen >= 0, "a saw the intruder");
    assert.deepEqual(
      a.log.slice(seen + 1, a.log.indexOf("stopped")),
      [],
      "no Lease request (no more renewals) between seeing the new holder and stopping",
    );
    assert.equal(await holder("taken"), "intruder", "a did not overwrite the new holder");
  });
});
