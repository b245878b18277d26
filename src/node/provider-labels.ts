// Per-node provider network mappings from the Node's labels, on top of the agent's node.bridgeMappings (the same for
// every node of the DaemonSet). One label per provider names its bridge, an optional second one its uplink:
//
//   provider.network.zstack.io/<provider>=<bridge>          e.g. provider.network.zstack.io/physnet1=br-provider
//   uplink.provider.network.zstack.io/<provider>=<uplink>   e.g. uplink.provider.network.zstack.io/physnet1=eth1
//
// A label's entry replaces node.bridgeMappings' entry for that provider, or adds one. Label values are hostile input
// (anyone who may label Nodes writes them): each is checked as node.bridgeMappings' entries are, a bad one is left
// out with a problem naming the label and the fix, and the mappings as a whole must pass node.bridgeMappings' rules
// (an uplink on one bridge only, ...), or the labels are left out altogether. With the node's guard
// (provider-guard.ts), a provider whose uplink holds an address or route of the node, whose bridge is br-int or the
// node's underlay bridge, or whose uplink would be a second one on an existing bridge is left out too, both of its
// labels: node.bridgeMappings' entry for it stays.

import { PROVIDER_NAME_RE } from "../ipam/subnet-spec.ts";
import { interfaceNameProblem } from "./interface-name.ts";
import { INTEGRATION_BRIDGE } from "./ovs-bridge.ts";
import { BridgeMappingError, type ProviderBridge, parseBridgeMappings } from "./provider-bridges.ts";
import type { ProviderGuard } from "./provider-guard.ts";

export const PROVIDER_BRIDGE_LABEL = "provider.network.zstack.io/";
export const PROVIDER_UPLINK_LABEL = "uplink.provider.network.zstack.io/";

export interface LabelMappings {
  /** node.bridgeMappings with the labels' entries applied (node.bridgeMappings' order, then new providers by name). */
  readonly mappings: ProviderBridge[];
  /** Whether any label entry is in `mappings`. */
  readonly fromLabels: boolean;
  /** Every label left out, naming it and the fix. */
  readonly problems: string[];
}

/**
 * The node's provider mappings: `configured` (node.bridgeMappings) with the Node's provider labels applied;
 * `guard` (the node's interfaces and bridges) refuses the labels that would cut the node off or misplace a
 * provider network.
 */
