// The live taken set of one foreign (ZStack) logical switch, kept up to date from the NB cache. Every batch of
// cache events that touches a row the switch's set depends on (the switch, its ports, the router ports they
// attach to, those routers and their NAT rules, DHCP options) rebuilds the set from the cache; rows are
// immutable objects, so each row is parsed once per version and a rebuild only walks the switch's rows.

import type { IpAddress } from "../ipam/address.ts";
import type { Cidr } from "../ipam/cidr.ts";
import {
  attachedRouterPort,
  collectHoldings,
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
import type { IpRange } from "../ipam/range.ts";
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

export class ForeignSwitchHoldings {
  private current: HoldingSet;
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
    this.current = this.build();
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

  /** The whole current set (read-only; replaced, never changed, by a rebuild). */
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
    const before = this.current;
    this.current = this.build();
    const change = HoldingSet.changes(before, this.current);
    if (change.addresses.length === 0 && change.ranges.length === 0) return;
    for (const fn of this.listeners) {
      try {
        fn(change);
      } catch (e) {
        this.onListenerError(e);
      }
    }
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

  private build(): HoldingSet {
    this.rebuilds++;
    const rows = this.resolve();
    return collectHoldings(rows, this.opts.cidrs, this.reader);
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
