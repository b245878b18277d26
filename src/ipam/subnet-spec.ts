// Validation of one Subnet spec on its own. Cluster-wide checks (overlap with other subnets, the service
// and join CIDRs, node addresses) belong to the controller, which has the other objects; `overlaps` in
// cidr.ts is the building block for them.

import { type Family, familyName, formatIp, type IpAddress, parseIp } from "./address.ts";
import { broadcastAddress, type Cidr, cidrContains, formatCidr, networkAddress, parseCidr } from "./cidr.ts";
import { type FieldProblem, InvalidInputError } from "./problem.ts";
import { type IpRange, parseRange } from "./range.ts";

export type Protocol = "IPv4" | "IPv6" | "Dual";
const PROTOCOLS: readonly Protocol[] = ["IPv4", "IPv6", "Dual"];

/** One spec.excludeIPs entry, kept with its position so a refusal can point at it. */
export interface ExcludedRange {
  readonly range: IpRange;
  /** e.g. `spec.excludeIPs[2]` */
  readonly field: string;
  /** The entry as the user wrote it. */
  readonly text: string;
}

/** A Subnet spec that passed validation, in parsed form; the input of SubnetAllocator.create. */
export interface SubnetDefinition {
  readonly protocol: Protocol;
  /** One CIDR per family, IPv4 first. */
  readonly cidrs: readonly Cidr[];
  /** The gateway of each CIDR, in the same order as `cidrs`. */
  readonly gateways: readonly IpAddress[];
  readonly excluded: readonly ExcludedRange[];
  /** The VLAN of a provider network subnet; absent for a flat (untagged) provider network or an overlay. */
  readonly vlanID?: number;
  /**
   * The provider network (OVN localnet `network_name`) the subnet's switch is bridged to; absent for an overlay
   * subnet. Each node maps it to a bridge with `ovn-bridge-mappings`.
   */
  readonly provider?: string;
}

/**
 * A provider name becomes a localnet port's `network_name` and a key of `ovn-bridge-mappings`
 * ("provider:bridge,..."), so ":" and "," are excluded, and so is anything a shell or log would mangle.
 */
export const PROVIDER_NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,62}[A-Za-z0-9])?$/;

/** Why `text` cannot be a provider network name, or undefined when it can. */
export function providerNameProblem(text: string): string | undefined {
  if (text.length > 64)
    return `${JSON.stringify(text.slice(0, 20))}... is ${text.length} characters; use at most 64`;
  if (!PROVIDER_NAME_RE.test(text))
    return `${JSON.stringify(text)} is not a provider network name; use letters, digits, "-", "_" and "." (no ":" or ","), starting and ending with a letter or digit, e.g. "physnet1"`;
  return undefined;
}

export type SubnetSpecResult =
  | { readonly ok: true; readonly subnet: SubnetDefinition }
  | { readonly ok: false; readonly problems: readonly FieldProblem[] };

/** Checks one Subnet spec and returns every problem found (an empty list means it is valid). */
export function validateSubnetSpec(spec: unknown, path = "spec"): FieldProblem[] {
  const result = parseSubnetSpec(spec, path);
  return result.ok ? [] : [...result.problems];
}

/**
 * Checks one Subnet spec and, when it is valid, returns it parsed. Fields: cidr (required; "v4,v6" for
 * Dual, either order), gateway (required; one per family), excludeIPs (addresses or ranges `a-b`/`a..b`),
 * protocol (IPv4 | IPv6 | Dual; inferred from cidr when absent), vlanID (1-4094, optional; needs provider),
 * provider (a provider network name, optional: alone it is a flat, untagged provider network).
 */
