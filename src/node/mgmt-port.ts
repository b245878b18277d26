// The management port: an OVS internal interface on br-int bound to the node's logical port on the join
// switch. It is how the node reaches pods (kubelet probes: routes to the cluster and service CIDRs via the join
// gateway, with the management address as source) and how pods' egress reaches the node to be SNATed. With the
// userspace datapath an internal interface is a tap device that ovs-vswitchd creates, and recreates when it
// restarts, without the address: so the address is configured after OVS reports the device, and again
// whenever its ifindex changes.

import { formatIp, type IpAddress, ipEquals, ipFamilyOf, parseIp } from "../ipam/address.ts";
import {
  broadcastAddress,
  type Cidr,
  cidrContains,
  formatCidr,
  networkAddress,
  parseCidr,
} from "../ipam/cidr.ts";
import { parseRequestedMac } from "../ipam/mac.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import { KIND_KEY } from "../ovn/ownership.ts";
import { mgmtPortName, NODE_REPLY_IPS_MAX } from "../ovn/topology.ts";
import { TimeoutError } from "../ovsdb/errors.ts";
import type { Interface } from "../ovsdb/models/vswitch.generated.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { StepError, StepTimeoutError } from "./errors.ts";
import { type IpLine, ipBatch, requireSuccess } from "./ip-batch.ts";
import { findBridge } from "./ovs-bridge.ts";
import { IFACE_ID_KEY } from "./ovs-port.ts";
import { ensureIndex, NODE_AGENT, OWNER_KEY, setMapKeys, type VswitchClient } from "./vswitch-db.ts";

/** Node annotation written by the controller: {"name","ip","mac","gateway"}. */
export { MGMT_PORT_ANNOTATION } from "../ovn/topology.ts";

/** The device name; the logical port name (`zovn-mgmt-<node>`) would not fit in 15 characters. */
export const MGMT_IFNAME = "zovn-mgmt";
export { KIND_KEY } from "../ovn/ownership.ts";

export interface MgmtPortAnnotation {
  /** The logical switch port, e.g. zovn-mgmt-node1. */
  name: string;
  /** With prefix, e.g. 100.64.0.2/16. */
  ip: string;
  mac: string;
  /** The join switch's router address, e.g. 100.64.0.1. */
  gateway: string;
  /**
   * The node's service SNAT address on the join network (no prefix), e.g. 100.64.0.3: the source of Service
   * connections that entered the node. Absent from a controller that predates it.
   */
  serviceSnatIp?: string;
  /**
   * The node's own IPv4 addresses whose replies the cluster router returns to this management port (the
   * controller's reply policy, in NB before the annotation says so), canonical and sorted. Absent: none.
   */
  nodeReplyIps?: string[];
}

/** What the controller's annotation for this node must say: its port's name, an address on the join network. */
export interface MgmtPortExpectation {
  node: string;
  joinCidr: Cidr;
}

/**
 * The annotation's value with every field in canonical form, or undefined when it is absent or refused (the
 * controller has not written it yet, or someone else wrote it: the name becomes the OVSDB iface-id that binds
 * the device to a logical port, and the address and gateway the node's routes to every pod). `onRefused` is
 * told why a present annotation was refused; `onIgnored` why one of its fields was left out while the rest
 * stands: a `nodeReplyIps` longer than NODE_REPLY_IPS_MAX (a Node with that many InternalIPs must not cost the
 * node its management port; without the field the node's own connections keep the management address).
 */
