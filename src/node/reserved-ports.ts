// The host's ephemeral ports stay out of the reply policy's range. The cluster router returns every packet to a
// node's own address with a TCP, UDP or SCTP destination port of 61440 or more to that node's management port
// (topology.ts nodeReplyMatch): only the agent's own connections that keep the node's address use those ports
// (service-nat.ts `_sc`). A host connection with an ephemeral port there (an operator's ip_local_port_range of
// 1024 65000) to another node's ETP Local NodePort would have its answer rerouted into the management port and
// be reset. `net.ipv4.ip_local_reserved_ports` keeps the kernel from choosing those ports for bind(0) and
// connect(); a program that binds one explicitly still can, and NAT's port choice ignores the list.
//
// The list belongs to the operator too: the agent parses it, adds only what is missing, and writes the union
// back; it never drops an entry. It is not removed when the agent stops: connections the node made meanwhile
// keep working either way, and an agent restarting would only add it again. The sysctl is per network namespace.

import { readFile, writeFile } from "node:fs/promises";
import { NODE_REPLY_PORT_MAX, NODE_REPLY_PORT_MIN } from "../ovn/topology.ts";
import { runTool, ToolError } from "./tool.ts";

export const RESERVED_PORTS_SYSCTL = "net.ipv4.ip_local_reserved_ports";

export interface PortRange {
  readonly min: number;
  readonly max: number;
}

/** The range the host must never choose as an ephemeral port. */
export const NODE_REPLY_PORTS: PortRange = { min: NODE_REPLY_PORT_MIN, max: NODE_REPLY_PORT_MAX };

function port(text: string, whole: string): number {
  if (!/^[0-9]{1,5}$/.test(text))
    throw new TypeError(`${RESERVED_PORTS_SYSCTL}: ${JSON.stringify(whole)} is not a port list`);
  const n = Number(text);
  if (n > 65_535)
    throw new TypeError(`${RESERVED_PORTS_SYSCTL}: ${n} in ${JSON.stringify(whole)} is not a port`);
  return n;
}

/**
 * The kernel's list ("8080,9148-9150", empty for none) as ranges, sorted and merged (adjacent ones too). Anything
 * else is refused: the agent writes back what it read, so it must understand all of it.
 */
export function parsePortList(text: string): PortRange[] {
  const t = text.trim();
  if (t === "") return [];
  const ranges = t.split(",").map((item) => {
    const [a, b, ...rest] = item.trim().split("-");
    if (a === undefined || rest.length > 0)
      throw new TypeError(`${RESERVED_PORTS_SYSCTL}: ${JSON.stringify(t)} is not a port list`);
    const min = port(a, t);
    const max = b === undefined ? min : port(b, t);
    if (max < min) throw new TypeError(`${RESERVED_PORTS_SYSCTL}: ${item.trim()} is an empty range`);
    return { min, max };
  });
  return normalize(ranges);
}

function normalize(ranges: readonly PortRange[]): PortRange[] {
  const sorted = [...ranges].sort((x, y) => x.min - y.min || x.max - y.max);
  const out: PortRange[] = [];
  for (const r of sorted) {
    const last = out.at(-1);
    if (last && r.min <= last.max + 1)
      out[out.length - 1] = { min: last.min, max: Math.max(last.max, r.max) };
    else out.push({ ...r });
  }
  return out;
}

/** The kernel's own text for ranges: "a" for one port, "a-b" for more, comma-separated. */
export function formatPortList(ranges: readonly PortRange[]): string {
  return ranges.map((r) => (r.min === r.max ? String(r.min) : `${r.min}-${r.max}`)).join(",");
}

/**
 * What to write so that `want` is reserved on top of `existing` (the sysctl's current text), or undefined when
 * every port of it already is: nothing to write.
 */
export function mergeReservedPorts(existing: string, want: PortRange = NODE_REPLY_PORTS): string | undefined {
  const have = parsePortList(existing);
  if (have.some((r) => r.min <= want.min && r.max >= want.max)) return undefined;
  return formatPortList(normalize([...have, want]));
}

/**
 * Reserves the reply policy's ports in the node's network namespace (the agent's own, or `netns` in tests).
 * Returns true when it wrote the sysctl.
 */
export async function ensureReservedPorts(opts: { netns?: string } = {}): Promise<boolean> {
  const path = `/proc/sys/${RESERVED_PORTS_SYSCTL.replaceAll(".", "/")}`;
  let current: string;
  if (opts.netns) {
    const r = await runTool("sysctl", ["-n", RESERVED_PORTS_SYSCTL], { netns: opts.netns });
    if (r.code !== 0) throw new ToolError(["sysctl", "-n", RESERVED_PORTS_SYSCTL], r);
    current = r.stdout;
  } else {
    current = await readFile(path, "utf8");
  }
  const next = mergeReservedPorts(current);
  if (next === undefined) return false;
  if (opts.netns) {
    // The value is printed from numbers (formatPortList), never copied from the text read.
    const args = ["-q", "-w", `${RESERVED_PORTS_SYSCTL}=${next}`];
    const r = await runTool("sysctl", args, { netns: opts.netns });
    if (r.code !== 0) throw new ToolError(["sysctl", ...args], r);
  } else {
    await writeFile(path, `${next}\n`);
  }
  return true;
}
