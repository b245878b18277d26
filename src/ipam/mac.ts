// MAC addresses for pod ports. With an IPv4 address the MAC is derived from it (0a:58 + the four address
// bytes, as ovn-kubernetes does), so it is stable across restarts and readable in traces; an IPv6-only port
// gets a random locally administered unicast MAC.

import { randomFillSync } from "node:crypto";
import type { IpAddress } from "./address.ts";
import { InvalidInputError } from "./problem.ts";

/** Returns `length` random bytes; injectable so tests are deterministic. */
export type RandomBytes = (length: number) => Uint8Array;

const cryptoRandomBytes: RandomBytes = (length) => randomFillSync(new Uint8Array(length));

/**
 * Parses "0a:58:0a:f4:00:05" (also with "-" separators, any case, one-digit octets as OVN allows) and
 * returns the canonical lower-case colon form. Checks syntax only.
 * @throws InvalidInputError
 */
export function parseMac(text: string, field = "mac_address"): string {
  // The canonical form is its own parse: every port this controller writes, read back on each NB update.
  if (CANONICAL_MAC.test(text)) return text;
  return formatMac(parseMacBytes(text, field));
}

const CANONICAL_MAC = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/;

/**
 * Parses a MAC a user asked for and checks it can be a port's own address: unicast (bit 0 of the first
 * octet clear) and not all zeros.
 * @throws InvalidInputError
 */
export function parseRequestedMac(text: string, field = "mac_address"): string {
  const bytes = parseMacBytes(text, field);
  const quoted = JSON.stringify(text);
  if ((bytes[0]! & 1) === 1) {
    throw new InvalidInputError(
      field,
      `${quoted} is a multicast address (the first octet is odd); a port needs a unicast MAC, e.g. 0a:58:...`,
    );
  }
  if (bytes.every((b) => b === 0)) {
    throw new InvalidInputError(field, `${quoted} is all zeros; give a real unicast MAC or leave it unset`);
  }
  return formatMac(bytes);
}

function parseMacBytes(text: string, field: string): Uint8Array {
  const parts = text.split(/[:-]/);
  const ok =
    parts.length === 6 &&
    !(text.includes(":") && text.includes("-")) &&
    parts.every((p) => /^[0-9a-fA-F]{1,2}$/.test(p));
  if (!ok) {
    throw new InvalidInputError(
      field,
      `${JSON.stringify(text)} is not a MAC address; write six hex octets separated by ':', e.g. 0a:58:0a:f4:00:05`,
    );
  }
  return Uint8Array.from(parts, (p) => Number.parseInt(p, 16));
}

const HEX_OCTETS = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

function formatMac(bytes: Uint8Array): string {
  const h = (i: number) => HEX_OCTETS[bytes[i] as number] as string;
  return `${h(0)}:${h(1)}:${h(2)}:${h(3)}:${h(4)}:${h(5)}`;
}

/** 0a:58 followed by the four bytes of the IPv4 address. */
export function macFromIPv4(ip: IpAddress): string {
  if (ip.family !== 4) throw new RangeError("macFromIPv4 needs an IPv4 address");
  const v = Number(ip.value);
  return formatMac(Uint8Array.of(0x0a, 0x58, v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255));
}

/** A random MAC with the locally administered bit (1) set and the multicast bit (0) clear. */
export function randomLocalMac(randomBytes: RandomBytes = cryptoRandomBytes): string {
  const bytes = Uint8Array.from(randomBytes(6).subarray(0, 6));
  if (bytes.length !== 6) throw new RangeError("randomBytes returned fewer than 6 bytes");
  bytes[0] = (bytes[0]! | 0b10) & ~0b1;
  // Keep clear of the 0a:58 prefix so a random MAC can never equal one derived from an IPv4 address.
  if (bytes[0] === 0x0a && bytes[1] === 0x58) bytes[1] = 0x59;
  return formatMac(bytes);
}

/** The MAC for a port with these addresses: derived from its IPv4 address if it has one, else random. */
export function macForAddresses(ips: readonly IpAddress[], randomBytes?: RandomBytes): string {
  const v4 = ips.find((ip) => ip.family === 4);
  return v4 ? macFromIPv4(v4) : randomLocalMac(randomBytes);
}
