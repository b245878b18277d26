// A node's place in the topology: its management port on the join switch (address from the join CIDR), the
// address set of its pods and its egress reroute policy. The management port holds a second join address, the
// node's service SNAT address: the node agent SNATs Service connections that entered the node to it, so that
// NetworkPolicy's own-node allow (the management address only) does not admit them. The join allocator is
// rebuilt from the ports on the join switch and follows their changes, like the pod allocators; NB itself refuses
// a fresh join address that a port already holds (one external_ids key per address, and a `wait` on it), so a
// view that lags NB can never give one address to two nodes.

import { SubnetAllocator } from "../ipam/allocator.ts";
import { heldIps } from "../ipam/lsp-addresses.ts";
import { macForAddresses } from "../ipam/mac.ts";
import { parseSubnetSpec, type SubnetDefinition } from "../ipam/subnet-spec.ts";
import { findAllOwned, findOwned, plan } from "../ovn/nb-diff.ts";
import {
  addressKey,
  idOf,
  isOurs,
  JOIN_ADDRESS_SCOPE,
  KIND_KEY,
  NODE_KEY,
  SERVICE_SNAT_IP_KEY,
} from "../ovn/ownership.ts";
import {
  type ClusterNetworks,
  egressPlaceholder,
  mgmtPortName,
  nodePodsAddressSet,
  nodeRows,
  nodeScope,
} from "../ovn/topology.ts";
import type { RowEvent } from "../ovsdb/cache.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import { certainlyNotApplied, WaitFailedError } from "../ovsdb/errors.ts";
import type { LogicalSwitchPort, NbTables } from "../ovsdb/models/nb.generated.ts";
import { setHas } from "../ovsdb/set-index.ts";
import { byUuid, type Mutation } from "../ovsdb/transaction.ts";

const POD_CHASSIS_INDEX = "zstack.io/pod-requested-chassis";

export { MGMT_PORT_ANNOTATION } from "../ovn/topology.ts";

export interface MgmtPort {
  readonly name: string;
  readonly ip: string; // with prefix
  readonly mac: string;
  readonly gateway: string;
  /** Without prefix. */
  readonly serviceSnatIp: string;
  /**
   * The node's own IPv4 addresses whose replies the cluster router returns to this port (its reply policy is in
   * NB once this is known): the node agent may then send node-local Service connections to pods with the
   * node's address as source. Absent when there are none.
   */
  readonly nodeReplyIps?: readonly string[];
}

const snatOwner = (node: string) => `node/${node}/service-snat`;
const nodeOwner = (node: string) => `node/${node}`;
/** How many times ensure tries again when NB refuses a fresh address that its view showed free. */
const ADDRESS_ATTEMPTS = 3;

/** NB refused a fresh join address: a port this controller does not see yet holds it. */
export class JoinAddressTakenError extends Error {
  constructor(
    readonly node: string,
    readonly ip: string,
  ) {
    super(`node ${node}: NB refused join address ${ip}: a port this controller does not see yet holds it`);
  }
}

/** The allocator owner of each address a management port holds. */
function holdings(p: LogicalSwitchPort): { address: string; owner: string }[] {
  const node = p.external_ids[NODE_KEY] ?? "";
  const snat = p.external_ids[SERVICE_SNAT_IP_KEY];
  return heldIps(p).map((address) => ({
    address,
    owner: address === snat ? snatOwner(node) : nodeOwner(node),
  }));
}

const isMgmtPort = (p: LogicalSwitchPort) =>
  isOurs(p) && p.external_ids[KIND_KEY] === "mgmt-port" && !!p.external_ids[NODE_KEY];

