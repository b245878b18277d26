// A Service as OVN load balancers, as plain data: per (Service, protocol) one Load_Balancer holding its cluster
// IPs and one holding every other VIP pods can reach (externalIPs, load-balancer IPs; each with each port), kept
// apart so that ZStack's switches can refer to cluster IPs only; and for VIPs whose backends depend on the
// client's node (internalTrafficPolicy Local, topology hints of trafficDistribution) template load balancers per
// (Service, protocol, family), split the same way, whose backends are a Chassis_Template_Var variable per
// chassis, holding that chassis' choice. NodePorts are not here: a
// pod reaches a node IP through its node's management port, where the node agent's nftables serve it.
//
// OVN 23.03 accepts a literal IPv4 VIP in a template load balancer but refuses a literal IPv6 one ("should be a
// template of the form ^vip_variable..."), so an IPv6 template VIP is a variable too, the same on every chassis.

import { createHash } from "node:crypto";
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { type Family, formatIp, type IpAddress } from "../ipam/address.ts";
import { type Cidr, cidrContains } from "../ipam/cidr.ts";
import {
  type ClientTopology,
  type Endpoint,
  hasTopologyHints,
  selectEndpoints,
} from "../services/endpoints.ts";
import {
  type L4Protocol,
  type ServiceModel,
  type ServicePortModel,
  sourceFiltered,
} from "../services/service-model.ts";
import type { DesiredRow } from "./nb-diff.ts";
import { ownedIds, SERVICE_KEY } from "./ownership.ts";

/** Every Chassis_Template_Var key the controller writes starts with this; other keys are never touched. */
export const TEMPLATE_VAR_PREFIX = "zsvc_";

/**
 * Who a load balancer row is for. "cluster": cluster IPs inside the service CIDRs only, the row every switch with
 * our Service groups may apply (ZStack's switches too, CLUSTER_IP_LB_GROUP); "external": externalIPs,
 * load-balancer IPs and any cluster IP outside the service CIDRs, addresses a tenant can aim anywhere, applied on
 * our own switches only (CLUSTER_LB_GROUP).
 */
export type LbAudience = "cluster" | "external";
const AUDIENCES: readonly LbAudience[] = ["cluster", "external"];

export interface ServiceLbRow extends DesiredRow {
  readonly audience: LbAudience;
}

export interface ServiceLoadBalancers {
  /**
   * Load_Balancer rows: ids `<ns>/<name>/<proto>` (cluster IPs) and `<ns>/<name>/<proto>/external` (the rest),
   * and template rows `<ns>/<name>/<proto>/local-v4|v6` (cluster IPs) and `.../external-v4|v6` (the rest).
   */
  readonly rows: ServiceLbRow[];
  /** Per chassis (node name): the template variables this Service needs there. */
  readonly variables: Map<string, Record<string, string>>;
}

export function serviceKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/**
 * Canonical texts of addresses, by object: an endpoint's address object is shared by every slice object that
 * holds it (services/endpoints.ts), so an endpoint change rebuilds a backend list from texts already made.
 */
const ipTexts = new WeakMap<IpAddress, string>();

function ipText(ip: IpAddress): string {
  let t = ipTexts.get(ip);
  if (t === undefined) {
    t = formatIp(ip);
    ipTexts.set(ip, t);
  }
  return t;
}

/** `ip:port`, with IPv6 in brackets, as OVN writes VIPs and backends. */
export function hostPort(ip: IpAddress, port: number): string {
  return ip.family === 6 ? `[${ipText(ip)}]:${port}` : `${ipText(ip)}:${port}`;
}

function backends(eps: readonly Endpoint[], family: Family): string {
  let out = "";
  for (const e of eps) {
    if (e.ip.family !== family) continue;
    out = out === "" ? hostPort(e.ip, e.port) : `${out},${hostPort(e.ip, e.port)}`;
  }
  return out;
}

function hashName(kind: string, parts: readonly (string | number)[]): string {
  return `${TEMPLATE_VAR_PREFIX}${kind}_${createHash("sha256").update(parts.join("/")).digest("hex").slice(0, 16)}`;
}

/** The variable holding one chassis' backends of a Service port in one family. */
export function backendsVariable(m: ServiceModel, port: ServicePortModel, family: Family): string {
  return hashName("be", [m.namespace, m.name, port.protocol, port.port, family]);
}

/** The variable holding one chassis' topology-hinted backends of a Service port in one family. */
export function topologyVariable(m: ServiceModel, port: ServicePortModel, family: Family): string {
  return hashName("bt", [m.namespace, m.name, port.protocol, port.port, family]);
}

