// StatefulSet pods keep their address when recreated under the same name; the address is released when the
// StatefulSet scales down past the pod or is deleted. Real kube-apiserver and NB; the test plays the StatefulSet
// controller (the rig runs no controller-manager), creating the pods with their owner reference.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { POD_NETWORKS_ANNOTATION, parsePodNetworksAnnotation } from "../../../src/ovn/pod-port.ts";
import { startInProcess, untilOk as until, useCluster } from "./harness.ts";

/**
 * A real apiserver and NB with the controller in-process, and a StatefulSet whose pods the test creates itself
 * (the rig runs no controller-manager), each with its owner reference.
 */
async function statefulSetRig(
  t: Parameters<typeof useCluster>[0],
  name: string,
  spec: { replicas: number; ordinals?: { start: number } },
) {
  const { api, srv } = await useCluster(t);
  await api
    .request("/api/v1/namespaces/default/serviceaccounts", {
      method: "POST",
      body: { metadata: { name: "default" } },
    })
    .catch(() => undefined);
  const run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  const sts = await api.request<{ metadata: { uid: string } }>(
    "/apis/apps/v1/namespaces/default/statefulsets",
    {
      method: "POST",
      body: {
        metadata: { name },
        spec: {
          ...spec,
          serviceName: name,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: { containers: [{ name: "c", image: "x" }] },
          },
        },
      },
    },
  );
  const createPod = (pod: string) =>
    api.request<{ metadata: { uid: string } }>("/api/v1/namespaces/default/pods", {
      method: "POST",
      body: {
        metadata: {
          name: pod,
          labels: { app: name },
          ownerReferences: [
            { apiVersion: "apps/v1", kind: "StatefulSet", name, uid: sts.metadata.uid, controller: true },
          ],
        },
        spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
      },
    });
  return { api, nb: run.nb, createPod };
}

test("a StatefulSet pod keeps its address across recreation and releases it when scaled down or deleted", async (t) => {
  const { api, nb, createPod } = await statefulSetRig(t, "web", { replicas: 2 });
  const ipOf = (name: string) =>
    until(`address of ${name}`, async () => {
      const p = await api.request<{ metadata: { uid: string; annotations?: Record<string, string> } }>(
        `/api/v1/namespaces/default/pods/${name}`,
      );
      const a = parsePodNetworksAnnotation(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
      return a ? { ip: a.ip_addresses[0] as string, uid: p.metadata.uid } : undefined;
    });
  const port = (name: string) =>
    nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === `default_${name}`);
  const deletePod = async (name: string) => {
    await api.request(`/api/v1/namespaces/default/pods/${name}`, {
      method: "DELETE",
      query: { gracePeriodSeconds: 0 },
    });
    await until(`${name} gone`, async () =>
      (await api.request(`/api/v1/namespaces/default/pods/${name}`).then(
        () => false,
        () => true,
      ))
        ? true
        : undefined,
    );
  };

  await createPod("web-0");
  await createPod("web-1");
  const first = await ipOf("web-1");
  await ipOf("web-0");

  // Recreated under the same name: same address, the port now carries the new pod's UID.
  await deletePod("web-1");
  await delay(1500);
  assert.ok(port("web-1"), "the port stays while the StatefulSet still wants web-1");
  await createPod("web-1");
  const second = await ipOf("web-1");
  assert.notEqual(second.uid, first.uid);
  assert.equal(second.ip, first.ip, "same address after recreation");
  await until("port carries the new UID", async () =>
    port("web-1")?.external_ids["zstack.io/pod-uid"] === second.uid ? true : undefined,
  );

  // Scaled down past web-1: its address is released once the pod is gone.
  await api.request("/apis/apps/v1/namespaces/default/statefulsets/web", {
    method: "PATCH",
    body: { spec: { replicas: 1 } },
  });
  await deletePod("web-1");
  await until("web-1's port removed", async () => (port("web-1") ? undefined : true));

  // StatefulSet deleted: web-0's port goes with its pod.
  await api.request("/apis/apps/v1/namespaces/default/statefulsets/web", {
    method: "DELETE",
    query: { propagationPolicy: "Orphan" },
  });
  await deletePod("web-0");
  await until("web-0's port removed", async () => (port("web-0") ? undefined : true));
});

test("a StatefulSet with spec.ordinals.start keeps the ports of the ordinals it wants, and only those", async (t) => {
  const { api, nb, createPod } = await statefulSetRig(t, "db", { replicas: 2, ordinals: { start: 5 } });
  const port = (name: string) =>
    nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === `default_${name}`);
  const ipOf = async (name: string) =>
    until(`address of ${name}`, async () => {
      const p = await api.request<{ metadata: { annotations?: Record<string, string> } }>(
        `/api/v1/namespaces/default/pods/${name}`,
      );
      return parsePodNetworksAnnotation(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION])?.ip_addresses[0];
    });
  await createPod("db-5");
  await createPod("db-6");
  const before = await ipOf("db-6");
  await ipOf("db-5");

  // db-6 is the StatefulSet's second ordinal (5 + 2 replicas): recreated, it keeps its address.
  await api.request("/api/v1/namespaces/default/pods/db-6", {
    method: "DELETE",
    query: { gracePeriodSeconds: 0 },
  });
  await delay(1500);
  assert.ok(port("db-6"), "the port stays while the StatefulSet still wants db-6");
  await createPod("db-6");
  assert.equal(await ipOf("db-6"), before, "same address after recreation");

  // Scaled to 1 replica (db-5 only): db-6's port goes with its pod.
  await api.request("/apis/apps/v1/namespaces/default/statefulsets/db", {
    method: "PATCH",
    body: { spec: { replicas: 1 } },
  });
  await api.request("/api/v1/namespaces/default/pods/db-6", {
    method: "DELETE",
    query: { gracePeriodSeconds: 0 },
  });
  await until("db-6's port removed", async () => (port("db-6") ? undefined : true));
  assert.ok(port("db-5"), "db-5 is still wanted");
});
