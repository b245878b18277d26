// A networking.k8s.io/v1 NetworkPolicy parsed into a typed model: every field checked, policyTypes defaulted as
// the API defines it, peers and ports in canonical forms. Anything the controller cannot realize exactly is
// refused with an error naming the field, so that nothing partial (which could open traffic) is written.

import { type Family, familyBits, familyName, parseIp } from "../ipam/address.ts";
import { type Cidr, cidrContainsCidr, formatCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { canonicalSelector, type LabelSelector, parseLabelSelector } from "./label-selector.ts";

export type Protocol = "tcp" | "udp" | "sctp";
export type Direction = "ingress" | "egress";

/** Which pods a peer covers: by label in the policy's own namespace, or in the namespaces a selector picks. */
export interface PodPeer {
  readonly kind: "pods";
  /** The policy's namespace (a podSelector-only peer), or a namespace selector. */
  readonly namespaces: { readonly name: string } | { readonly selector: LabelSelector };
  readonly pods: LabelSelector;
}

export interface IpBlockPeer {
  readonly kind: "ipBlock";
  readonly cidr: Cidr;
  /** Each inside cidr, same family. */
  readonly except: readonly Cidr[];
}

export type Peer = PodPeer | IpBlockPeer;

export type PortMatch =
  /** Every port of the protocol. */
  | { readonly kind: "any"; readonly protocol: Protocol }
  /** from..to inclusive (from === to for a single port). */
  | { readonly kind: "range"; readonly protocol: Protocol; readonly from: number; readonly to: number }
  /** A container port name, resolved per pod. */
  | { readonly kind: "named"; readonly protocol: Protocol; readonly name: string };

export interface PolicyRule {
  /** "all": `from`/`to` absent or empty. */
  readonly peers: readonly Peer[] | "all";
  /** "all": `ports` absent or empty. */
  readonly ports: readonly PortMatch[] | "all";
}

export interface PolicyModel {
  readonly namespace: string;
  readonly name: string;
  /** `<namespace>/<name>`. */
  readonly key: string;
  readonly podSelector: LabelSelector;
  /** Undefined when the policy does not isolate this direction; an empty list denies everything. */
  readonly ingress?: readonly PolicyRule[];
  readonly egress?: readonly PolicyRule[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function list(v: unknown, field: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new InvalidInputError(field, "must be a list");
  return v;
}

const PROTOCOLS: Record<string, Protocol> = { TCP: "tcp", UDP: "udp", SCTP: "sctp" };
// IANA_SVC_NAME: at most 15 characters, lower-case letters, digits and inner single hyphens, at least one letter.
const PORT_NAME = /^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?!-)){0,14}$/;

function portNumber(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535)
    throw new InvalidInputError(field, `${JSON.stringify(v)} is not a port number (1 to 65535)`);
  return v;
}

/** An ipBlock CIDR as the API reads it: host bits are masked off, not refused. */
export function parseBlockCidr(v: unknown, field: string): Cidr {
  if (typeof v !== "string") throw new InvalidInputError(field, "must be a CIDR string");
  const slash = v.indexOf("/");
  if (slash < 0) throw new InvalidInputError(field, `${JSON.stringify(v)} has no prefix length`);
  const ip = parseIp(v.slice(0, slash), field);
  const bits = familyBits(ip.family);
  const p = v.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > bits)
    throw new InvalidInputError(
      field,
      `${JSON.stringify(v)}: an ${familyName(ip.family)} prefix length is 0 to ${bits}`,
    );
  const prefix = Number(p);
  const host = BigInt(bits - prefix);
  const network = (ip.value >> host) << host;
  return { family: ip.family as Family, network, prefix };
}

function parsePeer(raw: unknown, namespace: string, field: string): Peer {
  if (!isRecord(raw)) throw new InvalidInputError(field, "must be an object");
  const { podSelector, namespaceSelector, ipBlock } = raw;
  if (ipBlock !== undefined && ipBlock !== null) {
    if ((podSelector ?? null) !== null || (namespaceSelector ?? null) !== null)
      throw new InvalidInputError(field, "ipBlock cannot be combined with podSelector or namespaceSelector");
    if (!isRecord(ipBlock)) throw new InvalidInputError(`${field}.ipBlock`, "must be an object");
    const cidr = parseBlockCidr(ipBlock.cidr, `${field}.ipBlock.cidr`);
    const except = list(ipBlock.except, `${field}.ipBlock.except`).map((e, i) => {
      const f = `${field}.ipBlock.except[${i}]`;
      const c = parseBlockCidr(e, f);
      if (c.family !== cidr.family || !cidrContainsCidr(cidr, c) || c.prefix <= cidr.prefix)
        throw new InvalidInputError(f, `${formatCidr(c)} must be strictly inside ${formatCidr(cidr)}`);
      return c;
    });
    const seen = new Set<string>();
    const uniq = except
      .filter((c) => {
        const t = formatCidr(c);
        if (seen.has(t)) return false;
        seen.add(t);
        return true;
      })
      .sort((a, b) => formatCidr(a).localeCompare(formatCidr(b)));
    return { kind: "ipBlock", cidr, except: uniq };
  }
  if ((podSelector ?? null) === null && (namespaceSelector ?? null) === null)
    throw new InvalidInputError(field, "must set podSelector, namespaceSelector or ipBlock");
  const pods = parseLabelSelector(podSelector, `${field}.podSelector`);
  const namespaces =
    (namespaceSelector ?? null) === null
      ? { name: namespace }
      : { selector: parseLabelSelector(namespaceSelector, `${field}.namespaceSelector`) };
  return { kind: "pods", namespaces, pods };
}