export function parseMgmtPortAnnotation(
  text: string | undefined,
  expect: MgmtPortExpectation,
  onRefused: (why: string) => void = () => {},
  onIgnored: (why: string) => void = () => {},
): MgmtPortAnnotation | undefined {
  if (!text) return undefined;
  const refuse = (why: string): undefined => {
    onRefused(why);
    return undefined;
  };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return refuse("is not JSON");
  }
  if (typeof v !== "object" || v === null) return refuse("is not a JSON object");
  const { name, ip, mac, gateway, serviceSnatIp, nodeReplyIps } = v as Record<string, unknown>;
  const wantName = mgmtPortName(expect.node);
  if (name !== wantName) return refuse(`names port ${JSON.stringify(name)}, not this node's ${wantName}`);
  if (typeof ip !== "string" || typeof mac !== "string" || typeof gateway !== "string")
    return refuse("must have string fields name, ip, mac and gateway");
  const join = expect.joinCidr;
  try {
    const slash = ip.indexOf("/");
    if (slash < 0) return refuse(`ip ${JSON.stringify(ip)} has no prefix length`);
    const addr = parseIp(ip.slice(0, slash), "ip");
    const prefix = ip.slice(slash + 1);
    if (prefix !== String(join.prefix))
      return refuse(`ip ${JSON.stringify(ip)} must have the join network's prefix length /${join.prefix}`);
    const gw = parseIp(gateway, "gateway");
    const hosts = (a: IpAddress) =>
      cidrContains(join, a) &&
      !ipEquals(a, networkAddress(join) ?? { family: join.family, value: -1n }) &&
      !ipEquals(a, broadcastAddress(join) ?? { family: join.family, value: -1n });
    if (!hosts(addr))
      return refuse(`ip ${formatIp(addr)} is not a host address of the join network ${formatCidr(join)}`);
    if (!hosts(gw))
      return refuse(`gateway ${formatIp(gw)} is not a host address of the join network ${formatCidr(join)}`);
    if (ipEquals(addr, gw)) return refuse(`ip and gateway are both ${formatIp(gw)}`);
    let snat: IpAddress | undefined;
    if (serviceSnatIp !== undefined) {
      if (typeof serviceSnatIp !== "string") return refuse("serviceSnatIp must be a string");
      snat = parseIp(serviceSnatIp, "serviceSnatIp");
      if (!hosts(snat))
        return refuse(
          `serviceSnatIp ${formatIp(snat)} is not a host address of the join network ${formatCidr(join)}`,
        );
      if (ipEquals(snat, addr) || ipEquals(snat, gw))
        return refuse(`serviceSnatIp ${formatIp(snat)} is also the ip or the gateway`);
    }
    const replies: IpAddress[] = [];
    if (nodeReplyIps !== undefined && !Array.isArray(nodeReplyIps))
      return refuse("nodeReplyIps must be a list");
    if (Array.isArray(nodeReplyIps) && nodeReplyIps.length > NODE_REPLY_IPS_MAX)
      onIgnored(
        `nodeReplyIps lists ${nodeReplyIps.length} addresses, more than ${NODE_REPLY_IPS_MAX}: ignored, the rest of the annotation applies`,
      );
    else if (Array.isArray(nodeReplyIps)) {
      for (const [i, t] of nodeReplyIps.entries()) {
        if (typeof t !== "string") return refuse(`nodeReplyIps[${i}] must be a string`);
        const a = parseIp(t, `nodeReplyIps[${i}]`);
        if (a.family !== 4) return refuse(`nodeReplyIps[${i}] ${formatIp(a)} is not an IPv4 address`);
        if (cidrContains(join, a))
          return refuse(`nodeReplyIps[${i}] ${formatIp(a)} is inside the join network ${formatCidr(join)}`);
        if (!replies.some((r) => ipEquals(r, a))) replies.push(a);
      }
      replies.sort((x, y) => (x.value < y.value ? -1 : x.value > y.value ? 1 : 0));
    }
    return {
      name: wantName,
      ip: `${formatIp(addr)}/${prefix}`,
      mac: parseRequestedMac(mac),
      gateway: formatIp(gw),
      ...(snat ? { serviceSnatIp: formatIp(snat) } : {}),
      ...(replies.length > 0 ? { nodeReplyIps: replies.map(formatIp) } : {}),
    };
  } catch (e) {
    if (e instanceof InvalidInputError) return refuse(e.message);
    throw e;
  }
}

