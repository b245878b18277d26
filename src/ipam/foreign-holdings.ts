// The addresses a foreign (ZStack) logical switch already uses, read from NB rows. External mode puts pods on
// switches whose VMs are addressed by someone else, so every column that can show an address in use counts:
// a port's `addresses`, `dynamic_addresses`, `port_security` and `options:virtual-ip`, the networks of the
// router ports attached to the switch and the NAT external addresses of their routers, the DHCP options'
// `server_id` and `router`, the switch's `other_config:exclude_ips`, and the subnet's first and last address.
// Reading is deliberately generous: any word that is an address counts, even in an entry OVN itself would
// refuse, because taking a free address costs one address and handing out a used one breaks a VM.

import { compareIp, formatIp, type IpAddress, parseIp } from "./address.ts";
import { type Cidr, cidrContains, cidrLast, formatCidr, networkOf } from "./cidr.ts";
import { parseMac } from "./mac.ts";
import { type FieldProblem, InvalidInputError } from "./problem.ts";
import { formatRange, type IpRange, parseRange, rangeContains } from "./range.ts";

/** Malformed values reported per row; the rest are skipped silently. */
const MAX_PROBLEMS_PER_ROW = 8;

/** The column (or map key) an address was read from. */
export type HoldingSource =
  | "addresses"
  | "dynamic_addresses"
  | "port_security"
  | "options:virtual-ip"
  | "networks"
  | "external_ip"
  | "options:server_id"
  | "options:router"
  | "other_config:exclude_ips"
  | "first"
  | "last";

export interface FoundAddress {
  readonly ip: IpAddress;
  readonly source: HoldingSource;
}

/** What one row shows: its addresses, and the elements that could not be read (skipped, never thrown). */
export interface RowReading {
  readonly found: readonly FoundAddress[];
  readonly problems: readonly FieldProblem[];
}

/** The columns of a Logical_Switch_Port that can show addresses (the generated NB row type fits). */
export interface SwitchPortColumns {
  readonly addresses: readonly string[];
  readonly dynamic_addresses: string | null;
  readonly port_security: readonly string[];
  readonly options: Readonly<Record<string, string>>;
}

const KEYWORDS = new Set(["unknown", "router", "dynamic"]);
// The common MAC spelling, recognised without parseMac's exception for every address word.
const PLAIN_MAC = /^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}$/;

function tryMac(word: string): boolean {
  try {
    parseMac(word);
    return true;
  } catch (e) {
    if (e instanceof InvalidInputError) return false;
    throw e;
  }
}

/** Parses an address that may carry a prefix length ("10.0.0.4/24"); undefined when it is not one. */
function addressWord(word: string): IpAddress | undefined {
  const slash = word.indexOf("/");
  const bare = slash < 0 ? word : word.slice(0, slash);
  if (slash >= 0 && !/^(0|[1-9][0-9]{0,2})$/.test(word.slice(slash + 1))) return undefined;
  try {
    const ip = parseIp(bare);
    if (slash >= 0 && Number(word.slice(slash + 1)) > (ip.family === 4 ? 32 : 128)) return undefined;
    return ip;
  } catch (e) {
    if (e instanceof InvalidInputError) return undefined;
    throw e;
  }
}

/**
 * Reads the addresses in one "MAC IP..." style element word by word. MACs and the keywords `unknown`,
 * `router` and `dynamic` are no addresses; any other word that is not an address is one problem.
 */
function readWords(
  text: string,
  field: string,
  source: HoldingSource,
  found: FoundAddress[],
  problems: FieldProblem[],
): void {
  for (const word of text.split(/\s+/)) {
    if (word === "" || KEYWORDS.has(word) || PLAIN_MAC.test(word)) continue;
    const ip = addressWord(word);
    if (ip) found.push({ ip, source });
    else if (!tryMac(word))
      if (problems.length < MAX_PROBLEMS_PER_ROW)
        // Kept short and few: a foreign row can hold a megabyte of words.
        problems.push({
          field,
          message: `${JSON.stringify(word.slice(0, 64))} is not a MAC, an address or a keyword`,
        });
  }
}