function parsePort(raw: unknown, field: string): PortMatch {
  if (!isRecord(raw)) throw new InvalidInputError(field, "must be an object");
  const protoText = raw.protocol ?? "TCP";
  const protocol = typeof protoText === "string" ? PROTOCOLS[protoText] : undefined;
  if (!protocol)
    throw new InvalidInputError(`${field}.protocol`, `${JSON.stringify(protoText)} is not TCP, UDP or SCTP`);
  const port = raw.port;
  const endPort = raw.endPort;
  if (port === undefined || port === null) {
    if (endPort !== undefined && endPort !== null)
      throw new InvalidInputError(`${field}.endPort`, "needs a numeric port");
    return { kind: "any", protocol };
  }
  if (typeof port === "string") {
    if (endPort !== undefined && endPort !== null)
      throw new InvalidInputError(`${field}.endPort`, "cannot be used with a named port");
    if (!PORT_NAME.test(port))
      throw new InvalidInputError(`${field}.port`, `${JSON.stringify(port)} is not a port name`);
    return { kind: "named", protocol, name: port };
  }
  const from = portNumber(port, `${field}.port`);
  if (endPort === undefined || endPort === null) return { kind: "range", protocol, from, to: from };
  const to = portNumber(endPort, `${field}.endPort`);
  if (to < from) throw new InvalidInputError(`${field}.endPort`, `${to} is below port ${from}`);
  return { kind: "range", protocol, from, to };
}

function parseRules(raw: unknown, direction: Direction, namespace: string): PolicyRule[] {
  const peerField = direction === "ingress" ? "from" : "to";
  return list(raw, `spec.${direction}`).map((r, i) => {
    const f = `spec.${direction}[${i}]`;
    if (!isRecord(r)) throw new InvalidInputError(f, "must be an object");
    const peersRaw = list(r[peerField], `${f}.${peerField}`);
    const portsRaw = list(r.ports, `${f}.ports`);
    const peers = peersRaw.map((p, j) => parsePeer(p, namespace, `${f}.${peerField}[${j}]`));
    const ports = portsRaw.map((p, j) => parsePort(p, `${f}.ports[${j}]`));
    return { peers: peers.length === 0 ? "all" : peers, ports: ports.length === 0 ? "all" : ports };
  });
}

/**
 * Parses a NetworkPolicy object as the apiserver returns it.
 * @throws InvalidInputError naming the field that cannot be realized and why
 */
export function parseNetworkPolicy(obj: unknown): PolicyModel {
  if (!isRecord(obj)) throw new InvalidInputError("", "a NetworkPolicy must be an object");
  const meta = isRecord(obj.metadata) ? obj.metadata : {};
  const namespace = meta.namespace;
  const name = meta.name;
  if (typeof namespace !== "string" || namespace === "")
    throw new InvalidInputError("metadata.namespace", "is missing");
  if (typeof name !== "string" || name === "") throw new InvalidInputError("metadata.name", "is missing");
  const spec = isRecord(obj.spec) ? obj.spec : {};
  const podSelector = parseLabelSelector(spec.podSelector, "spec.podSelector");
  const typesRaw = spec.policyTypes;
  let types: Set<string>;
  // An empty list is defaulted like an absent one, as the apiserver does.
  if (typesRaw === undefined || typesRaw === null || (Array.isArray(typesRaw) && typesRaw.length === 0)) {
    types = new Set(["Ingress"]);
    if (list(spec.egress, "spec.egress").length > 0) types.add("Egress");
  } else {
    types = new Set(
      list(typesRaw, "spec.policyTypes").map((t, i) => {
        if (t !== "Ingress" && t !== "Egress")
          throw new InvalidInputError(
            `spec.policyTypes[${i}]`,
            `${JSON.stringify(t)} is not Ingress or Egress`,
          );
        return t;
      }),
    );
  }
  const ingress = parseRules(spec.ingress, "ingress", namespace);
  const egress = parseRules(spec.egress, "egress", namespace);
  return {
    namespace,
    name,
    key: `${namespace}/${name}`,
    podSelector,
    ...(types.has("Ingress") ? { ingress } : {}),
    ...(types.has("Egress") ? { egress } : {}),
  };
}

/** The canonical text of a pod peer: policies naming the same pods share its address sets. */
export function peerKey(p: PodPeer): string {
  const ns =
    "name" in p.namespaces ? `ns=${p.namespaces.name}` : `nssel=${canonicalSelector(p.namespaces.selector)}`;
  return `${ns};pods=${canonicalSelector(p.pods)}`;
}

/** Every pod peer the policy refers to, by canonical key. */
export function podPeersOf(m: PolicyModel): Map<string, PodPeer> {
  const out = new Map<string, PodPeer>();
  for (const rules of [m.ingress ?? [], m.egress ?? []])
    for (const r of rules)
      if (r.peers !== "all") for (const p of r.peers) if (p.kind === "pods") out.set(peerKey(p), p);
  return out;
}
