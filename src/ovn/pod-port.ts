// A pod's logical switch port and the k8s.ovn.org/pod-networks annotation that tells the node agent how to
// wire the pod. The port is named <namespace>_<pod> (the node agent uses the same name as the OVS iface-id);
// the pod UID in external_ids tells a recreated pod of the same name apart from the old one.

import { type Family, familyBits, familyName, formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { type Cidr, formatCidr, parseCidr } from "../ipam/cidr.ts";
import { parseRequestedMac } from "../ipam/mac.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import type { DesiredRow, ParentRef } from "./nb-diff.ts";
import { addressKey, ownedIds, POD_KEY, POD_UID_KEY, STATEFULSET_KEY, SUBNET_KEY } from "./ownership.ts";

export const POD_NETWORKS_ANNOTATION = "k8s.ovn.org/pod-networks";

export interface PodRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** Name of the owning StatefulSet, if any. */
  readonly statefulSet?: string;
}

export interface PodAddressing {
  readonly subnet: string;
  /** Our switch's name, or the OVN UUID of ZStack's switch (its names may hold what the agent refuses). */
  readonly logicalSwitch: string;
  readonly mac: string;
  /** Addresses with the subnet prefix, e.g. ["10.244.0.5/16", "fd00::5/64"]. */
  readonly ipsWithPrefix: readonly string[];
  readonly gateways: readonly string[];
  /** Node the pod is scheduled to; its chassis is requested for the port. */
  readonly node?: string;
  /**
   * Routes besides the default one: only a pod on ZStack's switch has any (the cluster's networks via our router
   * port on that switch, external-router-port.ts).
   */
  readonly routes?: readonly { readonly dest: string; readonly nextHop: string }[];
}

export function podPortName(namespace: string, name: string): string {
  return `${namespace}_${name}`;
}

export function podPortId(namespace: string, name: string): string {
  return `pod/${namespace}/${name}`;
}

export function podPortRow(pod: PodRef, a: PodAddressing, parent: ParentRef): DesiredRow {
  const ips = a.ipsWithPrefix.map((c) => c.slice(0, c.indexOf("/")));
  const id = podPortId(pod.namespace, pod.name);
  return {
    table: "Logical_Switch_Port",
    id,
    row: {
      name: podPortName(pod.namespace, pod.name),
      addresses: [`${a.mac} ${ips.join(" ")}`],
      // Port security pins the pod to its own MAC and addresses: no spoofing of a neighbour.
      port_security: [`${a.mac} ${ips.join(" ")}`],
      // iface-id-ver: ovn-controller binds the port only to the OVS interface of this pod incarnation (the node
      // agent sets the same UID there), never to a stale interface an earlier pod of this name left behind.
      options: { ...(a.node ? { "requested-chassis": a.node } : {}), "iface-id-ver": pod.uid },
      external_ids: ownedIds("pod-port", id, {
        [POD_KEY]: `${pod.namespace}/${pod.name}`,
        [POD_UID_KEY]: pod.uid,
        [SUBNET_KEY]: a.subnet,
        ...Object.fromEntries(ips.map((ip) => [addressKey(ip), a.subnet])),
        ...(pod.statefulSet ? { [STATEFULSET_KEY]: pod.statefulSet } : {}),
      }),
    },
    parent,
  };
}

export interface PodNetworkAnnotation {
  readonly ip_addresses: readonly string[];
  readonly mac_address: string;
  readonly gateway_ips: readonly string[];
  readonly routes: readonly { dest: string; nextHop: string }[];
  readonly logical_switch: string;
}

/** The annotation value: keyed by "default", the pod's primary network. */
export function podNetworksAnnotation(a: PodAddressing): string {
  const value: Record<string, PodNetworkAnnotation> = {
    default: {
      ip_addresses: a.ipsWithPrefix,
      mac_address: a.mac,
      gateway_ips: a.gateways,
      routes: (a.routes ?? []).map((r) => ({ dest: r.dest, nextHop: r.nextHop })),
      logical_switch: a.logicalSwitch,
    },
  };
  return JSON.stringify(value);
}

/** The annotation's size limit: the controller writes a few hundred bytes; more is not ours. */
export const MAX_POD_NETWORKS_LENGTH = 8192;
const MAX_ROUTES = 16;
/** The longest IPv6 text (with an embedded IPv4 quad) is 45 characters, plus "/128". */
const MAX_ADDRESS_LENGTH = 49;
const LOGICAL_SWITCH_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$/;

/** A MAC in canonical form (lower case, colons), checked to be a unicast port address. */
export type MacAddress = string & { readonly __brand: "MacAddress" };

/** An interface address: the address and the prefix length of its subnet, e.g. 10.244.0.5/16. */
export interface InterfaceAddress {
  readonly ip: IpAddress;
  readonly prefix: number;
}

export interface PodRoute {
  readonly dest: Cidr;
  /** Same family as dest. */
  readonly nextHop: IpAddress;
}

