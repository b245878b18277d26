// Proving a component's RBAC minimal: its roles expanded into single rules (one verb on one resource), a role
// with one rule taken out, an apiserver audit policy that records ServiceAccounts' requests at Metadata level,
// and the denials read back from that audit log. Pure, apart from reading the log file.

import { existsSync, readFileSync } from "node:fs";
import type { RbacObject } from "../../src/sandbox/chart-rbac.ts";

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}

/** One verb on one resource (with its subresource, "subnets/status") of one role. */
export interface SingleRule {
  /** "ClusterRole/zstack-ovn:controller" or "Role/kube-system/zstack-ovn:controller-leader-election". */
  role: string;
  apiGroup: string;
  resource: string;
  verb: string;
  resourceNames?: string[];
}

export function roleId(o: RbacObject): string {
  return o.kind === "Role"
    ? `Role/${o.metadata.namespace}/${o.metadata.name}`
    : `${o.kind}/${o.metadata.name}`;
}

export function describeRule(r: SingleRule): string {
  const group = r.apiGroup === "" ? "core" : r.apiGroup;
  const names = r.resourceNames ? ` [${r.resourceNames.join(",")}]` : "";
  return `${r.verb} ${r.resource}.${group}${names} (${r.role})`;
}

function rulesField(o: RbacObject): PolicyRule[] {
  const rules = o.rules;
  if (!Array.isArray(rules)) throw new Error(`${roleId(o)} has no rules list`);
  return rules as PolicyRule[];
}

/** Every rule of the roles as single verb × resource rules, in the roles' order. */
export function singleRules(roles: readonly RbacObject[]): SingleRule[] {
  const out: SingleRule[] = [];
  for (const role of roles) {
    for (const rule of rulesField(role)) {
      for (const apiGroup of rule.apiGroups ?? [])
        for (const resource of rule.resources ?? [])
          for (const verb of rule.verbs)
            out.push({
              role: roleId(role),
              apiGroup,
              resource,
              verb,
              ...(rule.resourceNames ? { resourceNames: rule.resourceNames } : {}),
            });
    }
  }
  return out;
}

/** The role with exactly this verb × resource taken out (a rule left without verbs or resources goes). */
export function roleWithout(role: RbacObject, drop: SingleRule): RbacObject {
  if (roleId(role) !== drop.role) return role;
  const rules: PolicyRule[] = [];
  for (const rule of rulesField(role)) {
    const names = JSON.stringify(rule.resourceNames ?? null);
    const hit =
      (rule.apiGroups ?? []).includes(drop.apiGroup) &&
      (rule.resources ?? []).includes(drop.resource) &&
      rule.verbs.includes(drop.verb) &&
      names === JSON.stringify(drop.resourceNames ?? null);
    if (!hit) {
      rules.push(rule);
      continue;
    }
    // Split the rule so only this (group, resource, verb) is lost.
    const others = (rule.verbs ?? []).filter((v) => v !== drop.verb);
    if (others.length > 0)
      rules.push({ ...rule, apiGroups: [drop.apiGroup], resources: [drop.resource], verbs: others });
    const otherResources = (rule.resources ?? []).filter((r) => r !== drop.resource);
    if (otherResources.length > 0)
      rules.push({ ...rule, apiGroups: [drop.apiGroup], resources: otherResources });
    const otherGroups = (rule.apiGroups ?? []).filter((g) => g !== drop.apiGroup);
    if (otherGroups.length > 0) rules.push({ ...rule, apiGroups: otherGroups });
  }
  return { ...role, rules };
}

export { SERVICE_ACCOUNT_AUDIT_POLICY } from "../../src/sandbox/control-plane.ts";

/** One audited request, parsed from the log's JSON line. */
export interface AuditedRequest {
  user: string;
  verb: string;
  apiGroup: string;
  /** With its subresource: "subnets/status". */
  resource: string;
  namespace?: string;
  name?: string;
  code: number;
}

/** The requests in an audit log from a byte offset on; lines that are not audit events are skipped. */
export function auditedRequests(file: string, fromByte = 0): AuditedRequest[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file).subarray(fromByte).toString("utf8");
  const out: AuditedRequest[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    let ev: Record<string, unknown>;
    try {
      ev = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue; // a line still being written
    }
    const user = (ev.user as { username?: unknown } | undefined)?.username;
    const ref = ev.objectRef as
      | { apiGroup?: unknown; resource?: unknown; subresource?: unknown; namespace?: unknown; name?: unknown }
      | undefined;
    const code = (ev.responseStatus as { code?: unknown } | undefined)?.code;
    if (typeof user !== "string" || typeof ev.verb !== "string" || typeof ref?.resource !== "string")
      continue;
    if (typeof code !== "number") continue;
    out.push({
      user,
      verb: ev.verb,
      apiGroup: typeof ref.apiGroup === "string" ? ref.apiGroup : "",
      resource: typeof ref.subresource === "string" ? `${ref.resource}/${ref.subresource}` : ref.resource,
      ...(typeof ref.namespace === "string" ? { namespace: ref.namespace } : {}),
      ...(typeof ref.name === "string" ? { name: ref.name } : {}),
      code,
    });
  }
  return out;
}

/** Whether a request is the one this rule is for (same verb, group, resource, and name when the rule names one). */
export function requestOf(rule: SingleRule, req: AuditedRequest): boolean {
  if (req.verb !== rule.verb || req.apiGroup !== rule.apiGroup || req.resource !== rule.resource)
    return false;
  return !rule.resourceNames || (req.name !== undefined && rule.resourceNames.includes(req.name));
}

/** `kubectl auth can-i` arguments asking for exactly this rule (the caller adds --as). */
export function canIArgs(rule: SingleRule, namespace: string): string[] {
  const target = rule.resourceNames?.[0] ? `/${rule.resourceNames[0]}` : "";
  const [res, sub] = rule.resource.split("/") as [string, string | undefined];
  const group = rule.apiGroup === "" ? "" : `.${rule.apiGroup}`;
  const args = ["auth", "can-i", rule.verb, `${res}${group}${target}`];
  if (sub) args.push(`--subresource=${sub}`);
  if (rule.role.startsWith("Role/")) args.push("-n", namespace);
  return args;
}