/** One address alone (a map value such as `options:virtual-ip`); `allowMac` for DHCPv6's MAC `server_id`. */
function readSingle(
  text: string | undefined,
  field: string,
  source: HoldingSource,
  found: FoundAddress[],
  problems: FieldProblem[],
  allowMac = false,
): void {
  if (text === undefined) return;
  const trimmed = text.trim();
  if (trimmed === "") return;
  const ip = addressWord(trimmed);
  if (ip) found.push({ ip, source });
  else if (!(allowMac && tryMac(trimmed)))
    if (problems.length < MAX_PROBLEMS_PER_ROW)
      problems.push({ field, message: `${JSON.stringify(text.slice(0, 64))} is not an address` });
}

/**
 * The addresses a switch port shows. `dynamic_addresses` counts whatever `addresses` says: northd may still
 * be moving the port from a dynamic to a static address.
 */
export function readSwitchPort(lsp: SwitchPortColumns): RowReading {
  const found: FoundAddress[] = [];
  const problems: FieldProblem[] = [];
  lsp.addresses.forEach((e, i) => {
    readWords(e, `addresses[${i}]`, "addresses", found, problems);
  });
  if (lsp.dynamic_addresses !== null)
    readWords(lsp.dynamic_addresses, "dynamic_addresses", "dynamic_addresses", found, problems);
  lsp.port_security.forEach((e, i) => {
    readWords(e, `port_security[${i}]`, "port_security", found, problems);
  });
  readSingle(lsp.options["virtual-ip"], "options:virtual-ip", "options:virtual-ip", found, problems);
  return { found, problems };
}

/** The name of the router port a `router`-type switch port connects to, if any. */
export function attachedRouterPort(lsp: {
  readonly type: string;
  readonly options: Readonly<Record<string, string>>;
}): string | undefined {
  if (lsp.type !== "router") return undefined;
  const name = lsp.options["router-port"];
  return name === undefined || name === "" ? undefined : name;
}

/** The addresses of a router port's `networks` ("10.0.0.1/24"). */
export function readRouterPort(lrp: { readonly networks: readonly string[] }): RowReading {
  const found: FoundAddress[] = [];
  const problems: FieldProblem[] = [];
  lrp.networks.forEach((n, i) => {
    readSingle(n, `networks[${i}]`, "networks", found, problems);
  });
  return { found, problems };
}

export function readNat(nat: { readonly external_ip: string }): RowReading {
  const found: FoundAddress[] = [];
  const problems: FieldProblem[] = [];
  readSingle(nat.external_ip, "external_ip", "external_ip", found, problems);
  return { found, problems };
}

/** DHCP options: the server's own address and the router handed to clients (DHCPv6's server_id is a MAC). */
export function readDhcpOptions(d: { readonly options: Readonly<Record<string, string>> }): RowReading {
  const found: FoundAddress[] = [];
  const problems: FieldProblem[] = [];
  readSingle(d.options.server_id, "options:server_id", "options:server_id", found, problems, true);
  readSingle(d.options.router, "options:router", "options:router", found, problems);
  return { found, problems };
}

/** Whether a DHCP_Options row's `cidr` names one of these blocks (host bits in the text are tolerated). */
export function dhcpCidrIn(cidrText: string, cidrs: readonly Cidr[]): boolean {
  let c: Cidr;
  try {
    c = networkOf(cidrText.trim());
  } catch (e) {
    if (e instanceof InvalidInputError) return false;
    throw e;
  }
  return cidrs.some((x) => x.family === c.family && x.network === c.network && x.prefix === c.prefix);
}

export interface ExcludeEntry {
  readonly range: IpRange;
  /** The entry as written, for naming it. */
  readonly text: string;
}

