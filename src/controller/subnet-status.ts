// What a Subnet's status should say. The CRD's CEL rules reject what is wrong in one object; the problems that
// need knowledge of the cluster (overlaps, a missing external switch, exhaustion) are judged here and reported
// in the status, naming the conflicting object. A problem in one subnet never blocks another.

import { formatIp, parseIp } from "../ipam/address.ts";
import type { Capacity } from "../ipam/capacity.ts";
import { displayCount } from "../ipam/capacity.ts";
import { type Cidr, cidrContains, formatCidr, networkOf, overlaps, parseCidr } from "../ipam/cidr.ts";
import { formatProblem, InvalidInputError } from "../ipam/problem.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import { parseSubnetSpec, type SubnetDefinition } from "../ipam/subnet-spec.ts";
import type { ExternalSwitchFacts, ExternalSwitchLookup } from "../ovn/external-switch.ts";
import { VXLAN_PORTS_PER_SWITCH } from "./pod-port-allocator.ts";

export type Phase = "Pending" | "Active" | "Failed";

export interface SubnetObject {
  readonly name: string;
  readonly creationTimestamp: string;
  readonly spec: Readonly<Record<string, unknown>>;
  /**
   * External mode: the UUID of the switch the Subnet is bound to (its pods' ports are there), once it has
   * resolved spec.externalLogicalSwitch; a later resolution to another switch is refused, never followed.
   */
  readonly boundSwitch?: string;
}

export interface ClusterFacts {
  /** network.clusterCIDR: inside the cluster (inside set, management-port routes, no SNAT); never a VLAN's. */
  readonly clusterCIDRs?: readonly string[];
  readonly serviceCIDRs: readonly string[];
  readonly joinCIDR: string;
  /** Node name -> its addresses. */
  readonly nodeIPs: ReadonlyMap<string, readonly string[]>;
  /** Whether a logical switch of that name exists in NB (External mode switches); see externalSwitch. */
  readonly switchExists: (name: string) => boolean;
  /**
   * The switch spec.externalLogicalSwitch names (by name or OVN UUID) and what its rows say about its addresses.
   * When given, it replaces switchExists: an ambiguous name and a cidr or gateway that do not match are refused.
   */
  readonly externalSwitch?: (ref: string) => ExternalSwitchLookup;
  readonly tunnel: "vxlan" | "geneve";
  /** Logical datapaths in NB now: every Logical_Switch and Logical_Router, ours or not. */
  readonly datapaths: number;
  /** Whether the switch of our Subnet of that name is already in NB (it needs no new datapath). */
  readonly subnetSwitchExists: (subnet: string) => boolean;
}

/** OVN's limit on logical datapaths (switches and routers) with VXLAN (ovn-architecture(7), "VXLAN"). */
export const VXLAN_MAX_DATAPATHS = 4096;

export interface Verdict {
  readonly name: string;
  /** Parsed spec when it is usable (the subnet can serve pods). */
  readonly definition?: SubnetDefinition;
  readonly phase: Phase;
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  /** The foreign switch spec.externalLogicalSwitch resolved to (with facts.externalSwitch). */
  readonly externalSwitch?: { readonly uuid: string; readonly name: string };
}

/** Older subnets win an overlap, so adding a conflicting subnet never breaks a working one. */
function byAge(a: SubnetObject, b: SubnetObject): number {
  return a.creationTimestamp < b.creationTimestamp
    ? -1
    : a.creationTimestamp > b.creationTimestamp
      ? 1
      : a.name < b.name
        ? -1
        : 1;
}

