// The informer against a real kube-apiserver: list, watch, selectors, recovery after the apiserver restarts
// or the connection is cut, and the watchdog for a watch that stalls without either side noticing.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api } from "@kubernetes/client-node";
import { ApiClient } from "../../../src/k8s/api-client.ts";
import { type DeleteInfo, Informer, type InformerOptions } from "../../../src/k8s/informer.ts";
import type { KubeObject } from "../../../src/k8s/object-key.ts";
import type { WatchEventType } from "../../../src/observability/watch-trace.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { createNamespace, createPods, eventually, pod } from "./cluster-objects.ts";
import { startTcpProxy } from "./tcp-proxy.ts";

/** A pod as the informer stores it: JSON, so no Date objects as V1Pod would claim. */
interface Pod extends KubeObject {
  metadata: {
    name: string;
    namespace: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    managedFields?: unknown[];
  };
  spec?: { nodeName?: string };
}

interface Recorded {
  adds: string[];
  updates: string[];
  deletes: Array<{ key: string; info: DeleteInfo }>;
}

function record(inf: Informer<Pod>): Recorded {
  const r: Recorded = { adds: [], updates: [], deletes: [] };
  const key = (p: Pod) => `${p.metadata.namespace}/${p.metadata.name}`;
  inf.addHandlers({
    onAdd: (p) => r.adds.push(key(p)),
    onUpdate: (_, p) => r.updates.push(key(p)),
    onDelete: (p, info) => r.deletes.push({ key: key(p), info }),
  });
  return r;
}

let kube: KubeApiserver;
let core: CoreV1Api;
const informers: Informer<Pod>[] = [];

function podInformer(
  opts: Partial<InformerOptions<Pod>> & { server?: string; namespace: string },
): Informer<Pod> {
  const kc = opts.server ? kube.kubeConfigAt(opts.server) : kube.kubeConfig;
  const inf = new Informer<Pod>({
    client: new ApiClient(kc),
    path: `/api/v1/namespaces/${opts.namespace}/pods`,
    backoff: { initialMs: 100, maxMs: 1000 },
    ...opts,
  });
  informers.push(inf);
  inf.start();
  return inf;
}

async function serverPodNames(namespace: string): Promise<string[]> {
  const list = await core.listNamespacedPod({ namespace });
  return list.items.map((p) => p.metadata?.name ?? "").sort();
}

function storeNames(inf: Informer<Pod>): string[] {
  return inf
    .list()
    .map((p) => p.metadata.name)
    .sort();
}

before(async () => {
  kube = await startKubeApiserver();
  core = kube.kubeConfig.makeApiClient(CoreV1Api);
});

after(async () => {
  await Promise.all(informers.map((i) => i.stop()));
  await kube?.stop();
});

