// Inclusive address ranges, as written in spec.excludeIPs: "10.0.0.5", "10.0.0.5-10.0.0.9" or "10.0.0.5..10.0.0.9".

import { type Family, familyName, formatIp, type IpAddress, parseIp } from "./address.ts";
import { InvalidInputError } from "./problem.ts";

export interface IpRange {
  readonly family: Family;
  readonly first: bigint;
  /** Inclusive. */
  readonly last: bigint;
}

/**
 * Parses a single address or a range `a-b` / `a..b` (both ends included).
 * @throws InvalidInputError
 */
export function parseRange(text: string, field = "range"): IpRange {
  const sep = text.includes("..") ? ".." : text.includes("-") ? "-" : undefined;
  if (sep === undefined) {
    const ip = parseIp(text.trim(), field);
    return { family: ip.family, first: ip.value, last: ip.value };
  }
  const parts = text.split(sep);
  const quoted = JSON.stringify(text);
  if (parts.length !== 2) {
    throw new InvalidInputError(
      field,
      `${quoted} has more than one "${sep}"; write one range, like 10.0.0.5-10.0.0.9`,
    );
  }
  const a = parseIp(parts[0]!.trim(), field);
  const b = parseIp(parts[1]!.trim(), field);
  if (a.family !== b.family) {
    throw new InvalidInputError(
      field,
      `${quoted} mixes ${familyName(a.family)} and ${familyName(b.family)}; write both ends in one family`,
    );
  }
  if (a.value > b.value) {
    throw new InvalidInputError(field, `${quoted} is a reversed range; write the lower address first`);
  }
  return { family: a.family, first: a.value, last: b.value };
}

export function formatRange(range: IpRange): string {
  const first = formatIp({ family: range.family, value: range.first });
  if (range.first === range.last) return first;
  return `${first}-${formatIp({ family: range.family, value: range.last })}`;
}

export function rangeSize(range: IpRange): bigint {
  return range.last - range.first + 1n;
}

export function rangeContains(range: IpRange, ip: IpAddress): boolean {
  return ip.family === range.family && ip.value >= range.first && ip.value <= range.last;
}

/** Sorts ranges and joins overlapping or touching ones; families are kept apart (IPv4 first). */
export function mergeRanges(ranges: readonly IpRange[]): IpRange[] {
  const sorted = [...ranges].sort((x, y) =>
    x.family !== y.family ? x.family - y.family : x.first < y.first ? -1 : x.first > y.first ? 1 : 0,
  );
  const out: IpRange[] = [];
  for (const r of sorted) {
    const prev = out.at(-1);
    if (prev && prev.family === r.family && r.first <= prev.last + 1n) {
      if (r.last > prev.last) out[out.length - 1] = { family: prev.family, first: prev.first, last: r.last };
    } else {
      out.push(r);
    }
  }
  return out;
}
