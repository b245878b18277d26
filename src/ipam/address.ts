// IP addresses as a family plus a bigint, so IPv4 and IPv6 share one arithmetic. Text is parsed strictly
// (no leading zeros in IPv4 octets, no zones) and IPv6 is printed in the RFC 5952 canonical form, so the
// same address always has the same text in OVN rows, annotations and status.

import { isIP } from "node:net";
import { InvalidInputError } from "./problem.ts";

export type Family = 4 | 6;

export interface IpAddress {
  readonly family: Family;
  /** The address as an unsigned integer: 32 bits for IPv4, 128 bits for IPv6. */
  readonly value: bigint;
}

export function familyBits(family: Family): 32 | 128 {
  return family === 4 ? 32 : 128;
}

/** True only for a real parsed address: where text is produced from one, a cast from a raw string is caught. */
export function isParsedIp(v: unknown): v is IpAddress {
  const ip = v as IpAddress;
  return (
    typeof ip === "object" &&
    ip !== null &&
    (ip.family === 4 || ip.family === 6) &&
    typeof ip.value === "bigint" &&
    ip.value >= 0n &&
    ip.value < 1n << BigInt(familyBits(ip.family))
  );
}

export function familyName(family: Family): "IPv4" | "IPv6" {
  return family === 4 ? "IPv4" : "IPv6";
}

export function maxValue(family: Family): bigint {
  return (1n << BigInt(familyBits(family))) - 1n;
}

export function ipFromValue(family: Family, value: bigint): IpAddress {
  if (value < 0n || value > maxValue(family)) {
    throw new RangeError(`${value} does not fit in an ${familyName(family)} address`);
  }
  return { family, value };
}

export function ipEquals(a: IpAddress, b: IpAddress): boolean {
  return a.family === b.family && a.value === b.value;
}

/** Orders IPv4 before IPv6, then numerically. */
export function compareIp(a: IpAddress, b: IpAddress): number {
  if (a.family !== b.family) return a.family - b.family;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

const EXAMPLE = "write it like 10.244.0.5 or fd00::5";

/**
 * Parses an IPv4 or IPv6 address. `field` names the value in the error, e.g. `spec.gateway`.
 * @throws InvalidInputError
 */
export function parseIp(text: string, field = "address"): IpAddress {
  const fail = (why: string): never => {
    throw new InvalidInputError(field, `${JSON.stringify(text)} ${why}`);
  };
  if (text === "") fail(`is empty; ${EXAMPLE}`);
  if (text.trim() !== text) fail("has leading or trailing spaces; remove them");
  const slash = text.indexOf("/");
  if (slash >= 0) fail(`has a prefix length; give the address alone, without ${text.slice(slash)}`);
  if (text.includes(":")) return parseIPv6(text, fail);
  if (text.includes(".")) return { family: 4, value: parseIPv4(text, fail) };
  return fail(`is not an IPv4 or IPv6 address; ${EXAMPLE}`);
}

/** Like parseIp, but returns undefined instead of throwing. */
export function tryParseIp(text: string): IpAddress | undefined {
  try {
    return parseIp(text);
  } catch (e) {
    if (e instanceof InvalidInputError) return undefined;
    throw e;
  }
}

/** Accepts an address object or its text; `field` names the value in the error. */
export function toIp(address: IpAddress | string, field = "address"): IpAddress {
  return typeof address === "string" ? parseIp(address, field) : address;
}

function parseIPv4(text: string, fail: (why: string) => never): bigint {
  const octets = text.split(".");
  if (octets.length !== 4) {
    fail(`has ${octets.length} parts; an IPv4 address has 4 octets, e.g. 10.244.0.5`);
  }
  let value = 0n;
  for (const octet of octets) {
    if (!/^[0-9]{1,3}$/.test(octet)) {
      fail(`is not an IPv4 address: octet ${JSON.stringify(octet)} is not a number from 0 to 255`);
    }
    if (octet.length > 1 && octet.startsWith("0")) {
      const fixed = octets.every((o) => /^[0-9]{1,3}$/.test(o)) ? octets.map(Number).join(".") : undefined;
      fail(
        `has a leading zero in octet ${JSON.stringify(octet)}; ${fixed ? `write ${fixed}` : "remove it"} (some tools read leading zeros as octal)`,
      );
    }
    const n = Number(octet);
    if (n > 255) fail(`is not an IPv4 address: octet ${n} is above 255`);
    value = (value << 8n) | BigInt(n);
  }
  return value;
}

function parseIPv6(text: string, fail: (why: string) => never): IpAddress {
  const bad = (why: string): never => fail(`is not an IPv6 address: ${why}; write it like fd00::5`);
  if (text.includes("%")) fail("has a zone index; zones are not allowed here, remove the %... suffix");
  if (text.startsWith("[")) fail("is in brackets; write the address without [ ]");
  const halves = text.split("::");
  if (halves.length > 2) bad('"::" appears more than once');
  const compressed = halves.length === 2;
  const split = (half: string | undefined) => (half ? half.split(":") : []);
  // Only the very last group of the address may be an embedded dotted quad (e.g. ::ffff:10.0.0.1).
  const readGroups = (parts: string[], mayEndInIPv4: boolean): number[] => {
    const out: number[] = [];
    parts.forEach((part, i) => {
      if (mayEndInIPv4 && i === parts.length - 1 && part.includes(".")) {
        const v4 = parseIPv4(part, () => bad(`its IPv4 part ${JSON.stringify(part)} is not a dotted quad`));
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
        return;
      }
      if (part === "") bad("it has an empty group (a single ':' at the start or end)");
      if (!/^[0-9a-fA-F]{1,4}$/.test(part)) bad(`group ${JSON.stringify(part)} is not 1 to 4 hex digits`);
      out.push(Number.parseInt(part, 16));
    });
    return out;
  };
  const head = readGroups(split(halves[0]), !compressed);
  const tail = compressed ? readGroups(split(halves[1]), true) : [];
  let groups: number[];
  if (compressed) {
    const present = head.length + tail.length;
    if (present > 7)
      bad(`it has ${present} groups besides "::", which must stand for at least one zero group`);
    groups = [...head, ...new Array<number>(8 - present).fill(0), ...tail];
  } else {
    if (head.length !== 8) bad(`it has ${head.length} groups; write 8, or use "::" for a run of zero groups`);
    groups = head;
  }
  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(g);
  return { family: 6, value };
}

/** Text form: dotted quad for IPv4, RFC 5952 for IPv6 (lower case, longest zero run as "::"). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return formatIPv4(ip.value);
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((ip.value >> shift) & 0xffffn));
  // RFC 5952 section 5: IPv4-mapped addresses keep the dotted quad so they read as the IPv4 address they are.
  if (ip.value >> 32n === 0xffffn) return `::ffff:${formatIPv4(ip.value & 0xffffffffn)}`;
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(":");
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

function formatIPv4(value: bigint): string {
  const v = Number(value);
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

/** 6 for an IPv6 address or CIDR, else 4; for text already known to be an address (no validation). */
export function ipFamilyOf(cidrOrIp: string): 4 | 6 {
  const slash = cidrOrIp.indexOf("/");
  return isIP(slash < 0 ? cidrOrIp : cidrOrIp.slice(0, slash)) === 6 ? 6 : 4;
}
