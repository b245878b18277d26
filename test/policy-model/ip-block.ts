// ipBlock of a NetworkPolicy peer: an address is in the block when it is inside `cidr` and inside none of
// `except`. IPv4 and IPv6, on bigint arithmetic; the sandbox's pods and nodes are IPv4.
import { isIPv4, isIPv6 } from "node:net";

export interface IPBlock {
  cidr: string;
  except?: string[];
}

interface Parsed {
  family: 4 | 6;
  value: bigint;
}

function parseAddress(text: string): Parsed {
  if (isIPv4(text)) {
    return { family: 4, value: text.split(".").reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n) };
  }
  if (isIPv6(text)) {
    const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
    const h = head ? head.split(":") : [];
    const t = tail ? tail.split(":") : [];
    // A trailing dotted quad stands for the last two groups.
    const expand = (groups: string[]): string[] =>
      groups.flatMap((g) => {
        if (!g.includes(".")) return [g];
        const v = parseAddress(g).value;
        return [(v >> 16n).toString(16), (v & 0xffffn).toString(16)];
      });
    const hh = expand(h);
    const tt = expand(t);
    const fill = tail === undefined ? [] : new Array(8 - hh.length - tt.length).fill("0");
    const groups = [...hh, ...fill, ...tt];
    if (groups.length !== 8) throw new Error(`bad IPv6 address ${text}`);
    return { family: 6, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n) };
  }
  throw new Error(`bad IP address ${JSON.stringify(text)}`);
}

function inCidr(addr: Parsed, cidr: string): boolean {
  const slash = cidr.indexOf("/");
  if (slash < 0) throw new Error(`bad CIDR ${JSON.stringify(cidr)} (no prefix length)`);
  const net = parseAddress(cidr.slice(0, slash));
  const bits = net.family === 4 ? 32 : 128;
  const lenText = cidr.slice(slash + 1);
  const len = Number(lenText);
  if (!/^\d+$/.test(lenText) || len > bits) throw new Error(`bad CIDR ${JSON.stringify(cidr)}`);
  if (net.family !== addr.family) return false;
  const shift = BigInt(bits - len);
  return addr.value >> shift === net.value >> shift;
}

/** Whether `address` is in the block: inside its CIDR and outside every `except`. */
export function inIpBlock(block: IPBlock, address: string): boolean {
  const a = parseAddress(address);
  return inCidr(a, block.cidr) && !(block.except ?? []).some((e) => inCidr(a, e));
}