export function parseSubnetSpec(spec: unknown, path = "spec"): SubnetSpecResult {
  const problems: FieldProblem[] = [];
  const problem = (field: string, message: string) => problems.push({ field, message });
  const guard = <T>(fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      problems.push(e.problem);
      return undefined;
    }
  };
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
    return {
      ok: false,
      problems: [{ field: path, message: "must be an object with at least cidr and gateway" }],
    };
  }
  const s = spec as Record<string, unknown>;
  const f = (name: string) => `${path}.${name}`;

  let protocol: Protocol | undefined;
  if (s.protocol !== undefined && s.protocol !== null) {
    const p = s.protocol;
    if (typeof p === "string" && (PROTOCOLS as readonly string[]).includes(p)) {
      protocol = p as Protocol;
    } else {
      const near =
        typeof p === "string" ? PROTOCOLS.find((x) => x.toLowerCase() === p.toLowerCase()) : undefined;
      problem(
        f("protocol"),
        near
          ? `${JSON.stringify(p)} has the wrong case; write ${near}`
          : `${JSON.stringify(p)} is not one of IPv4, IPv6, Dual`,
      );
    }
  }

  const cidrs = parseCidrField(s.cidr, f("cidr"), protocol, problem, guard);
  const families = cidrs?.map((c) => c.family);
  const effective: Protocol | undefined =
    protocol ?? (families ? (families.length === 2 ? "Dual" : familyName(families[0]!)) : undefined);

  const gateways = cidrs
    ? parseGatewayField(s.gateway, f("gateway"), f("cidr"), cidrs, problem, guard)
    : undefined;
  if (!cidrs) {
    // Without a CIDR only the gateway's own syntax can be checked.
    if (s.gateway === undefined || s.gateway === null || s.gateway === "") {
      problem(f("gateway"), "is required; write the router address of the subnet, usually its first address");
    } else if (typeof s.gateway === "string") {
      for (const part of splitList(s.gateway)) guard(() => parseIpInField(part, f("gateway")));
    }
  }

  const excluded: ExcludedRange[] = [];
  if (s.excludeIPs !== undefined && s.excludeIPs !== null) {
    if (!Array.isArray(s.excludeIPs)) {
      problem(f("excludeIPs"), 'must be a list of addresses or ranges, e.g. ["10.244.0.2-10.244.0.10"]');
    } else {
      s.excludeIPs.forEach((entry: unknown, i: number) => {
        const field = `${f("excludeIPs")}[${i}]`;
        if (typeof entry !== "string") {
          problem(field, `${JSON.stringify(entry)} must be a string, an address or a range like "a-b"`);
          return;
        }
        const range = guard(() => parseRange(entry, field));
        if (!range || !cidrs) return;
        const cidr = cidrs.find((c) => c.family === range.family);
        if (!cidr) {
          problem(
            field,
            `${JSON.stringify(entry)} is ${familyName(range.family)} but the subnet has no ${familyName(range.family)} CIDR; remove it`,
          );
          return;
        }
        const outside = [range.first, range.last].find(
          (v) => !cidrContains(cidr, { family: range.family, value: v }),
        );
        if (outside !== undefined) {
          problem(
            field,
            `${JSON.stringify(entry)} reaches outside ${f("cidr")} ${formatCidr(cidr)} (${formatIp({ family: range.family, value: outside })}); keep it within ${formatCidr(cidr)}`,
          );
          return;
        }
        excluded.push({ range, field, text: entry });
      });
    }
  }

  let vlanID: number | undefined;
  if (s.vlanID !== undefined && s.vlanID !== null) {
    const v = s.vlanID;
    if (typeof v === "string") {
      problem(f("vlanID"), `${JSON.stringify(v)} is a string; write a number from 1 to 4094 without quotes`);
    } else if (typeof v !== "number" || !Number.isInteger(v)) {
      problem(f("vlanID"), `${JSON.stringify(v)} must be a whole number from 1 to 4094`);
    } else if (v < 1 || v > 4094) {
      problem(f("vlanID"), `${v} is out of range; use 1-4094, or omit vlanID for an overlay subnet`);
    } else {
      vlanID = v;
    }
  }

  let provider: string | undefined;
  if (s.provider !== undefined && s.provider !== null && s.provider !== "") {
    const v = s.provider;
    if (typeof v !== "string") {
      problem(
        f("provider"),
        `${JSON.stringify(v)} must be a string naming a provider network, e.g. "physnet1"`,
      );
    } else {
      const why = providerNameProblem(v);
      if (why) problem(f("provider"), why);
      else provider = v;
    }
  }
  // Only a valid vlanID asks for a provider: a bad one already has its message.
  if (vlanID !== undefined && (s.provider === undefined || s.provider === null || s.provider === "")) {
    problem(
      f("provider"),
      "is required with spec.vlanID: name the provider network that carries the VLAN (each node maps it to a bridge with ovn-bridge-mappings), or remove vlanID for an overlay subnet",
    );
  }
  const hasProvider = s.provider !== undefined && s.provider !== null && s.provider !== "";
  if (hasProvider && typeof s.externalLogicalSwitch === "string" && s.externalLogicalSwitch !== "") {
    problem(
      f("provider"),
      "cannot be combined with spec.externalLogicalSwitch: an external switch brings its own localnet port; remove provider and vlanID",
    );
  }

  if (problems.length > 0 || !cidrs || !gateways || !effective) return { ok: false, problems };
  const subnet: SubnetDefinition = {
    protocol: effective,
    cidrs,
    gateways,
    excluded,
    ...(vlanID === undefined ? {} : { vlanID }),
    ...(provider === undefined ? {} : { provider }),
  };
  return { ok: true, subnet };
}

