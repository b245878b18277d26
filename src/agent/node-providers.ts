// The node's provider network mappings as they follow its Node's labels (src/node/provider-labels.ts): node.bridgeMappings
// with the labels applied, recomputed on every Node update; a change goes to NodeSetup (bridges and
// ovn-bridge-mappings), and each new label problem becomes one Warning Event on the Node. The agent stays up
// whatever the labels say.

import { bridgeMappingsValue, type ProviderBridge } from "../node/provider-bridges.ts";
import type { ProviderGuard } from "../node/provider-guard.ts";
import { providerMappingsFromLabels } from "../node/provider-labels.ts";
import type { Logger } from "../observability/log.ts";

export interface NodeProvidersOptions {
  readonly node: string;
  /** node.bridgeMappings. */
  readonly configured: readonly ProviderBridge[];
  /** A label problem not reported before (a Warning Event `ProviderLabelInvalid` on the Node). */
  readonly warn?: (problem: string) => void;
  readonly log?: Logger;
}

export class NodeProviders {
  private current: readonly ProviderBridge[];
  private key: string;
  private labelsUsed = false;
  private reported = new Set<string>();
  private problemList: string[] = [];
  private guard: ProviderGuard | undefined;

  constructor(private readonly opts: NodeProvidersOptions) {
    this.current = opts.configured;
    this.key = JSON.stringify(opts.configured);
  }

  get mappings(): readonly ProviderBridge[] {
    return this.current;
  }

  /**
   * ovn-controller's ovn-bridge-mappings: absent (left alone, as an admin or ZStack may have set it) while neither
   * node.bridgeMappings nor a label ever gave a mapping; once a label did, the agent keeps it in step, "" included.
   */
  get bridgeMappings(): string | undefined {
    return this.opts.configured.length > 0 || this.labelsUsed ? bridgeMappingsValue(this.current) : undefined;
  }

  get problems(): readonly string[] {
    return this.problemList;
  }

  /**
   * Recomputes from the Node's labels, checked against `guard` (the node's interfaces and bridges, read just
   * before; the last one given when absent); true when the mappings changed.
   */
  update(labels: Readonly<Record<string, string>> | undefined, guard?: ProviderGuard): boolean {
    if (guard) this.guard = guard;
    const r = providerMappingsFromLabels(this.opts.node, labels, this.opts.configured, this.guard);
    this.problemList = r.problems;
    const now = new Set(r.problems);
    for (const p of r.problems) {
      if (this.reported.has(p)) continue;
      this.opts.log?.warn({ problem: p }, "Node provider label");
      this.opts.warn?.(p);
    }
    this.reported = now;
    if (r.fromLabels) this.labelsUsed = true;
    const key = JSON.stringify(r.mappings);
    if (key === this.key) return false;
    this.key = key;
    this.current = r.mappings;
    this.opts.log?.info(
      { bridgeMappings: bridgeMappingsValue(r.mappings), fromLabels: r.fromLabels },
      "provider network mappings",
    );
    return true;
  }
}
