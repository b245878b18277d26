// Nodes: each Node's management port on the join switch (its address from the join CIDR), the address set of
// its pods, its egress policy and its reply policy (for its own validated InternalIPs) in NB, and the
// annotation that tells the node agent its management port and which of its addresses the reply policy holds.

import { formatIp } from "../ipam/address.ts";
import { type Cidr, parseCidr } from "../ipam/cidr.ts";
import { InvalidInputError } from "../ipam/problem.ts";
import type { Informer } from "../k8s/informer.ts";
import { findOwned } from "../ovn/nb-diff.ts";
import { KIND_KEY, NODE_KEY } from "../ovn/ownership.ts";
import { setSize } from "../ovsdb/live-set.ts";
import { type ControllerContext, type ControllerOptions, NODES } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import type { NodeLite } from "./informers.ts";
import { type ManagementPorts, MGMT_PORT_ANNOTATION } from "./management-ports.ts";
import { nodeReplyAddresses } from "./node-addresses.ts";

/** The InternalIPs a Node lists, as a comparable key. */
function internalKey(n: NodeLite | undefined): string {
  return JSON.stringify(
    (n?.status?.addresses ?? []).filter((a) => a?.type === "InternalIP").map((a) => a?.address),
  );
}

export class NodeReconciler implements Reconciler {
  readonly name = NODES;
  readonly workers = 2;
  private readonly o: ControllerOptions;
  private readonly nodes: Informer<NodeLite>;
  /** Each node's refused addresses as last reported: a Node's every status update must not repeat the report. */
  private readonly reported = new Map<string, string>();

  constructor(private readonly ctx: ControllerContext) {
    this.o = ctx.o;
    this.nodes = ctx.informers.nodes;
  }

  watch(): Disposer[] {
    const { ctx } = this;
    const nb = this.o.nb;
    // The join allocator follows the join ports' changes, and is rebuilt after a full reload of the NB cache.
    const unfollow = ctx.mgmtPorts?.follow() ?? (() => {});
    ctx.term.addEventListener("abort", unfollow, { once: true });
    return [
      unfollow,
      this.nodes.addHandlers(
        {
          onAdd: (n) => this.nodeChanged(undefined, n),
          onUpdate: (o, n) => this.nodeChanged(o, n),
          onDelete: (n) => this.nodeChanged(n, undefined),
        },
        { replay: true },
      ),
      // A pod whose node's address set lacks it (the set came later, or went with a re-registered Node).
      nb.cache.subscribe("Logical_Switch_Port", (events) => {
        for (const node of ctx.mgmtPorts?.nodesMissingPods(events) ?? []) ctx.requeueNode(node);
      }),
      // A node's pod address set created, or shrunk (by a pod leaving, or by a write racing another): its
      // reconcile compares it with the node's pods again.
      nb.cache.subscribe("Address_Set", (events) => {
        for (const e of events) {
          if (e.kind === "delete") continue;
          const ids = e.row.external_ids as Readonly<Record<string, string>>;
          // The ranges a node address may not be in changed: every node's addresses are judged again.
          if (ids[KIND_KEY] === "inside-set") {
            for (const k of this.nodes.keys()) ctx.requeueNode(k);
            continue;
          }
          const node = ids[NODE_KEY];
          if (ids[KIND_KEY] !== "node-pods" || !node) continue;
          const shrank = e.kind === "update" && setSize(e.row, "addresses") < setSize(e.old, "addresses");
          if (e.kind === "add" || shrank) ctx.requeueNode(node);
        }
      }),
    ];
  }

  /**
   * A Node's InternalIPs decide its neighbours' reply policies too (an address two Nodes claim is refused for
   * both), so a change of them requeues every node; any other change only the node itself.
   */
  private nodeChanged(old: NodeLite | undefined, cur: NodeLite | undefined): void {
    const name = (cur ?? old)?.metadata.name;
    if (!name) return;
    if (internalKey(old) !== internalKey(cur)) for (const k of this.nodes.keys()) this.ctx.requeueNode(k);
    this.ctx.requeueNode(name);
  }

