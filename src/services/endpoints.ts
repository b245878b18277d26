// Which endpoints a Service port sends to, chosen as kube-proxy chooses them, from the Service's EndpointSlices.

import type { V1EndpointSlice } from "@kubernetes/client-node";
import { compareIp, type Family, familyBits, formatIp, type IpAddress, tryParseIp } from "../ipam/address.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import type { L4Protocol, ServicePortModel } from "./service-model.ts";

export interface Endpoint {
  ip: IpAddress;
  port: number;
  nodeName?: string;
}

/** What selection reads of an endpoint, taken from its slice once per slice object. */
interface UsableEndpoint {
  readonly ip: IpAddress;
  /** The address in canonical form. */
  readonly text: string;
  readonly nodeName: string | undefined;
  readonly ready: boolean;
  readonly servingTerminating: boolean;
  /** EndpointSlice hints.forZones / hints.forNodes names (empty: no hint). */
  readonly zones: ReadonlySet<string>;
  readonly nodes: ReadonlySet<string>;
}

interface Candidate {
  readonly u: UsableEndpoint;
  readonly port: number;
}

/** Where the client is, for topology hints: its node and that node's `topology.kubernetes.io/zone` label. */
export interface ClientTopology {
  node: string;
  zone?: string | undefined;
}

/** The Node label kube-proxy reads the node's zone from. */
export const ZONE_LABEL = "topology.kubernetes.io/zone";

/**
 * kube-proxy's topology mode for a client on `where`: hints are used only when every ready endpoint has them;
 * node hints (PreferSameNode) first, when one names this node; then zone hints, when one names this zone;
 * otherwise none (every endpoint).
 */
function topologyMode(ready: readonly UsableEndpoint[], where: ClientTopology): "node" | "zone" | undefined {
  if (ready.length === 0) return undefined;
  if (ready.every((c) => c.nodes.size > 0) && ready.some((c) => c.nodes.has(where.node))) return "node";
  const zone = where.zone;
  if (zone && ready.every((c) => c.zones.size > 0) && ready.some((c) => c.zones.has(zone))) return "zone";
  return undefined;
}

const NO_NAMES: ReadonlySet<string> = new Set();

/** The hint names of a list (shared and empty when there is none: most endpoints carry no hints). */
function namesOf(list: unknown): ReadonlySet<string> {
  if (!Array.isArray(list) || list.length === 0) return NO_NAMES;
  const out = new Set<string>();
  for (const h of list) {
    const name = (h as { name?: unknown } | null)?.name;
    if (typeof name === "string" && name !== "") out.add(name);
  }
  return out.size === 0 ? NO_NAMES : out;
}

/** Whether any endpoint of the slices carries a topology hint (so the choice may differ per node). */
export function hasTopologyHints(slices: readonly V1EndpointSlice[]): boolean {
  return slices.some((s) =>
    (s.endpoints ?? []).some((e) => namesOf(e.hints?.forZones).size + namesOf(e.hints?.forNodes).size > 0),
  );
}

/**
 * A slice's endpoints whose first address parses into the slice's family and lies in no special range, parsed
 * once per slice object with what selection reads of each: the informer replaces the object on every change, and
 * one reconcile asks for the same slice once per port and node.
 */
const usable = new WeakMap<V1EndpointSlice, readonly UsableEndpoint[]>();

/** An address text parsed, with its canonical form; null when it is no address or lies in a special range. */
type ParsedAddress = { readonly ip: IpAddress; readonly text: string } | null;

/**
 * Address texts parsed across slice objects: an endpoint change replaces one address of a slice and keeps the
 * others, which would otherwise be parsed (and range-checked) again with each new object. Two generations: a
 * text used since the older one was started survives the next turn, so the cache holds the addresses in use
 * and stays bounded.
 */
const ADDRESS_GENERATION = 16_384;
let addressesNew = new Map<string, ParsedAddress>();
let addressesOld = new Map<string, ParsedAddress>();

function parsedAddress(text: string): ParsedAddress {
  let p = addressesNew.get(text);
  if (p !== undefined) return p;
  p = addressesOld.get(text);
  if (p === undefined) {
    const ip = tryParseIp(text);
    // The apiserver refuses these in a slice, but a slice's author is still not trusted: loopback (the node's
    // own local-only services for node-originated traffic), link-local (cloud metadata), multicast, 0.0.0.0.
    p =
      ip && !specialRangeOverlapping({ family: ip.family, network: ip.value, prefix: familyBits(ip.family) })
        ? { ip, text: formatIp(ip) }
        : null;
  }
  if (addressesNew.size >= ADDRESS_GENERATION) {
    addressesOld = addressesNew;
    addressesNew = new Map();
  }
  addressesNew.set(text, p);
  return p;
}

