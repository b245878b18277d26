// Which hostPorts this node serves, from its pods (pure). Every value of the pod is hostile: ports are integers in
// range, protocols one of a fixed set, hostIPs parsed and refused in special ranges (except 127.0.0.1, served to
// the node itself as portmap does), and the pod's address comes from the controller's parsed annotation. Two
// pods claiming one hostIP/hostPort/protocol (the scheduler prevents it; nothing here trusts that): the older
// pod keeps it and the newer is reported as a conflict, naming its field and the holder. A wildcard hostIP
// (empty, 0.0.0.0 or ::) claims the port on every address of its family, so it conflicts with any other
// claim of that port and protocol, as the scheduler's NodePorts filter sees it.

import { familyBits, formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import { type HostPortMapping, isLoopbackHostIp } from "../node/host-port-nat.ts";
import type { NatProtocol } from "../node/service-nat.ts";
import { type NodePod, podNetworkOf } from "./pod-networks.ts";

/** What the plan reads of a pod: the node pods informer's slim copy. */
export type HostPortPod = NodePod;

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

/** A port of a pod not served: its value was refused, or another pod holds it. */
export interface HostPortProblem {
  pod: PodRef;
  /** The field, e.g. `spec.containers[0].ports[1].hostPort`. */
  field: string;
  reason: "HostPortInvalid" | "HostPortConflict";
  message: string;
}

export interface HostPortPlan {
  mappings: HostPortMapping[];
  problems: HostPortProblem[];
}

const PROTOCOLS: Record<string, NatProtocol> = { TCP: "tcp", UDP: "udp", SCTP: "sctp" };

/** Mappings one pod may have served, and the node in all; the ports beyond are refused, naming the cap. */
export const MAX_HOST_PORTS_PER_POD = 128;
export const MAX_HOST_PORTS_PER_NODE = 4096;

/**
 * Ports of the node's own that no pod may take, whatever its hostIP: ssh, the OVN databases, the kubelet and its
 * health port, this plugin's controller and node agent, and the VXLAN and Geneve tunnels (a pod holding one would
 * take the node's overlay or its management). A pod that really needs one runs with hostNetwork.
 */
export const NODE_RESERVED_PORTS: Readonly<Record<NatProtocol, ReadonlySet<number>>> = {
  tcp: new Set([22, 6641, 6642, 6643, 6644, 10248, 10250, 10660, 10665]),
  udp: new Set([4789, 6081]),
  sctp: new Set(),
};

function portOf(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535)
    throw new InvalidInputError(
      field,
      `${JSON.stringify(v) ?? typeof v} is not a port number from 1 to 65535`,
    );
  return v;
}

/** The hostIP as an address, or the family it is a wildcard of ("all" when empty or absent). */
function hostIpOf(v: unknown, field: string): IpAddress | 4 | 6 | "all" {
  if (v === undefined || v === null || v === "") return "all";
  if (typeof v !== "string") throw new InvalidInputError(field, `must be a string, not ${typeof v}`);
  const ip = parseIp(v, field);
  if (ip.value === 0n) return ip.family;
  if (isLoopbackHostIp(ip)) return ip;
  const special = specialRangeOverlapping({
    family: ip.family,
    network: ip.value,
    prefix: familyBits(ip.family),
  });
  if (special)
    throw new InvalidInputError(field, `${v} is in the ${special.name}; only 127.0.0.1 is served there`);
  return ip;
}

const ageKey = (p: HostPortPod) => p.metadata.creationTimestamp ?? "";