/** The variable holding an IPv6 VIP (the same on every chassis). */
export function vipVariable(m: ServiceModel, ip: IpAddress): string {
  return hashName("vip", [m.namespace, m.name, formatIp(ip)]);
}

/** The template variable names a load balancer's vips refer to (`^name` tokens). */
export function variablesOf(vips: Readonly<Record<string, string>>): string[] {
  const out = new Set<string>();
  for (const k in vips) {
    if (!Object.hasOwn(vips, k)) continue;
    const v = vips[k] as string;
    // Most rows are plain: no template to look for (every reconcile reads each of its rows here).
    if (!k.includes("^") && !v.includes("^")) continue;
    for (const m of `${k} ${v}`.matchAll(/\^([A-Za-z0-9_]+)/g)) out.add(m[1] as string);
  }
  return [...out].filter((n) => n.startsWith(TEMPLATE_VAR_PREFIX));
}

const PROTOCOLS: readonly L4Protocol[] = ["tcp", "udp", "sctp"];

/** What a row of a Service has whatever its endpoints: its name and external_ids, by row id. */
interface RowParts {
  readonly name: string;
  readonly external_ids: Record<string, string>;
}

/**
 * Per Service model (parsed once per Service object by the controller), its rows' names and external_ids: an
 * endpoint change rebuilds only the vips.
 */
const rowParts = new WeakMap<ServiceModel, Map<string, RowParts>>();

function partsOf(m: ServiceModel, id: string, name: () => string): RowParts {
  let byId = rowParts.get(m);
  if (!byId) {
    byId = new Map();
    rowParts.set(m, byId);
  }
  let p = byId.get(id);
  if (!p) {
    p = {
      name: name(),
      external_ids: ownedIds("service-lb", id, { [SERVICE_KEY]: serviceKey(m.namespace, m.name) }),
    };
    byId.set(id, p);
  }
  return p;
}

/**
 * The desired load balancers of a Service and the template variables of each chassis in `chassis` (the nodes,
 * with their zones). Plain VIPs go to the Service's load balancer; a VIP whose backends differ per chassis goes
 * to a template load balancer per (Service, protocol, family) instead: the cluster IPs with
 * internalTrafficPolicy Local (that chassis' endpoints), and, when EndpointSlice topology hints make the choice
 * differ between nodes (trafficDistribution), every VIP of the Cluster policy (that chassis' hinted endpoints,
 * as kube-proxy chooses them on that node). LB IPs filtered by loadBalancerSourceRanges are no VIP at all: pods
 * reach them through their node, whose nft filters the source. A VIP with no endpoint keeps an empty backend
 * list: with options:reject a client gets a TCP reset or ICMP unreachable at once.
 */
export function serviceLoadBalancers(
  m: ServiceModel,
  slices: readonly V1EndpointSlice[],
  chassis: readonly ClientTopology[],
  serviceCidrs?: readonly Cidr[],
): ServiceLoadBalancers {
  if (!m.internalTrafficLocal && !hasTopologyHints(slices))
    return plainLoadBalancers(m, slices, chassis, serviceCidrs);
  return generalLoadBalancers(m, slices, chassis, serviceCidrs);
}

/** One VIP of a plain load balancer: its key in vips and the port and family its backends are chosen for. */
interface PlainVip {
  readonly key: string;
  readonly port: ServicePortModel;
  readonly family: Family;
}

/** Everything of a plain Service's rows but their backends, in the order generalLoadBalancers writes them. */
interface PlainLayout {
  readonly serviceCidrs: readonly Cidr[] | undefined;
  readonly options: Record<string, string>;
  readonly ports: readonly ServicePortModel[];
  readonly rows: readonly {
    readonly protocol: L4Protocol;
    readonly audience: LbAudience;
    readonly id: string;
    readonly parts: RowParts;
    readonly vips: readonly PlainVip[];
  }[];
}

const plainLayouts = new WeakMap<ServiceModel, PlainLayout>();