export interface MgmtPortSpec {
  bridge: string;
  /** Default MGMT_IFNAME. */
  ifname?: string;
  /** iface-id: the management logical switch port. */
  lspName: string;
  mac: string;
  /** With prefix. */
  ip: string;
  gateway: string;
  /**
   * Routed via the gateway: the cluster and service CIDRs and every accepted Subnet's. The device is ours, so
   * any other route on it (the kernel's connected route aside) is removed.
   */
  routeCidrs: readonly Cidr[];
  mtu: number;
}

/** The ip lines that give the device its MAC, MTU, address and routes; `flush` drops addresses set before. */
export function mgmtInterfaceLines(spec: MgmtPortSpec, flush: boolean): IpLine[] {
  const dev = spec.ifname ?? MGMT_IFNAME;
  const addr = spec.ip.split("/")[0] as string;
  const v6 = ipFamilyOf(addr) === 6;
  const lines: IpLine[] = [["link", "set", "dev", dev, "address", spec.mac, "mtu", String(spec.mtu), "up"]];
  if (flush) lines.push(["addr", "flush", "dev", dev, "scope", "global"]);
  lines.push(["addr", "replace", spec.ip, "dev", dev, ...(v6 ? ["nodad"] : [])]);
  for (const cidr of spec.routeCidrs) {
    if (cidr.family !== ipFamilyOf(addr)) continue;
    lines.push(["route", "replace", formatCidr(cidr), "via", spec.gateway, "dev", dev, "src", addr]);
  }
  return lines;
}

/** What identifies an applied spec: changes to any of it reconfigure the device. */
export function mgmtSpecKey(spec: MgmtPortSpec): string {
  return JSON.stringify({ ...spec, routeCidrs: spec.routeCidrs.map(formatCidr).sort() });
}

interface IpRouteJson {
  dst: string;
  protocol?: string;
  family: 4 | 6;
}

/** The lines that delete routes on the device that `spec` does not want; the kernel's own stay. */
export function staleMgmtRouteLines(spec: MgmtPortSpec, present: readonly IpRouteJson[]): IpLine[] {
  const dev = spec.ifname ?? MGMT_IFNAME;
  const wanted = new Set(spec.routeCidrs.map(formatCidr));
  const lines: IpLine[] = [];
  for (const r of present) {
    if (r.protocol === "kernel") continue;
    // ip prints host routes without a prefix and a default route as "default"; read it back as a prefix.
    const dst = r.dst === "default" ? (r.family === 6 ? "::/0" : "0.0.0.0/0") : r.dst;
    let cidr: Cidr;
    try {
      cidr = parseCidr(dst.includes("/") ? dst : `${dst}/${r.family === 6 ? 128 : 32}`);
    } catch {
      continue;
    }
    if (!wanted.has(formatCidr(cidr))) lines.push(["route", "del", formatCidr(cidr), "dev", dev]);
  }
  return lines;
}

