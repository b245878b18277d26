// The event recorder against a real apiserver: what an Event looks like, repeats folded into one Event,
// a flood about one object held to the rate limit, and a term's recorder fenced on the term.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, type CoreV1Event } from "@kubernetes/client-node";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { EventRecorder, type InvolvedObject } from "../../../src/k8s/events.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { createNamespace, createPods, pod } from "./cluster-objects.ts";

let kube: KubeApiserver;
let core: CoreV1Api;

async function eventsAbout(namespace: string, name: string): Promise<CoreV1Event[]> {
  const list = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items;
}

async function podRef(namespace: string, name: string): Promise<InvolvedObject> {
  const p = await core.readNamespacedPod({ namespace, name });
  return { apiVersion: "v1", kind: "Pod", namespace, name, uid: p.metadata?.uid ?? "" };
}

before(async () => {
  kube = await startKubeApiserver();
  core = kube.kubeConfig.makeApiClient(CoreV1Api);
  await createNamespace(kube.kubeConfig, "ev");
  await createPods(kube.kubeConfig, "ev", [pod("target"), pod("hot"), pod("flood"), pod("fenced")]);
});

after(() => kube?.stop());

describe("event recorder", () => {
  it("records an Event naming the object, type, reason, message and source", async () => {
    const rec = new EventRecorder({
      client: new ApiClient(kube.kubeConfig),
      component: "zstack-ovnkube-controller",
      host: "cp",
    });
    const ref = await podRef("ev", "target");
    rec.warning(ref, "AddressAllocationFailed", "subnet pods-a has no free address");
    await rec.flush();
    const [ev, ...rest] = await eventsAbout("ev", "target");
    assert.equal(rest.length, 0);
    assert.ok(ev);
    assert.equal(ev.type, "Warning");
    assert.equal(ev.reason, "AddressAllocationFailed");
    assert.equal(ev.message, "subnet pods-a has no free address");
    assert.equal(ev.count, 1);
    assert.deepEqual(
      { kind: ev.involvedObject.kind, name: ev.involvedObject.name, uid: ev.involvedObject.uid },
      { kind: "Pod", name: "target", uid: ref.uid },
    );
    assert.equal(ev.source?.component, "zstack-ovnkube-controller");
    assert.equal(ev.source?.host, "cp");
    await rec.close();
  });

  it("folds 500 repeats from a hot loop into one Event with count 500, in a few writes", async () => {
    const rec = new EventRecorder({ client: new ApiClient(kube.kubeConfig), component: "test" });
    const ref = await podRef("ev", "hot");
    for (let i = 0; i < 500; i++) rec.warning(ref, "ReconcileFailed", "OVN northbound database unreachable");
    await rec.flush();
    const events = await eventsAbout("ev", "hot");
    assert.equal(events.length, 1);
    assert.equal(events[0]?.count, 500);
    const writes = rec.stats.created + rec.stats.updated;
    assert.ok(writes <= 3, `${writes} writes for 500 occurrences`);
    // A later repeat updates the same Event.
    rec.warning(ref, "ReconcileFailed", "OVN northbound database unreachable");
    await rec.flush();
    const again = await eventsAbout("ev", "hot");
    assert.equal(again.length, 1);
    assert.equal(again[0]?.count, 501);
    console.log(`# 501 occurrences cost ${rec.stats.created + rec.stats.updated} apiserver writes`);
    await rec.close();
  });

  it("holds a flood of distinct events about one object to the burst, and lets others through", async () => {
    const rec = new EventRecorder({ client: new ApiClient(kube.kubeConfig), component: "test", burst: 10 });
    const ref = await podRef("ev", "flood");
    const other = await podRef("ev", "target");
    for (let i = 0; i < 200; i++) rec.warning(ref, "ReconcileFailed", `attempt ${i} failed`);
    rec.normal(other, "Allocated", "10.244.0.5 allocated");
    await rec.flush();
    const flood = await eventsAbout("ev", "flood");
    assert.equal(flood.length, 10, "only the burst got through");
    const others = (await eventsAbout("ev", "target")).filter((e) => e.reason === "Allocated");
    assert.equal(others.length, 1, "another object's events are not held back by the flood");
    await rec.close();
    assert.equal(rec.stats.dropped, 190, "the held-back occurrences are counted as dropped on close");
  });

  it("a recorder fenced on a term posts through the term's fence: nothing once the term has ended, not even what was recorded before", async () => {
    const root = new EventRecorder({ client: new ApiClient(kube.kubeConfig), component: "test", burst: 1 });
    const term = new AbortController();
    const rec = root.fenced(term.signal);
    const ref = await podRef("ev", "fenced");
    rec.warning(ref, "DuringTerm", "recorded while leading");
    await root.flush();
    assert.deepEqual(
      (await eventsAbout("ev", "fenced")).map((e) => e.reason),
      ["DuringTerm"],
      "the term's Event is posted, and the root's flush covers the term's recorder",
    );
    // One recorded just before the term ends (its write not sent yet), one waiting for a rate-limit token,
    // and one recorded after: none may reach the apiserver.
    rec.warning(ref, "WaitingForToken", "held by the rate limit");
    const other = { ...ref, name: "fenced-other", uid: "0e0e0e0e-0000-4000-8000-000000000002" };
    rec.warning(other, "JustBeforeTheEnd", "recorded as the term ends");
    term.abort(new Error("leadership lost"));
    rec.warning(ref, "AfterTheEnd", "recorded by a reconcile still in flight");
    await rec.flush();
    await root.close();
    assert.deepEqual(
      (await eventsAbout("ev", "fenced")).map((e) => e.reason),
      ["DuringTerm"],
    );
    assert.deepEqual(await eventsAbout("ev", "fenced-other"), []);
    assert.equal(root.stats.created, 0, "the root recorder itself posted nothing");
    assert.equal(rec.stats.created, 1);
    // A term that has already ended gets a recorder that records nothing.
    const late = root.fenced(term.signal);
    late.warning(ref, "LateTerm", "never posted");
    await late.flush();
    assert.equal(late.stats.created + late.stats.dropped, 0);
  });

  it("records events about cluster-scoped objects in the default namespace", async () => {
    const rec = new EventRecorder({ client: new ApiClient(kube.kubeConfig), component: "test" });
    rec.normal(
      {
        apiVersion: "network.zstack.io/v1",
        kind: "Subnet",
        name: "pods-a",
        uid: "0e0e0e0e-0000-4000-8000-000000000001",
      },
      "Ready",
      "logical switch subnet-pods-a created",
    );
    await rec.flush();
    const events = await eventsAbout("default", "pods-a");
    assert.equal(events.length, 1);
    assert.equal(events[0]?.involvedObject.kind, "Subnet");
    await rec.close();
  });
});