export function judgeSubnets(subnets: readonly SubnetObject[], facts: ClusterFacts): Map<string, Verdict> {
  const out = new Map<string, Verdict>();
  const accepted: { name: string; cidrs: string[] }[] = [];
  let newDatapaths = 0;
  for (const s of [...subnets].sort(byAge)) {
    const parsed = parseSubnetSpec(s.spec);
    if (!parsed.ok) {
      out.set(s.name, fail(s.name, "InvalidSpec", parsed.problems.map(formatProblem).join("; ")));
      continue;
    }
    const def = parsed.subnet;
    const cidrs = def.cidrs.map(formatCidr);
    const problem = clusterProblem(s, def, cidrs, accepted, facts);
    const ext = s.spec.externalLogicalSwitch;
    let externalSwitch: Verdict["externalSwitch"];
    if (!problem && typeof ext === "string" && ext !== "" && facts.externalSwitch) {
      const found = facts.externalSwitch(ext);
      const extProblem =
        boundSwitchProblem(ext, s.boundSwitch, found) ?? externalSwitchProblem(def, ext, found);
      if (extProblem) {
        out.set(s.name, fail(s.name, extProblem.reason, extProblem.message));
        continue;
      }
      if (found.kind === "found") externalSwitch = { uuid: found.facts.uuid, name: found.facts.name };
    }
    if (problem) {
      out.set(s.name, fail(s.name, problem.reason, problem.message));
      continue;
    }
    // A Subnet of ours whose switch is not in NB yet needs one more datapath; under VXLAN the older Subnets
    // get the ones left, and a Subnet whose switch exists keeps it.
    const needsDatapath = !s.spec.externalLogicalSwitch && !facts.subnetSwitchExists(s.name);
    if (needsDatapath && facts.tunnel === "vxlan") {
      if (facts.datapaths + newDatapaths + 1 > VXLAN_MAX_DATAPATHS) {
        out.set(
          s.name,
          fail(
            s.name,
            "DatapathCapacityExceeded",
            `NB already holds ${facts.datapaths + newDatapaths} logical switches and routers, and OVN allows at ` +
              `most ${VXLAN_MAX_DATAPATHS} with VXLAN; delete unused Subnets (or ZStack networks), or switch the ` +
              "tunnel to Geneve",
          ),
        );
        continue;
      }
      newDatapaths++;
    }
    accepted.push({ name: s.name, cidrs });
    out.set(s.name, {
      name: s.name,
      definition: def,
      phase: "Active",
      ready: true,
      reason: "Ready",
      message: "",
      ...(externalSwitch ? { externalSwitch } : {}),
    });
  }
  return out;
}

function clusterProblem(
  s: SubnetObject,
  def: SubnetDefinition,
  cidrs: readonly string[],
  accepted: readonly { name: string; cidrs: string[] }[],
  facts: ClusterFacts,
): { reason: string; message: string } | undefined {
  for (const c of cidrs) {
    // Nodes would route these through the management port: loopback, link-local (cloud metadata), multicast.
    const special = specialRangeOverlapping(parseCidr(c));
    if (special) {
      return {
        reason: "ReservedRange",
        message: `spec.cidr ${c} overlaps the ${special.name} ${formatCidr(special.range)}, which no pod network may use; choose a global unicast CIDR such as 10.244.0.0/16`,
      };
    }
    // A provider network's addresses are reached through the underlay; inside clusterCIDR they would be routed
    // to the overlay (and its localnet guard would drop them as forged).
    if (def.provider !== undefined) {
      const hit = (facts.clusterCIDRs ?? []).find((cc) => overlaps(cc, c));
      if (hit) {
        return {
          reason: "Overlap",
          message: `spec.cidr ${c} overlaps the cluster CIDR ${hit}, which the cluster routes to the overlay; a provider network Subnet must lie outside clusterCIDR, the service CIDR and the join CIDR: use the VLAN's own CIDR`,
        };
      }
    }
    for (const other of accepted) {
      const hit = other.cidrs.find((o) => overlaps(o, c));
      if (hit) {
        return {
          reason: "Overlap",
          message: `spec.cidr ${c} overlaps Subnet ${other.name} (${hit}); choose a CIDR that no other Subnet uses`,
        };
      }
    }
    for (const svc of facts.serviceCIDRs) {
      if (overlaps(svc, c)) {
        return {
          reason: "Overlap",
          message: `spec.cidr ${c} overlaps the service CIDR ${svc}; choose another CIDR`,
        };
      }
    }
    if (overlaps(facts.joinCIDR, c)) {
      return {
        reason: "Overlap",
        message: `spec.cidr ${c} overlaps the join CIDR ${facts.joinCIDR} used by node management ports; choose another CIDR`,
      };
    }
    const cidr = parseCidr(c);
    for (const [node, ips] of facts.nodeIPs) {
      const ip = ips.find((i) => {
        try {
          return cidrContains(cidr, parseIp(i));
        } catch {
          return false;
        }
      });
      if (ip) {
        return {
          reason: "Overlap",
          message: `spec.cidr ${c} contains ${ip}, an address of node ${node}; pods would shadow the node`,
        };
      }
    }
  }
  const ext = s.spec.externalLogicalSwitch;
  if (typeof ext === "string" && ext !== "" && !facts.externalSwitch && !facts.switchExists(ext)) {
    return {
      reason: "ExternalSwitchNotFound",
      message: `spec.externalLogicalSwitch ${ext} does not exist in the OVN northbound database; create it in ZStack or fix the name`,
    };
  }
  return undefined;
}