/** The pod's primary network as the node agent uses it: every value parsed and cross-checked. */
export interface PodNetwork {
  /** At most one per family. */
  readonly ips: readonly InterfaceAddress[];
  readonly mac: MacAddress;
  /** At most one per family, each the family of one of `ips`. */
  readonly gateways: readonly IpAddress[];
  readonly routes: readonly PodRoute[];
  readonly logicalSwitch: string;
}

export function formatInterfaceAddress(a: InterfaceAddress): string {
  return `${formatIp(a.ip)}/${a.prefix}`;
}

/** Why `ip` cannot be a pod's own address, gateway or next hop, or undefined when it can. */
function unicastProblem(ip: IpAddress): string | undefined {
  const v = ip.value;
  if (v === 0n) return "is the unspecified address";
  if (ip.family === 4) {
    if (v >> 24n === 127n) return "is a loopback address";
    if (v >> 28n === 0xen) return "is a multicast address";
    if (v === 0xffffffffn) return "is the broadcast address";
    return undefined;
  }
  if (v === 1n) return "is the loopback address";
  if (v >> 120n === 0xffn) return "is a multicast address";
  // An IPv4-mapped address would be configured as IPv6 but mean an IPv4 peer.
  if (v >> 32n === 0xffffn) return "is an IPv4-mapped IPv6 address; give the IPv4 address as such";
  return undefined;
}

function fieldText(v: unknown, field: string, max: number): string {
  if (typeof v !== "string") throw new InvalidInputError(field, `must be a string, not ${kindOf(v)}`);
  if (v.length > max)
    throw new InvalidInputError(field, `is ${v.length} characters long; at most ${max} are allowed here`);
  return v;
}

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

function fieldArray(v: unknown, field: string, max: number): readonly unknown[] {
  if (!Array.isArray(v)) throw new InvalidInputError(field, `must be an array, not ${kindOf(v)}`);
  if (v.length > max)
    throw new InvalidInputError(field, `has ${v.length} entries; at most ${max} are allowed`);
  return v;
}

function unicast(v: unknown, field: string): IpAddress {
  const text = fieldText(v, field, MAX_ADDRESS_LENGTH);
  const ip = parseIp(text, field);
  const why = unicastProblem(ip);
  if (why) throw new InvalidInputError(field, `${JSON.stringify(text)} ${why}`);
  return ip;
}

function interfaceAddress(v: unknown, field: string): InterfaceAddress {
  const text = fieldText(v, field, MAX_ADDRESS_LENGTH);
  const slash = text.indexOf("/");
  if (slash < 0)
    throw new InvalidInputError(
      field,
      `${JSON.stringify(text)} has no prefix length; write it like 10.244.0.5/16`,
    );
  const ip = unicast(text.slice(0, slash), field);
  const bits = familyBits(ip.family);
  const prefixText = text.slice(slash + 1);
  if (!/^[1-9][0-9]{0,2}$/.test(prefixText) || Number(prefixText) > bits)
    throw new InvalidInputError(
      field,
      `${JSON.stringify(text)} has prefix length ${JSON.stringify(prefixText)}; an ${familyName(ip.family)} prefix is 1 to ${bits}`,
    );
  return { ip, prefix: Number(prefixText) };
}

function onePerFamily<T>(items: readonly T[], family: (t: T) => Family, field: string): void {
  const seen = new Set<Family>();
  for (const t of items) {
    const f = family(t);
    if (seen.has(f))
      throw new InvalidInputError(field, `holds two ${familyName(f)} entries; at most one per family`);
    seen.add(f);
  }
}

/**
 * Parses the annotation (written by the controller, but anyone who can patch the pod can write it) into a
 * PodNetwork; undefined when it is absent. Entries other than "default" and unknown keys are ignored.
 * @throws InvalidInputError naming the field (e.g. `default.routes[0].dest`) and what is wrong with it
 */
