// The node's chassis in External mode, where the SB is ZStack's and its hypervisors are chassis there too. Our
// chassis name (ovn-controller's system-id) is a configured prefix plus the node name, so it cannot be a ZStack
// host's; before the agent hands the name to ovn-controller it checks SB: a chassis of that name that is not this
// node's (its hostname is not the node name the agent writes) is refused, because ovn-controller would take the
// row over. It also compares the encapsulation of ZStack's chassis with ours: a node that tunnels vxlan among
// hosts that speak only geneve cannot reach their VMs. The agent writes nothing in SB; ovn-controller writes its
// own chassis.

import type { OvsdbClient } from "../ovsdb/client.ts";
import type { Chassis, Encap, SbTables } from "../ovsdb/models/sb.generated.ts";
import type { EncapType } from "./mtu.ts";
import { rootRow, type VswitchClient } from "./vswitch-db.ts";

/** The default `node.chassisPrefix`: "k8s-<node>" is neither a management IP nor a ZStack UUID. */
export const DEFAULT_CHASSIS_PREFIX = "k8s-";
/** What a chassis name may hold: it is a system-id, a hostname-like token in OVS, and shows in SB and logs. */
const CHASSIS_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const MAX_CHASSIS_NAME = 64;
/** ZStack names objects by 32-hex UUIDs without dashes; a chassis name of that shape could be one of its hosts. */
const ZSTACK_UUID_RE = /^[0-9a-fA-F]{32}$/;
const IPV4_RE = /^\d{1,3}(\.\d{1,3}){3}$/;

/**
 * Why `prefix + nodeName` cannot be our chassis name in External mode, or undefined when it can. ZStack's hosts
 * are named by their management IP (and its objects by 32-hex UUIDs): a name of either shape is refused, and so
 * is an empty prefix, which would leave the bare node name (a host name ZStack may use for a hypervisor).
 */
export function chassisNameProblem(prefix: string, nodeName: string, setting: string): string | undefined {
  const name = `${prefix}${nodeName}`;
  if (prefix === "")
    return `${setting} is empty: in ovn.mode=external the chassis is named <prefix><node name> so that it cannot be one of ZStack's hosts; set it, e.g. ${setting}=${DEFAULT_CHASSIS_PREFIX}`;
  if (!CHASSIS_NAME_RE.test(prefix))
    return `${setting}=${JSON.stringify(prefix)}: the chassis name prefix may hold letters, digits, ".", "_" and "-", starting with a letter or digit`;
  if (!CHASSIS_NAME_RE.test(name) || name.length > MAX_CHASSIS_NAME)
    return `the chassis name ${JSON.stringify(name)} (${setting} + node name) must be at most ${MAX_CHASSIS_NAME} letters, digits, ".", "_" or "-"; shorten ${setting}`;
  if (IPV4_RE.test(name) || name.includes(":") || ZSTACK_UUID_RE.test(name))
    return `the chassis name ${JSON.stringify(name)} (${setting} + node name) looks like a ZStack host's (a management IP or a ZStack UUID); set ${setting} to a word such as ${DEFAULT_CHASSIS_PREFIX}`;
  return undefined;
}

/** This node as SB should show it once ovn-controller has registered. */
export interface SelfChassis {
  /** The chassis name (system-id). */
  readonly name: string;
  /** The hostname the agent writes for ovn-controller (the node name). */
  readonly hostname: string;
  readonly encapType: EncapType;
  /** The setting that chooses the encapsulation, named in the problem. */
  readonly encapSetting: string;
}

export interface ChassisCheck {
  /**
   * Set when SB holds a chassis of our name that is not this node's, or another chassis answering to the node name
   * (which pod ports request): the name must not be given to ovn-controller.
   */
  readonly conflict?: string;
  /** Set when other chassis use an encapsulation this node is not configured for. */
  readonly encapMismatch?: string;
}

type ChassisRow = Pick<Chassis, "_uuid" | "name" | "hostname" | "encaps">;
type EncapRow = Pick<Encap, "_uuid" | "type" | "ip" | "chassis_name">;

/** How many other chassis an encapsulation problem names before it says "and N more". */
const NAMED = 5;

const describe = (c: ChassisRow) => (c.hostname ? `${c.name} (hostname ${c.hostname})` : c.name);

/**
 * Compares SB's chassis with this node: pure, for the watcher below and its tests. `localSystemId` is the
 * system-id the node's Open_vSwitch row holds now: when it is not ours and names a chassis in SB, this OVS serves
 * that chassis (a ZStack hypervisor's own OVS), and writing our name would rename it.
 */
