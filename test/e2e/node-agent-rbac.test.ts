// The chart's node RBAC is exactly what zstack-ovnkube-node needs. In a one-node sandbox (the agent on a token
// of the chart's node ServiceAccount, the apiserver's audit log recording ServiceAccounts' requests) a pod comes
// up, two pods in hostPort conflict get their Event, and every rule of the node ClusterRole is used and none
// denied; then, for each verb × resource of that role in turn, the role is applied without that one rule, the
// agent restarted (a fresh token, as a new pod would get), and the audit log shows it denied (403) exactly that
// verb on that resource. So no rule is unused.

import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { after, describe, it } from "node:test";
import {
  chartRbacObjects,
  NODE_SA,
  type RbacObject,
  serviceAccountNamespace,
} from "../../src/sandbox/chart-rbac.ts";
import { CommandError, run } from "../../src/sandbox/command.ts";
import { auditLogPath } from "../../src/sandbox/control-plane.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { ensureNodeAgent } from "../../src/sandbox/node-agent.ts";
import { ensurePki } from "../../src/sandbox/pki.ts";
import { terminate } from "../../src/sandbox/process-table.ts";
import { liveDaemon } from "../../src/sandbox/state.ts";
import {
  auditedRequests,
  canIArgs,
  describeRule,
  requestOf,
  roleId,
  roleWithout,
  type SingleRule,
  singleRules,
} from "../rig/rbac-audit.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbrbac";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;

describe("the node agent's RBAC in the sandbox", { timeout: 15 * 60_000 }, () => {
  after(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  const objects = chartRbacObjects();
  const namespace = serviceAccountNamespace(objects, NODE_SA);
  const user = `system:serviceaccount:${namespace}:${NODE_SA}`;
  const bound = objects
    .filter((o) => o.kind === "ClusterRoleBinding")
    .filter((b) =>
      ((b.subjects ?? []) as Array<{ kind: string; name: string }>).some(
        (s) => s.kind === "ServiceAccount" && s.name === NODE_SA,
      ),
    )
    .map((b) => `ClusterRole/${(b.roleRef as { name: string }).name}`);
  const roles = objects.filter((o) => bound.includes(roleId(o)));
  const rules = singleRules(roles);

  const kubectl = (args: string[], input?: string) => {
    const bin = ctx().state.binaries?.KUBECTL as string;
    return run(bin, ["--kubeconfig", adminKubeconfig(layout), ...args], input === undefined ? {} : { input });
  };
  const applyRoles = (rs: readonly RbacObject[]) =>
    kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: rs }));
  const authorizerSays = (rule: SingleRule, allowed: boolean) =>
    eventually(`the authorizer to ${allowed ? "allow" : "deny"} ${describeRule(rule)}`, 30_000, async () => {
      const answer = await kubectl([...canIArgs(rule, namespace), `--as=${user}`]).catch((e: unknown) =>
        e instanceof CommandError ? e.stdout : "",
      );
      return answer.trim() === (allowed ? "yes" : "no") ? true : undefined;
    });
  /** A pod bound to the node: the node simulator's CNI ADD makes the agent read it. */
  const createPod = (name: string) =>
    kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: "default" },
        spec: {
          nodeName: ctx().topo.nodes[0]?.name,
          terminationGracePeriodSeconds: 0,
          containers: [{ name: "podserver", image: "zstack-ovn/podserver" }],
        },
      }),
    );
  /**
   * Two pods on the node claiming one hostPort (nodeName skips the scheduler's check): the agent reports the
   * conflict as an Event on the newer (POST), and again at each resync (PATCH of its count).
   */
  const createHostPortConflict = () =>
    kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: ["rbac-hp-a", "rbac-hp-b"].map((name) => ({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name, namespace: "default" },
          spec: {
            nodeName: ctx().topo.nodes[0]?.name,
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: "podserver",
                image: "zstack-ovn/podserver",
                ports: [{ containerPort: 8080, hostPort: 18080 }],
              },
            ],
          },
        })),
      }),
    );
  /** The agent's hostPort resync (60 s) is what repeats an Event: waits that involve it allow for it. */
  const waitFor = (rule: SingleRule) => (rule.resource === "events" ? 150_000 : 60_000);
  /** Stops the agent by its recorded PID and starts it again with a fresh token. */
  const restartAgent = async () => {
    const { state, topo } = ctx();
    const node = topo.nodes[0];
    assert.ok(node);
    const live = liveDaemon(state, `${node.name}/zstack-ovnkube-node`);
    if (live) await terminate([live]);
    const pki = await ensurePki(layout.pkiDir, topo);
    const kubectlBin = state.binaries?.KUBECTL as string;
    await ensureNodeAgent(
      { layout, topo, state, pki, kubectl: kubectlBin, adminKubeconfig: adminKubeconfig(layout) },
      node,
    );
  };
  const mine = (from: number) => auditedRequests(auditLogPath(layout), from).filter((r) => r.user === user);
  const auditSize = () => (existsSync(auditLogPath(layout)) ? statSync(auditLogPath(layout)).size : 0);

  it("with the chart's full node role a pod comes up, every rule is used and nothing is denied", async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up", "--nodes", "1"]);
    await createPod("rbac-0");
    await eventually("pod rbac-0 Running", 120_000, async () =>
      (await kubectl(["get", "pod", "rbac-0", "-o", "jsonpath={.status.phase}"])) === "Running"
        ? true
        : undefined,
    );
    await createHostPortConflict();
    const seen = await eventually("every rule of the node role used", 150_000, async () => {
      const reqs = mine(0);
      return rules.every((r) => reqs.some((q) => requestOf(r, q) && q.code !== 403)) ? reqs : undefined;
    }).catch((e: Error) => {
      const reqs = mine(0);
      const unused = rules.filter((r) => !reqs.some((q) => requestOf(r, q) && q.code !== 403));
      throw new Error(`${e.message}; unused: ${unused.map(describeRule).join("; ")}`);
    });
    assert.deepEqual(
      seen.filter((q) => q.code === 403),
      [],
      "no request of the node ServiceAccount denied",
    );
  });

  let n = 1;
  for (const rule of rules) {
    it(`without "${describeRule(rule)}" the agent is denied exactly that`, async () => {
      await applyRoles(roles.map((r) => roleWithout(r, rule)));
      await authorizerSays(rule, false);
      const from = auditSize();
      await restartAgent();
      // Only a CNI ADD makes the agent GET a pod.
      if (rule.verb === "get" && rule.resource === "pods") await createPod(`rbac-${n++}`);
      await eventually(`a 403 for ${describeRule(rule)}`, waitFor(rule), async () =>
        mine(from).some((q) => q.code === 403 && requestOf(rule, q)) ? true : undefined,
      );
      await applyRoles(roles);
      await authorizerSays(rule, true);
    });
  }
});