export function parsePodNetwork(text: string | undefined): PodNetwork | undefined {
  if (text === undefined || text === "") return undefined;
  const field = POD_NETWORKS_ANNOTATION;
  if (typeof text !== "string") throw new InvalidInputError(field, `must be a string, not ${kindOf(text)}`);
  if (text.length > MAX_POD_NETWORKS_LENGTH)
    throw new InvalidInputError(
      field,
      `is ${text.length} characters long; at most ${MAX_POD_NETWORKS_LENGTH} are allowed`,
    );
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new InvalidInputError(field, `is not JSON: ${(e as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InvalidInputError(field, `must be a JSON object keyed by network name, not ${kindOf(value)}`);
  const d = (value as Record<string, unknown>).default;
  if (typeof d !== "object" || d === null || Array.isArray(d))
    throw new InvalidInputError(
      "default",
      `must be an object describing the pod's primary network, not ${kindOf(d)}`,
    );
  const o = d as Record<string, unknown>;

  const ips = fieldArray(o.ip_addresses, "default.ip_addresses", 2).map((v, i) =>
    interfaceAddress(v, `default.ip_addresses[${i}]`),
  );
  if (ips.length === 0)
    throw new InvalidInputError("default.ip_addresses", "is empty; the pod needs an address");
  onePerFamily(ips, (a) => a.ip.family, "default.ip_addresses");
  const families = new Set(ips.map((a) => a.ip.family));
  const inFamily = (ip: IpAddress, f: string) => {
    if (!families.has(ip.family))
      throw new InvalidInputError(
        f,
        `is ${familyName(ip.family)}, but the pod has no ${familyName(ip.family)} address`,
      );
  };

  const mac = parseRequestedMac(fieldText(o.mac_address, "default.mac_address", 17), "default.mac_address");

  const gateways = fieldArray(o.gateway_ips ?? [], "default.gateway_ips", 2).map((v, i) => {
    const f = `default.gateway_ips[${i}]`;
    const gw = unicast(v, f);
    inFamily(gw, f);
    return gw;
  });
  onePerFamily(gateways, (g) => g.family, "default.gateway_ips");

  const routes = fieldArray(o.routes ?? [], "default.routes", MAX_ROUTES).map((v, i): PodRoute => {
    const f = `default.routes[${i}]`;
    if (typeof v !== "object" || v === null || Array.isArray(v))
      throw new InvalidInputError(
        f,
        `must be an object {"dest": CIDR, "nextHop": address}, not ${kindOf(v)}`,
      );
    const r = v as Record<string, unknown>;
    const dest = parseCidr(fieldText(r.dest, `${f}.dest`, MAX_ADDRESS_LENGTH), `${f}.dest`);
    const nextHop = unicast(r.nextHop, `${f}.nextHop`);
    if (nextHop.family !== dest.family)
      throw new InvalidInputError(
        `${f}.nextHop`,
        `is ${familyName(nextHop.family)} but the destination ${formatCidr(dest)} is ${familyName(dest.family)}`,
      );
    inFamily(nextHop, `${f}.nextHop`);
    return { dest, nextHop };
  });
  // The controller writes routes only for a pod on ZStack's switch: the cluster's own networks via our router port
  // there, a neighbour on the pod's own network. Anything else was not written by it: a default route (the gateway's
  // job), a next hop off the pod's networks, or a destination covering the pod's own network (it would replace the
  // on-link route) would steer the pod's traffic, and what the runtime reports, wherever its author chose.
  for (const [i, r] of routes.entries()) {
    const f = `default.routes[${i}]`;
    if (r.dest.prefix === 0)
      throw new InvalidInputError(
        `${f}.dest`,
        `${formatCidr(r.dest)} is a default route; the pod's default route is its gateway (gateway_ips)`,
      );
    const own = ips.filter((a) => a.ip.family === r.dest.family);
    const onLink = own.some((a) => sameNetwork(a, r.nextHop));
    if (!onLink)
      throw new InvalidInputError(
        `${f}.nextHop`,
        `${formatIp(r.nextHop)} is not on the pod's own network (${own.map(formatInterfaceAddress).join(", ")}); zstack-ovnkube-controller writes only on-link next hops`,
      );
    if (own.some((a) => coversNetwork(r.dest, a)))
      throw new InvalidInputError(
        `${f}.dest`,
        `${formatCidr(r.dest)} overlaps the pod's own network; the on-link route must stay`,
      );
  }

  const logicalSwitch = fieldText(o.logical_switch, "default.logical_switch", 253);
  if (!LOGICAL_SWITCH_RE.test(logicalSwitch))
    throw new InvalidInputError(
      "default.logical_switch",
      `${JSON.stringify(logicalSwitch)} must start with a letter or digit and hold only letters, digits, '_', '.', ':' and '-'`,
    );
  return { ips, mac: mac as MacAddress, gateways, routes, logicalSwitch };
}

function maskOf(bits: number, prefix: number): bigint {
  return ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - prefix)) - 1n);
}

/** Whether `ip` is on the network of the interface address `a` (same family assumed). */
function sameNetwork(a: InterfaceAddress, ip: IpAddress): boolean {
  const mask = maskOf(familyBits(a.ip.family), a.prefix);
  return (a.ip.value & mask) === (ip.value & mask);
}

/** Whether the route destination and the interface's network share an address (same family assumed). */
function coversNetwork(dest: Cidr, a: InterfaceAddress): boolean {
  const prefix = Math.min(dest.prefix, a.prefix);
  const mask = maskOf(familyBits(a.ip.family), prefix);
  return (dest.network & mask) === (a.ip.value & mask);
}

/** Whether two parsed networks configure the pod identically (canonical forms compared). */
export function samePodNetwork(a: PodNetwork, b: PodNetwork): boolean {
  return JSON.stringify(wireForm(a)) === JSON.stringify(wireForm(b));
}

function wireForm(n: PodNetwork): PodNetworkAnnotation {
  return {
    ip_addresses: n.ips.map(formatInterfaceAddress),
    mac_address: n.mac,
    gateway_ips: n.gateways.map(formatIp),
    routes: n.routes.map((r) => ({ dest: formatCidr(r.dest), nextHop: formatIp(r.nextHop) })),
    logical_switch: n.logicalSwitch,
  };
}

/** The annotation's "default" entry in its wire form, from the strict parse: undefined when absent. */
export function parsePodNetworksAnnotation(text: string | undefined): PodNetworkAnnotation | undefined {
  const n = parsePodNetwork(text);
  return n ? wireForm(n) : undefined;
}