function usableEndpoints(slice: V1EndpointSlice, family: Family): readonly UsableEndpoint[] {
  const known = usable.get(slice);
  if (known) return known;
  const out: UsableEndpoint[] = [];
  for (const ep of slice.endpoints ?? []) {
    // kube-proxy uses the first address only; the API says they are fungible.
    const text = ep.addresses?.[0];
    const p = typeof text === "string" ? parsedAddress(text) : null;
    if (!p || p.ip.family !== family) continue;
    const c = ep.conditions;
    const hints = ep.hints;
    out.push({
      ip: p.ip,
      text: p.text,
      nodeName: typeof ep.nodeName === "string" ? ep.nodeName : undefined,
      ready: c?.ready !== false,
      servingTerminating: c?.serving !== false && c?.terminating === true,
      zones: hints ? namesOf(hints.forZones) : NO_NAMES,
      nodes: hints ? namesOf(hints.forNodes) : NO_NAMES,
    });
  }
  usable.set(slice, out);
  return out;
}

/** An EndpointSlice with this label (any value) serves no proxy: kube-proxy watches slices without it. */
export const HEADLESS_LABEL = "service.kubernetes.io/headless";

/**
 * kube-proxy's choice: the ready endpoints; if there are none, the serving and terminating ones. With `node`,
 * the same rule applied to that node's endpoints only (the Local traffic policies, which ignore hints). With
 * `topology`, the choice for a client there as kube-proxy makes it for the Cluster policies: only the endpoints
 * hinted for its node or zone when the hints allow it (see topologyMode), else every one. Each endpoint's
 * port comes from its slice's port with the same name and protocol as `port` (a named targetPort may map to different numbers per slice).
 * Endpoints with an address or port that cannot be read, or an address in a special range, are left out.
 * Sorted, without duplicates.
 */
export function selectEndpoints(
  slices: readonly V1EndpointSlice[],
  port: ServicePortModel,
  /** readyOnly: no fallback to serving-and-terminating endpoints (what a healthCheckNodePort counts). */
  opts: { node?: string; topology?: ClientTopology; readyOnly?: boolean } = {},
): Endpoint[] {
  const candidates = new Map<string, Candidate>();
  for (const slice of slices) {
    if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") continue;
    // A slice labelled headless is not for a service proxy, as kube-proxy's slice informer leaves it out.
    const labels = slice.metadata?.labels;
    if (labels && Object.hasOwn(labels, HEADLESS_LABEL)) continue;
    const family = slice.addressType === "IPv4" ? 4 : 6;
    let number: unknown;
    for (const p of slice.ports ?? [])
      if ((p.name ?? "") === port.name && protocolOf(p.protocol) === port.protocol) {
        number = p.port;
        break;
      }
    if (typeof number !== "number" || !Number.isInteger(number) || number < 1 || number > 65535) continue;
    const suffix = `|${number}`;
    for (const u of usableEndpoints(slice, family)) {
      if (opts.node !== undefined && u.nodeName !== opts.node) continue;
      const key = u.text + suffix;
      const prior = candidates.get(key);
      // The same endpoint can sit in two slices while the slice controller moves it; the readier copy wins.
      if (prior && (prior.u.ready || !u.ready)) continue;
      candidates.set(key, { u, port: number });
    }
  }
  const all = [...candidates.values()];
  const where = opts.topology;
  const ready = all.filter((c) => c.u.ready);
  const mode = where
    ? topologyMode(
        ready.map((c) => c.u),
        where,
      )
    : undefined;
  const near = (c: Candidate) =>
    mode === "node"
      ? c.u.nodes.has(where?.node ?? "")
      : mode === "zone"
        ? c.u.zones.has(where?.zone ?? "")
        : true;
  const readyNear = mode === undefined ? ready : ready.filter(near);
  const chosen =
    readyNear.length > 0 || opts.readyOnly ? readyNear : all.filter((c) => c.u.servingTerminating && near(c));
  const out: Endpoint[] = chosen.map(({ u, port: p }) =>
    u.nodeName === undefined ? { ip: u.ip, port: p } : { ip: u.ip, port: p, nodeName: u.nodeName },
  );
  return out.sort((a, b) => compareIp(a.ip, b.ip) || a.port - b.port);
}

function protocolOf(raw: string | undefined): L4Protocol | undefined {
  const p = raw ?? "TCP";
  return p === "TCP" ? "tcp" : p === "UDP" ? "udp" : p === "SCTP" ? "sctp" : undefined;
}