export class ManagementPorts {
  private allocator: SubnetAllocator;
  private readonly def: SubnetDefinition;
  /** Nodes with an ensure under way: their cache events only add holdings. */
  private readonly busy = new Set<string>();
  /** Fresh addresses of writes under way, by allocator owner. */
  private readonly pending = new Map<string, string>();

  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly net: ClusterNetworks,
  ) {
    const def = parseSubnetSpec({
      cidr: net.joinCIDR,
      gateway: net.joinGateway,
      excludeIPs: [egressPlaceholder(net.joinCIDR)],
    });
    if (!def.ok) throw new Error(`join CIDR ${net.joinCIDR}: ${JSON.stringify(def.problems)}`);
    this.def = def.subnet;
    this.allocator = this.rebuilt();
  }

  /**
   * Follows NB: the allocator records every join port change, and is rebuilt after a full reload of the cache.
   * Returns what stops it.
   */
  follow(): () => void {
    const { nb } = this;
    const onReady = (info: { fullSnapshot: boolean }) => {
      if (info.fullSnapshot) this.rebuild();
    };
    nb.on("ready", onReady);
    const off = nb.cache.subscribe("Logical_Switch_Port", (events) => this.observe(events));
    return () => {
      nb.off("ready", onReady);
      off();
    };
  }

  /** Rebuilds the join allocator from the management ports in the cache (after a full reload of it). */
  rebuild(): void {
    this.allocator = this.rebuilt();
  }

  private rebuilt(): SubnetAllocator {
    const { nb } = this;
    const entries: { address: string; holder: { owner: string; foreign: boolean } }[] = [];
    const join = findOwned(nb.cache as never, "Logical_Switch", "join");
    const ports = nb.cache.table("Logical_Switch_Port");
    for (const uuid of (join?.ports as readonly string[] | undefined) ?? []) {
      const p = ports.get(uuid);
      if (!p) continue;
      if (isMgmtPort(p))
        for (const h of holdings(p))
          entries.push({ address: h.address, holder: { owner: h.owner, foreign: false } });
      else
        for (const address of heldIps(p)) entries.push({ address, holder: { owner: p.name, foreign: true } });
    }
    // Addresses of writes still under way are in no row of the view yet; dropping them would hand them out twice.
    for (const [owner, address] of this.pending) entries.push({ address, holder: { owner, foreign: false } });
    return SubnetAllocator.rebuild(this.def, entries).allocator;
  }

  /**
   * Keeps the allocator in step with the join switch's ports as NB reports them: anyone's management port added,
   * changed or removed (another controller's write, ours whose reply was lost), and foreign ports on the switch.
   */
  observe(events: readonly RowEvent[]): void {
    const join = findOwned(this.nb.cache as never, "Logical_Switch", "join");
    const onJoin = (p: LogicalSwitchPort) => setHas((join?.ports ?? []) as readonly string[], p._uuid);
    for (const e of events) {
      const before = e.kind === "add" ? undefined : (e.old as unknown as LogicalSwitchPort);
      const after = e.kind === "delete" ? undefined : (e.row as unknown as LogicalSwitchPort);
      if (before && !isMgmtPort(before))
        for (const ip of heldIps(before)) this.allocator.forgetForeign(ip, before.name);
      if (after && isMgmtPort(after))
        for (const h of holdings(after))
          this.allocator.recordHolder(h.address, { owner: h.owner, foreign: false });
      else if (after && onJoin(after))
        for (const ip of heldIps(after))
          this.allocator.recordHolder(ip, { owner: after.name, foreign: true });
      if (!before || !isMgmtPort(before)) continue;
      const node = before.external_ids[NODE_KEY] as string;
      // An ensure under way settles its own holdings once its outcome is known.
      if (this.busy.has(node)) continue;
      const still = new Set(
        findAllOwned(this.nb.cache as never, "Logical_Switch_Port", idOf(before) ?? "").flatMap((r) =>
          heldIps(r as unknown as LogicalSwitchPort),
        ),
      );
      for (const h of holdings(before)) if (!still.has(h.address)) this.allocator.release(h.address, h.owner);
    }
  }

  /**
   * Ensures the node's management port, address set and policy; one NB transaction if anything changes. A fresh
   * address that NB refuses (a port not in this view holds it) is tried again once the view has caught up.
   */
  async ensure(node: string, replyIps: readonly string[] = []): Promise<MgmtPort> {
    this.busy.add(node);
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.ensureOnce(node, replyIps);
        } catch (e) {
          if (!(e instanceof JoinAddressTakenError) || attempt >= ADDRESS_ATTEMPTS) throw e;
        }
        // The port holding it is in NB: once the view shows it, the allocator holds its addresses.
        await this.nb.echo();
      }
    } finally {
      this.busy.delete(node);
    }
  }

  private async ensureOnce(node: string, replyIps: readonly string[]): Promise<MgmtPort> {
    const res = this.allocator.allocate(nodeOwner(node));
    if (!res.ok) throw new Error(`node ${node}: no management address: ${res.message}`);
    const ip = res.addresses[0] as string;
    const snatRes = this.allocator.allocate(snatOwner(node));
    if (!snatRes.ok) {
      if (!res.reused) this.allocator.release(ip, nodeOwner(node));
      throw new Error(`node ${node}: no service SNAT address: ${snatRes.message}`);
    }
    const serviceSnatIp = snatRes.addresses[0] as string;
    const fresh = [
      ...(res.reused ? [] : [{ owner: nodeOwner(node), ip }]),
      ...(snatRes.reused ? [] : [{ owner: snatOwner(node), ip: serviceSnatIp }]),
    ];
    const existing = findOwned(this.nb.cache as never, "Logical_Switch_Port", `node/${node}/mgmt`);
    const mac =
      (existing?.addresses as readonly string[] | undefined)?.[0]?.split(" ")[0] ?? macForAddresses(res.ips);
    const prefix = this.net.joinCIDR.slice(this.net.joinCIDR.indexOf("/") + 1);
    const mgmt = {
      name: node,
      mgmtIP: `${ip}/${prefix}`,
      mgmtMAC: mac,
      serviceSnatIP: serviceSnatIp,
      replyIPs: replyIps,
    };
    const txn = this.nb.transaction();
    // NB refuses a fresh address that some join port already holds, however wrong this view of NB is (a write
    // whose reply was lost, another controller's, a reload from a server still applying its predecessor's log).
    const guards = new Map<number, string>();
    // The node's own port (rewritten with a fresh address) is not another holder.
    const others = existing ? [["_uuid", "!=", existing._uuid] as const] : [];
    for (const f of fresh) {
      guards.set(txn.size, f.ip);
      txn.wait(
        "Logical_Switch_Port",
        [["external_ids", "includes", { [addressKey(f.ip)]: JOIN_ADDRESS_SCOPE }], ...others],
        ["_uuid"],
        "==",
        [],
      );
    }
    // The address set holds the pods whose port asks for this node, whoever wrote them and whenever: pods
    // that landed before the set existed (a new or re-registered node) are in it from its creation on.
    const want = this.podAddressesOn(node);
    const set = findOwned(this.nb.cache as never, "Address_Set", `node/${node}/pods-v4`);
    const summary = plan(
      this.nb.cache as never,
      this.nb.schema,
      txn as never,
      nodeRows(mgmt, set ? undefined : want),
      nodeScope(node),
    );
    let mutated = false;
    if (set) {
      const have = set.addresses as readonly string[];
      const wanted = new Set(want);
      const missing = want.filter((a) => !setHas(have, a));
      const stale = have.filter((a) => !wanted.has(a));
      // Mutations, not a new value: a pod write landing between our read and our commit is kept.
      const mutations: Mutation[] = [];
      if (missing.length > 0) mutations.push(["addresses", "insert", missing]);
      if (stale.length > 0) mutations.push(["addresses", "delete", stale]);
      if (mutations.length > 0) {
        txn.mutate("Address_Set", byUuid(set._uuid), mutations);
        mutated = true;
      }
    }
    if (!summary.empty || mutated) {
      for (const f of fresh) this.pending.set(f.owner, f.ip);
      try {
        await txn.commit();
      } catch (e) {
        if (certainlyNotApplied(e)) for (const f of fresh) this.allocator.release(f.ip, f.owner);
        const taken = e instanceof WaitFailedError ? e.failures.find((f) => guards.has(f.index)) : undefined;
        if (taken) throw new JoinAddressTakenError(node, guards.get(taken.index) as string);
        throw e;
      } finally {
        for (const f of fresh) this.pending.delete(f.owner);
      }
    }
    return {
      name: mgmtPortName(node),
      ip: mgmt.mgmtIP,
      mac,
      gateway: this.net.joinGateway,
      serviceSnatIp,
      ...(replyIps.length > 0 ? { nodeReplyIps: [...new Set(replyIps)].sort() } : {}),
    };
  }

  private podsByChassis() {
    const tc = this.nb.cache.table("Logical_Switch_Port");
    if (!tc.hasIndex(POD_CHASSIS_INDEX)) {
      tc.addIndex(POD_CHASSIS_INDEX, (r) =>
        isOurs(r) && r.external_ids[KIND_KEY] === "pod-port" ? r.options["requested-chassis"] : undefined,
      );
    }
    return tc;
  }

  /** The IPv4 addresses of the pods whose port asks for the node's chassis: what its address set must hold. */
  podAddressesOn(node: string): string[] {
    const out = new Set<string>();
    for (const p of this.podsByChassis().lookup(POD_CHASSIS_INDEX, node))
      for (const ip of heldIps(p)) if (!ip.includes(":")) out.add(ip);
    return [...out].sort();
  }

  /**
   * The nodes whose address set misses a pod of theirs after these port changes (the set did not exist when the
   * pod's port was written, or a concurrent write took the address out): their reconcile puts it back.
   */
  nodesMissingPods(events: readonly RowEvent[]): Set<string> {
    const out = new Set<string>();
    const sets = this.nb.cache.table("Address_Set");
    for (const e of events) {
      if (e.kind === "delete") continue;
      const p = e.row as unknown as LogicalSwitchPort;
      const node = p.options["requested-chassis"];
      if (!node || !isOurs(p) || p.external_ids[KIND_KEY] !== "pod-port" || out.has(node)) continue;
      const set = sets.lookupOne("name", nodePodsAddressSet(node, 4));
      const have = (set?.addresses ?? []) as readonly string[];
      if (heldIps(p).some((ip) => !ip.includes(":") && !setHas(have, ip))) out.add(node);
    }
    return out;
  }

  /** Removes everything of a node that left the cluster. */
  async remove(node: string): Promise<boolean> {
    const txn = this.nb.transaction();
    const summary = plan(this.nb.cache as never, this.nb.schema, txn as never, [], nodeScope(node));
    // Nothing left in NB: an earlier remove landed although its reply was lost; its address goes now.
    if (summary.empty)
      return (
        this.allocator.releaseOwner(nodeOwner(node)).length +
          this.allocator.releaseOwner(snatOwner(node)).length >
        0
      );
    await txn.commit();
    this.allocator.releaseOwner(nodeOwner(node));
    this.allocator.releaseOwner(snatOwner(node));
    return true;
  }
}