/** `other_config:exclude_ips`: addresses and `a..b` ranges separated by spaces. */
export function readExcludeIps(text: string | undefined): {
  entries: ExcludeEntry[];
  problems: FieldProblem[];
} {
  const entries: ExcludeEntry[] = [];
  const problems: FieldProblem[] = [];
  if (text === undefined) return { entries, problems };
  for (const word of text.split(/\s+/)) {
    if (word === "") continue;
    try {
      entries.push({ range: parseRange(word, "other_config:exclude_ips"), text: word });
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      problems.push(e.problem);
    }
  }
  return { entries, problems };
}

/** The first and last address of a block; a point-to-point block (IPv4 /31, /32, IPv6 /127, /128) has none. */
export function subnetEdges(cidr: Cidr): { first?: IpAddress; last?: IpAddress } {
  if ((cidr.family === 4 ? 32 : 128) - cidr.prefix <= 1) return {};
  return { first: { family: cidr.family, value: cidr.network }, last: cidrLast(cidr) };
}

/** A row (or the subnet itself) that shows an address. */
export interface ForeignHolder {
  readonly table:
    | "Logical_Switch_Port"
    | "Logical_Router_Port"
    | "NAT"
    | "DHCP_Options"
    | "Logical_Switch"
    | "subnet";
  /** The row's UUID; absent for the subnet's own first and last address. */
  readonly uuid?: string;
  /** The port, router port or switch name; the NAT's or DHCP options' identifying text; the CIDR. */
  readonly name: string;
  readonly source: HoldingSource;
  /** For an exclude_ips entry: the entry as written. */
  readonly entry?: string;
}

export function describeForeignHolder(h: ForeignHolder): string {
  const what = h.table === "subnet" ? `subnet ${h.name}` : `${h.table} ${JSON.stringify(h.name)}`;
  return `${what} (${h.source}${h.entry !== undefined ? ` ${h.entry}` : ""})`;
}

/** A malformed element, with the row it came from. */
export interface HoldingProblem {
  readonly holder: Omit<ForeignHolder, "source" | "entry">;
  readonly problem: FieldProblem;
}

const keyOf = (ip: IpAddress) => `${ip.family}/${ip.value}`;
const rowId = (h: Pick<ForeignHolder, "table" | "uuid">) => `${h.table} ${h.uuid ?? ""}`;

/**
 * The taken set of one switch: single addresses with the rows showing them, and exclude ranges (a range may
 * hold millions of addresses, so it is kept as a range). Only addresses inside the given CIDRs are kept.
 */
export class HoldingSet {
  private readonly points = new Map<string, { ip: IpAddress; holders: ForeignHolder[] }>();
  private rangeList: { range: IpRange; holder: ForeignHolder }[] = [];
  /** The point keys each row added, so a changed row can be taken out again. */
  private readonly byRow = new Map<string, string[]>();
  private problemList: HoldingProblem[] = [];

  constructor(readonly cidrs: readonly Cidr[]) {}

  get problems(): readonly HoldingProblem[] {
    return this.problemList;
  }

  private inside(ip: IpAddress): boolean {
    return this.cidrs.some((c) => cidrContains(c, ip));
  }

  /** Records an address; one outside every CIDR is ignored. Returns its key when recorded. */
  add(ip: IpAddress, holder: ForeignHolder): string | undefined {
    if (!this.inside(ip)) return undefined;
    const k = keyOf(ip);
    const cur = this.points.get(k);
    if (cur) cur.holders.push(holder);
    else this.points.set(k, { ip, holders: [holder] });
    return k;
  }

  /** Records one row's reading under a holder that differs only in source; the row can be removed later. */
  addReading(reading: RowReading, holder: Omit<ForeignHolder, "source">): void {
    const keys: string[] = [];
    for (const f of reading.found) {
      const k = this.add(f.ip, { ...holder, source: f.source });
      if (k !== undefined) keys.push(k);
    }
    if (keys.length > 0) this.byRow.set(rowId(holder), keys);
    for (const problem of reading.problems) this.problemList.push({ holder, problem });
  }