function plainLayout(m: ServiceModel, serviceCidrs: readonly Cidr[] | undefined): PlainLayout {
  const known = plainLayouts.get(m);
  if (known && known.serviceCidrs === serviceCidrs) return known;
  const audienceOf = (ip: IpAddress): LbAudience =>
    !serviceCidrs || serviceCidrs.some((c) => cidrContains(c, ip)) ? "cluster" : "external";
  const external = [...m.externalIPs, ...m.loadBalancerIPs.filter((ip) => !sourceFiltered(m, ip.family))];
  const svc = serviceKey(m.namespace, m.name);
  const rows: PlainLayout["rows"][number][] = [];
  for (const protocol of PROTOCOLS) {
    const vipsOf: Record<LbAudience, PlainVip[]> = { cluster: [], external: [] };
    for (const port of m.ports) {
      if (port.protocol !== protocol) continue;
      for (const vip of m.clusterIPs)
        vipsOf[audienceOf(vip)].push({ key: hostPort(vip, port.port), port, family: vip.family });
      for (const vip of external)
        vipsOf.external.push({ key: hostPort(vip, port.port), port, family: vip.family });
    }
    for (const audience of AUDIENCES) {
      if (vipsOf[audience].length === 0) continue;
      const id = audience === "cluster" ? `${svc}/${protocol}` : `${svc}/${protocol}/external`;
      const parts = partsOf(
        m,
        id,
        () => `zovn-svc_${m.namespace}_${m.name}_${protocol}${audience === "cluster" ? "" : "_external"}`,
      );
      rows.push({ protocol, audience, id, parts, vips: vipsOf[audience] });
    }
  }
  const options: Record<string, string> = { reject: "true", ct_flush: "true" };
  if (m.affinityTimeoutSeconds !== undefined) options.affinity_timeout = String(m.affinityTimeoutSeconds);
  const layout = { serviceCidrs, options, ports: m.ports, rows };
  plainLayouts.set(m, layout);
  return layout;
}

/**
 * generalLoadBalancers' answer for a Service whose backends are the same on every chassis (no
 * internalTrafficPolicy Local, no topology hints), from its layout kept per model: an endpoint change
 * chooses each port's endpoints once and writes only the backend lists.
 */
function plainLoadBalancers(
  m: ServiceModel,
  slices: readonly V1EndpointSlice[],
  chassis: readonly ClientTopology[],
  serviceCidrs: readonly Cidr[] | undefined,
): ServiceLoadBalancers {
  const layout = plainLayout(m, serviceCidrs);
  const variables = new Map<string, Record<string, string>>();
  for (const c of chassis) variables.set(c.node, {});
  const chosen = new Map<ServicePortModel, Endpoint[]>();
  const lists = new Map<ServicePortModel, [string | undefined, string | undefined]>();
  const backendsOf = (port: ServicePortModel, family: Family): string => {
    let l = lists.get(port);
    if (!l) {
      l = [undefined, undefined];
      lists.set(port, l);
    }
    const at = family === 4 ? 0 : 1;
    let text = l[at];
    if (text === undefined) {
      let eps = chosen.get(port);
      if (!eps) {
        eps = selectEndpoints(slices, port);
        chosen.set(port, eps);
      }
      text = backends(eps, family);
      l[at] = text;
    }
    return text;
  };
  const rows: ServiceLbRow[] = [];
  for (const r of layout.rows) {
    const vips: Record<string, string> = {};
    for (const v of r.vips) vips[v.key] = backendsOf(v.port, v.family);
    rows.push({
      table: "Load_Balancer",
      id: r.id,
      audience: r.audience,
      row: {
        name: r.parts.name,
        protocol: r.protocol,
        vips,
        options: layout.options,
        external_ids: r.parts.external_ids,
      },
    });
  }
  return { rows, variables };
}