/**
 * A Subnet bound to one switch whose spec.externalLogicalSwitch now resolves to another (ZStack renamed its switch
 * and gave another one the name, or deleted and recreated it): following it would put the pods' ports on two
 * switches, so the Subnet fails and names both.
 */
export function boundSwitchProblem(
  ref: string,
  bound: string | undefined,
  found: ExternalSwitchLookup,
): { reason: string; message: string } | undefined {
  if (bound === undefined || found.kind !== "found" || found.facts.uuid === bound) return undefined;
  return {
    reason: "ExternalSwitchChanged",
    message:
      `spec.externalLogicalSwitch ${ref} now resolves to Logical_Switch ${found.facts.uuid} (${JSON.stringify(found.facts.name)}), ` +
      `but the Subnet is bound to Logical_Switch ${bound}, where its pods' ports are; they are not moved. ` +
      "Give ZStack's switch its name back, or create a new Subnet for the new switch and move the namespaces to it",
  };
}

const notFound = (ext: string) => ({
  reason: "ExternalSwitchNotFound",
  message: `spec.externalLogicalSwitch ${ext} does not exist in the OVN northbound database (neither as a switch name nor as a switch UUID); create it in ZStack or fix the name`,
});

function tryNetwork(text: string): Cidr | undefined {
  try {
    return networkOf(text.trim());
  } catch (e) {
    if (e instanceof InvalidInputError) return undefined;
    throw e;
  }
}

function tryIp(text: string): string | undefined {
  try {
    return formatIp(parseIp(text.trim()));
  } catch (e) {
    if (e instanceof InvalidInputError) return undefined;
    throw e;
  }
}

const sameCidr = (a: Cidr, b: Cidr) =>
  a.family === b.family && a.network === b.network && a.prefix === b.prefix;

/**
 * A Subnet on a foreign switch must describe that switch as ZStack does: its cidr is the switch's
 * other_config:subnet, the network of its router ports and the cidr of its DHCP options, and its gateway is the
 * router port's address (and the DHCP options' router), whenever the switch's rows say so. Names the row and
 * the value that disagree.
 */
