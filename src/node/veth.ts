// The pod's veth pair: the pod end (eth0) with its MAC, addresses, routes and MTU inside the pod's netns, the
// host end in the node's netns named after the container id. An ADD costs a fixed number of processes: one `ip`
// inside the pod netns that creates the pair (the host end lands in the node's netns directly), one `ip -batch`
// there that configures the pod end, then, in parallel, one `ip` in the node's netns to bring the host end up
// and in userspace-datapath mode one ethtool. Every step tolerates what an earlier, interrupted attempt left
// behind, and only that: an interface that already exists is configured only if it is our pair.

import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { formatIp, type IpAddress } from "../ipam/address.ts";
import { formatCidr } from "../ipam/cidr.ts";
import {
  formatInterfaceAddress,
  type InterfaceAddress,
  type MacAddress,
  type PodRoute,
} from "../ovn/pod-port.ts";
import type { InterfaceName, NetnsPath } from "./interface-name.ts";
import {
  type IpBatchFailure,
  type IpLine,
  ipBatch,
  isAlreadyExists,
  isNoSuchDevice,
  requireSuccess,
} from "./ip-batch.ts";
import { runTool, ToolError } from "./tool.ts";

/** Host ends are `<12 hex>_zv`: IFNAMSIZ allows 15 characters, and the suffix marks the veths this agent owns. */
export const HOST_VETH_SUFFIX = "_zv";
const HOST_VETH_RE = /^[0-9a-f]{12}_zv$/;

/** Deterministic host-side name: the id's first 12 hex digits (as runtimes abbreviate ids), else a hash of it. */
export function hostVethName(containerId: string): string {
  const prefix = /^[0-9a-f]{12}/.exec(containerId)?.[0];
  const hex = prefix ?? createHash("sha256").update(containerId).digest("hex").slice(0, 12);
  return `${hex}${HOST_VETH_SUFFIX}`;
}

export function isHostVethName(name: string): boolean {
  return HOST_VETH_RE.test(name);
}

export type { PodRoute } from "../ovn/pod-port.ts";

export interface PodInterfaceSpec {
  containerId: string;
  /** Path of the pod's netns (CNI_NETNS). */
  netns: NetnsPath;
  /** Interface name inside the pod (CNI_IFNAME), usually eth0. */
  ifname: InterfaceName;
  mac: MacAddress;
  ips: readonly InterfaceAddress[];
  /** Default gateways, at most one per family. */
  gateways: readonly IpAddress[];
  routes?: readonly PodRoute[];
  mtu: number;
  /** Userspace datapath: TCP and UDP from the pod fail unless the pod end computes its own checksums. */
  txChecksumOff: boolean;
}

/** Where the host ends live: the agent's own netns unless a path is given (tests use a netns of their own). */
export interface HostNetns {
  netns?: string;
}

function ownNetnsPath(host: HostNetns): string {
  // Seen from the ip process inside the pod netns, /proc/self would be the pod's own namespace.
  return host.netns ?? `/proc/${process.pid}/ns/net`;
}

function checkedMtu(mtu: number): string {
  if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535)
    throw new RangeError(`MTU ${mtu} is not 68 to 65535`);
  return String(mtu);
}

/** The ip lines that configure the pod end once it exists; each is idempotent. Text only from typed values. */
export function podSideLines(spec: PodInterfaceSpec): IpLine[] {
  const dev = spec.ifname;
  const lines: IpLine[] = [
    ["link", "set", "dev", "lo", "up"],
    ["link", "set", "dev", dev, "address", spec.mac, "mtu", checkedMtu(spec.mtu)],
    ["link", "set", "dev", dev, "up"],
  ];
  for (const a of spec.ips) {
    // IPv6 duplicate address detection would hold the address "tentative" for a second; OVN's port
    // security already guarantees uniqueness.
    lines.push([
      "addr",
      "replace",
      formatInterfaceAddress(a),
      "dev",
      dev,
      ...(a.ip.family === 6 ? ["nodad"] : []),
    ]);
  }
  for (const gw of spec.gateways) {
    lines.push(["route", "replace", gw.family === 6 ? "::/0" : "0.0.0.0/0", "via", formatIp(gw), "dev", dev]);
  }
  for (const r of spec.routes ?? [])
    lines.push(["route", "replace", formatCidr(r.dest), "via", formatIp(r.nextHop), "dev", dev]);
  return lines;
}

