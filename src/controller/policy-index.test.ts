import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIp } from "../ipam/address.ts";
import { EVERYTHING } from "../policy/label-selector.ts";
import { podPortGroupIds } from "../policy/membership.ts";
import { isolationGroupId } from "../policy/nb-names.ts";
import { policySelects } from "../policy/selection.ts";
import type { NetworkPolicyObject } from "./informers.ts";
import { lspIps, notRealizedMessage, policyEntry, policyPod } from "./policy-index.ts";

const obj = (spec: Record<string, unknown>) =>
  ({ metadata: { namespace: "ns", name: "p" }, spec }) as unknown as NetworkPolicyObject;

describe("policy entries", () => {
  it("an unrealizable policy isolates its directions with nothing allowed, and names the field", () => {
    const e = policyEntry(
      obj({
        podSelector: { matchLabels: { app: "x" } },
        policyTypes: ["Ingress", "Egress"],
        ingress: [{ from: [{ ipBlock: { cidr: "010.0.0.0/8" } }] }],
      }),
    );
    assert.ok(e);
    assert.deepEqual(e.model.ingress, []);
    assert.deepEqual(e.model.egress, []);
    assert.equal(e.problem?.field, "spec.ingress[0].from[0].ipBlock.cidr");
    assert.match(e.problem?.message ?? "", /leading zero/);
    assert.equal(e.peers.size, 0);
  });

  it("an unrealizable policy without policyTypes isolates ingress, and egress only when it has egress rules", () => {
    const e = policyEntry(obj({ podSelector: {}, egress: [{ ports: [{ port: 0 }] }] }));
    assert.deepEqual(e?.model.ingress, []);
    assert.deepEqual(e?.model.egress, []);
    assert.match(e?.problem?.field ?? "", /spec\.egress\[0\]\.ports\[0\]\.port/);
  });

  it("a policy whose podSelector cannot be read isolates its whole namespace and names the field", () => {
    const e = policyEntry(
      obj({ podSelector: { matchLabels: { "bad key!": "x" } }, ingress: [{ from: [{ podSelector: {} }] }] }),
    );
    assert.ok(e);
    assert.deepEqual(e.model.podSelector, EVERYTHING);
    assert.deepEqual(e.model.ingress, []);
    assert.equal(e.model.egress, undefined);
    assert.equal(e.peers.size, 0);
    assert.match(e.problem?.field ?? "", /^spec\.podSelector\.matchLabels/);
    // Every pod of the namespace is selected, none of another.
    const pod = (namespace: string) => ({
      namespace,
      labels: { app: "x" },
      hostNetwork: false,
      namedPorts: [],
    });
    assert.equal(policySelects(e.model, pod("ns")), true);
    assert.equal(policySelects(e.model, pod("other")), false);
    assert.deepEqual(podPortGroupIds([e.model], pod("ns"), "n1").includes(isolationGroupId("ingress")), true);
    // The Warning Event names the field and says what is realized instead.
    const msg = notRealizedMessage(e.problem as { field: string; message: string });
    assert.match(msg, /^spec\.podSelector\.matchLabels\["bad key!"\]: /);
    assert.match(msg, /every pod of the namespace is isolated with nothing allowed/);
  });

  it("records the egress named ports and whether ingress has ipBlocks, for the event fan-out", () => {
    const e = policyEntry(
      obj({
        podSelector: {},
        ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }] }],
        egress: [{ ports: [{ port: "dns" }] }],
      }),
    );
    assert.deepEqual([...(e?.egressPortNames ?? [])], ["dns"]);
    assert.equal(e?.hasIngressBlocks, true);
    assert.equal(e?.problem, undefined);
  });
});

describe("pod view", () => {
  it("host-network pods are in no policy; bad named ports are dropped, protocols mapped", () => {
    const base = { metadata: { name: "a", namespace: "ns", uid: "u", labels: { k: "v" } }, status: {} };
    assert.equal(policyPod({ ...base, spec: { hostNetwork: true } }), undefined);
    const p = policyPod({
      ...base,
      spec: {
        namedPorts: [
          { name: "web", protocol: "TCP", port: 80 },
          { name: "dns", protocol: "UDP", port: 53 },
          { name: "bad", protocol: "ICMP", port: 1 },
          { name: "big", protocol: "TCP", port: 70000 },
        ],
      },
    });
    assert.deepEqual(p?.namedPorts, [
      { name: "web", protocol: "tcp", port: 80 },
      { name: "dns", protocol: "udp", port: 53 },
    ]);
    assert.deepEqual(p?.labels, { k: "v" });
  });
});

describe("port addresses", () => {
  it("parses a port row's addresses once and follows a replaced row", () => {
    const row = { addresses: ["0a:58:0a:f4:00:05 10.244.0.5"] };
    const first = lspIps(row);
    assert.deepEqual(first.map(formatIp), ["10.244.0.5"]);
    assert.equal(lspIps(row), first, "the same row object: the same parsed value");
    const replaced = { addresses: ["0a:58:0a:f4:00:09 10.244.0.9"] };
    assert.deepEqual(lspIps(replaced).map(formatIp), ["10.244.0.9"]);
    assert.deepEqual(lspIps(row).map(formatIp), ["10.244.0.5"]);
  });
});
