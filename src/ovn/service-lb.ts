// A Service as OVN load balancers, as plain data: one Load_Balancer per (Service, protocol) holding every VIP
// pods can reach (cluster IPs, externalIPs, load-balancer IPs, each with each port), and for
// internalTrafficPolicy Local one template load balancer per (Service, protocol, family) whose backends are a
// Chassis_Template_Var variable per chassis, holding only that chassis' endpoints. NodePorts are not here: a
// pod reaches a node IP through its node's management port, where the node agent's nftables serve it.
//
// OVN 23.03 accepts a literal IPv4 VIP in a template load balancer but refuses a literal IPv6 one ("should be a
// template of the form ^vip_variable..."), so an IPv6 template VIP is a variable too, the same on every chassis.

import { createHash } from "node:crypto";
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { type Family, formatIp, type IpAddress } from "../ipam/address.ts";
import { type Endpoint, selectEndpoints } from "../services/endpoints.ts";
import type { L4Protocol, ServiceModel, ServicePortModel } from "../services/service-model.ts";
import type { DesiredRow } from "./nb-diff.ts";
import { ownedIds, SERVICE_KEY } from "./ownership.ts";

/** Every Chassis_Template_Var key the controller writes starts with this; other keys are never touched. */
export const TEMPLATE_VAR_PREFIX = "zsvc_";

export interface ServiceLoadBalancers {
  /** Load_Balancer rows (ids `<ns>/<name>/<proto>` and `<ns>/<name>/<proto>/local-v4|v6`), members of the group. */
  readonly rows: DesiredRow[];
  /** Per chassis (node name): the template variables this Service needs there. */
  readonly variables: Map<string, Record<string, string>>;
}

export function serviceKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** `ip:port`, with IPv6 in brackets, as OVN writes VIPs and backends. */
export function hostPort(ip: IpAddress, port: number): string {
  return ip.family === 6 ? `[${formatIp(ip)}]:${port}` : `${formatIp(ip)}:${port}`;
}

function backends(eps: readonly Endpoint[], family: Family): string {
  return eps
    .filter((e) => e.ip.family === family)
    .map((e) => hostPort(e.ip, e.port))
    .join(",");
}

function hashName(kind: string, parts: readonly (string | number)[]): string {
  return `${TEMPLATE_VAR_PREFIX}${kind}_${createHash("sha256").update(parts.join("/")).digest("hex").slice(0, 16)}`;
}

/** The variable holding one chassis' backends of a Service port in one family. */
export function backendsVariable(m: ServiceModel, port: ServicePortModel, family: Family): string {
  return hashName("be", [m.namespace, m.name, port.protocol, port.port, family]);
}

/** The variable holding an IPv6 cluster IP (the same on every chassis). */
export function vipVariable(m: ServiceModel, ip: IpAddress): string {
  return hashName("vip", [m.namespace, m.name, formatIp(ip)]);
}

/** The template variable names a load balancer's vips refer to (`^name` tokens). */
export function variablesOf(vips: Readonly<Record<string, string>>): string[] {
  const out = new Set<string>();
  for (const [k, v] of Object.entries(vips))
    for (const m of `${k} ${v}`.matchAll(/\^([A-Za-z0-9_]+)/g)) out.add(m[1] as string);
  return [...out].filter((n) => n.startsWith(TEMPLATE_VAR_PREFIX));
}

const PROTOCOLS: readonly L4Protocol[] = ["tcp", "udp", "sctp"];

/**
 * The desired load balancers of a Service and, for internalTrafficPolicy Local, the template variables of
 * each chassis in `chassis` (the node names). A VIP with no endpoint keeps an empty backend list: with
 * options:reject a client gets a TCP reset or ICMP unreachable at once.
 */
export function serviceLoadBalancers(
  m: ServiceModel,
  slices: readonly V1EndpointSlice[],
  chassis: readonly string[],
): ServiceLoadBalancers {
  const rows: DesiredRow[] = [];
  const variables = new Map<string, Record<string, string>>(chassis.map((c) => [c, {}]));
  const svc = serviceKey(m.namespace, m.name);
  const baseOptions: Record<string, string> = { reject: "true" };
  if (m.affinityTimeoutSeconds !== undefined) baseOptions.affinity_timeout = String(m.affinityTimeoutSeconds);
  const external = [...m.externalIPs, ...m.loadBalancerIPs];
  const clusterInLb = m.internalTrafficLocal ? [] : m.clusterIPs;

  for (const protocol of PROTOCOLS) {
    const ports = m.ports.filter((p) => p.protocol === protocol);
    if (ports.length === 0) continue;
    const vips: Record<string, string> = {};
    for (const port of ports) {
      const eps = selectEndpoints(slices, port);
      for (const vip of [...clusterInLb, ...external])
        vips[hostPort(vip, port.port)] = backends(eps, vip.family);
    }
    if (Object.keys(vips).length > 0) {
      const id = `${svc}/${protocol}`;
      rows.push({
        table: "Load_Balancer",
        id,
        row: {
          name: `zovn-svc_${m.namespace}_${m.name}_${protocol}`,
          protocol,
          vips,
          options: baseOptions,
          external_ids: ownedIds("service-lb", id, { [SERVICE_KEY]: svc }),
        },
      });
    }
    if (!m.internalTrafficLocal) continue;
    for (const ip of m.clusterIPs) {
      const family = ip.family;
      const tvips: Record<string, string> = {};
      for (const port of ports) {
        const beVar = backendsVariable(m, port, family);
        let key: string;
        if (family === 4) {
          key = hostPort(ip, port.port);
        } else {
          const vv = vipVariable(m, ip);
          key = `^${vv}:${port.port}`;
          for (const vars of variables.values()) vars[vv] = formatIp(ip);
        }
        tvips[key] = `^${beVar}`;
        for (const [node, vars] of variables)
          vars[beVar] = backends(selectEndpoints(slices, port, { node }), family);
      }
      const id = `${svc}/${protocol}/local-v${family}`;
      rows.push({
        table: "Load_Balancer",
        id,
        row: {
          name: `zovn-svc_${m.namespace}_${m.name}_${protocol}_local_v${family}`,
          protocol,
          vips: tvips,
          options: { ...baseOptions, template: "true", "address-family": family === 4 ? "ipv4" : "ipv6" },
          external_ids: ownedIds("service-lb", id, { [SERVICE_KEY]: svc }),
        },
      });
    }
  }
  return { rows, variables };
}