/** The general path of serviceLoadBalancers (also what the plain path is tested against). */
export function generalLoadBalancers(
  m: ServiceModel,
  slices: readonly V1EndpointSlice[],
  chassis: readonly ClientTopology[],
  serviceCidrs?: readonly Cidr[],
): ServiceLoadBalancers {
  const rows: ServiceLbRow[] = [];
  // Without the service CIDRs (tests of the VIP layout) every cluster IP counts as one.
  const audienceOf = (ip: IpAddress): LbAudience =>
    !serviceCidrs || serviceCidrs.some((c) => cidrContains(c, ip)) ? "cluster" : "external";
  const variables = new Map<string, Record<string, string>>(chassis.map((c) => [c.node, {}]));
  const svc = serviceKey(m.namespace, m.name);
  // ct_flush: ovn-controller deletes the conntrack entries of a backend removed from a VIP (a pod replaced, a
  // target port changed). A UDP client that keeps one flow would otherwise stay on its entry to the old backend
  // for as long as it keeps sending, as kube-proxy's conntrack cleanup prevents.
  const baseOptions: Record<string, string> = { reject: "true", ct_flush: "true" };
  if (m.affinityTimeoutSeconds !== undefined) baseOptions.affinity_timeout = String(m.affinityTimeoutSeconds);
  const external = [...m.externalIPs, ...m.loadBalancerIPs.filter((ip) => !sourceFiltered(m, ip.family))];
  // Per chassis, the Cluster-policy choice; a template is needed only where it differs from the plain one.
  const clusterEps = (port: ServicePortModel) => {
    const plain = selectEndpoints(slices, port);
    if (!hasTopologyHints(slices)) return { plain, perChassis: undefined };
    const perChassis = new Map(chassis.map((c) => [c.node, selectEndpoints(slices, port, { topology: c })]));
    const key = (eps: readonly Endpoint[]) => eps.map((e) => hostPort(e.ip, e.port)).join(",");
    const same = [...perChassis.values()].every((eps) => key(eps) === key(plain));
    return { plain, perChassis: same ? undefined : perChassis };
  };

  for (const protocol of PROTOCOLS) {
    const ports = m.ports.filter((p) => p.protocol === protocol);
    if (ports.length === 0) continue;
    // Cluster IPs inside the service CIDRs on one side, every address a tenant can choose on the other.
    const vipsOf: Record<LbAudience, Record<string, string>> = { cluster: {}, external: {} };
    const tvipsOf = new Map<string, Record<string, string>>(); // `${audience}/${family}`
    const templateVip = (audience: LbAudience, ip: IpAddress, port: ServicePortModel, value: string) => {
      let key: string;
      if (ip.family === 4) {
        key = hostPort(ip, port.port);
      } else {
        const vv = vipVariable(m, ip);
        key = `^${vv}:${port.port}`;
        for (const vars of variables.values()) vars[vv] = formatIp(ip);
      }
      const t = tvipsOf.get(`${audience}/${ip.family}`) ?? {};
      t[key] = value;
      tvipsOf.set(`${audience}/${ip.family}`, t);
    };
    for (const port of ports) {
      const { plain, perChassis } = clusterEps(port);
      // Only families some VIP refers to: a variable no load balancer names would never be found stale.
      const topologyVips = [...(m.internalTrafficLocal ? [] : m.clusterIPs), ...external];
      const families = new Set(topologyVips.map((ip) => ip.family));
      if (perChassis)
        for (const family of families) {
          const v = topologyVariable(m, port, family);
          for (const [node, vars] of variables) vars[v] = backends(perChassis.get(node) ?? plain, family);
        }
      if (m.internalTrafficLocal)
        for (const family of new Set(m.clusterIPs.map((ip) => ip.family))) {
          const v = backendsVariable(m, port, family);
          for (const [node, vars] of variables)
            vars[v] = backends(selectEndpoints(slices, port, { node }), family);
        }
      for (const vip of m.clusterIPs) {
        const audience = audienceOf(vip);
        if (m.internalTrafficLocal)
          templateVip(audience, vip, port, `^${backendsVariable(m, port, vip.family)}`);
        else if (perChassis) templateVip(audience, vip, port, `^${topologyVariable(m, port, vip.family)}`);
        else vipsOf[audience][hostPort(vip, port.port)] = backends(plain, vip.family);
      }
      for (const vip of external) {
        if (perChassis) templateVip("external", vip, port, `^${topologyVariable(m, port, vip.family)}`);
        else vipsOf.external[hostPort(vip, port.port)] = backends(plain, vip.family);
      }
    }
    for (const audience of AUDIENCES) {
      const vips = vipsOf[audience];
      if (Object.keys(vips).length === 0) continue;
      // The cluster row keeps the id (and name) the single row of a Service had, so it is not rewritten.
      const id = audience === "cluster" ? `${svc}/${protocol}` : `${svc}/${protocol}/external`;
      const parts = partsOf(
        m,
        id,
        () => `zovn-svc_${m.namespace}_${m.name}_${protocol}${audience === "cluster" ? "" : "_external"}`,
      );
      rows.push({
        table: "Load_Balancer",
        id,
        audience,
        row: { name: parts.name, protocol, vips, options: baseOptions, external_ids: parts.external_ids },
      });
    }
    for (const audience of AUDIENCES)
      for (const family of [4, 6] as const) {
        const tvips = tvipsOf.get(`${audience}/${family}`);
        if (!tvips) continue;
        // The id keeps its first use (internalTrafficPolicy Local) so existing rows are not rewritten.
        const suffix = audience === "cluster" ? `local-v${family}` : `external-v${family}`;
        const id = `${svc}/${protocol}/${suffix}`;
        const parts = partsOf(
          m,
          id,
          () => `zovn-svc_${m.namespace}_${m.name}_${protocol}_${suffix.replace("-", "_")}`,
        );
        rows.push({
          table: "Load_Balancer",
          id,
          audience,
          row: {
            name: parts.name,
            protocol,
            vips: tvips,
            options: { ...baseOptions, template: "true", "address-family": family === 4 ? "ipv4" : "ipv6" },
            external_ids: parts.external_ids,
          },
        });
      }
  }
  return { rows, variables };
}
