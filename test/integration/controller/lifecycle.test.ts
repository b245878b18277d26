// Pod and cluster lifecycle against a real kube-apiserver and NB: hostNetwork pods are skipped, binding sets the
// requested chassis and the node's address set, a finished pod gives its address back, and objects deleted while
// the controller was down lose their NB rows at the next start.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH } from "../../../src/api/subnet.ts";
import { POD_NETWORKS_ANNOTATION } from "../../../src/ovn/pod-port.ts";
import { nodePodsAddressSet } from "../../../src/ovn/topology.ts";
import { startInProcess, untilOk as until, useCluster } from "./harness.ts";

test("pod lifecycle and cleanup of objects deleted during downtime", async (t) => {
  const { api, srv } = await useCluster(t);
  await api
    .request("/api/v1/namespaces/default/serviceaccounts", {
      method: "POST",
      body: { metadata: { name: "default" } },
    })
    .catch(() => undefined);
  for (const n of ["node1", "node2"])
    await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name: n } } });
  let run = await startInProcess({ api, srv });
  t.after(() => run.stop());
  const nb = () => run.nb;
  const port = (name: string) =>
    nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.name === `default_${name}`);
  const annotation = async (name: string) =>
    (
      await api.request<{ metadata: { annotations?: Record<string, string> } }>(
        `/api/v1/namespaces/default/pods/${name}`,
      )
    ).metadata.annotations?.[POD_NETWORKS_ANNOTATION];
  const createPod = (name: string, spec: Record<string, unknown>) =>
    api.request("/api/v1/namespaces/default/pods", {
      method: "POST",
      body: { metadata: { name }, spec: { containers: [{ name: "c", image: "x" }], ...spec } },
    });

  // A hostNetwork pod gets no port and no annotation.
  await createPod("host", { hostNetwork: true, nodeSelector: { none: "x" } });
  await createPod("regular", { nodeSelector: { none: "x" } });
  await until("regular annotated", () => annotation("regular"));
  assert.equal(await annotation("host"), undefined);
  assert.equal(port("host"), undefined);
  assert.equal(
    port("regular")?.options["requested-chassis"],
    undefined,
    "no requested chassis before scheduling",
  );

  // Binding the pod to node1: its port asks for node1's chassis and its address joins node1's address set.
  await api.request("/api/v1/namespaces/default/pods/regular/binding", {
    method: "POST",
    body: { metadata: { name: "regular" }, target: { apiVersion: "v1", kind: "Node", name: "node1" } },
  });
  await until("requested-chassis", () =>
    port("regular")?.options["requested-chassis"] === "node1" ? true : undefined,
  );
  const ip = String(port("regular")?.addresses[0]).split(" ")[1] as string;
  const set = () =>
    nb()
      .cache.table("Address_Set")
      .findOne((r) => r.name === nodePodsAddressSet("node1", 4));
  await until("address in node1's set", () => (set()?.addresses.includes(ip) ? true : undefined));

  // A finished pod (a Job's) gives its port and address back while the pod object still exists.
  await api.request("/api/v1/namespaces/default/pods/regular/status", {
    method: "PATCH",
    body: { status: { phase: "Succeeded" } },
  });
  await until("port of the finished pod removed", () => (port("regular") ? undefined : true));
  await until("address left node1's set", () => (set()?.addresses.includes(ip) ? undefined : true));

  // A Subnet and a Node deleted while the controller is down lose their NB rows at the next start.
  await api.request(SUBNET_PATH, {
    method: "POST",
    body: {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "extra" },
      spec: { cidr: "10.99.0.0/24", gateway: "10.99.0.1" },
    },
  });
  await until("subnet-extra switch", () =>
    nb()
      .cache.table("Logical_Switch")
      .findOne((r) => r.name === "subnet-extra"),
  );
  await until("node2 mgmt port", () =>
    nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.name === "zovn-mgmt-node2"),
  );
  await run.stop();
  await api.request(`${SUBNET_PATH}/extra`, { method: "DELETE" });
  await api.request("/api/v1/nodes/node2", { method: "DELETE" });
  run = await startInProcess({ api, srv });
  await until("subnet-extra switch removed", () =>
    nb().connected &&
    !nb()
      .cache.table("Logical_Switch")
      .findOne((r) => r.name === "subnet-extra")
      ? true
      : undefined,
  );
  await until("node2 rows removed", () =>
    nb().connected &&
    !nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.name === "zovn-mgmt-node2") &&
    !nb()
      .cache.table("Address_Set")
      .findOne((r) => r.name === nodePodsAddressSet("node2", 4))
      ? true
      : undefined,
  );
  assert.ok(
    nb()
      .cache.table("Logical_Switch_Port")
      .findOne((r) => r.name === "zovn-mgmt-node1"),
    "node1 untouched",
  );
});
