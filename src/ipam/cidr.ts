// CIDR blocks. A CIDR given by a user must have its host bits clear: "10.244.0.5/16" is refused with the
// corrected text rather than silently rounded, because it usually means a gateway was pasted into cidr.

import { type Family, familyBits, familyName, formatIp, type IpAddress, parseIp } from "./address.ts";
import { InvalidInputError } from "./problem.ts";

export interface Cidr {
  readonly family: Family;
  /** The network address as an integer (host bits zero). */
  readonly network: bigint;
  readonly prefix: number;
}

/**
 * Parses "10.244.0.0/16" or "fd00:10:244::/64". `field` names the value in the error.
 * @throws InvalidInputError
 */
export function parseCidr(text: string, field = "cidr"): Cidr {
  const fail = (why: string): never => {
    throw new InvalidInputError(field, `${JSON.stringify(text)} ${why}`);
  };
  const slash = text.indexOf("/");
  if (slash < 0) {
    const ip = parseIp(text, field);
    return fail(`has no prefix length; write it like ${formatIp(ip)}/${ip.family === 4 ? 24 : 64}`);
  }
  const ip = parseIp(text.slice(0, slash), field);
  const bits = familyBits(ip.family);
  const prefixText = text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > bits) {
    fail(
      `has prefix length ${JSON.stringify(prefixText)}; an ${familyName(ip.family)} prefix is 0 to ${bits}`,
    );
  }
  const prefix = Number(prefixText);
  const network = ip.value & prefixMask(ip.family, prefix);
  if (network !== ip.value) {
    const fixed = formatCidr({ family: ip.family, network, prefix });
    fail(`has host bits set; write the network address, ${fixed} (the gateway goes in its own field)`);
  }
  return { family: ip.family, network, prefix };
}

/** The network an interface address with its prefix ("100.64.0.2/16") is on: 100.64.0.0/16. */
export function networkOf(text: string, field = "cidr"): Cidr {
  const slash = text.indexOf("/");
  if (slash < 0) return parseCidr(text, field);
  const ip = parseIp(text.slice(0, slash), field);
  const { prefix } = parseCidr(
    `${formatIp({ family: ip.family, value: 0n })}/${text.slice(slash + 1)}`,
    field,
  );
  return { family: ip.family, network: ip.value & prefixMask(ip.family, prefix), prefix };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp({ family: cidr.family, value: cidr.network })}/${cidr.prefix}`;
}

export function toCidr(cidr: Cidr | string, field = "cidr"): Cidr {
  return typeof cidr === "string" ? parseCidr(cidr, field) : cidr;
}

function prefixMask(family: Family, prefix: number): bigint {
  const bits = BigInt(familyBits(family));
  const host = bits - BigInt(prefix);
  return ((1n << bits) - 1n) ^ ((1n << host) - 1n);
}

/** Number of addresses in the block, network and broadcast included. */
export function cidrSize(cidr: Cidr): bigint {
  return 1n << BigInt(familyBits(cidr.family) - cidr.prefix);
}

/** The highest address in the block (the IPv4 broadcast address when there is one). */
export function cidrLast(cidr: Cidr): IpAddress {
  return { family: cidr.family, value: cidr.network + cidrSize(cidr) - 1n };
}

export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  return ip.family === cidr.family && ip.value >= cidr.network && ip.value - cidr.network < cidrSize(cidr);
}

export function cidrContainsCidr(outer: Cidr, inner: Cidr): boolean {
  return (
    outer.family === inner.family &&
    outer.prefix <= inner.prefix &&
    (inner.network & prefixMask(outer.family, outer.prefix)) === outer.network
  );
}

/** Whether two blocks share any address. Blocks of different families never overlap. */
export function overlaps(a: Cidr | string, b: Cidr | string): boolean {
  const x = toCidr(a);
  const y = toCidr(b);
  return cidrContainsCidr(x, y) || cidrContainsCidr(y, x);
}

/**
 * The network address, which is never handed out. IPv4 /31 and /32 and IPv6 /127 and /128 have none
 * (RFC 3021, RFC 6164): every address in them is usable.
 */
export function networkAddress(cidr: Cidr): IpAddress | undefined {
  const pointToPoint = familyBits(cidr.family) - cidr.prefix <= 1;
  return pointToPoint ? undefined : { family: cidr.family, value: cidr.network };
}

/** The IPv4 broadcast address; IPv6 has none, nor do IPv4 /31 and /32. */
export function broadcastAddress(cidr: Cidr): IpAddress | undefined {
  if (cidr.family !== 4 || cidr.prefix >= 31) return undefined;
  return cidrLast(cidr);
}
