import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { schemaFileName, schemasFromCrd, schemasFromOpenApiV2 } from "./kube-json-schemas.ts";

const doc = {
  swagger: "2.0",
  definitions: {
    "io.k8s.api.apps.v1.Deployment": {
      type: "object",
      properties: {
        apiVersion: { type: "string" },
        kind: { type: "string" },
        spec: { $ref: "#/definitions/io.k8s.api.apps.v1.DeploymentSpec" },
      },
      "x-kubernetes-group-version-kind": [{ group: "apps", version: "v1", kind: "Deployment" }],
    },
    "io.k8s.api.apps.v1.DeploymentSpec": {
      type: "object",
      properties: {
        replicas: { type: "integer" },
        port: { $ref: "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString" },
        cpu: { $ref: "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity" },
        extra: {
          type: "object",
          properties: { a: { type: "string" } },
          "x-kubernetes-preserve-unknown-fields": true,
        },
      },
    },
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": { type: "string", format: "int-or-string" },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": { type: "string" },
    "io.k8s.api.core.v1.Pod": {
      type: "object",
      properties: { apiVersion: { type: "string" }, kind: { type: "string" } },
      "x-kubernetes-group-version-kind": [{ group: "", version: "v1", kind: "Pod" }],
    },
    "io.k8s.api.core.v1.PodList": {
      type: "object",
      properties: { items: { type: "array" } },
      "x-kubernetes-group-version-kind": [{ group: "", version: "v1", kind: "PodList" }],
    },
    "io.k8s.api.core.v1.Unrelated": { type: "object", properties: { x: { type: "string" } } },
  },
};

describe("kubeconform schemas from OpenAPI v2", () => {
  it("names files as kubeconform's template asks, with the full group and v1 twice for core", () => {
    assert.equal(
      schemaFileName({ group: "apps", version: "v1", kind: "Deployment" }),
      "deployment_apps_v1.json",
    );
    assert.equal(schemaFileName({ group: "", version: "v1", kind: "Pod" }), "pod_v1_v1.json");
    assert.equal(
      schemaFileName({ group: "network.zstack.io", version: "v1", kind: "Subnet" }),
      "subnet_network.zstack.io_v1.json",
    );
  });

  it("writes one schema per object kind, skipping kinds without apiVersion and kind fields", () => {
    const out = schemasFromOpenApiV2(doc);
    assert.deepEqual([...out.keys()].sort(), ["deployment_apps_v1.json", "pod_v1_v1.json"]);
  });

  it("carries only the definitions the kind reaches, made strict, int-or-string and Quantity widened", () => {
    const d = schemasFromOpenApiV2(doc).get("deployment_apps_v1.json") as Record<string, unknown>;
    const defs = d.definitions as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(defs).sort(), [
      "io.k8s.api.apps.v1.DeploymentSpec",
      "io.k8s.apimachinery.pkg.api.resource.Quantity",
      "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    ]);
    assert.equal(d.additionalProperties, false);
    const spec = defs["io.k8s.api.apps.v1.DeploymentSpec"] as Record<
      string,
      Record<string, Record<string, unknown>>
    >;
    assert.equal(spec.additionalProperties, false);
    assert.equal(
      spec.properties?.extra?.additionalProperties,
      undefined,
      "preserve-unknown-fields stays open",
    );
    assert.deepEqual(defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]?.anyOf, [
      { type: "string" },
      { type: "integer" },
    ]);
    assert.deepEqual(defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]?.anyOf, [
      { type: "string" },
      { type: "number" },
    ]);
  });

  it("refuses a document without definitions", () => {
    assert.throws(() => schemasFromOpenApiV2({ openapi: "3.0.0" }), /not an OpenAPI v2 document/);
  });
});

describe("kubeconform schemas from a CRD", () => {
  it("takes each version's openAPIV3Schema and adds apiVersion, kind and metadata", () => {
    const out = schemasFromCrd({
      kind: "CustomResourceDefinition",
      spec: {
        group: "network.zstack.io",
        names: { kind: "Subnet" },
        versions: [
          {
            name: "v1",
            schema: {
              openAPIV3Schema: { type: "object", properties: { spec: { type: "object", properties: {} } } },
            },
          },
        ],
      },
    });
    const s = out.get("subnet_network.zstack.io_v1.json") as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(s.properties ?? {}).sort(), ["apiVersion", "kind", "metadata", "spec"]);
    assert.equal(s.additionalProperties, false);
  });
});