  /** The ranges the cluster routes itself: the inside address set as NB holds it, and the configured ranges. */
  private insideRanges(): Cidr[] {
    const net = this.ctx.net;
    const set = findOwned(this.o.nb.cache as never, "Address_Set", "inside-v4");
    const texts = [
      ...net.clusterCIDRs,
      ...net.serviceCIDRs,
      net.joinCIDR,
      ...(((set?.addresses as readonly string[] | undefined) ?? []) as string[]),
    ];
    const out: Cidr[] = [];
    for (const t of texts) {
      try {
        out.push(parseCidr(t.includes("/") ? t : `${t}/${t.includes(":") ? 128 : 32}`));
      } catch (e) {
        if (!(e instanceof InvalidInputError)) throw e;
      }
    }
    return out;
  }

  /** The node's InternalIPs its reply policy may hold; each refused one is reported on the Node. */
  private replyAddresses(node: NodeLite): string[] {
    const all = [...this.nodes.list()].map((n) => ({
      name: n.metadata.name,
      addresses: n.status?.addresses,
    }));
    const { accepted, refused } = nodeReplyAddresses(node.metadata.name, all, this.insideRanges());
    const key = JSON.stringify(refused);
    if (this.reported.get(node.metadata.name) === key) return accepted.map(formatIp);
    if (refused.length > 0) this.reported.set(node.metadata.name, key);
    else this.reported.delete(node.metadata.name);
    for (const r of refused) {
      this.o.log.warn(
        { node: node.metadata.name, field: r.field, address: r.address, why: r.reason },
        "node address refused for the node reply policy",
      );
      this.o.events?.warning(
        {
          apiVersion: "v1",
          kind: "Node",
          name: node.metadata.name,
        },
        "NodeAddressRefused",
        `${r.field}: ${JSON.stringify(r.address)} ${r.reason}; node-local Service connections from this address keep the management address as source`,
      );
    }
    return accepted.map(formatIp);
  }

  /** Nodes deleted while we were not running still have rows in NB: reconcile them too. */
  *startupKeys(): Iterable<string> {
    for (const p of this.o.nb.cache.table("Logical_Switch_Port").values()) {
      const node = p.external_ids[NODE_KEY];
      if (p.external_ids[KIND_KEY] === "mgmt-port" && node && !this.nodes.get(node)) yield node;
    }
  }

  resyncKeys(): Iterable<string> {
    return this.nodes.keys();
  }

  async reconcile(name: string): Promise<undefined> {
    const nn = this.ctx.mgmtPorts as ManagementPorts;
    const node = this.nodes.get(name);
    if (!node) {
      this.reported.delete(name);
      await nn.remove(name);
      return undefined;
    }
    const replies = this.replyAddresses(node);
    // An address leaves the annotation before its policy leaves NB: the agent stops giving its connections the
    // reserved ports while the cluster router still returns their replies (it is added in the other order).
    const interim = withdrawnFirst(node.metadata.annotations?.[MGMT_PORT_ANNOTATION], replies);
    if (interim !== undefined)
      await this.o.api.request(`/api/v1/nodes/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [MGMT_PORT_ANNOTATION]: interim } } },
      });
    const mgmt = await nn.ensure(name, replies);
    const value = JSON.stringify(mgmt);
    if ((interim ?? node.metadata.annotations?.[MGMT_PORT_ANNOTATION]) !== value) {
      await this.o.api.request(`/api/v1/nodes/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [MGMT_PORT_ANNOTATION]: value } } },
      });
    }
    return undefined;
  }
}

/**
 * The management port annotation without the reply addresses the controller is about to withdraw (those not in
 * `accepted`), every other field as it is; undefined when none is withdrawn (or there is no list to shrink).
 * Only addresses already in the annotation are kept, so whatever it holds, nothing is added.
 */
export function withdrawnFirst(current: string | undefined, accepted: readonly string[]): string | undefined {
  if (!current) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(current);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const { nodeReplyIps, ...rest } = v as Record<string, unknown>;
  if (!Array.isArray(nodeReplyIps)) return undefined;
  const keep = nodeReplyIps.filter((t) => typeof t === "string" && accepted.includes(t));
  if (keep.length === nodeReplyIps.length) return undefined;
  return JSON.stringify(keep.length > 0 ? { ...rest, nodeReplyIps: keep } : rest);
}
