import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { podPortGroupIds } from "./membership.ts";
import { isolationGroupId, nodeGroupId, policyGroupId } from "./nb-names.ts";
import { parseNetworkPolicy } from "./policy-model.ts";
import { policySelects } from "./selection.ts";

const np = (name: string, spec: Record<string, unknown>) =>
  parseNetworkPolicy({ metadata: { namespace: "ns", name }, spec });
const pod = (labels: Record<string, string>, namespace = "ns") => ({
  namespace,
  labels,
  hostNetwork: false,
  namedPorts: [],
});

describe("port groups of a new pod's port", () => {
  it("a deny-all ingress policy puts the pod in its group, the ingress isolation group and its node's group", () => {
    const deny = np("deny", { podSelector: {} });
    assert.deepEqual(
      podPortGroupIds([deny], pod({}), "n1"),
      [isolationGroupId("ingress"), policyGroupId("ns/deny"), nodeGroupId("n1")].sort(),
    );
  });

  it("egress-only policies isolate egress and leave the own-node group out; unselected pods join nothing", () => {
    const eg = np("eg", { podSelector: { matchLabels: { app: "a" } }, policyTypes: ["Egress"] });
    assert.deepEqual(
      podPortGroupIds([eg], pod({ app: "a" }), "n1"),
      [isolationGroupId("egress"), policyGroupId("ns/eg")].sort(),
    );
    assert.deepEqual(podPortGroupIds([eg], pod({ app: "b" }), "n1"), []);
    assert.deepEqual(podPortGroupIds([eg], undefined, "n1"), []);
    assert.deepEqual(podPortGroupIds([eg], { ...pod({ app: "a" }), hostNetwork: true }, "n1"), []);
  });

  it("is exactly the union over the selecting policies (what the reconcilers converge to)", () => {
    const label = fc.constantFrom("a", "b", "c");
    const policy = fc.record({
      app: fc.option(label, { nil: undefined }),
      types: fc.constantFrom(["Ingress"], ["Egress"], ["Ingress", "Egress"]),
    });
    fc.assert(
      fc.property(
        fc.array(policy, { maxLength: 5 }),
        label,
        fc.option(fc.constantFrom("n1", "n2")),
        (ps, app, node) => {
          const models = ps.map((p, i) =>
            np(`p${i}`, {
              podSelector: p.app ? { matchLabels: { app: p.app } } : {},
              policyTypes: p.types,
            }),
          );
          const pp = pod({ app });
          const got = podPortGroupIds(models, pp, node ?? undefined);
          const selecting = models.filter((m) => policySelects(m, pp));
          const want = new Set(selecting.map((m) => policyGroupId(m.key)));
          if (selecting.some((m) => m.ingress)) {
            want.add(isolationGroupId("ingress"));
            if (node) want.add(nodeGroupId(node));
          }
          if (selecting.some((m) => m.egress)) want.add(isolationGroupId("egress"));
          assert.deepEqual(got, [...want].sort());
        },
      ),
    );
  });
});
