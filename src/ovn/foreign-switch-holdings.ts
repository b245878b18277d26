// The live taken set of one foreign (ZStack) logical switch, kept up to date from the NB cache. Every batch of
// cache events that touches a row the switch's set depends on (the switch, its ports, the router ports they
// attach to, those routers and their NAT rules, DHCP options) resolves the switch's rows from the cache again.
// Rows are immutable objects (a change replaces the object), so only rows whose object changed are taken out of
// the set and read again; the rest cost one lookup each.

import { compareIp, type IpAddress } from "../ipam/address.ts";
import type { Cidr } from "../ipam/cidr.ts";
import {
  attachedRouterPort,
  dhcpCidrIn,
  type ForeignHolder,
  type HoldingProblem,
  HoldingSet,
  type RowReader,
  type RowReading,
  readDhcpOptions,
  readNat,
  readRouterPort,
  readSwitchPort,
  type SwitchRows,
} from "../ipam/foreign-holdings.ts";
import { formatRange, type IpRange } from "../ipam/range.ts";
import type { Cache, RowEvent } from "../ovsdb/cache.ts";
import type {
  DHCPOptions,
  LogicalRouterPort,
  LogicalSwitchPort,
  NAT,
  NbTables,
} from "../ovsdb/models/nb.generated.ts";

export interface ForeignSwitchHoldingsOptions {
  /** The subnet's blocks (one per family); addresses outside them are not tracked. */
  readonly cidrs: readonly Cidr[];
  /** Ports left out of the set, e.g. our own pod ports, which the pod allocator holds itself. */
  readonly skipPort?: (lsp: LogicalSwitchPort) => boolean;
}

/** What changed in one rebuild: consult isTaken / holdersOf for each. */
export interface HoldingsChange {
  /** Single addresses whose holders changed (taken, freed or held by other rows). */
  readonly addresses: readonly IpAddress[];
  /** exclude_ips ranges added or removed, whole. */
  readonly ranges: readonly IpRange[];
}

export type HoldingsListener = (change: HoldingsChange) => void;

const WATCHED = new Set([
  "Logical_Switch",
  "Logical_Switch_Port",
  "Logical_Router_Port",
  "Logical_Router",
  "NAT",
  "DHCP_Options",
]);

/** One row in the set: the row object it was read from, and how it is named. */
interface Entry {
  readonly row: object;
  readonly kind: "port" | "routerPort" | "nat" | "dhcp";
  readonly holder: Omit<ForeignHolder, "source">;
}

export class ForeignSwitchHoldings {
  private readonly current: HoldingSet;
  private entries = new Map<string, Entry>();
  private switchRow: object | undefined;
  private readonly listeners = new Set<HoldingsListener>();
  private readonly unsubscribe: () => void;
  // What the last rebuild depended on, so unrelated events (other switches' ports) cost a lookup only.
  private portUuids = new Set<string>();
  private routerPortNames = new Set<string>();
  private routerUuids = new Set<string>();
  private natUuids = new Set<string>();
  private readonly readings = new WeakMap<object, RowReading>();
  private readonly reader: RowReader;
  /** Rebuilds done (the first one at construction included), for tests and diagnostics. */
  rebuilds = 0;
  /** Listener failures land here and never stop the view. */
  onListenerError: (e: unknown) => void = () => {};

  constructor(
    private readonly cache: Cache<NbTables>,
    readonly switchUuid: string,
    private readonly opts: ForeignSwitchHoldingsOptions,
  ) {
    const memo =
      <R extends object>(read: (r: R) => RowReading) =>
      (r: R): RowReading => {
        let v = this.readings.get(r);
        if (!v) {
          v = read(r);
          this.readings.set(r, v);
        }
        return v;
      };
    this.reader = {
      port: memo(readSwitchPort),
      routerPort: memo(readRouterPort),
      nat: memo(readNat),
      dhcp: memo(readDhcpOptions),
    };
    this.current = new HoldingSet(opts.cidrs);
    this.current.addSubnetEdges();
    this.update();
    this.unsubscribe = cache.subscribe(undefined, (events) => this.onEvents(events));
  }