  /** Takes out everything a row recorded with addReading; returns the addresses it held (deduplicated). */
  removeRow(holder: Pick<ForeignHolder, "table" | "uuid">): IpAddress[] {
    const id = rowId(holder);
    if (this.problemList.some((p) => rowId(p.holder) === id))
      this.problemList = this.problemList.filter((p) => rowId(p.holder) !== id);
    const keys = this.byRow.get(id);
    if (!keys) return [];
    this.byRow.delete(id);
    const out: IpAddress[] = [];
    for (const k of new Set(keys)) {
      const cur = this.points.get(k);
      if (!cur) continue;
      out.push(cur.ip);
      const rest = cur.holders.filter((h) => h.table !== holder.table || h.uuid !== holder.uuid);
      if (rest.length === 0) this.points.delete(k);
      else cur.holders = rest;
    }
    return out;
  }

  /** Holders of one address as comparable text (for telling a real change from a row read again). */
  holdersKey(ip: IpAddress): string {
    const hs = this.points.get(keyOf(ip))?.holders ?? [];
    return hs
      .map((h) => `${h.table} ${h.uuid} ${h.name} ${h.source}`)
      .sort()
      .join("\n");
  }

  /** Drops every range (before recording a switch's exclude_ips again). */
  clearRanges(): void {
    this.rangeList = [];
  }

  /** Records a range, clipped to the CIDRs of its family; nothing when it lies outside them all. */
  addRange(range: IpRange, holder: ForeignHolder): void {
    for (const c of this.cidrs) {
      if (c.family !== range.family) continue;
      const lo = c.network;
      const hi = cidrLast(c).value;
      let first = range.first;
      let last = range.last;
      if (first < lo) first = lo; // bigints: Math.max does not take them
      if (last > hi) last = hi;
      if (first <= last) this.rangeList.push({ range: { family: range.family, first, last }, holder });
    }
  }

  /** Records the first and last address of each CIDR (once, when the set is made). */
  addSubnetEdges(): void {
    for (const c of this.cidrs) {
      const { first, last } = subnetEdges(c);
      const name = formatCidr(c);
      if (first) this.add(first, { table: "subnet", name, source: "first" });
      if (last) this.add(last, { table: "subnet", name, source: "last" });
    }
  }

  /** Records a switch's exclude_ips as ranges, and its unreadable entries as problems of the switch row. */
  addSwitch(ls: {
    readonly _uuid: string;
    readonly name: string;
    readonly other_config: Readonly<Record<string, string>>;
  }): void {
    const { entries, problems } = readExcludeIps(ls.other_config.exclude_ips);
    const holder = { table: "Logical_Switch", uuid: ls._uuid, name: ls.name } as const;
    for (const e of entries)
      this.addRange(e.range, { ...holder, source: "other_config:exclude_ips", entry: e.text });
    for (const problem of problems) this.problemList.push({ holder, problem });
  }

  isTaken(ip: IpAddress): boolean {
    return this.points.has(keyOf(ip)) || this.rangeList.some((r) => rangeContains(r.range, ip));
  }

  /** Every row that shows the address (empty when it is free). */
  holdersOf(ip: IpAddress): ForeignHolder[] {
    const out = [...(this.points.get(keyOf(ip))?.holders ?? [])];
    for (const r of this.rangeList) if (rangeContains(r.range, ip)) out.push(r.holder);
    return out;
  }

  /** The single addresses, in address order. */
  addresses(): IpAddress[] {
    return [...this.points.values()].map((p) => p.ip).sort(compareIp);
  }

  ranges(): readonly { readonly range: IpRange; readonly holder: ForeignHolder }[] {
    return this.rangeList;
  }

  /**
   * A canonical text listing of the whole set ("10.0.0.5 Logical_Switch_Port vm1 port_security", ranges as
   * "10.0.0.20-10.0.0.29 ..."), sorted: two sets hold the same thing exactly when their listings are equal.
   */
  listing(): string[] {
    const line = (what: string, h: ForeignHolder) =>
      `${what} ${h.table} ${h.uuid ?? "-"} ${h.name} ${h.source}${h.entry !== undefined ? ` ${h.entry}` : ""}`;
    const out: string[] = [];
    for (const p of this.points.values()) for (const h of p.holders) out.push(line(formatIp(p.ip), h));
    for (const r of this.rangeList) out.push(line(formatRange(r.range), r.holder));
    return out.sort();
  }