export function externalSwitchProblem(
  def: SubnetDefinition,
  ref: string,
  found: ExternalSwitchLookup,
): { reason: string; message: string } | undefined {
  if (found.kind === "missing") return notFound(ref);
  if (found.kind === "ambiguous") {
    return {
      reason: "ExternalSwitchAmbiguous",
      message: `spec.externalLogicalSwitch ${ref} names ${found.uuids.length} logical switches (${found.uuids.join(", ")}); name one of them by its UUID`,
    };
  }
  const f: ExternalSwitchFacts = found.facts;
  const sw = `Logical_Switch ${f.uuid} (${JSON.stringify(f.name)})`;
  if (f.ours)
    return {
      reason: "ExternalSwitchNotForeign",
      message: `spec.externalLogicalSwitch ${ref} is ${sw}, a switch of this plugin's own; name a ZStack switch, or remove externalLogicalSwitch to get a switch of the Subnet's own`,
    };
  const mismatch = (message: string) => ({ reason: "ExternalSwitchMismatch", message });
  const cidrOf = (family: 4 | 6) => def.cidrs.find((c) => c.family === family);
  const gatewayOf = (family: 4 | 6) => {
    const g = def.gateways.find((x) => x.family === family);
    return g ? formatIp(g) : undefined;
  };
  if (f.otherConfigSubnet !== undefined) {
    const n = tryNetwork(f.otherConfigSubnet);
    const mine = n ? cidrOf(n.family) : cidrOf(4);
    if (!n || !mine || !sameCidr(n, mine))
      return mismatch(
        `spec.cidr ${def.cidrs.map(formatCidr).join(",")} does not match ${sw} other_config:subnet=${f.otherConfigSubnet}; use the switch's CIDR`,
      );
  }
  for (const family of [4, 6] as const) {
    const mine = cidrOf(family);
    if (!mine) continue;
    const gw = gatewayOf(family);
    const nets = f.routerPorts.flatMap((p) =>
      p.networks
        .map((text) => ({ port: p, text, net: tryNetwork(text) }))
        .filter((x) => x.net?.family === family),
    );
    if (nets.length === 0) continue;
    const on = nets.filter((x) => x.net && sameCidr(x.net, mine));
    if (on.length === 0) {
      const x = nets[0] as (typeof nets)[number];
      return mismatch(
        `spec.cidr ${formatCidr(mine)} does not match Logical_Router_Port ${x.port.uuid} (${JSON.stringify(x.port.name)}) networks ${x.text}, the router port on ${sw}; use ${formatCidr(x.net as Cidr)}`,
      );
    }
    const addrs = on.map((x) => tryIp(x.text.slice(0, x.text.indexOf("/"))));
    if (gw === undefined || !addrs.includes(gw)) {
      const x = on[0] as (typeof on)[number];
      return mismatch(
        `spec.gateway ${gw ?? "(none)"} is not ZStack's router port on ${sw}: Logical_Router_Port ${x.port.uuid} (${JSON.stringify(x.port.name)}) networks ${x.text}; use ${addrs.filter((a) => a).join(" or ")} as the gateway`,
      );
    }
  }
  for (const d of f.dhcpOptions) {
    const n = tryNetwork(d.cidr);
    if (!n) continue;
    const mine = cidrOf(n.family);
    if (!mine) continue;
    if (!sameCidr(n, mine))
      return mismatch(
        `spec.cidr ${formatCidr(mine)} does not match DHCP_Options ${d.uuid} cidr=${d.cidr}, used by ports of ${sw}; use the switch's CIDR`,
      );
    const router = d.router === undefined ? undefined : tryIp(d.router);
    const gw = gatewayOf(n.family);
    if (router !== undefined && router !== gw)
      return mismatch(
        `spec.gateway ${gw ?? "(none)"} does not match DHCP_Options ${d.uuid} options:router=${d.router}, the gateway ZStack's VMs on ${sw} use; use ${router}`,
      );
  }
  return undefined;
}

function fail(name: string, reason: string, message: string): Verdict {
  return { name, phase: "Failed", ready: false, reason, message };
}

export interface SubnetStatusBody {
  phase: Phase;
  /** The metadata.generation this status describes. */
  observedGeneration?: number;
  availableIPs: number;
  usedIPs: number;
  logicalSwitch: string;
  /** External mode: the UUID of ZStack's switch the Subnet is bound to. */
  logicalSwitchUUID?: string;
  portCapacity: number;
  message: string;
  conditions: {
    type: "Ready" | "AddressConflict" | "ClusterPath";
    status: "True" | "False";
    reason: string;
    message: string;
    lastTransitionTime: string;
    observedGeneration?: number;
  }[];
}

/** How many holders a terminating Subnet's status names before it says "and N more". */
export const HOLDERS_NAMED = 10;

function terminatingMessage(holders: readonly string[]): string {
  if (holders.length === 0) return "being deleted; its logical switch is being removed";
  const named = holders.slice(0, HOLDERS_NAMED).join(", ");
  const more = holders.length > HOLDERS_NAMED ? ` and ${holders.length - HOLDERS_NAMED} more` : "";
  return (
    `being deleted, but ${holders.length} port${holders.length === 1 ? "" : "s"} still use${holders.length === 1 ? "s" : ""} it: ${named}${more}; ` +
    "it is removed once they are gone (delete those pods, or scale their StatefulSets down); new pods get no address from it"
  );
}

/**
 * The status to write. An exhausted subnet stays Active (its pods keep working) but is not Ready, so that
 * "Ready" always means new pods can get an address.
 */