/** Older pods first (they keep a contested port), then by namespace/name and uid, so the order is total. */
export function byAge(a: HostPortPod, b: HostPortPod): number {
  const ta = Date.parse(ageKey(a));
  const tb = Date.parse(ageKey(b));
  const na = Number.isNaN(ta) ? Number.POSITIVE_INFINITY : ta;
  const nb = Number.isNaN(tb) ? Number.POSITIVE_INFINITY : tb;
  if (na !== nb) return na < nb ? -1 : 1;
  const ka = `${a.metadata.namespace}/${a.metadata.name}/${a.metadata.uid}`;
  const kb = `${b.metadata.namespace}/${b.metadata.name}/${b.metadata.uid}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

interface Claim {
  family: 4 | 6;
  protocol: NatProtocol;
  hostPort: number;
  /** undefined: every address of the family. */
  hostIP: IpAddress | undefined;
  holder: PodRef;
  field: string;
}

function clashes(a: Claim, b: Claim): boolean {
  return (
    a.family === b.family &&
    a.protocol === b.protocol &&
    a.hostPort === b.hostPort &&
    (a.hostIP === undefined || b.hostIP === undefined || a.hostIP.value === b.hostIP.value)
  );
}

const describeClaim = (c: Claim) =>
  `${c.hostIP ? formatIp(c.hostIP) : "every address"} port ${c.hostPort}/${c.protocol.toUpperCase()}`;

/** The mappings this node serves and the problems to report, from its pods in any order. */
export function planHostPorts(pods: readonly HostPortPod[]): HostPortPlan {
  const mappings: HostPortMapping[] = [];
  const problems: HostPortProblem[] = [];
  // Claims by family, protocol and port: a clash is only ever with a claim of the same key.
  const claims = new Map<string, Claim[]>();
  const claimKey = (c: Claim) => `${c.family}/${c.protocol}/${c.hostPort}`;
  for (const pod of [...pods].sort(byAge)) {
    if (pod.spec?.hostNetwork === true) continue;
    const phase = pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") continue;
    const ref: PodRef = { namespace: pod.metadata.namespace, name: pod.metadata.name, uid: pod.metadata.uid };
    const containers = Array.isArray(pod.spec?.containers) ? pod.spec.containers : [];
    const wanted = containers.some(
      (c) => Array.isArray(c?.ports) && c.ports.some((p) => p?.hostPort != null),
    );
    if (!wanted) continue;
    // Without its network (not yet annotated, or a refused annotation) the pod is served nothing yet.
    const net = podNetworkOf(pod);
    if (!net?.network) continue;
    // The pod's own address only: never one in a special range (a forged annotation naming the metadata service,
    // say, before the controller puts it right).
    const podIps = net.network.ips
      .map((a) => a.ip)
      .filter(
        (ip) =>
          !specialRangeOverlapping({ family: ip.family, network: ip.value, prefix: familyBits(ip.family) }),
      );
    let served = 0;
    for (const [i, c] of containers.entries()) {
      const ports = Array.isArray(c?.ports) ? c.ports : [];
      for (const [j, p] of ports.entries()) {
        if (p?.hostPort === undefined || p.hostPort === null || p.hostPort === 0) continue;
        const base = `spec.containers[${i}].ports[${j}]`;
        let hostPort: number;
        let containerPort: number;
        let protocol: NatProtocol;
        let hostIP: ReturnType<typeof hostIpOf>;
        try {
          hostPort = portOf(p.hostPort, `${base}.hostPort`);
          containerPort = portOf(p.containerPort, `${base}.containerPort`);
          const proto = p.protocol === undefined || p.protocol === "" ? "TCP" : p.protocol;
          if (typeof proto !== "string" || !Object.hasOwn(PROTOCOLS, proto))
            throw new InvalidInputError(
              `${base}.protocol`,
              `${JSON.stringify(proto)} is not TCP, UDP or SCTP`,
            );
          protocol = PROTOCOLS[proto]!;
          if (NODE_RESERVED_PORTS[protocol].has(hostPort))
            throw new InvalidInputError(
              `${base}.hostPort`,
              `${hostPort}/${proto} is one of the node's own ports (${[...NODE_RESERVED_PORTS[protocol]].join(", ")}); use another hostPort, or hostNetwork`,
            );
          hostIP = hostIpOf(p.hostIP, `${base}.hostIP`);
          if (served >= MAX_HOST_PORTS_PER_POD)
            throw new InvalidInputError(
              `${base}.hostPort`,
              `the pod asks for more than ${MAX_HOST_PORTS_PER_POD} hostPorts; the rest are not served`,
            );
          if (mappings.length >= MAX_HOST_PORTS_PER_NODE)
            throw new InvalidInputError(
              `${base}.hostPort`,
              `this node serves ${MAX_HOST_PORTS_PER_NODE} hostPorts already; not served`,
            );
        } catch (e) {
          if (!(e instanceof InvalidInputError)) throw e;
          problems.push({ pod: ref, field: e.problem.field, reason: "HostPortInvalid", message: e.message });
          continue;
        }
        const targets = podIps.filter((ip) =>
          hostIP === "all"
            ? true
            : typeof hostIP === "number"
              ? ip.family === hostIP
              : ip.family === hostIP.family,
        );
        if (targets.length === 0) {
          problems.push({
            pod: ref,
            field: `${base}.hostIP`,
            reason: "HostPortInvalid",
            message: `${base}.hostIP: the pod has no address of the hostIP's family`,
          });
          continue;
        }
        const field = `${base}.hostPort`;
        const mine: Claim[] = targets.map((ip) => ({
          family: ip.family,
          protocol,
          hostPort,
          hostIP: typeof hostIP === "object" ? hostIP : undefined,
          holder: ref,
          field,
        }));
        const clash = mine
          .map((m) => [m, claims.get(claimKey(m))?.find((c) => clashes(c, m))] as const)
          .find(([, c]) => c);
        if (clash) {
          const [m, held] = clash as readonly [Claim, Claim];
          const same = held.holder.uid === ref.uid;
          problems.push({
            pod: ref,
            field,
            reason: "HostPortConflict",
            message:
              `${field}: ${describeClaim(m)} is already held by ` +
              (same
                ? `this pod's ${held.field}`
                : `pod ${held.holder.namespace}/${held.holder.name} (${held.field})`) +
              "; not served",
          });
          continue;
        }
        served++;
        for (const m of mine) {
          const list = claims.get(claimKey(m));
          if (list) list.push(m);
          else claims.set(claimKey(m), [m]);
        }
        for (const [k, ip] of targets.entries())
          mappings.push({
            key: `${ref.uid}\0${i}\0${j}\0${ip.family}`,
            protocol,
            ...(mine[k]!.hostIP ? { hostIP: mine[k]!.hostIP } : {}),
            hostPort,
            podIP: ip,
            containerPort,
          });
      }
    }
  }
  return { mappings, problems };
}