export function providerMappingsFromLabels(
  node: string,
  labels: Readonly<Record<string, string>> | undefined,
  configured: readonly ProviderBridge[],
  guard?: ProviderGuard,
): LabelMappings {
  const problems: string[] = [];
  const bridges = new Map<string, string>();
  const uplinks = new Map<string, string>();
  const fix = (key: string, example: string) =>
    `set it as in kubectl label node ${node} ${key}=${example} --overwrite, or remove it (kubectl label node ${node} ${key}-)`;
  for (const [key, raw] of Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const isUplink = key.startsWith(PROVIDER_UPLINK_LABEL);
    if (!isUplink && !key.startsWith(PROVIDER_BRIDGE_LABEL)) continue;
    const provider = key.slice((isUplink ? PROVIDER_UPLINK_LABEL : PROVIDER_BRIDGE_LABEL).length);
    const value = String(raw);
    const at = `Node label ${key}=${JSON.stringify(value)}`;
    if (!PROVIDER_NAME_RE.test(provider)) {
      problems.push(
        `${at}: ${JSON.stringify(provider)} is not a provider network name (letters, digits, "-", "_", "."); name the provider as the Subnets' spec.provider does`,
      );
      continue;
    }
    const why = interfaceNameProblem(value);
    if (why) {
      problems.push(
        `${at}: the ${isUplink ? "uplink" : "bridge"} name ${why}; ${fix(key, isUplink ? "eth1" : "br-provider")}`,
      );
      continue;
    }
    if (!isUplink && value === INTEGRATION_BRIDGE) {
      problems.push(`${at}: ${INTEGRATION_BRIDGE} is OVN's integration bridge; ${fix(key, "br-provider")}`);
      continue;
    }
    (isUplink ? uplinks : bridges).set(provider, value);
  }
  for (const [provider, uplink] of [...uplinks]) {
    if (bridges.has(provider)) continue;
    uplinks.delete(provider);
    problems.push(
      `Node label ${PROVIDER_UPLINK_LABEL}${provider}=${JSON.stringify(uplink)}: names the uplink of provider ${provider}, but no label ${PROVIDER_BRIDGE_LABEL}${provider} names its bridge; add it (kubectl label node ${node} ${PROVIDER_BRIDGE_LABEL}${provider}=br-provider)`,
    );
  }
  if (guard) {
    for (const [provider, bridge] of [...bridges]) {
      const uplink = uplinks.get(provider);
      const bridgeAt = `Node label ${PROVIDER_BRIDGE_LABEL}${provider}=${JSON.stringify(bridge)}`;
      const uplinkAt = `Node label ${PROVIDER_UPLINK_LABEL}${provider}=${JSON.stringify(uplink)}`;
      const refused: string[] = [];
      const reserved = guard.reservedBridges.get(bridge);
      if (reserved !== undefined)
        refused.push(
          `${bridgeAt}: ${bridge} ${reserved}, which a provider network must not share; name a bridge of its own (with an uplink label the agent creates it)`,
        );
      if (uplink !== undefined) {
        const held = guard.hostInterfaces.get(uplink);
        const others = (guard.bridgeUplinks.get(bridge) ?? []).filter((u) => u !== uplink);
        if (guard.unknown !== undefined)
          refused.push(
            `${uplinkAt}: the node's addresses cannot be read (${guard.unknown}), so no uplink is attached`,
          );
        else if (held !== undefined)
          refused.push(
            `${uplinkAt}: ${uplink} ${held}; as a port of an OVS bridge it would lose it and cut the node off; name an interface without the node's addresses and routes`,
          );
        if (others.length > 0)
          refused.push(
            `${uplinkAt}: bridge ${bridge} already has the uplink ${others.join(", ")}; a second one would loop the network; remove the uplink label to use ${bridge} as it is`,
          );
      }
      if (refused.length === 0) continue;
      problems.push(
        ...refused.map(
          (r) =>
            `${r}; the labels of provider ${provider} are left out${configured.some((m) => m.provider === provider) ? ", node.bridgeMappings' entry applies" : ""}`,
        ),
      );
      bridges.delete(provider);
      uplinks.delete(provider);
    }
  }
  if (bridges.size === 0) return { mappings: [...configured], fromLabels: false, problems };
  const merged = new Map(configured.map((m) => [m.provider, m]));
  for (const [provider, bridge] of [...bridges].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const uplink = uplinks.get(provider);
    merged.set(provider, { provider, bridge, ...(uplink === undefined ? {} : { uplink }) });
  }
  const text = [...merged.values()]
    .map((m) => `${m.provider}:${m.bridge}${m.uplink === undefined ? "" : `:${m.uplink}`}`)
    .join(",");
  try {
    return {
      mappings: parseBridgeMappings(text, "node.bridgeMappings with the Node's provider labels"),
      fromLabels: true,
      problems,
    };
  } catch (e) {
    if (!(e instanceof BridgeMappingError)) throw e;
    problems.push(
      `the Node's provider labels are left out, node.bridgeMappings alone applies: ${e.message}; fix the labels ${PROVIDER_BRIDGE_LABEL}* and ${PROVIDER_UPLINK_LABEL}* on node ${node}`,
    );
    return { mappings: [...configured], fromLabels: false, problems };
  }
}

/**
 * node.bridgeMappings' entries the node must refuse: an uplink holding an address or route of the node (the
 * bridges are the admin's choice: the sandbox maps its provider onto the underlay bridge on purpose).
 */
export function configuredMappingProblems(
  configured: readonly ProviderBridge[],
  hostInterfaces: ReadonlyMap<string, string>,
): string[] {
  const out: string[] = [];
  for (const m of configured) {
    const held = m.uplink === undefined ? undefined : hostInterfaces.get(m.uplink);
    if (held !== undefined)
      out.push(
        `node.bridgeMappings entry ${m.provider}:${m.bridge}:${m.uplink}: uplink ${m.uplink} ${held}; as a port of an OVS bridge it would lose it and cut the node off; name an interface without the node's addresses and routes`,
      );
  }
  return out;
}
