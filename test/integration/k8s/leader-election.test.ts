// Leader election between electors in one process against a real apiserver: one leader at a time, takeover
// after a crash once the lease expires, immediate takeover after a graceful release, and a leader cut off
// from the apiserver stepping down before anyone else can take over.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CoordinationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { LeaderElector } from "../../../src/k8s/leader-election.ts";
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
}

function candidate(identity: string, lease: string, server?: string): Candidate {
  const c: Candidate = {
    elector: undefined as unknown as LeaderElector,
    startedAt: [],
    stoppedAt: [],
    signalAborted: false,
  };
  c.elector = new LeaderElector({
    client: new ApiClient(server ? kube.kubeConfigAt(server) : kube.kubeConfig),
    namespace: NS,
    name: lease,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    onStartedLeading: (signal) => {
      c.startedAt.push(Date.now());
      return new Promise<void>((resolve) =>
        signal.addEventListener("abort", () => {
          c.signalAborted = true;
          resolve();
        }),
      );
    },
    onStoppedLeading: () => c.stoppedAt.push(Date.now()),
  });
  electors.push(c.elector);
  c.elector.start();
  return c;
}

async function holder(lease: string): Promise<string> {
  const api = kube.kubeConfig.makeApiClient(CoordinationV1Api);
  const l = await api.readNamespacedLease({ namespace: NS, name: lease });
  return l.spec?.holderIdentity ?? "";
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
    await sleep(4 * RETRY_MS); // b has seen a's lease renewed
    assert.equal(b.elector.isLeader(), false);

    const crashedAt = Date.now();
    await a.elector.stop({ release: false });
    await eventually("b leads", () => b.elector.isLeader(), 3 * LEASE_MS);
    const takeover = (b.startedAt[0] as number) - crashedAt;
    console.log(`# takeover after a crash: ${takeover} ms (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`);
    // a renewed at most one retry period before it crashed, and its lease stays valid for LEASE_MS after that.
    assert.ok(
      takeover >= LEASE_MS - 2 * RETRY_MS,
      `took over after ${takeover} ms, before the lease expired`,
    );
    assert.ok(takeover <= LEASE_MS + 3 * RETRY_MS, `took over only after ${takeover} ms`);
    assert.equal(await holder("crash"), "b");
    const lease = await kube.kubeConfig
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: NS, name: "crash" });
    assert.equal(lease.spec?.leaseTransitions, 1);
  });

  it("on a graceful stop the leader releases the lease and the other takes over at once", async () => {
    const a = candidate("a", "graceful");
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "graceful");
    await sleep(2 * RETRY_MS);
    const stoppedAt = Date.now();
    await a.elector.stop();
    assert.ok(a.signalAborted, "the leader's work was told to stop before the release");
    assert.equal(a.stoppedAt.length, 1);
    await eventually("b leads", () => b.elector.isLeader(), LEASE_MS);
    const takeover = (b.startedAt[0] as number) - stoppedAt;
    console.log(`# takeover after a release: ${takeover} ms`);
    assert.ok(takeover < 2 * RETRY_MS + 300, `took ${takeover} ms`);
  });

  it("a leader cut off from the apiserver stops leading before anyone else starts", async () => {
    const proxy = await startTcpProxy(kube.port);
    after(() => proxy.close());
    const a = candidate("a", "partition", `https://127.0.0.1:${proxy.port}`);
    await eventually("a leads", () => a.elector.isLeader());
    const b = candidate("b", "partition");
    await sleep(2 * RETRY_MS);
    const cutAt = Date.now();
    proxy.refuse();
    proxy.cut();
    await eventually("b leads", () => b.elector.isLeader(), 3 * LEASE_MS);
    const stepDown = (a.stoppedAt[0] as number) - cutAt;
    const takeover = (b.startedAt[0] as number) - cutAt;
    console.log(
      `# partitioned leader stepped down after ${stepDown} ms; successor started after ${takeover} ms`,
    );
    assert.equal(a.elector.isLeader(), false);
    assert.ok(stepDown <= RENEW_DEADLINE_MS + 2 * RETRY_MS, `stepped down only after ${stepDown} ms`);
    assert.ok(stepDown < takeover, "the old leader stopped before the new one started");
  });
});