type Report = (field: string, message: string) => void;
type Guard = <T>(fn: () => T) => T | undefined;

function splitList(text: string): string[] {
  return text.split(",").map((p) => p.trim());
}

function exampleCidr(family: Family): string {
  return family === 4 ? "10.244.0.0/16" : "fd00:10:244::/64";
}

/** Returns the CIDRs sorted IPv4 first, or undefined when the field has a problem. */
function parseCidrField(
  value: unknown,
  field: string,
  protocol: Protocol | undefined,
  problem: Report,
  guard: Guard,
): Cidr[] | undefined {
  if (value === undefined || value === null || value === "") {
    problem(
      field,
      `is required; write the subnet block, e.g. ${protocol === "Dual" ? `"${exampleCidr(4)},${exampleCidr(6)}"` : exampleCidr(protocol === "IPv6" ? 6 : 4)}`,
    );
    return undefined;
  }
  if (typeof value !== "string") {
    problem(field, `${JSON.stringify(value)} must be a string like "${exampleCidr(4)}"`);
    return undefined;
  }
  const parts = splitList(value);
  if (parts.length > 2) {
    problem(
      field,
      `${JSON.stringify(value)} has ${parts.length} CIDRs; give one, or an IPv4,IPv6 pair for Dual`,
    );
    return undefined;
  }
  const cidrs: Cidr[] = [];
  for (const part of parts) {
    const c = guard(() => parseCidr(part, field));
    if (!c) return undefined;
    cidrs.push(c);
  }
  const [a, b] = cidrs as [Cidr, Cidr | undefined];
  const quoted = JSON.stringify(value);
  if (b && a.family === b.family) {
    const other = familyName(a.family === 4 ? 6 : 4);
    problem(
      field,
      `${quoted} has two ${familyName(a.family)} CIDRs; a Dual subnet has one IPv4 and one IPv6 CIDR, replace one with an ${other} CIDR`,
    );
    return undefined;
  }
  if (protocol === "Dual" && !b) {
    const missing: Family = a.family === 4 ? 6 : 4;
    problem(
      field,
      `${quoted} has one CIDR, but protocol is Dual; add the ${familyName(missing)} CIDR after a comma, e.g. "${a.family === 4 ? `${value},${exampleCidr(6)}` : `${exampleCidr(4)},${value}`}", or set protocol: ${familyName(a.family)}`,
    );
    return undefined;
  }
  if ((protocol === "IPv4" || protocol === "IPv6") && b) {
    problem(
      field,
      `${quoted} has an IPv4 and an IPv6 CIDR, but protocol is ${protocol}; set protocol: Dual, or keep one CIDR`,
    );
    return undefined;
  }
  if ((protocol === "IPv4" || protocol === "IPv6") && protocol !== familyName(a.family)) {
    problem(
      field.replace(/cidr$/, "protocol"),
      `${JSON.stringify(protocol)} does not match ${field} ${formatCidr(a)}, which is ${familyName(a.family)}; set protocol: ${familyName(a.family)}`,
    );
    return undefined;
  }
  return cidrs.sort((x, y) => x.family - y.family);
}