describe("informer", () => {
  it("lists existing pods, then follows adds, updates and deletes through the watch", async () => {
    await createNamespace(kube.kubeConfig, "basic");
    await createPods(kube.kubeConfig, "basic", [pod("a"), pod("b")]);
    const inf = podInformer({ namespace: "basic" });
    const seen = record(inf);
    await inf.waitForSync(10_000);
    assert.deepEqual(storeNames(inf), ["a", "b"]);
    assert.deepEqual(seen.adds.sort(), ["basic/a", "basic/b"]);
    assert.equal(inf.get("basic/a")?.kind, "Pod", "list items get the kind that watch events carry");
    assert.equal(inf.get("basic/a")?.metadata.managedFields, undefined, "managedFields are dropped");

    await createPods(kube.kubeConfig, "basic", [pod("c")]);
    await core.patchNamespacedPod({
      namespace: "basic",
      name: "a",
      body: [{ op: "add", path: "/metadata/labels", value: { touched: "yes" } }],
    });
    await core.deleteNamespacedPod({ namespace: "basic", name: "b", gracePeriodSeconds: 0 });
    await eventually("watch delivers add, update and delete", () => seen.deletes.length === 1, 10_000);
    assert.deepEqual(storeNames(inf), ["a", "c"]);
    assert.ok(seen.adds.includes("basic/c"));
    assert.ok(seen.updates.includes("basic/a"));
    assert.equal(inf.get("basic/a")?.metadata.labels?.touched, "yes");
    assert.deepEqual(seen.deletes, [{ key: "basic/b", info: { finalStateUnknown: false } }]);
    assert.equal(inf.stats.lists, 1, "no relist while the watch is healthy");
  });

  it("tells its arrival hook of each watch event, with the key and resourceVersion, before the handlers; not of listed objects", async () => {
    await createNamespace(kube.kubeConfig, "arrivals");
    await createPods(kube.kubeConfig, "arrivals", [pod("listed")]);
    const order: string[] = [];
    const arrivals: Array<{ type: WatchEventType; key: string; rv: string | undefined }> = [];
    const inf = podInformer({
      namespace: "arrivals",
      onWatchEvent: (type, key, rv) => {
        arrivals.push({ type, key, rv });
        order.push(`arrival ${type} ${key}`);
      },
    });
    inf.addHandlers({
      onAdd: (p) => order.push(`add arrivals/${p.metadata.name}`),
      onUpdate: (_, p) => order.push(`update arrivals/${p.metadata.name}`),
      onDelete: (p) => order.push(`delete arrivals/${p.metadata.name}`),
    });
    await inf.waitForSync(10_000);
    await createPods(kube.kubeConfig, "arrivals", [pod("watched")]);
    const patched = await core.patchNamespacedPod({
      namespace: "arrivals",
      name: "watched",
      body: [{ op: "add", path: "/metadata/labels", value: { touched: "yes" } }],
    });
    await core.deleteNamespacedPod({ namespace: "arrivals", name: "watched", gracePeriodSeconds: 0 });
    await eventually("the delete arrives", () => arrivals.some((a) => a.type === "DELETED"), 10_000);
    // Deleting a pod may first set its deletionTimestamp (one more MODIFIED) before the DELETED.
    const types = arrivals.map((a) => `${a.type} ${a.key}`);
    assert.equal(types[0], "ADDED arrivals/watched");
    assert.equal(types.at(-1), "DELETED arrivals/watched");
    assert.ok(
      arrivals.some((a) => a.type === "MODIFIED" && a.rv === patched.metadata?.resourceVersion),
      "a MODIFIED arrival carries the resourceVersion the PATCH answered",
    );
    const handlerOf = { ADDED: "add", MODIFIED: "update", DELETED: "delete" } as const;
    assert.deepEqual(order, [
      "add arrivals/listed",
      ...arrivals.flatMap((a) => [`arrival ${a.type} ${a.key}`, `${handlerOf[a.type]} ${a.key}`]),
    ]);
  });

  it("label and field selectors limit the store, and a pod leaving the selection is deleted from it", async () => {
    await createNamespace(kube.kubeConfig, "selectors");
    await createPods(kube.kubeConfig, "selectors", [
      pod("web-1", { app: "web" }, "node1"),
      pod("web-2", { app: "web" }, "node2"),
      pod("db-1", { app: "db" }, "node1"),
    ]);
    const byLabel = podInformer({ namespace: "selectors", labelSelector: "app=web" });
    const byNode = podInformer({ namespace: "selectors", fieldSelector: "spec.nodeName=node1" });
    const labelled = record(byLabel);
    await Promise.all([byLabel.waitForSync(), byNode.waitForSync()]);
    assert.deepEqual(storeNames(byLabel), ["web-1", "web-2"]);
    assert.deepEqual(storeNames(byNode), ["db-1", "web-1"]);

    await core.patchNamespacedPod({
      namespace: "selectors",
      name: "web-2",
      body: [{ op: "replace", path: "/metadata/labels/app", value: "legacy" }],
    });
    await eventually("web-2 leaves the label selection", () => labelled.deletes.length === 1);
    assert.deepEqual(storeNames(byLabel), ["web-1"]);
  });

  it("indexers answer which pods run on a node", async () => {
    await createNamespace(kube.kubeConfig, "indexed");
    await createPods(kube.kubeConfig, "indexed", [
      pod("p1", {}, "node1"),
      pod("p2", {}, "node2"),
      pod("p3", {}, "node1"),
    ]);
    const inf = podInformer({
      namespace: "indexed",
      indexers: { node: (p) => (p.spec?.nodeName ? [p.spec.nodeName] : []) },
    });
    await inf.waitForSync();
    assert.deepEqual(
      inf
        .byIndex("node", "node1")
        .map((p) => p.metadata.name)
        .sort(),
      ["p1", "p3"],
    );
    await core.deleteNamespacedPod({ namespace: "indexed", name: "p1", gracePeriodSeconds: 0 });
    await eventually("index drops the deleted pod", () => inf.byIndex("node", "node1").length === 1);
    assert.deepEqual(
      inf.byIndex("node", "node2").map((p) => p.metadata.name),
      ["p2"],
    );
  });

  it("keeps following pods across an apiserver restart", async () => {
    await createNamespace(kube.kubeConfig, "restart");
    await createPods(kube.kubeConfig, "restart", [pod("before")]);
    const inf = podInformer({ namespace: "restart" });
    await inf.waitForSync();
    const t0 = Date.now();
    await kube.restartApiserver();
    const restartMs = Date.now() - t0;
    await createPods(kube.kubeConfig, "restart", [pod("after-1"), pod("after-2")]);
    const seenMs = await eventually(
      "pods created after the restart",
      () => inf.size === 3 && inf.get("restart/after-2") !== undefined,
      60_000,
    );
    assert.deepEqual(storeNames(inf), ["after-1", "after-2", "before"]);
    console.log(`# apiserver restart took ${restartMs} ms; new pods in the store ${seenMs} ms later`);
  });

  it("relists after an outage and reports what changed meanwhile, vanished pods as final-state-unknown deletes", async () => {
    await createNamespace(kube.kubeConfig, "outage");
    await createPods(kube.kubeConfig, "outage", [pod("stays"), pod("changes"), pod("goes")]);
    const proxy = await startTcpProxy(kube.port);
    after(() => proxy.close());
    const inf = podInformer({ namespace: "outage", server: `https://127.0.0.1:${proxy.port}` });
    const seen = record(inf);
    await inf.waitForSync();
    const listsBefore = inf.stats.lists;

    // The informer loses its connection and cannot reconnect, while the apiserver restarts (so the watch
    // cache starts over) and the namespace changes behind the informer's back.
    proxy.refuse();
    proxy.cut();
    await kube.restartApiserver();
    const created = Array.from({ length: 10 }, (_, i) => pod(`during-${i}`));
    await createPods(kube.kubeConfig, "outage", created);
    await core.deleteNamespacedPod({ namespace: "outage", name: "goes", gracePeriodSeconds: 0 });
    await core.patchNamespacedPod({
      namespace: "outage",
      name: "changes",
      body: [{ op: "add", path: "/metadata/labels", value: { changed: "yes" } }],
    });
    await sleep(300);
    assert.ok(inf.stats.errors > 0, "the informer noticed the outage");
    assert.ok(inf.get("outage/goes"), "no change is visible during the outage");
    proxy.accept();

    const expected = await serverPodNames("outage");
    await eventually(
      "store matches the server after the outage",
      () => JSON.stringify(storeNames(inf)) === JSON.stringify(expected),
      15_000,
    );
    assert.ok(inf.stats.lists > listsBefore, "recovery went through a relist");
    for (const p of created) assert.ok(seen.adds.includes(`outage/${p.metadata?.name}`));
    assert.deepEqual(seen.deletes, [{ key: "outage/goes", info: { finalStateUnknown: true } }]);
    assert.ok(seen.updates.includes("outage/changes"));
    assert.ok(!seen.updates.includes("outage/stays"), "unchanged pods produce no update");
    assert.equal(inf.get("outage/changes")?.metadata.labels?.changed, "yes");
  });

  it("a transform that drops resourceVersion still lets a relist report exactly the pods that changed", async () => {
    await createNamespace(kube.kubeConfig, "slim");
    await createPods(kube.kubeConfig, "slim", [pod("stays"), pod("changes")]);
    const proxy = await startTcpProxy(kube.port);
    after(() => proxy.close());
    // Like the controller's pod informer: keep only what the handlers need.
    const slim = (o: KubeObject): Pod => {
      const m = (o as Pod).metadata;
      return {
        metadata: { name: m.name, namespace: m.namespace, labels: m.labels },
      } as unknown as Pod;
    };
    const inf = podInformer({
      namespace: "slim",
      server: `https://127.0.0.1:${proxy.port}`,
      transform: slim,
    });
    const seen = record(inf);
    await inf.waitForSync();
    const listsBefore = inf.stats.lists;
    proxy.refuse();
    proxy.cut();
    await kube.restartApiserver();
    await core.patchNamespacedPod({
      namespace: "slim",
      name: "changes",
      body: [{ op: "add", path: "/metadata/labels", value: { changed: "yes" } }],
    });
    proxy.accept();
    await eventually(
      "the relist reports the changed pod",
      () => seen.updates.includes("slim/changes"),
      15_000,
    );
    assert.ok(inf.stats.lists > listsBefore, "recovery went through a relist");
    assert.ok(!seen.updates.includes("slim/stays"), "unchanged pods produce no update");
    assert.equal(inf.get("slim/changes")?.metadata.labels?.changed, "yes");
  });

  it("the watchdog restarts a watch that stalled silently; without it the stalled informer misses changes", async () => {
    await createNamespace(kube.kubeConfig, "stall");
    const proxy = await startTcpProxy(kube.port);
    after(() => proxy.close());
    const server = `https://127.0.0.1:${proxy.port}`;
    const guarded = podInformer({ namespace: "stall", server, watchdogMs: 1000 });
    const unguarded = podInformer({ namespace: "stall", server });
    await Promise.all([guarded.waitForSync(), unguarded.waitForSync()]);

    // Connections stay open but carry nothing, like a watch behind a dead NAT entry or a hung proxy.
    proxy.freeze();
    await createPods(kube.kubeConfig, "stall", [pod("while-stalled")]);
    const ms = await eventually("guarded informer sees the pod", () => guarded.size === 1, 30_000);
    assert.ok(guarded.stats.watchdogRestarts >= 1);
    assert.equal(unguarded.size, 0, "the informer with the default 5 min watchdog is still stuck");
    console.log(
      `# stalled watch recovered after ${ms} ms (${guarded.stats.watchdogRestarts} watchdog restarts)`,
    );
  });

  it("a tiny watchdog on an idle watch keeps restarting it, and the store stays correct", async () => {
    await createNamespace(kube.kubeConfig, "idle");
    await createPods(kube.kubeConfig, "idle", [pod("one")]);
    const inf = podInformer({ namespace: "idle", watchdogMs: 200 });
    const seen = record(inf);
    await inf.waitForSync();
    await eventually("several watchdog restarts", () => inf.stats.watchdogRestarts >= 3, 30_000);
    assert.equal(inf.stats.lists, 1, "a watchdog restart resumes the watch, it does not relist");
    await createPods(kube.kubeConfig, "idle", [pod("two")]);
    await eventually("the pod created between restarts", () => inf.size === 2, 30_000);
    assert.deepEqual(seen.adds.sort(), ["idle/one", "idle/two"]);
    assert.equal(seen.updates.length, 0);
  });
});