export interface PodInterfaceResult {
  hostIfname: string;
  /** True when the pair already existed (a retried ADD). */
  existed: boolean;
}

/**
 * Creates (or completes) the veth pair and configures the pod end. Re-running it with the same spec changes
 * nothing, so a runtime retrying an interrupted ADD gets the same interface.
 */
export async function ensurePodInterface(
  spec: PodInterfaceSpec,
  host: HostNetns = {},
): Promise<PodInterfaceResult> {
  if (!existsSync(spec.netns)) throw new Error(`the pod netns ${spec.netns} does not exist`);
  const hostIfname = hostVethName(spec.containerId);
  const mtu = checkedMtu(spec.mtu);
  const create: IpLine = [
    "link",
    "add",
    // "name" first, so an interface name that is also an ip keyword (type, netns...) stays a name.
    "name",
    spec.ifname,
    "mtu",
    mtu,
    "address",
    spec.mac,
    "type",
    "veth",
    "peer",
    "name",
    hostIfname,
    "mtu",
    mtu,
    "netns",
    ownNetnsPath(host),
  ];
  // The pair is created on its own: an interface that was there before is configured only once it is known to
  // be the pod end of our host end, never someone else's (the node's eth0, if CNI_NETNS named the node).
  const made = await ipBatch([create], { netns: spec.netns });
  const existed = made.failures.some(isAlreadyExists);
  requireSuccess("creating the pod interface", made, isAlreadyExists);
  if (existed) await requireOwnPair(spec, hostIfname, host);
  const pod = await ipBatch(podSideLines(spec), { netns: spec.netns });
  requireSuccess("configuring the pod interface", pod);

  // The two remaining steps touch different namespaces: run them side by side.
  const [up, ethtool] = await Promise.all([
    ipBatch([["link", "set", "dev", hostIfname, "up"]], host),
    spec.txChecksumOff
      ? runTool("ethtool", ["-K", spec.ifname, "tx", "off"], { netns: spec.netns })
      : Promise.resolve(undefined),
  ]);
  requireSuccess("bringing the host end up", up);
  if (ethtool && ethtool.code !== 0)
    throw new ToolError(["ethtool", "-K", spec.ifname, "tx", "off"], ethtool);
  return { hostIfname, existed };
}

interface IpLinkIdentity {
  ifindex?: number;
  link_index?: number;
  link_netnsid?: number;
  address?: string;
  linkinfo?: { info_kind?: string };
}

/** Why an existing pod end and host end are not one pair made by an earlier attempt, or undefined when they are. */
export function pairProblem(
  pod: IpLinkIdentity | undefined,
  hostEnd: IpLinkIdentity | undefined,
  mac: MacAddress,
): string | undefined {
  if (!pod) return "is missing";
  if (pod.linkinfo?.info_kind !== "veth") return `is ${pod.linkinfo?.info_kind ?? "not a veth"}`;
  if (!hostEnd) return "has no host end of ours";
  // The peer must sit in another namespace and each end must name the other; the MAC is the one set at creation.
  if (pod.link_netnsid === undefined) return "is a veth whose peer is in the same namespace";
  if (pod.link_index !== hostEnd.ifindex || hostEnd.link_index !== pod.ifindex)
    return "is not paired with it";
  if (pod.address !== mac) return `has MAC ${pod.address ?? "none"}, not ${mac}`;
  return undefined;
}