/** Returns one gateway per CIDR in the CIDRs' order, or undefined when the field has a problem. */
function parseGatewayField(
  value: unknown,
  field: string,
  cidrField: string,
  cidrs: readonly Cidr[],
  problem: Report,
  guard: Guard,
): IpAddress[] | undefined {
  const example = cidrs.map((c) => formatIp({ family: c.family, value: c.network + 1n })).join(",");
  if (value === undefined || value === null || value === "") {
    problem(
      field,
      `is required; write the router address of the subnet, usually its first address, e.g. "${example}"`,
    );
    return undefined;
  }
  if (typeof value !== "string") {
    problem(field, `${JSON.stringify(value)} must be a string like "${example}"`);
    return undefined;
  }
  const quoted = JSON.stringify(value);
  const parts = splitList(value);
  const byFamily = new Map<Family, IpAddress>();
  let ok = true;
  for (const part of parts) {
    const ip = guard(() => parseIpInField(part, field));
    if (!ip) {
      ok = false;
      continue;
    }
    const cidr = cidrs.find((c) => c.family === ip.family);
    if (!cidr) {
      problem(
        field,
        `${JSON.stringify(part)} is ${familyName(ip.family)} but ${cidrField} has no ${familyName(ip.family)} CIDR; write e.g. "${example}"`,
      );
      ok = false;
    } else if (byFamily.has(ip.family)) {
      problem(
        field,
        `${quoted} has two ${familyName(ip.family)} gateways; give one per family, e.g. "${example}"`,
      );
      ok = false;
    } else if (!cidrContains(cidr, ip)) {
      problem(
        field,
        `${JSON.stringify(part)} is outside ${cidrField} ${formatCidr(cidr)}; use an address inside it, e.g. ${formatIp({ family: cidr.family, value: cidr.network + 1n })}`,
      );
      ok = false;
    } else if (networkAddress(cidr)?.value === ip.value) {
      problem(
        field,
        `${JSON.stringify(part)} is the network address of ${formatCidr(cidr)}; use a host address, usually ${formatIp({ family: cidr.family, value: cidr.network + 1n })}`,
      );
      ok = false;
    } else if (broadcastAddress(cidr)?.value === ip.value) {
      problem(
        field,
        `${JSON.stringify(part)} is the broadcast address of ${formatCidr(cidr)}; use a host address, usually ${formatIp({ family: cidr.family, value: cidr.network + 1n })}`,
      );
      ok = false;
    } else {
      byFamily.set(ip.family, ip);
    }
  }
  if (!ok) return undefined;
  const missing = cidrs.filter((c) => !byFamily.has(c.family));
  if (missing.length > 0) {
    const m = missing[0]!;
    problem(
      field,
      `${quoted} has no ${familyName(m.family)} gateway for ${formatCidr(m)}; give one per family, e.g. "${example}"`,
    );
    return undefined;
  }
  return cidrs.map((c) => byFamily.get(c.family)!);
}

function parseIpInField(text: string, field: string): IpAddress {
  // A range is a common slip in gateway; say so instead of a generic parse error.
  if (text.includes("-") || text.includes("..")) {
    throw new InvalidInputError(field, `${JSON.stringify(text)} is a range; the gateway is a single address`);
  }
  return parseIp(text, field);
}
