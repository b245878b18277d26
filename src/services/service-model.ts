// A Service as the datapath needs it: typed VIPs and ports, parsed once from the API object. Shared by the
// controller (OVN load balancers) and the node agent (nftables). A problem never throws: what can be realized
// is kept, and each problem names the field and the fix so it can become a Warning Event unchanged.

import type { V1Service } from "@kubernetes/client-node";
import { familyBits, formatIp, type IpAddress, ipEquals, parseIp, tryParseIp } from "../ipam/address.ts";
import { type Cidr, cidrContains, cidrContainsCidr, formatCidr, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import type { ReservedAddresses } from "./reserved-addresses.ts";

export type L4Protocol = "tcp" | "udp" | "sctp";

export interface ServicePortModel {
  name: string;
  protocol: L4Protocol;
  port: number;
  nodePort?: number;
}

export interface ServiceModel {
  namespace: string;
  name: string;
  type: "ClusterIP" | "NodePort" | "LoadBalancer";
  /** Never empty: a headless Service has no model. */
  clusterIPs: IpAddress[];
  externalIPs: IpAddress[];
  /**
   * status.loadBalancer.ingress[].ip, for type LoadBalancer only, and only those with ipMode VIP (or none): an
   * ipMode Proxy address belongs to a load balancer that proxies to the nodes, so it is never captured here.
   */
  loadBalancerIPs: IpAddress[];
  /**
   * spec.loadBalancerSourceRanges that parsed (host bits cleared, as kube-proxy reads them), without ranges
   * inside another. A family with at least one range filters that family's loadBalancerIPs to those sources.
   */
  loadBalancerSourceRanges: Cidr[];
  ports: ServicePortModel[];
  /** Present iff sessionAffinity is ClientIP (default 10800; at most 65535, OVN's limit). */
  affinityTimeoutSeconds?: number;
  externalTrafficLocal: boolean;
  internalTrafficLocal: boolean;
  healthCheckNodePort?: number;
}

export interface ServiceProblem {
  /** e.g. `spec.externalIPs[0]`. */
  field: string;
  /** What is wrong and how to fix it. */
  message: string;
}

/** Address ranges no externalIP or load-balancer IP may claim: a VIP there would capture in-cluster traffic. */
export interface ClusterRanges {
  readonly clusterCIDRs: readonly Cidr[];
  readonly serviceCIDRs: readonly Cidr[];
  readonly joinCIDRs: readonly Cidr[];
  /**
   * Addresses of the nodes and the API server (see reserved-addresses.ts). Refused as externalIPs; as
   * load-balancer IPs only the API server's (a load balancer implementation may announce node addresses).
   */
  readonly reserved?: ReservedAddresses;
}

export const NO_RANGES: ClusterRanges = { clusterCIDRs: [], serviceCIDRs: [], joinCIDRs: [] };

/** Parses CIDR texts from configuration into ClusterRanges; throws InvalidInputError on a bad CIDR. */
export function clusterRanges(texts: {
  clusterCIDRs: readonly string[];
  serviceCIDRs: readonly string[];
  joinCIDRs: readonly string[];
}): ClusterRanges {
  const all = (list: readonly string[], field: string) => list.map((t, i) => parseCidr(t, `${field}[${i}]`));
  return {
    clusterCIDRs: all(texts.clusterCIDRs, "clusterCIDRs"),
    serviceCIDRs: all(texts.serviceCIDRs, "serviceCIDRs"),
    joinCIDRs: all(texts.joinCIDRs, "joinCIDRs"),
  };
}

const ADMISSION_HINT = "enable the DenyServiceExternalIPs admission plugin if no one should set externalIPs";

export const DEFAULT_AFFINITY_TIMEOUT = 10800;
/** OVN's Load_Balancer options:affinity_timeout is at most 65535 seconds. */
export const MAX_AFFINITY_TIMEOUT = 65535;

const DENY_HINT =
  "use an address outside the cluster's own ranges (enable the DenyServiceExternalIPs admission plugin if no one should set externalIPs)";

/**
 * The Service's model, or none for a headless or ExternalName Service (or one whose type or cluster IPs
 * cannot be realized at all), plus every problem found. `ranges` are refused as externalIPs and LB IPs.
 */
/** Labels whose presence makes every service proxy but a named one ignore the Service (kube-proxy's selector). */
export const PROXY_SKIP_LABELS = [
  "service.kubernetes.io/service-proxy-name",
  "service.kubernetes.io/headless",
];

export function parseService(
  svc: V1Service,
  ranges: ClusterRanges = NO_RANGES,
): { model?: ServiceModel; problems: ServiceProblem[] } {
  const problems: ServiceProblem[] = [];
  const problem = (field: string, message: string) => problems.push({ field, message });
  const spec = svc.spec ?? {};
  const namespace = svc.metadata?.namespace ?? "";
  const name = svc.metadata?.name ?? "";

  // Left to another service proxy, as kube-proxy leaves them: a Service labelled with a non-default proxy's
  // name, or marked headless by label (the label's presence counts, whatever its value).
  const labels = svc.metadata?.labels ?? {};
  if (PROXY_SKIP_LABELS.some((l) => Object.hasOwn(labels, l))) return { problems };
  const rawType = spec.type ?? "ClusterIP";
  if (rawType === "ExternalName") return { problems };
  if (rawType !== "ClusterIP" && rawType !== "NodePort" && rawType !== "LoadBalancer") {
    problem(
      "spec.type",
      `${JSON.stringify(rawType)} is not ClusterIP, NodePort, LoadBalancer or ExternalName`,
    );
    return { problems };
  }
  const type = rawType;

  const clusterIPTexts = spec.clusterIPs?.length ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : [];
  const clusterField = spec.clusterIPs?.length ? "spec.clusterIPs" : "spec.clusterIP";
  if (clusterIPTexts.includes("None")) return { problems };
  const clusterIPs: IpAddress[] = [];
  clusterIPTexts.forEach((text, i) => {
    const field = spec.clusterIPs?.length ? `${clusterField}[${i}]` : clusterField;
    const ip = parseAddress(text, field, problem);
    if (!ip) return;
    // The apiserver allocates cluster IPs only from ServiceCIDRs, but a ServiceCIDR may overlap what the
    // cluster uses itself: a cluster IP there would capture pods' (or the nodes') traffic to that address.
    const conflict = reservedConflict(ip, ranges, true) ?? clusterRangeConflict(ip, ranges, false);
    if (conflict) {
      problem(
        field,
        `${formatIp(ip)} is ${conflict}; this Service is not served (remove the ServiceCIDR that overlaps it)`,
      );
      return;
    }
    if (clusterIPs.some((c) => c.family === ip.family)) {
      problem(
        field,
        `a second ${ip.family === 4 ? "IPv4" : "IPv6"} cluster IP is ignored; give one per family`,
      );
      return;
    }
    clusterIPs.push(ip);
  });
  if (clusterIPs.length === 0) {
    if (clusterIPTexts.length === 0)
      problem("spec.clusterIP", "is empty; the apiserver allocates it, so the Service is not ready yet");
    return { problems };
  }

  const ports: ServicePortModel[] = [];
  const seen = new Set<string>();
  const wantsNodePorts =
    type === "NodePort" || (type === "LoadBalancer" && spec.allocateLoadBalancerNodePorts !== false);
  (spec.ports ?? []).forEach((p, i) => {
    const field = `spec.ports[${i}]`;
    const protocol = parseProtocol(p.protocol, `${field}.protocol`, problem);
    const port = parsePort(p.port, `${field}.port`, problem);
    if (protocol === undefined || port === undefined) return;
    const key = `${protocol}/${port}`;
    if (seen.has(key)) {
      problem(`${field}.port`, `${key} is listed twice; remove the duplicate`);
      return;
    }
    seen.add(key);
    const model: ServicePortModel = { name: p.name ?? "", protocol, port };
    if (type !== "ClusterIP") {
      if (p.nodePort !== undefined && p.nodePort !== null) {
        const nodePort = parsePort(p.nodePort, `${field}.nodePort`, problem);
        if (nodePort !== undefined) model.nodePort = nodePort;
      } else if (wantsNodePorts) {
        problem(
          `${field}.nodePort`,
          "is missing; the apiserver allocates it for a NodePort or LoadBalancer Service",
        );
      }
    }
    ports.push(model);
  });

  const externalIPs = parseVips(spec.externalIPs ?? [], "spec.externalIPs", ranges, problem, "", true);
  const loadBalancerIPs =
    type === "LoadBalancer"
      ? parseVips(
          (svc.status?.loadBalancer?.ingress ?? []).map((g, i) => {
            const mode = (g as { ipMode?: unknown }).ipMode;
            if (mode === undefined || mode === null || mode === "VIP") return g.ip;
            // kube-proxy serves only VIP-mode ingress; traffic to a Proxy one goes to the real load balancer.
            if (mode !== "Proxy")
              problem(
                `status.loadBalancer.ingress[${i}].ipMode`,
                `${JSON.stringify(mode)} is not VIP or Proxy; this address is not captured`,
              );
            return undefined;
          }),
          "status.loadBalancer.ingress",
          ranges,
          problem,
          ".ip",
        )
      : [];
  const loadBalancerSourceRanges =
    type === "LoadBalancer" ? parseSourceRanges(spec.loadBalancerSourceRanges, problem) : [];

  const model: ServiceModel = {
    namespace,
    name,
    type,
    clusterIPs,
    externalIPs,
    loadBalancerIPs,
    loadBalancerSourceRanges,
    ports,
    externalTrafficLocal: parsePolicy(spec.externalTrafficPolicy, "spec.externalTrafficPolicy", problem),
    internalTrafficLocal: parsePolicy(spec.internalTrafficPolicy, "spec.internalTrafficPolicy", problem),
  };

  const affinity = spec.sessionAffinity ?? "None";
  if (affinity === "ClientIP") {
    const field = "spec.sessionAffinityConfig.clientIP.timeoutSeconds";
    const raw = spec.sessionAffinityConfig?.clientIP?.timeoutSeconds;
    let timeout = DEFAULT_AFFINITY_TIMEOUT;
    if (raw !== undefined && raw !== null) {
      if (!Number.isInteger(raw) || raw < 1) {
        problem(
          field,
          `${JSON.stringify(raw)} is not a whole number of seconds from 1 to 86400; using ${timeout}`,
        );
      } else if (raw > MAX_AFFINITY_TIMEOUT) {
        timeout = MAX_AFFINITY_TIMEOUT;
        problem(
          field,
          `${raw} is above OVN's limit of ${MAX_AFFINITY_TIMEOUT} seconds; clamped to it (set ${MAX_AFFINITY_TIMEOUT} or less)`,
        );
      } else {
        timeout = raw;
      }
    }
    model.affinityTimeoutSeconds = timeout;
  } else if (affinity !== "None") {
    problem(
      "spec.sessionAffinity",
      `${JSON.stringify(affinity)} is not None or ClientIP; no affinity is applied`,
    );
  }

  if (type === "LoadBalancer" && model.externalTrafficLocal && spec.healthCheckNodePort != null) {
    const hc = parsePort(spec.healthCheckNodePort, "spec.healthCheckNodePort", problem);
    if (hc !== undefined) model.healthCheckNodePort = hc;
  }
  return { model, problems };
}

type Report = (field: string, message: string) => void;

/** Whether `m`'s loadBalancerIPs of `family` are reachable only from its loadBalancerSourceRanges. */
export function sourceFiltered(m: ServiceModel, family: 4 | 6): boolean {
  return m.loadBalancerSourceRanges.some((c) => c.family === family);
}

/**
 * spec.loadBalancerSourceRanges as typed CIDRs. As kube-proxy: surrounding spaces and host bits are tolerated
 * (`1.2.3.4/24` is 1.2.3.0/24), a bad entry is left out (with a problem), and a range inside another is
 * dropped so the ruleset holds no overlapping intervals.
 */
function parseSourceRanges(raw: unknown, problem: Report): Cidr[] {
  if (raw === undefined || raw === null) return [];
  const field = "spec.loadBalancerSourceRanges";
  if (!Array.isArray(raw)) {
    problem(field, `${JSON.stringify(raw)} is not a list of CIDRs; no source filter is applied`);
    return [];
  }
  const out: Cidr[] = [];
  raw.forEach((text, i) => {
    const f = `${field}[${i}]`;
    const bad = (why: string): void => {
      problem(f, `${JSON.stringify(text)} ${why}; this entry is ignored (write it like 203.0.113.0/24)`);
    };
    if (typeof text !== "string") {
      bad("is not a CIDR");
      return;
    }
    const t = text.trim();
    const slash = t.indexOf("/");
    const ip = slash > 0 ? tryParseIp(t.slice(0, slash)) : undefined;
    const prefixText = slash > 0 ? t.slice(slash + 1) : "";
    if (!ip || !/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) {
      bad("is not a CIDR");
      return;
    }
    const bits = ip.family === 4 ? 32 : 128;
    const prefix = Number(prefixText);
    if (prefix > bits) {
      bad(`has a prefix length above ${bits}`);
      return;
    }
    const host = BigInt(bits - prefix);
    const cidr: Cidr = { family: ip.family, network: (ip.value >> host) << host, prefix };
    out.push(cidr);
  });
  return out.filter(
    (c, i) =>
      !out.some(
        (o, j) => j !== i && cidrContainsCidr(o, c) && (o.prefix < c.prefix || j < i), // of two equal ranges the first stays
      ),
  );
}

function parseAddress(text: unknown, field: string, problem: Report): IpAddress | undefined {
  if (typeof text !== "string") {
    problem(field, `${JSON.stringify(text)} is not an IP address`);
    return undefined;
  }
  try {
    return parseIp(text, field);
  } catch (e) {
    if (!(e instanceof InvalidInputError)) throw e;
    problem(field, e.problem.message);
    return undefined;
  }
}

function parseProtocol(raw: unknown, field: string, problem: Report): L4Protocol | undefined {
  const p = raw ?? "TCP";
  if (p === "TCP") return "tcp";
  if (p === "UDP") return "udp";
  if (p === "SCTP") return "sctp";
  problem(field, `${JSON.stringify(p)} is not TCP, UDP or SCTP; this port is not served`);
  return undefined;
}

function parsePort(raw: unknown, field: string, problem: Report): number | undefined {
  if (typeof raw === "number" && Number.isInteger(raw) && raw >= 1 && raw <= 65535) return raw;
  problem(field, `${JSON.stringify(raw)} is not a port number from 1 to 65535; this port is not served`);
  return undefined;
}

function parsePolicy(raw: unknown, field: string, problem: Report): boolean {
  if (raw === undefined || raw === null || raw === "Cluster") return false;
  if (raw === "Local") return true;
  problem(field, `${JSON.stringify(raw)} is not Cluster or Local; Cluster is used`);
  return false;
}

/** External VIPs: refused inside the cluster's own ranges and in special ranges (loopback, multicast...). */
function parseVips(
  texts: readonly unknown[],
  field: string,
  ranges: ClusterRanges,
  problem: Report,
  suffix = "",
  refuseNodeAddresses = false,
): IpAddress[] {
  const out: IpAddress[] = [];
  texts.forEach((text, i) => {
    // A hostname-only ingress entry has no IP to serve.
    if (text === undefined || text === null) return;
    const f = `${field}[${i}]${suffix}`;
    const ip = parseAddress(text, f, problem);
    if (!ip) return;
    const reserved = reservedConflict(ip, ranges, refuseNodeAddresses);
    if (reserved) {
      const hint = reserved.startsWith("a node")
        ? "use a NodePort to serve on node addresses"
        : "use another address";
      problem(
        f,
        `${formatIp(ip)} is ${reserved}, so a Service there would take its traffic; ${hint} (${ADMISSION_HINT})`,
      );
      return;
    }
    const inside = clusterRangeConflict(ip, ranges, true);
    if (inside) {
      problem(
        f,
        inside.startsWith("in the")
          ? `${formatIp(ip)} is ${inside}; it cannot be a Service address`
          : `${formatIp(ip)} is ${inside}, so it would capture in-cluster traffic; ${DENY_HINT}`,
      );
      return;
    }
    if (out.some((o) => o.family === ip.family && o.value === ip.value)) return;
    out.push(ip);
  });
  return out;
}

/** The node or API server address `ip` is, if it is one (node addresses only with `nodes`). */
function reservedConflict(ip: IpAddress, ranges: ClusterRanges, nodes: boolean): string | undefined {
  if (ranges.reserved?.apiServerAddresses.some((a) => ipEquals(a, ip))) return "the API server's address";
  if (nodes && ranges.reserved?.nodeAddresses.some((a) => ipEquals(a, ip)))
    return "a node's address (its own ports: SSH, the kubelet...)";
  return undefined;
}

/** The special range or cluster range `ip` is in (service CIDRs only with `serviceCidrs`). */
function clusterRangeConflict(
  ip: IpAddress,
  ranges: ClusterRanges,
  serviceCidrs: boolean,
): string | undefined {
  const special = specialRangeOverlapping({
    family: ip.family,
    network: ip.value,
    prefix: familyBits(ip.family),
  });
  if (special) return `in the ${special.name}`;
  const groups: [readonly Cidr[], string][] = [
    [ranges.clusterCIDRs, "cluster CIDR"],
    ...(serviceCidrs ? [[ranges.serviceCIDRs, "service CIDR"] as [readonly Cidr[], string]] : []),
    [ranges.joinCIDRs, "join CIDR"],
  ];
  for (const [list, what] of groups) {
    const hit = list.find((c) => cidrContains(c, ip));
    if (hit) return `inside the ${what} ${formatCidr(hit)}`;
  }
  return undefined;
}
