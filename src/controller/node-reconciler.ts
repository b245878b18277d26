// Nodes: each Node's management port on the join switch (its address from the join CIDR), the address set of
// its pods and its egress policy in NB, and the annotation that tells the node agent its management port.

import type { Informer } from "../k8s/informer.ts";
import { KIND_KEY, NODE_KEY } from "../ovn/ownership.ts";
import { setSize } from "../ovsdb/live-set.ts";
import { type ControllerContext, type ControllerOptions, NODES } from "./context.ts";
import type { Disposer, Reconciler } from "./framework.ts";
import type { NodeLite } from "./informers.ts";
import { type ManagementPorts, MGMT_PORT_ANNOTATION } from "./management-ports.ts";

export class NodeReconciler implements Reconciler {
  readonly name = NODES;
  readonly workers = 2;
  private readonly o: ControllerOptions;
  private readonly nodes: Informer<NodeLite>;

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
          onAdd: (n) => ctx.requeueNode(n.metadata.name),
          onUpdate: (_, n) => ctx.requeueNode(n.metadata.name),
          onDelete: (n) => ctx.requeueNode(n.metadata.name),
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
          const node = ids[NODE_KEY];
          if (ids[KIND_KEY] !== "node-pods" || !node) continue;
          const shrank = e.kind === "update" && setSize(e.row, "addresses") < setSize(e.old, "addresses");
          if (e.kind === "add" || shrank) ctx.requeueNode(node);
        }
      }),
    ];
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
      await nn.remove(name);
      return undefined;
    }
    const mgmt = await nn.ensure(name);
    const value = JSON.stringify(mgmt);
    if (node.metadata.annotations?.[MGMT_PORT_ANNOTATION] !== value) {
      await this.o.api.request(`/api/v1/nodes/${name}`, {
        method: "PATCH",
        body: { metadata: { annotations: { [MGMT_PORT_ANNOTATION]: value } } },
      });
    }
    return undefined;
  }
}
