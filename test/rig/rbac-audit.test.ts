import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { RbacObject } from "../../src/sandbox/chart-rbac.ts";
import { auditedRequests, canIArgs, requestOf, roleWithout, singleRules } from "./rbac-audit.ts";

const role: RbacObject = {
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name: "r" },
  rules: [
    { apiGroups: [""], resources: ["services", "nodes"], verbs: ["list", "watch"] },
    { apiGroups: ["x.io"], resources: ["things/status"], verbs: ["patch"] },
  ],
};

test("a role expands into one rule per verb and resource, and removing one keeps every other", () => {
  const rules = singleRules([role]);
  assert.equal(rules.length, 5);
  const drop = rules.find((r) => r.verb === "watch" && r.resource === "nodes");
  assert.ok(drop);
  const left = singleRules([roleWithout(role, drop)]).map((r) => `${r.verb} ${r.resource}`);
  assert.deepEqual(left.sort(), ["list nodes", "list services", "patch things/status", "watch services"]);
  const status = rules.find((r) => r.resource === "things/status");
  assert.ok(status);
  assert.deepEqual(singleRules([roleWithout(role, status)]).length, 4);
  assert.deepEqual(canIArgs(status, "ns"), ["auth", "can-i", "patch", "things.x.io", "--subresource=status"]);
});

test("audit lines become requests with their subresource and code; other lines are skipped", () => {
  const dir = mkdtempSync(join(tmpdir(), "zovn-audit-"));
  try {
    const file = join(dir, "audit.log");
    const ev = {
      user: { username: "system:serviceaccount:ns:a" },
      verb: "patch",
      objectRef: { apiGroup: "x.io", resource: "things", subresource: "status", name: "t" },
      responseStatus: { code: 403 },
    };
    writeFileSync(file, `${JSON.stringify(ev)}\nnot json\n{"cut`);
    const reqs = auditedRequests(file);
    assert.deepEqual(reqs, [
      {
        user: "system:serviceaccount:ns:a",
        verb: "patch",
        apiGroup: "x.io",
        resource: "things/status",
        name: "t",
        code: 403,
      },
    ]);
    const rule = singleRules([role]).find((r) => r.resource === "things/status");
    assert.ok(rule && requestOf(rule, reqs[0] as (typeof reqs)[0]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