/** The Port and internal Interface on the bridge, bound to the management logical port; returns what changed. */
export async function ensureMgmtOvsPort(
  client: VswitchClient,
  spec: MgmtPortSpec,
): Promise<{ interfaceUuid: string; changed: string[] }> {
  const name = spec.ifname ?? MGMT_IFNAME;
  const br = findBridge(client, spec.bridge);
  if (!br) throw new StepError("mgmt-port", `bridge ${spec.bridge} does not exist`);
  const ids = { [IFACE_ID_KEY]: spec.lspName, [OWNER_KEY]: NODE_AGENT, [KIND_KEY]: "mgmt-port" };
  const existing = client.cache.table("Interface").lookupOne("name", name);
  const txn = client.transaction();
  const changed: string[] = [];
  if (!existing) {
    const iface = txn.insert("Interface", {
      name,
      type: "internal",
      mac: spec.mac,
      mtu_request: spec.mtu,
      external_ids: ids,
    });
    const port = txn.insert("Port", { name, interfaces: [iface], external_ids: { [OWNER_KEY]: NODE_AGENT } });
    txn.mutate("Bridge", byUuid(br._uuid), [["ports", "insert", [port]]]);
    const res = await txn.commit();
    return { interfaceUuid: res.uuid(iface), changed: ["created"] };
  }
  const cols: { type?: string; mac?: string; mtu_request?: number } = {};
  if (existing.type !== "internal") cols.type = "internal";
  if (existing.mac !== spec.mac) cols.mac = spec.mac;
  if (existing.mtu_request !== spec.mtu) cols.mtu_request = spec.mtu;
  if (Object.keys(cols).length > 0) {
    txn.update("Interface", byUuid(existing._uuid), cols);
    changed.push(...Object.keys(cols));
  }
  const keys = setMapKeys(txn, "Interface", existing._uuid, "external_ids", existing.external_ids, ids);
  changed.push(...keys.map((k) => `external_ids:${k}`));
  const port = ensureIndex(client.cache.table("Port"), "interfaces", (r) => r.interfaces).lookupOne(
    "interfaces",
    existing._uuid,
  );
  if (port && !br.ports.includes(port._uuid)) {
    txn.mutate("Bridge", byUuid(br._uuid), [["ports", "insert", [port._uuid]]]);
    changed.push("linked");
  }
  if (changed.length > 0) await txn.commit();
  return { interfaceUuid: existing._uuid, changed };
}

/** Resolves with the Interface once ovs-vswitchd has created the device (it has an ifindex). */
export async function waitMgmtDevice(
  client: VswitchClient,
  interfaceUuid: string,
  budgetMs: number,
): Promise<Interface> {
  try {
    return await client.waitForRow(
      "Interface",
      (r) => r._uuid === interfaceUuid && (r.ifindex ?? 0) > 0 && (r.ofport ?? -1) > 0,
      { timeoutMs: budgetMs, description: "with an ifindex (the device created)" },
    );
  } catch (e) {
    if (!(e instanceof TimeoutError)) throw e;
    const row = client.cache.table("Interface").get(interfaceUuid);
    throw new StepTimeoutError("mgmt-port", budgetMs, row?.error ?? "ovs-vswitchd did not create the device");
  }
}

/**
 * Configures the device in the node's netns and removes the routes on it that the spec no longer wants (a
 * Subnet deleted); returns the routes removed.
 */
export async function configureMgmtInterface(
  spec: MgmtPortSpec,
  opts: { netns?: string; flush?: boolean } = {},
): Promise<string[]> {
  const host = opts.netns ? { netns: opts.netns } : {};
  const r = await ipBatch(mgmtInterfaceLines(spec, opts.flush ?? false), host);
  requireSuccess("configuring the management port", r);
  const dev = spec.ifname ?? MGMT_IFNAME;
  // "root" with a prefix of each family selects that family's routes within one batch.
  const families = [4, 6] as const;
  const shown = await ipBatch(
    families.map((f) => ["route", "show", "root", f === 4 ? "0.0.0.0/0" : "::/0", "dev", dev]),
    { ...host, globalArgs: ["-j"] },
  );
  // A node without IPv6 fails the second line; it has no IPv6 routes to remove either.
  requireSuccess("reading the management port's routes", shown, (f) => f.line === 1);
  const docs = shown.stdout.split("\n").filter((l) => l.trim());
  const answered = families.filter((_f, i) => !shown.failures.some((x) => x.line === i));
  const present = answered.flatMap((family, i) =>
    (JSON.parse(docs[i] ?? "[]") as Omit<IpRouteJson, "family">[]).map((r) => ({ ...r, family })),
  );
  const stale = staleMgmtRouteLines(spec, present);
  if (stale.length > 0) {
    const d = await ipBatch(stale, host);
    requireSuccess("removing stale management port routes", d, isNoSuchProcess);
  }
  return stale.map((l) => l[2] as string);
}

/** A route that is gone already (removed by someone else meanwhile). */
const isNoSuchProcess = (f: { message: string }): boolean => /No such process/i.test(f.message);
