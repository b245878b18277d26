import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  CONTROLLER_SA,
  chartRbacObjects,
  NODE_SA,
  rbacObjectsOf,
  serviceAccountNamespace,
} from "./chart-rbac.ts";

describe("the chart's RBAC objects for the sandbox", () => {
  test("only ServiceAccounts, roles and bindings are taken from a rendered stream", () => {
    const yaml = `apiVersion: v1
kind: ServiceAccount
metadata: {name: a, namespace: ns}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d, namespace: ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: r}
rules: []
`;
    assert.deepEqual(
      rbacObjectsOf(yaml).map((o) => `${o.kind}/${o.metadata.name}`),
      ["ServiceAccount/a", "ClusterRole/r"],
    );
  });

  test("the rendered standalone manifest holds both ServiceAccounts in one namespace", () => {
    const objects = chartRbacObjects();
    assert.equal(serviceAccountNamespace(objects, CONTROLLER_SA), "kube-system");
    assert.equal(serviceAccountNamespace(objects, NODE_SA), "kube-system");
    assert.throws(() => serviceAccountNamespace(objects, "nobody"), /no ServiceAccount nobody/);
  });
});