  close(): void {
    this.unsubscribe();
    this.listeners.clear();
  }

  /** Whether the switch row is in the cache (false after ZStack deleted it, or before it appears). */
  get switchPresent(): boolean {
    return this.cache.table("Logical_Switch").get(this.switchUuid) !== undefined;
  }

  isTaken(ip: IpAddress): boolean {
    return this.current.isTaken(ip);
  }

  holdersOf(ip: IpAddress): ForeignHolder[] {
    return this.current.holdersOf(ip);
  }

  /** Elements that could not be read, with their rows: skipped, and counted here. */
  get problems(): readonly HoldingProblem[] {
    return this.current.problems;
  }

  /** The whole current set, updated in place: read it, never change it. */
  get holdings(): HoldingSet {
    return this.current;
  }

  /** Calls `fn` after each rebuild that changed the set. Returns the unsubscribe function. */
  onChange(fn: HoldingsListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private onEvents(events: readonly RowEvent[]): void {
    if (!events.some((e) => this.relevant(e))) return;
    const change = this.update();
    if (change.addresses.length === 0 && change.ranges.length === 0) return;
    for (const fn of this.listeners) {
      try {
        fn(change);
      } catch (e) {
        this.onListenerError(e);
      }
    }
  }

  /** Brings the set in line with the cache, touching only rows whose object changed. */
  private update(): HoldingsChange {
    this.rebuilds++;
    const rows = this.resolve();
    const set = this.current;
    // Keyed by UUID (unique across the tables); an unchanged row keeps its entry, so this walk allocates little.
    const next = new Map<string, Entry>();
    const put = (
      row: { readonly _uuid: string },
      kind: Entry["kind"],
      name: () => Omit<ForeignHolder, "source">,
    ) => {
      const old = this.entries.get(row._uuid);
      next.set(row._uuid, old && old.row === row ? old : { row, kind, holder: name() });
    };
    for (const p of rows.ports)
      put(p, "port", () => ({ table: "Logical_Switch_Port", uuid: p._uuid, name: p.name }));
    for (const p of rows.routerPorts)
      put(p, "routerPort", () => ({ table: "Logical_Router_Port", uuid: p._uuid, name: p.name }));
    for (const n of rows.nats) put(n, "nat", () => ({ table: "NAT", uuid: n._uuid, name: n.external_ip }));
    for (const d of rows.dhcpOptions)
      put(d, "dhcp", () => ({ table: "DHCP_Options", uuid: d._uuid, name: d.cidr }));
    const read = (e: Entry): RowReading => {
      const r = this.reader;
      switch (e.kind) {
        case "port":
          return r.port(e.row as LogicalSwitchPort);
        case "routerPort":
          return r.routerPort(e.row as LogicalRouterPort);
        case "nat":
          return r.nat(e.row as NAT);
        default:
          return r.dhcp(e.row as DHCPOptions);
      }
    };

    // Each touched address with its holders before, to report only real changes.
    const touched = new Map<string, { ip: IpAddress; before: string }>();
    const note = (reading: RowReading) => {
      for (const f of reading.found) {
        const k = `${f.ip.family}/${f.ip.value}`;
        if (!touched.has(k)) touched.set(k, { ip: f.ip, before: set.holdersKey(f.ip) });
      }
    };
    for (const [id, old] of this.entries) {
      const now = next.get(id);
      if (now === old) continue;
      note(read(old));
      set.removeRow(old.holder);
    }
    for (const [id, now] of next) {
      const old = this.entries.get(id);
      if (old === now) continue;
      const reading = read(now);
      note(reading);
      set.addReading(reading, now.holder);
    }
    this.entries = next;

    let ranges: IpRange[] = [];
    if (rows.switch !== this.switchRow) {
      const rangeKey = (x: { range: IpRange; holder: ForeignHolder }) =>
        `${formatRange(x.range)} ${x.holder.uuid} ${x.holder.entry}`;
      const before = [...set.ranges()];
      set.removeRow({ table: "Logical_Switch", uuid: this.switchUuid });
      set.clearRanges();
      if (rows.switch) set.addSwitch(rows.switch);
      const after = set.ranges();
      const beforeKeys = new Set(before.map(rangeKey));
      const afterKeys = new Set(after.map(rangeKey));
      ranges = [
        ...after.filter((x) => !beforeKeys.has(rangeKey(x))),
        ...before.filter((x) => !afterKeys.has(rangeKey(x))),
      ].map((x) => x.range);
      this.switchRow = rows.switch;
    }
    const addresses = [...touched.values()]
      .filter((t) => set.holdersKey(t.ip) !== t.before)
      .map((t) => t.ip)
      .sort(compareIp);
    return { addresses, ranges };
  }

  private relevant(e: RowEvent): boolean {
    if (!WATCHED.has(e.table)) return false;
    const rows = e.kind === "update" ? [e.old, e.row] : e.kind === "add" ? [e.row] : [e.old];
    switch (e.table) {
      case "Logical_Switch":
        return rows.some((r) => r._uuid === this.switchUuid);
      case "Logical_Switch_Port":
        // A port added to the switch arrives with the switch's update in the same batch.
        return rows.some((r) => this.portUuids.has(r._uuid));
      case "Logical_Router_Port":
        return rows.some((r) => this.routerPortNames.has((r as unknown as LogicalRouterPort).name));
      case "Logical_Router":
        // A router port may be attached before its router lists it; routers change rarely.
        return this.routerPortNames.size > 0;
      case "NAT":
        return rows.some((r) => this.natUuids.has(r._uuid));
      default:
        return true; // DHCP_Options: few rows, and any may name the subnet's CIDR
    }
  }

  private resolve(): SwitchRows<LogicalSwitchPort> {
    const c = this.cache;
    const ls = c.table("Logical_Switch").get(this.switchUuid);
    const lspTable = c.table("Logical_Switch_Port");
    const ports: LogicalSwitchPort[] = [];
    const portUuids = new Set<string>();
    const routerPortNames = new Set<string>();
    const dhcpRefs = new Set<string>();
    for (const uuid of ls?.ports ?? []) {
      portUuids.add(uuid);
      const p = lspTable.get(uuid);
      if (!p) continue;
      const lrp = attachedRouterPort(p);
      if (lrp !== undefined) routerPortNames.add(lrp);
      if (this.opts.skipPort?.(p)) continue;
      ports.push(p);
      if (p.dhcpv4_options) dhcpRefs.add(p.dhcpv4_options);
      if (p.dhcpv6_options) dhcpRefs.add(p.dhcpv6_options);
    }
    const lrpTable = c.table("Logical_Router_Port");
    const routerPorts: LogicalRouterPort[] = [];
    for (const name of routerPortNames) routerPorts.push(...lrpTable.lookup("name", name));
    const lrpUuids = new Set(routerPorts.map((p) => p._uuid));
    const routerUuids = new Set<string>();
    const natUuids = new Set<string>();
    const nats: NAT[] = [];
    if (lrpUuids.size > 0) {
      const natTable = c.table("NAT");
      for (const lr of c.table("Logical_Router").values()) {
        if (!lr.ports.some((u) => lrpUuids.has(u))) continue;
        routerUuids.add(lr._uuid);
        for (const u of lr.nat) {
          natUuids.add(u);
          const n = natTable.get(u);
          if (n) nats.push(n);
        }
      }
    }
    const dhcpOptions: DHCPOptions[] = [];
    for (const d of c.table("DHCP_Options").values())
      if (dhcpRefs.has(d._uuid) || dhcpCidrIn(d.cidr, this.opts.cidrs)) dhcpOptions.push(d);
    this.portUuids = portUuids;
    this.routerPortNames = routerPortNames;
    this.routerUuids = routerUuids;
    this.natUuids = natUuids;
    return { switch: ls, ports, routerPorts, nats, dhcpOptions };
  }

  /** The routers whose ports attach to the switch (for diagnostics). */
  get attachedRouters(): readonly string[] {
    return [...this.routerUuids];
  }
}
