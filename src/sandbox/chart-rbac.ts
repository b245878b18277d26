// The chart's RBAC in the sandbox: the ServiceAccounts, roles and bindings rendered from the Helm chart
// (deploy/manifests/standalone.yaml, `make manifests`) are applied as an install would apply them, and each
// component gets a kubeconfig holding a token of its ServiceAccount minted by the TokenRequest API, as a pod's
// projected token would be. No component runs with admin or kubelet credentials, so a missing rule shows here.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadAll } from "js-yaml";
import { run } from "./command.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import { repoRoot } from "./repo.ts";

export const RENDERED_CHART = join(repoRoot, "deploy", "manifests", "standalone.yaml");
export const RBAC_KINDS: ReadonlySet<string> = new Set([
  "ServiceAccount",
  "ClusterRole",
  "ClusterRoleBinding",
  "Role",
  "RoleBinding",
]);
/** The chart's fixed ServiceAccount names (templates/_helpers.tpl). */
export const CONTROLLER_SA = "zstack-ovnkube-controller";
export const NODE_SA = "zstack-ovnkube-node";
/** Long enough for a sandbox left running for weeks; `up` and `restart-node` mint fresh ones. */
const TOKEN_DURATION = "720h";

export interface RbacObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [field: string]: unknown;
}

/** The RBAC objects of a rendered chart stream, in their order. */
export function rbacObjectsOf(yaml: string): RbacObject[] {
  const out: RbacObject[] = [];
  for (const doc of loadAll(yaml)) {
    if (!doc || typeof doc !== "object") continue;
    const obj = doc as Partial<RbacObject>;
    if (typeof obj.kind !== "string" || !RBAC_KINDS.has(obj.kind)) continue;
    if (typeof obj.apiVersion !== "string" || typeof obj.metadata?.name !== "string")
      throw new Error(`${RENDERED_CHART}: a ${obj.kind} without apiVersion or metadata.name`);
    out.push(obj as RbacObject);
  }
  return out;
}

export function chartRbacObjects(): RbacObject[] {
  return rbacObjectsOf(readFileSync(RENDERED_CHART, "utf8"));
}

/** The namespace the chart was rendered into: the one its ServiceAccounts live in. */
export function serviceAccountNamespace(objects: readonly RbacObject[], name: string): string {
  const sa = objects.find((o) => o.kind === "ServiceAccount" && o.metadata.name === name);
  if (!sa?.metadata.namespace)
    throw new Error(`${RENDERED_CHART} has no ServiceAccount ${name} with a namespace`);
  return sa.metadata.namespace;
}

/** `kubectl apply` of the chart's RBAC objects as one List; idempotent. */
export async function applyChartRbac(kubectl: string, adminKubeconfig: string): Promise<RbacObject[]> {
  const objects = chartRbacObjects();
  const list = JSON.stringify({ apiVersion: "v1", kind: "List", items: objects });
  await run(kubectl, ["--kubeconfig", adminKubeconfig, "apply", "-f", "-"], { input: list });
  return objects;
}

export interface TokenKubeconfig {
  kubectl: string;
  adminKubeconfig: string;
  serviceAccount: string;
  /** Where the kubeconfig is written (mode 0600). */
  path: string;
  server: string;
  caCert: string;
}

/** Mints a token of the ServiceAccount (TokenRequest API) and writes a kubeconfig that presents it. */
export async function writeServiceAccountKubeconfig(opts: TokenKubeconfig): Promise<void> {
  const namespace = serviceAccountNamespace(chartRbacObjects(), opts.serviceAccount);
  const token = (
    await run(opts.kubectl, [
      ...["--kubeconfig", opts.adminKubeconfig, "create", "token", opts.serviceAccount],
      ...["-n", namespace, `--duration=${TOKEN_DURATION}`],
    ])
  ).trim();
  // A JWT is three base64url parts; anything else is not written into a credential file.
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token))
    throw new Error(`kubectl create token ${opts.serviceAccount} returned something other than a token`);
  writeKubeconfig(opts.path, {
    server: opts.server,
    caCert: opts.caCert,
    token,
    user: `system:serviceaccount:${namespace}:${opts.serviceAccount}`,
  });
}