async function requireOwnPair(spec: PodInterfaceSpec, hostIfname: string, host: HostNetns): Promise<void> {
  const show = (netns: string, dev: string) =>
    ipBatch([["link", "show", "dev", dev]], { netns, globalArgs: ["-j", "-d"] });
  const [pod, hostEnd] = await Promise.all([
    show(spec.netns, spec.ifname),
    show(ownNetnsPath(host), hostIfname),
  ]);
  const first = (r: { stdout: string; failures: readonly IpBatchFailure[] }) =>
    r.failures.length > 0 ? undefined : (JSON.parse(r.stdout.trim() || "[]") as IpLinkIdentity[])[0];
  const why = pairProblem(first(pod), first(hostEnd), spec.mac);
  if (why)
    throw new Error(
      `the pod netns already has ${spec.ifname}, which ${why} (host end ${hostIfname}); nothing was changed`,
    );
}

/** Deletes the pair by its host end (the pod end goes with it). False when it was gone already. */
export async function removePodInterface(containerId: string, host: HostNetns = {}): Promise<boolean> {
  const name = hostVethName(containerId);
  const r = await ipBatch([["link", "del", "dev", name]], host);
  requireSuccess(`deleting ${name}`, r, isNoSuchDevice);
  return r.failures.length === 0;
}

interface IpLink {
  ifname: string;
  address?: string;
  mtu?: number;
  flags?: string[];
  linkinfo?: { info_kind?: string };
  addr_info?: { family: string; local: string; prefixlen: number }[];
}

interface IpRoute {
  dst: string;
  gateway?: string;
  dev?: string;
}

export interface PodInterfaceState {
  ifname: string;
  mac: string;
  mtu: number;
  up: boolean;
  kind: string | undefined;
  /** With prefix. */
  ips: string[];
  /** IPv4 default gateway, if any. */
  gateway4: string | undefined;
}

/** What the pod end looks like now (one process), or undefined when the netns or the interface is gone. */
export async function readPodInterface(
  netns: NetnsPath,
  ifname: InterfaceName,
): Promise<PodInterfaceState | undefined> {
  if (!existsSync(netns)) return undefined;
  const lines: IpLine[] = [
    ["addr", "show", "dev", ifname],
    ["route", "show", "0.0.0.0/0"],
  ];
  const r = await ipBatch(lines, {
    netns,
    globalArgs: ["-j", "-d"],
  });
  if (r.failures.some((f: IpBatchFailure) => f.line === 0)) return undefined;
  requireSuccess("reading the pod interface", r);
  const [linkJson, routeJson] = r.stdout.split("\n").filter((l) => l.trim());
  const link = (JSON.parse(linkJson ?? "[]") as IpLink[])[0];
  if (!link) return undefined;
  const routes = JSON.parse(routeJson ?? "[]") as IpRoute[];
  return {
    ifname: link.ifname,
    mac: link.address ?? "",
    mtu: link.mtu ?? 0,
    up: (link.flags ?? []).includes("UP"),
    kind: link.linkinfo?.info_kind,
    ips: (link.addr_info ?? [])
      .filter((a) => a.family === "inet" || a.family === "inet6")
      .map((a) => `${a.local}/${a.prefixlen}`),
    gateway4: routes.find((rt) => rt.dst === "default" && rt.dev === ifname)?.gateway,
  };
}

/** Host ends this agent created (by name), in the node's netns. */
export async function listHostVeths(host: HostNetns = {}): Promise<string[]> {
  const r = await ipBatch([["link", "show", "type", "veth"]], { ...host, globalArgs: ["-j"] });
  requireSuccess("listing veths", r);
  const links = JSON.parse(r.stdout.trim() || "[]") as IpLink[];
  return links.map((l) => l.ifname).filter(isHostVethName);
}

/** Deletes the given host ends in one process; absent ones are fine. */
export async function removeHostVeths(names: readonly string[], host: HostNetns = {}): Promise<void> {
  const r = await ipBatch(
    names.map((n) => ["link", "del", "dev", n]),
    host,
  );
  requireSuccess("deleting veths", r, isNoSuchDevice);
}