  /**
   * The addresses whose holders differ between two sets: single addresses one by one, and every range that is
   * in one set and not the other (as a whole). Holders are compared as a whole listing per address.
   */
  static changes(before: HoldingSet, after: HoldingSet): { addresses: IpAddress[]; ranges: IpRange[] } {
    const addresses: IpAddress[] = [];
    const holders = (s: HoldingSet, k: string) =>
      JSON.stringify(
        (s.points.get(k)?.holders ?? []).map((h) => [h.table, h.uuid, h.name, h.source, h.entry]).sort(),
      );
    for (const [k, p] of after.points) if (holders(before, k) !== holders(after, k)) addresses.push(p.ip);
    for (const [k, p] of before.points) if (!after.points.has(k)) addresses.push(p.ip);
    const rangeKey = (r: { range: IpRange; holder: ForeignHolder }) =>
      `${formatRange(r.range)} ${r.holder.uuid} ${r.holder.entry}`;
    const beforeRanges = new Set(before.rangeList.map(rangeKey));
    const afterRanges = new Set(after.rangeList.map(rangeKey));
    const ranges = [
      ...after.rangeList.filter((r) => !beforeRanges.has(rangeKey(r))),
      ...before.rangeList.filter((r) => !afterRanges.has(rangeKey(r))),
    ].map((r) => r.range);
    return { addresses: addresses.sort(compareIp), ranges };
  }
}

/** The rows of one switch that can show addresses, already resolved (by the live view, from the NB cache). */
export interface SwitchRows<P extends SwitchPortColumns & { readonly _uuid: string; readonly name: string }> {
  readonly switch:
    | {
        readonly _uuid: string;
        readonly name: string;
        readonly other_config: Readonly<Record<string, string>>;
      }
    | undefined;
  readonly ports: readonly P[];
  readonly routerPorts: readonly {
    readonly _uuid: string;
    readonly name: string;
    readonly networks: readonly string[];
  }[];
  readonly nats: readonly { readonly _uuid: string; readonly external_ip: string }[];
  readonly dhcpOptions: readonly {
    readonly _uuid: string;
    readonly cidr: string;
    readonly options: Readonly<Record<string, string>>;
  }[];
}

/** How a row is read; the live view passes a memoizing reader so an unchanged row is not parsed again. */
export interface RowReader {
  port(p: SwitchPortColumns): RowReading;
  routerPort(p: { readonly networks: readonly string[] }): RowReading;
  nat(n: { readonly external_ip: string }): RowReading;
  dhcp(d: { readonly options: Readonly<Record<string, string>> }): RowReading;
}

export const plainReader: RowReader = {
  port: readSwitchPort,
  routerPort: readRouterPort,
  nat: readNat,
  dhcp: readDhcpOptions,
};

/** The taken set of a switch from its resolved rows. */
export function collectHoldings<
  P extends SwitchPortColumns & { readonly _uuid: string; readonly name: string },
>(rows: SwitchRows<P>, cidrs: readonly Cidr[], reader: RowReader = plainReader): HoldingSet {
  const set = new HoldingSet(cidrs);
  set.addSubnetEdges();
  if (rows.switch) set.addSwitch(rows.switch);
  for (const p of rows.ports)
    set.addReading(reader.port(p), { table: "Logical_Switch_Port", uuid: p._uuid, name: p.name });
  for (const p of rows.routerPorts)
    set.addReading(reader.routerPort(p), { table: "Logical_Router_Port", uuid: p._uuid, name: p.name });
  for (const n of rows.nats)
    set.addReading(reader.nat(n), { table: "NAT", uuid: n._uuid, name: n.external_ip });
  for (const d of rows.dhcpOptions)
    set.addReading(reader.dhcp(d), { table: "DHCP_Options", uuid: d._uuid, name: d.cidr });
  return set;
}
