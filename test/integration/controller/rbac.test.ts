// The chart's controller RBAC is exactly what zstack-ovnkube-controller needs: run with a token of the chart's
// ServiceAccount (never admin) against a real apiserver whose audit log records ServiceAccounts' requests, the
// controller uses every rule with none denied; then, for each verb × resource of its roles in turn, the role is
// applied without that one rule, the controller restarted, and the audit log shows it denied (403) exactly that
// verb on that resource. So no rule is unused and none is missing.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { ANNOTATION_SUBNET } from "../../../src/controller/pod-port-allocator.ts";
import { ApiClient, isNotFound } from "../../../src/k8s/api-client.ts";
import {
  CONTROLLER_SA,
  chartRbacObjects,
  type RbacObject,
  serviceAccountNamespace,
  writeServiceAccountKubeconfig,
} from "../../../src/sandbox/chart-rbac.ts";
import { CommandError, run as runCommand } from "../../../src/sandbox/command.ts";
import { useKubeApiserver } from "../../rig/kube-apiserver.ts";
import { SCHEMAS, useOvsdbServer } from "../../rig/ovsdb-server.ts";
import {
  auditedRequests,
  canIArgs,
  describeRule,
  requestOf,
  roleId,
  roleWithout,
  SERVICE_ACCOUNT_AUDIT_POLICY,
  type SingleRule,
  singleRules,
} from "../../rig/rbac-audit.ts";
import { teardownFor } from "../../rig/teardown.ts";
import { createNamespace, createPods, spawnController, until } from "./harness.ts";

const CRD = new URL("../../../deploy/crds/subnet.network.zstack.io.yaml", import.meta.url).pathname;
const NS = "rbac";

/**
 * Rules the chart grants for code that is not on this branch yet. They must be unused here (the baseline checks
 * it); when the code arrives the baseline fails, and the rule moves out of this list into the per-rule check.
 */
const PENDING: Record<string, string> = {};
const pendingKey = (r: SingleRule) => `${r.verb} ${r.resource}.${r.apiGroup === "" ? "core" : r.apiGroup}`;