export function statusFor(
  v: Verdict,
  usage: {
    capacity?: Capacity;
    ports: number;
    logicalSwitch: string;
    /** External mode: the UUID of the switch the Subnet is bound to. */
    logicalSwitchUUID?: string;
    /** Set while the Subnet is being deleted: the ports (pods first) that hold it. */
    deleting?: { holders: readonly string[] };
    /**
     * On a foreign switch: the addresses a pod of ours and a foreign row (a ZStack VM) hold at once, one
     * message each naming both. Given (even empty), the status carries an AddressConflict condition.
     */
    conflicts?: readonly string[];
    /**
     * On a foreign switch: whether the cluster's path to its pods (our router port there) may be up. Given, the
     * status carries a ClusterPath condition; when it is held back, Ready is False with the same reason (the
     * Subnet's new pods wait for the port).
     */
    clusterPath?: {
      readonly up: boolean;
      readonly reason: string;
      readonly message: string;
      readonly previous?: SubnetStatusBody["conditions"][number];
    };
  },
  facts: Pick<ClusterFacts, "tunnel">,
  previous?: SubnetStatusBody["conditions"][number],
  now = new Date(),
  previousConflict?: SubnetStatusBody["conditions"][number],
): SubnetStatusBody {
  const total = usage.capacity ? usage.capacity.available + usage.capacity.used : 0n;
  const portCap =
    facts.tunnel === "vxlan" ? Math.min(VXLAN_PORTS_PER_SWITCH, displayCount(total)) : displayCount(total);
  let ready = v.ready;
  let reason = v.reason;
  let message = v.message;
  if (usage.deleting) {
    ready = false;
    reason = "Terminating";
    message = terminatingMessage(usage.deleting.holders);
  } else if (ready && usage.capacity && usage.capacity.available === 0n) {
    ready = false;
    reason = "AddressesExhausted";
    message = `all ${displayCount(total)} addresses are in use; widen spec.cidr, shrink spec.excludeIPs, or add a Subnet for some namespaces`;
  } else if (ready && facts.tunnel === "vxlan" && usage.ports >= VXLAN_PORTS_PER_SWITCH) {
    ready = false;
    reason = "PortCapacityExceeded";
    message = `the switch holds ${usage.ports} ports, OVN's limit per switch with VXLAN is ${VXLAN_PORTS_PER_SWITCH}; add a Subnet or use Geneve`;
  } else if (ready && usage.clusterPath && !usage.clusterPath.up) {
    ready = false;
    reason = usage.clusterPath.reason;
    message = usage.clusterPath.message;
  }
  const status = ready ? "True" : "False";
  const lastTransitionTime =
    previous && previous.status === status
      ? previous.lastTransitionTime
      : now.toISOString().replace(/\.\d+Z$/, "Z");
  const conditions: SubnetStatusBody["conditions"] = [
    { type: "Ready", status, reason, message, lastTransitionTime },
  ];
  if (usage.conflicts) {
    const n = usage.conflicts.length;
    const cStatus = n > 0 ? "True" : "False";
    const shown = usage.conflicts.slice(0, HOLDERS_NAMED).join("; ");
    conditions.push({
      type: "AddressConflict",
      status: cStatus,
      reason: n > 0 ? "AddressHeldTwice" : "NoConflict",
      message:
        n > 0
          ? `${n} address${n === 1 ? " is" : "es are"} used by a pod and by ZStack at once: ${shown}${n > HOLDERS_NAMED ? `; and ${n - HOLDERS_NAMED} more` : ""}`
          : "no pod address is used by ZStack",
      lastTransitionTime:
        previousConflict && previousConflict.status === cStatus
          ? previousConflict.lastTransitionTime
          : now.toISOString().replace(/\.\d+Z$/, "Z"),
    });
  }
  if (usage.clusterPath) {
    const p = usage.clusterPath;
    const pStatus = p.up ? "True" : "False";
    conditions.push({
      type: "ClusterPath",
      status: pStatus,
      reason: p.reason,
      message: p.message,
      lastTransitionTime:
        p.previous && p.previous.status === pStatus
          ? p.previous.lastTransitionTime
          : now.toISOString().replace(/\.\d+Z$/, "Z"),
    });
  }
  return {
    phase: v.phase,
    availableIPs: usage.capacity ? displayCount(usage.capacity.available) : 0,
    usedIPs: usage.capacity ? displayCount(usage.capacity.used) : 0,
    logicalSwitch: usage.logicalSwitch,
    ...(usage.logicalSwitchUUID !== undefined ? { logicalSwitchUUID: usage.logicalSwitchUUID } : {}),
    portCapacity: portCap,
    message,
    conditions,
  };
}