export function checkChassis(
  self: SelfChassis,
  chassis: readonly ChassisRow[],
  encaps: ReadonlyMap<string, EncapRow>,
  localSystemId?: string,
): ChassisCheck {
  let conflict: string | undefined;
  const mine = chassis.find((c) => c.name === self.name);
  const served =
    localSystemId && localSystemId !== self.name ? chassis.find((c) => c.name === localSystemId) : undefined;
  if (served)
    conflict = `this node's Open_vSwitch already serves chassis ${describe(served)} in SB (its external_ids:system-id); the agent does not rename another chassis to ${self.name}. Give the node an OVS of its own (not a ZStack hypervisor's), or, if that chassis is a stale one of this node, delete it from SB and clear system-id`;
  else if (mine && mine.hostname !== self.hostname)
    conflict = `SB already holds a chassis named ${self.name} that is not this node's: its hostname is ${JSON.stringify(mine.hostname)}, this node (${self.hostname}) registers with hostname ${JSON.stringify(self.hostname)}; the agent does not hand that name to ovn-controller (it would take the chassis over). Set node.chassisPrefix so that the name is free, or remove the stale chassis if it is really this node's`;
  // The controller asks for this node's pod ports by the node name (options:requested-chassis), which
  // ovn-controller matches against a chassis' name or hostname: another chassis answering to the node name (a
  // ZStack host whose hostname, its management IP, is also this node's name) would bind this node's pods.
  const claimant = chassis.find(
    (c) => c.name !== self.name && (c.name === self.hostname || c.hostname === self.hostname),
  );
  if (!conflict && claimant)
    conflict = `SB holds chassis ${describe(claimant)}, which answers to this node's name ${JSON.stringify(self.hostname)}: pod ports request their node by that name (options:requested-chassis, matched against a chassis' name or hostname), so that chassis would bind this node's pods; the agent does not register beside it. Give the Kubernetes node a name that is not a ZStack host's name or hostname (its management IP), or remove that chassis if it is stale`;
  const others = chassis.filter((c) => c.name !== self.name).sort((a, b) => (a.name < b.name ? -1 : 1));
  const lacking: { c: ChassisRow; types: string[] }[] = [];
  for (const c of others) {
    const types = [
      ...new Set(c.encaps.map((u) => encaps.get(u)?.type).filter((t): t is EncapRow["type"] => !!t)),
    ];
    if (types.length > 0 && !types.includes(self.encapType)) lacking.push({ c, types: types.sort() });
  }
  let encapMismatch: string | undefined;
  if (lacking.length > 0) {
    const theirs = [...new Set(lacking.flatMap((l) => l.types))].sort();
    const named = lacking
      .slice(0, NAMED)
      .map((l) => `${describe(l.c)} uses ${l.types.join("+")}`)
      .join(", ");
    const more = lacking.length > NAMED ? ` and ${lacking.length - NAMED} more` : "";
    const fix =
      theirs.length === 1 ? `${self.encapSetting}=${theirs[0]}` : `${self.encapSetting} to one of theirs`;
    encapMismatch = `${lacking.length} of ${others.length} other chassis in SB have no ${self.encapType} encapsulation, which this node is configured for (${self.encapSetting}=${self.encapType}): ${named}${more}; tunnels between them and this node cannot work; set ${fix}`;
  }
  return {
    ...(conflict ? { conflict } : {}),
    ...(encapMismatch ? { encapMismatch } : {}),
  };
}

/**
 * Follows SB's Chassis and Encap tables (level-triggered: every change recomputes the check) and tells the agent
 * the result. `onCleared` is called once, at the first check on a synced cache that shows no conflict: from then
 * on the agent may hand the chassis name to ovn-controller, and the chassis of that name is its own. The client
 * is the caller's, monitoring at least Chassis and Encap; nothing is written.
 */
export class ChassisWatch {
  private last: ChassisCheck | undefined;
  private cleared = false;
  private unsubscribe: (() => void)[] = [];
  private readonly onState = (state: string) => {
    if (state === "ready") this.evaluate();
  };

  constructor(
    private readonly opts: {
      client: OvsdbClient<SbTables>;
      self: SelfChassis;
      /** Called with every changed check (a problem appearing, changing or clearing). */
      onChange: (check: ChassisCheck) => void;
      onCleared?: () => void;
      /** The node's Open_vSwitch database: its system-id is checked too, and its changes re-run the check. */
      vswitch?: VswitchClient;
    },
  ) {}

  /** The last check; undefined until SB has been read. */
  get check(): ChassisCheck | undefined {
    return this.last;
  }

  start(): void {
    const { client } = this.opts;
    const again = () => this.evaluate();
    this.unsubscribe = [client.cache.subscribe("Chassis", again), client.cache.subscribe("Encap", again)];
    if (this.opts.vswitch) this.unsubscribe.push(this.opts.vswitch.cache.subscribe("Open_vSwitch", again));
    client.on("state", this.onState);
    this.evaluate();
  }

  stop(): void {
    for (const u of this.unsubscribe.splice(0)) u();
    this.opts.client.off("state", this.onState);
  }

  private evaluate(): void {
    const { client } = this.opts;
    // While a monitor reply is being applied the cache may hold Encap rows but not yet the Chassis rows: an empty
    // Chassis table would look like a free name. Only a synced cache counts (entering "ready" evaluates again).
    if (!client.connected) return;
    const chassis = [...client.cache.table("Chassis").values()];
    const encaps = new Map([...client.cache.table("Encap").values()].map((e) => [e._uuid, e] as const));
    const local = this.opts.vswitch ? rootRow(this.opts.vswitch)?.external_ids["system-id"] : undefined;
    const next = checkChassis(this.opts.self, chassis, encaps, local);
    const prev = this.last;
    this.last = next;
    if (!prev || prev.conflict !== next.conflict || prev.encapMismatch !== next.encapMismatch)
      this.opts.onChange(next);
    if (!next.conflict && !this.cleared) {
      this.cleared = true;
      this.opts.onCleared?.();
    }
  }
}