test("the controller runs on the chart's ServiceAccount, uses every rule of its roles, and fails without any one of them", {
  timeout: 10 * 60_000,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "zovn-rbac-"));
  teardownFor(t).after(() => rmSync(dir, { recursive: true, force: true }));
  const policy = join(dir, "audit-policy.yaml");
  const auditLog = join(dir, "audit.log");
  writeFileSync(policy, SERVICE_ACCOUNT_AUDIT_POLICY);
  const kube = await useKubeApiserver(t, {
    apiserverArgs: [
      `--audit-policy-file=${policy}`,
      `--audit-log-path=${auditLog}`,
      "--audit-log-mode=blocking",
    ],
  });
  await kube.kubectl(["apply", "-f", CRD]);
  await kube.kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io"]);
  const api = new ApiClient(kube.kubeConfig);
  teardownFor(t).after(() => api.close());
  const srv = await useOvsdbServer(t, { schemas: [SCHEMAS.nb] });

  const objects = chartRbacObjects();
  await kube.kubectl(["apply", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  });
  const namespace = serviceAccountNamespace(objects, CONTROLLER_SA);
  const user = `system:serviceaccount:${namespace}:${CONTROLLER_SA}`;
  // The roles bound to the controller's ServiceAccount.
  const bound = new Set(
    objects
      .filter((o) => o.kind.endsWith("Binding"))
      .filter((b) =>
        ((b.subjects ?? []) as Array<{ kind: string; name: string }>).some(
          (s) => s.kind === "ServiceAccount" && s.name === CONTROLLER_SA,
        ),
      )
      .map((b) => {
        const ref = b.roleRef as { kind: string; name: string };
        return ref.kind === "Role" ? `Role/${b.metadata.namespace}/${ref.name}` : `${ref.kind}/${ref.name}`;
      }),
  );
  const roles = objects.filter((o) => bound.has(roleId(o)));
  assert.equal(roles.length, 2, "the chart binds a ClusterRole and a leader-election Role to the controller");
  const rules = singleRules(roles);
  const kubeconfig = join(dir, "controller.kubeconfig");
  await writeServiceAccountKubeconfig({
    kubectl: kube.binaries.KUBECTL,
    adminKubeconfig: kube.kubeconfigPath,
    serviceAccount: CONTROLLER_SA,
    path: kubeconfig,
    server: kube.server,
    caCert: kube.ca.cert,
  });
  await createNamespace(api, NS);

  const subnetPath = "/apis/network.zstack.io/v1/subnets/default";
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${CONTROLLER_SA}`;
  const ignoreMissing = (e: unknown) => {
    if (!isNotFound(e)) throw e;
  };
  /** Objects that make the controller use its write rules: a pod to annotate, a node to give a port, a pod on a
   * missing Subnet (a Warning Event, repeated on each update of the pod). */
  const scenario = async (run: number, rule?: SingleRule) => {
    await createPods(api, [[NS, `p${run}`]]);
    await api.request("/api/v1/nodes", {
      method: "POST",
      body: {
        metadata: { name: `n${run}` },
        status: { addresses: [{ type: "InternalIP", address: `192.168.201.${run + 1}` }] },
      },
    });
    await api.request(`/api/v1/namespaces/${NS}/pods`, {
      method: "POST",
      body: {
        metadata: { name: `ev${run}`, annotations: { [ANNOTATION_SUBNET]: "missing" } },
        spec: { nodeSelector: { "no-such-label": "x" }, containers: [{ name: "c", image: "x" }] },
      },
    });
    const is = (verb: string, resource: string) => rule?.verb === verb && rule.resource === resource;
    if (is("create", "leases")) await api.request(leasePath, { method: "DELETE" }).catch(ignoreMissing);
    // The default Subnet's finalizer, its status and the Subnet itself are written again only when missing.
    if (is("patch", "subnets") || is("create", "subnets"))
      await api
        .request(subnetPath, {
          method: "PATCH",

          body: { metadata: { finalizers: null } },
        })
        .catch(ignoreMissing);
    if (is("create", "subnets")) await api.request(subnetPath, { method: "DELETE" }).catch(ignoreMissing);
    if (is("patch", "subnets/status"))
      await api
        .request(`${subnetPath}/status`, { method: "PATCH", body: { status: null } })
        .catch(ignoreMissing);
  };
  const touch = (run: number, n: number) =>
    api
      .request(`/api/v1/namespaces/${NS}/pods/ev${run}`, {
        method: "PATCH",

        body: { metadata: { labels: { touched: String(n) } } },
      })
      .catch(() => undefined);
  /** Runs the controller until `done` holds of the audit log written since it started (touching the pod). */
  const runController = async (
    run: number,
    what: string,
    done: (reqs: ReturnType<typeof auditedRequests>) => boolean,
  ) => {
    const from = statSync(auditLog).size;
    const c = await spawnController(
      t,
      { kube, srv },
      {
        identity: `rbac-${run}`,
        leaderElect: true,
        env: {
          ZSTACK_KUBECONFIG: kubeconfig,
          ZSTACK_LEASE_NAMESPACE: namespace,
          ZSTACK_LEASE_NAME: CONTROLLER_SA,
        },
      },
    );
    let n = 0;
    try {
      await until(
        what,
        async () => {
          if (c.daemon.hasExited()) throw new Error(`the controller exited; see ${c.logFile}`);
          await touch(run, n++);
          return done(auditedRequests(auditLog, from).filter((r) => r.user === user));
        },
        60_000,
        500,
      ).catch((e: Error) => {
        const tail = readFileSync(c.logFile, "utf8").split("\n").slice(-12).join("\n");
        throw new Error(`${e.message}\n--- ${c.logFile} ---\n${tail}`);
      });
    } finally {
      await c.stop();
    }
  };
  const applyRoles = async (rs: readonly RbacObject[]) => {
    await kube.kubectl(["apply", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: rs }),
    });
  };
  /** Waits until the apiserver's authorizer answers `allowed` for the rule (it watches roles, so it lags a bit). */
  const authorizerSays = (rule: SingleRule, allowed: boolean) =>
    until(`the authorizer to ${allowed ? "allow" : "deny"} ${describeRule(rule)}`, async () => {
      // can-i prints its answer and exits 1 for "no".
      const args = ["--kubeconfig", kube.kubeconfigPath, ...canIArgs(rule, namespace), `--as=${user}`];
      const answer = await runCommand(kube.binaries.KUBECTL, args).catch((e: unknown) =>
        e instanceof CommandError ? e.stdout : "",
      );
      return answer.trim() === (allowed ? "yes" : "no");
    });

  const checked = rules.filter((r) => !(pendingKey(r) in PENDING));
  const pending = rules.filter((r) => pendingKey(r) in PENDING);
  assert.equal(pending.length, Object.keys(PENDING).length, "every pending rule is still in the chart");

  await t.test("with the full roles every rule is used and nothing is denied", async () => {
    let seen: ReturnType<typeof auditedRequests> = [];
    await scenario(0);
    await runController(0, "every rule of the chart used by the controller", (reqs) => {
      seen = reqs;
      return checked.every((r) => reqs.some((q) => requestOf(r, q) && q.code !== 403));
    }).catch((e: Error) => {
      const unused = checked.filter((r) => !seen.some((q) => requestOf(r, q) && q.code !== 403));
      throw new Error(`${e.message}; unused: ${unused.map(describeRule).join("; ")}`);
    });
    const denied = seen.filter((q) => q.code === 403);
    assert.deepEqual(denied, [], "no request of the controller's ServiceAccount denied");
    for (const r of pending)
      assert.ok(
        !seen.some((q) => requestOf(r, q)),
        `${describeRule(r)} is used now: take it out of PENDING so its removal is checked`,
      );
  });

  // The default Subnet is deleted for the create case; every other case wants it in place, so that one runs last.
  const order = [...checked].sort(
    (a, b) =>
      Number(a.verb === "create" && a.resource === "subnets") -
      Number(b.verb === "create" && b.resource === "subnets"),
  );
  let run = 1;
  for (const rule of order) {
    await t.test(`without "${describeRule(rule)}" the controller is denied exactly that`, async () => {
      const minus = roles.map((r) => roleWithout(r, rule));
      await applyRoles(minus);
      await authorizerSays(rule, false);
      await scenario(run, rule);
      await runController(run, `a 403 for ${describeRule(rule)}`, (reqs) =>
        reqs.some((q) => q.code === 403 && requestOf(rule, q)),
      );
      run++;
      await applyRoles(roles);
      await authorizerSays(rule, true);
    });
  }
  // Leaves the apiserver as found; nothing else runs on it.
  await delay(0);
});
