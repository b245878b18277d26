// The CNI ADD result: one version-independent shape for the agent, and its wire form per spec version.
// 1.1.0 added interface mtu/socketPath/pciID and route mtu/advmss/priority/table/scope; 0.4.0 carries
// a `version` ("4" or "6") on each IP and knows none of those fields.

import { isIP } from "node:net";
import { CniError, CniErrorCode } from "./error.ts";
import type { CniVersion } from "./spec.ts";

export interface CniInterface {
  name: string;
  mac?: string;
  mtu?: number;
  /** The netns path for interfaces inside the container; absent for host-side interfaces. */
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

export interface CniIpConfig {
  /** CIDR notation: the address and its subnet's prefix length, e.g. "10.244.1.5/24". */
  address: string;
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

export interface CniRoute {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

export interface CniResult {
  interfaces?: CniInterface[];
  ips?: CniIpConfig[];
  routes?: CniRoute[];
  dns?: CniDns;
}

/** Returns 4 or 6 for "a.b.c.d/n" or "x::y/n", 0 when the text is not an address with a prefix length. */
export function cidrFamily(cidr: string): 0 | 4 | 6 {
  const slash = cidr.indexOf("/");
  if (slash < 0) return 0;
  const family = isIP(cidr.slice(0, slash)) as 0 | 4 | 6;
  const prefix = cidr.slice(slash + 1);
  if (family === 0 || !/^\d{1,3}$/.test(prefix)) return 0;
  return Number(prefix) <= (family === 4 ? 32 : 128) ? family : 0;
}

function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}

function hasDns(dns: CniDns | undefined): dns is CniDns {
  return dns !== undefined && Object.values(dns).some((v) => v !== undefined);
}

/**
 * The result object a plugin prints for `version`. Fields the version does not define are dropped, so an
 * older runtime never sees them; empty lists are omitted as libcni does.
 */
export function encodeResult(result: CniResult, version: CniVersion): Record<string, unknown> {
  const legacy = version === "0.4.0";
  const v11 = version === "1.1.0";
  const out: Record<string, unknown> = { cniVersion: version };
  if (result.interfaces && result.interfaces.length > 0) {
    out.interfaces = result.interfaces.map((i) =>
      compact({
        name: i.name,
        mac: i.mac,
        mtu: v11 ? i.mtu : undefined,
        sandbox: i.sandbox,
        socketPath: v11 ? i.socketPath : undefined,
        pciID: v11 ? i.pciID : undefined,
      }),
    );
  }
  if (result.ips && result.ips.length > 0) {
    out.ips = result.ips.map((ip) => {
      const family = cidrFamily(ip.address);
      if (family === 0) {
        throw new CniError(
          CniErrorCode.Internal,
          "the agent built an invalid CNI result",
          `ips address "${ip.address}" is not an address with a prefix length`,
        );
      }
      return compact({
        version: legacy ? String(family) : undefined,
        interface: ip.interface,
        address: ip.address,
        gateway: ip.gateway,
      });
    });
  }
  if ((result.routes && result.routes.length > 0) || legacy) {
    // libcni's 0.4.0 type always writes a routes list, so older runtimes expect the key.
    out.routes = (result.routes ?? []).map((r) =>
      compact({
        dst: r.dst,
        gw: r.gw,
        mtu: v11 ? r.mtu : undefined,
        advmss: v11 ? r.advmss : undefined,
        priority: v11 ? r.priority : undefined,
        table: v11 ? r.table : undefined,
        scope: v11 ? r.scope : undefined,
      }),
    );
  }
  if (hasDns(result.dns)) out.dns = compact({ ...result.dns });
  return out;
}

export function formatResult(result: CniResult, version: CniVersion): string {
  return `${JSON.stringify(encodeResult(result, version))}\n`;
}

// ---- parsing a result (prevResult) of any supported version back into the neutral shape ----

function invalid(field: string, problem: string): CniError {
  return new CniError(CniErrorCode.InvalidNetworkConfig, `invalid ${field}: ${problem}`);
}

function optString(o: Record<string, unknown>, key: string, field: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(`${field}.${key}`, `want a string, got ${JSON.stringify(v)}`);
  return v;
}

function optUint(o: Record<string, unknown>, key: string, field: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
    throw invalid(`${field}.${key}`, `want a non-negative integer, got ${JSON.stringify(v)}`);
  return v;
}

function optStrings(o: Record<string, unknown>, key: string, field: string): string[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string"))
    throw invalid(`${field}.${key}`, `want a list of strings, got ${JSON.stringify(v)}`);
  return v as string[];
}

function objectAt(v: unknown, field: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw invalid(field, `want an object, got ${JSON.stringify(v)}`);
  return v as Record<string, unknown>;
}

function listAt(
  o: Record<string, unknown>,
  key: string,
  field: string,
): Record<string, unknown>[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw invalid(`${field}.${key}`, `want a list, got ${JSON.stringify(v)}`);
  return v.map((item, i) => objectAt(item, `${field}.${key}[${i}]`));
}

/** Reads a result of any supported version (e.g. `prevResult`); `field` names it in error messages. */
export function parseResult(value: unknown, field = "prevResult"): CniResult {
  const o = objectAt(value, field);
  const result: CniResult = {};
  const interfaces = listAt(o, "interfaces", field);
  if (interfaces) {
    result.interfaces = interfaces.map((i, n) => {
      const f = `${field}.interfaces[${n}]`;
      const name = optString(i, "name", f);
      if (!name) throw invalid(`${f}.name`, "an interface needs a name");
      return compact({
        name,
        mac: optString(i, "mac", f),
        mtu: optUint(i, "mtu", f),
        sandbox: optString(i, "sandbox", f),
        socketPath: optString(i, "socketPath", f),
        pciID: optString(i, "pciID", f),
      });
    });
  }
  const ips = listAt(o, "ips", field);
  if (ips) {
    result.ips = ips.map((ip, n) => {
      const f = `${field}.ips[${n}]`;
      const address = optString(ip, "address", f);
      if (!address || cidrFamily(address) === 0)
        throw invalid(
          `${f}.address`,
          `want an address with prefix length like "10.0.0.5/24", got ${JSON.stringify(ip.address)}`,
        );
      const gateway = optString(ip, "gateway", f);
      if (gateway !== undefined && isIP(gateway) === 0)
        throw invalid(`${f}.gateway`, `want an IP address, got ${JSON.stringify(gateway)}`);
      const index = optUint(ip, "interface", f);
      if (index !== undefined && (result.interfaces?.length ?? 0) <= index)
        throw invalid(`${f}.interface`, `index ${index} is past the end of interfaces`);
      return compact({ address, gateway, interface: index });
    });
  }
  const routes = listAt(o, "routes", field);
  if (routes) {
    result.routes = routes.map((r, n) => {
      const f = `${field}.routes[${n}]`;
      const dst = optString(r, "dst", f);
      if (!dst || cidrFamily(dst) === 0)
        throw invalid(`${f}.dst`, `want a destination like "0.0.0.0/0", got ${JSON.stringify(r.dst)}`);
      const gw = optString(r, "gw", f);
      if (gw !== undefined && isIP(gw) === 0)
        throw invalid(`${f}.gw`, `want an IP address, got ${JSON.stringify(gw)}`);
      return compact({
        dst,
        gw,
        mtu: optUint(r, "mtu", f),
        advmss: optUint(r, "advmss", f),
        priority: optUint(r, "priority", f),
        table: optUint(r, "table", f),
        scope: optUint(r, "scope", f),
      });
    });
  }
  if (o.dns !== undefined && o.dns !== null) {
    const d = objectAt(o.dns, `${field}.dns`);
    const dns = compact({
      nameservers: optStrings(d, "nameservers", `${field}.dns`),
      domain: optString(d, "domain", `${field}.dns`),
      search: optStrings(d, "search", `${field}.dns`),
      options: optStrings(d, "options", `${field}.dns`),
    });
    if (hasDns(dns)) result.dns = dns;
  }
  return result;
}
