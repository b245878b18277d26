// The test rig's control plane: how long it takes to be ready, that it runs the real authentication,
// authorization and admission chain, that the apiserver restarts on the same port and data, and that stop()
// leaves neither processes nor files behind.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, AuthenticationV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { startKubeApiserver, useKubeApiserver } from "../../rig/kube-apiserver.ts";
import { eventually } from "./cluster-objects.ts";

/** A zombie counts as gone: it runs nothing and holds no port. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function httpStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

describe("kube-apiserver rig", () => {
  it("starts in seconds, enforces RBAC, admission and service-account tokens, survives a restart, and stops clean", async () => {
    const t0 = Date.now();
    const kube = await startKubeApiserver();
    const readyMs = Date.now() - t0;
    console.log(`# etcd + kube-apiserver ready in ${readyMs} ms at ${kube.server}`);
    try {
      assert.match(kube.server, /^https:\/\/127\.0\.0\.1:\d+$/);
      const core = kube.kubeConfig.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: "rig" } } });

      // Admission: the ServiceAccount plugin refuses a pod until the namespace's default account exists.
      await assert.rejects(
        core.createNamespacedPod({
          namespace: "rig",
          body: { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "x" }] } },
        }),
        (err: unknown) =>
          httpStatus(err) === 403 && /serviceaccount/i.test(String((err as ApiException<string>).body)),
      );

      // Service-account tokens: a token from the TokenRequest API authenticates as that account...
      await core.createNamespacedServiceAccount({ namespace: "rig", body: { metadata: { name: "robot" } } });
      const token = await core.createNamespacedServiceAccountToken({
        namespace: "rig",
        name: "robot",
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      });
      const asRobot = new KubeConfig();
      asRobot.loadFromOptions({
        clusters: [{ name: "rig", server: kube.server, caData: kube.kubeConfig.getCurrentCluster()?.caData }],
        users: [{ name: "robot", token: token.status?.token }],
        contexts: [{ name: "robot", cluster: "rig", user: "robot" }],
        currentContext: "robot",
      });
      const review = await asRobot.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
      assert.equal(review.status?.userInfo?.username, "system:serviceaccount:rig:robot");
      // ...and RBAC gives it nothing it was not granted.
      await assert.rejects(
        asRobot.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: "rig" }),
        (err: unknown) => httpStatus(err) === 403,
      );

      const before = kube.pids();
      const t1 = Date.now();
      await kube.restartApiserver();
      console.log(`# apiserver restart (same port, same etcd) took ${Date.now() - t1} ms`);
      const after = kube.pids();
      assert.equal(after.length, 2);
      assert.equal(after[0], before[0], "etcd keeps running");
      assert.notEqual(after[1], before[1], "a new apiserver process");
      const ns = await core.readNamespace({ name: "rig" });
      assert.equal(ns.metadata?.name, "rig", "data survives the restart");
    } finally {
      const pids = kube.pids();
      await kube.stop();
      await sleep(50);
      assert.deepEqual(pids.filter(alive), [], "no process left");
      assert.equal(existsSync(kube.dir), false, "temp dir removed");
    }
  });

  it("with kube-controller-manager, a new namespace gets its default ServiceAccount", async (t) => {
    const kube = await useKubeApiserver(t, { controllerManager: true });
    assert.equal(kube.pids().length, 3);
    const core = kube.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: "managed" } } });
    const ms = await eventually(
      "the serviceaccount controller creates default",
      async () =>
        (await core.listNamespacedServiceAccount({ namespace: "managed" })).items.some(
          (s) => s.metadata?.name === "default",
        ),
      30_000,
      200,
    );
    console.log(`# kube-controller-manager created the default ServiceAccount ${ms} ms after the namespace`);
  });
});
