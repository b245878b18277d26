// The pod-networks annotation against a real kube-apiserver and NB: the controller writes it, and puts it back
// when someone else changes or removes it (the annotation stage's informer handler skips only its own echo).
import assert from "node:assert/strict";
import { test } from "node:test";
import { POD_NETWORKS_ANNOTATION } from "../../../src/ovn/pod-port.ts";
import { startInProcess, untilOk as until, useCluster } from "./harness.ts";

test("a pod-networks annotation someone else changes or removes is put back as the pod's port says", async (t) => {
  const { api, srv } = await useCluster(t);
  await api
    .request("/api/v1/namespaces/default/serviceaccounts", {
      method: "POST",
      body: { metadata: { name: "default" } },
    })
    .catch(() => undefined);
  const run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  const path = "/api/v1/namespaces/default/pods/p";
  const annotation = async () =>
    (await api.request<{ metadata: { annotations?: Record<string, string> } }>(path)).metadata.annotations?.[
      POD_NETWORKS_ANNOTATION
    ];
  const patch = (value: string | null) =>
    api.request(path, {
      method: "PATCH",
      body: { metadata: { annotations: { [POD_NETWORKS_ANNOTATION]: value } } },
    });
  await api.request("/api/v1/namespaces/default/pods", {
    method: "POST",
    body: {
      metadata: { name: "p" },
      spec: { nodeSelector: { none: "x" }, containers: [{ name: "c", image: "x" }] },
    },
  });
  const ours = await until("the pod annotated", annotation);
  const port = run.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "default_p");
  assert.ok(port, "the pod has its port");
  assert.ok(
    ours.includes(String(port.addresses[0]).split(" ")[1] as string),
    "the annotation holds the port's address",
  );

  const forged = ours.replace(/10\.244\.\d+\.\d+/g, "10.244.250.250");
  assert.notEqual(forged, ours);
  await patch(forged);
  await until("the changed annotation put back", async () =>
    (await annotation()) === ours ? true : undefined,
  );

  await patch(null);
  await until("the removed annotation put back", async () =>
    (await annotation()) === ours ? true : undefined,
  );
  assert.equal(
    run.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "default_p")?._uuid,
    port._uuid,
    "the port stayed as it was",
  );
});
