// Provider networks on a node: which OVS bridge carries each provider network (ovn-controller's
// `ovn-bridge-mappings`, "provider:bridge,..."), and, when the configuration names an uplink, the bridge itself
// with the uplink as its port. ovn-controller patches br-int to the mapped bridge for every localnet port whose
// network_name is the provider, so a provider network Subnet's traffic leaves through the uplink, VLAN-tagged.
//
// The agent creates a provider bridge only when asked to (an uplink is configured) and marks it as its own; it
// removes only bridges it marked, once their mapping is gone. A bridge an admin or the packaging made (the
// sandbox's br-phy, ZStack's flat bridge) is used as it is and never removed; an uplink is added to it only
// when the configuration names one.

import { PROVIDER_NAME_RE } from "../ipam/subnet-spec.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { interfaceNameProblem } from "./interface-name.ts";
import { INTEGRATION_BRIDGE } from "./ovs-bridge.ts";
import { ensureRootRow, NODE_AGENT, OWNER_KEY, type VswitchClient } from "./vswitch-db.ts";

/** The ovn-controller key in the Open_vSwitch row's external_ids. */
export const BRIDGE_MAPPINGS_KEY = "ovn-bridge-mappings";
/** On a bridge (and its uplink port) the agent created for a provider network: which provider. */
export const PROVIDER_KEY = "zstack.io/provider";

export interface ProviderBridge {
  /** The provider network name, as in a Subnet's spec.provider and the localnet port's network_name. */
  readonly provider: string;
  readonly bridge: string;
  /** The host interface to attach to the bridge; absent: the bridge is someone else's and used as it is. */
  readonly uplink?: string;
}

export class BridgeMappingError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join("; "));
    this.name = "BridgeMappingError";
  }
}

/**
 * Parses "provider:bridge[:uplink],..." (the `node.bridgeMappings` setting). Every entry is checked: the provider
 * as a Subnet's spec.provider, bridge and uplink as interface names; a provider may appear once, an uplink once,
 * and br-int is not a provider bridge. Empty text: no provider networks.
 * @throws BridgeMappingError listing every problem
 */
export function parseBridgeMappings(text: string, field = "node.bridgeMappings"): ProviderBridge[] {
  const out: ProviderBridge[] = [];
  const problems: string[] = [];
  const trimmed = text.trim();
  if (trimmed === "") return out;
  const providers = new Set<string>();
  const uplinks = new Set<string>();
  trimmed.split(",").forEach((raw, i) => {
    const entry = raw.trim();
    const at = `${field} entry ${i + 1} ${JSON.stringify(entry)}`;
    const parts = entry.split(":");
    if (parts.length < 2 || parts.length > 3) {
      problems.push(`${at}: write provider:bridge or provider:bridge:uplink, e.g. physnet1:br-provider:eth1`);
      return;
    }
    const [provider, bridge, uplink] = parts as [string, string, string | undefined];
    let ok = true;
    if (!PROVIDER_NAME_RE.test(provider)) {
      problems.push(
        `${at}: provider ${JSON.stringify(provider)} is not a provider network name (letters, digits, "-", "_", ".")`,
      );
      ok = false;
    }
    for (const [what, name] of [
      ["bridge", bridge],
      ["uplink", uplink],
    ] as const) {
      if (name === undefined) continue;
      const why = interfaceNameProblem(name);
      if (why) {
        problems.push(`${at}: ${what} ${JSON.stringify(name)} ${why}`);
        ok = false;
      }
    }
    if (bridge === INTEGRATION_BRIDGE) {
      problems.push(
        `${at}: ${INTEGRATION_BRIDGE} is OVN's integration bridge; name the bridge of the uplink`,
      );
      ok = false;
    }
    if (uplink !== undefined && uplink === bridge) {
      problems.push(`${at}: the uplink cannot be the bridge itself`);
      ok = false;
    }
    if (providers.has(provider)) {
      problems.push(`${at}: provider ${provider} is mapped twice; keep one entry`);
      ok = false;
    }
    if (uplink !== undefined && uplinks.has(uplink)) {
      problems.push(`${at}: uplink ${uplink} is named twice; an interface can be on one bridge only`);
      ok = false;
    }
    providers.add(provider);
    if (uplink !== undefined) uplinks.add(uplink);
    if (ok) out.push({ provider, bridge, ...(uplink === undefined ? {} : { uplink }) });
  });
  // One bridge may carry several providers, but then at most one entry may name its uplink.
  const byBridge = new Map<string, string>();
  for (const m of out) {
    if (m.uplink === undefined) continue;
    const other = byBridge.get(m.bridge);
    if (other !== undefined && other !== m.uplink)
      problems.push(`${field}: bridge ${m.bridge} is given two uplinks, ${other} and ${m.uplink}; give one`);
    byBridge.set(m.bridge, m.uplink);
  }
  if (problems.length > 0) throw new BridgeMappingError(problems);
  return out;
}

/** ovn-controller's value: "provider:bridge,..." in the configured order. */
export function bridgeMappingsValue(mappings: readonly ProviderBridge[]): string {
  return mappings.map((m) => `${m.provider}:${m.bridge}`).join(",");
}

/** What ensureProviderBridges changed ("created br-x", "uplink eth1 on br-x", "removed br-y"); empty when nothing. */
export type ProviderBridgeChanges = string[];

/**
 * Creates the provider bridges that have an uplink and are missing (standalone fail mode: a plain learning switch
 * between the uplink and br-int's patch ports), adds a missing uplink port, and removes the bridges this agent
 * created whose mapping is gone. One transaction; nothing when all is in place. A bridge without an uplink in the
 * configuration is not created: it belongs to whoever made it.
 */
export async function ensureProviderBridges(
  client: VswitchClient,
  mappings: readonly ProviderBridge[],
  datapathType: string,
): Promise<{ changes: ProviderBridgeChanges; problems: string[] }> {
  const root = await ensureRootRow(client);
  const bridges = client.cache.table("Bridge");
  const ports = client.cache.table("Port");
  const changes: string[] = [];
  const problems: string[] = [];
  const txn = client.transaction();
  const interfaces = client.cache.table("Interface");
  const portBridge = new Map<string, string>(); // port name -> bridge name
  const ifacePort = new Map<string, { port: string; bridge: string }>(); // interface name -> its port and bridge
  const portRows = new Map<string, { _uuid: string; external_ids: unknown }>();
  for (const b of bridges.values())
    for (const p of b.ports) {
      const row = ports.get(p);
      if (!row) continue;
      portBridge.set(row.name, b.name);
      portRows.set(row.name, row);
      for (const i of row.interfaces) {
        const iface = interfaces.get(i);
        if (iface) ifacePort.set(iface.name, { port: row.name, bridge: b.name });
      }
    }
  const isAgentUplink = (port: { external_ids: unknown } | undefined) => {
    const ids = (port?.external_ids ?? {}) as Readonly<Record<string, string>>;
    return ids[OWNER_KEY] === NODE_AGENT && ids[PROVIDER_KEY] !== undefined;
  };
  const wanted = new Map<string, ProviderBridge>(); // bridge -> the entry naming its uplink, or the first
  for (const m of mappings) {
    const cur = wanted.get(m.bridge);
    if (!cur || (cur.uplink === undefined && m.uplink !== undefined)) wanted.set(m.bridge, m);
  }
  const newUplink = (uplink: string, provider: string) =>
    txn.insert("Port", {
      name: uplink,
      interfaces: [txn.insert("Interface", { name: uplink })],
      external_ids: { [OWNER_KEY]: NODE_AGENT, [PROVIDER_KEY]: provider },
    });
  for (const [name, m] of wanted) {
    const existing = bridges.lookupOne("name", name);
    // The uplink port the agent added elsewhere (the mapping moved it): moved in this transaction, the same row.
    let moving: string | undefined;
    if (m.uplink !== undefined) {
      const elsewhere = portBridge.get(m.uplink);
      const inside = ifacePort.get(m.uplink);
      if (inside !== undefined && inside.port !== m.uplink) {
        problems.push(
          `uplink ${m.uplink} of provider ${m.provider} is an interface of port ${inside.port} on bridge ${inside.bridge} (a bond); name the bridge ${inside.bridge} without an uplink, or take ${m.uplink} out of ${inside.port}`,
        );
        continue;
      }
      if (elsewhere !== undefined && elsewhere !== name) {
        if (!isAgentUplink(portRows.get(m.uplink))) {
          problems.push(
            `uplink ${m.uplink} of provider ${m.provider} is a port of bridge ${elsewhere}, not ${name}; move it or fix node.bridgeMappings`,
          );
          continue;
        }
        moving = portRows.get(m.uplink)?._uuid;
      }
    }
    if (!existing) {
      const clash = portBridge.get(name) ?? ifacePort.get(name)?.bridge;
      if (clash !== undefined || interfaces.findOne((r) => r.name === name) !== undefined) {
        problems.push(
          `bridge ${name} of provider ${m.provider} cannot be created: a port or interface of that name exists${clash === undefined ? "" : ` on bridge ${clash}`}; name another bridge in node.bridgeMappings`,
        );
        continue;
      }
      if (m.uplink === undefined) {
        problems.push(
          `bridge ${name} of provider ${m.provider} does not exist; create it with its uplink, or name the uplink (provider:bridge:uplink) to have the agent create it`,
        );
        continue;
      }
      const local = txn.insert("Interface", { name, type: "internal" });
      const localPort = txn.insert("Port", { name, interfaces: [local] });
      const upPort = moving ?? newUplink(m.uplink, m.provider);
      // Guarded: another writer creating the same bridge between our read and our write fails this one.
      txn.guardAbsent("Bridge", [["name", "==", name]]);
      const br = txn.insert("Bridge", {
        name,
        ports: [localPort, upPort],
        datapath_type: datapathType,
        external_ids: { [OWNER_KEY]: NODE_AGENT, [PROVIDER_KEY]: m.provider },
      });
      txn.mutate("Open_vSwitch", byUuid(root._uuid), [["bridges", "insert", [br]]]);
      changes.push(`created ${name} with uplink ${m.uplink}`);
    } else if (m.uplink !== undefined && portBridge.get(m.uplink) !== name) {
      const upPort = moving ?? newUplink(m.uplink, m.provider);
      txn.mutate("Bridge", byUuid(existing._uuid), [["ports", "insert", [upPort]]]);
      changes.push(`uplink ${m.uplink} on ${name}`);
    }
  }
  // Only bridges this agent created for a provider network, and only once no mapping names them; on someone
  // else's bridge, only the uplink port the agent added, once no mapping names it there.
  for (const b of bridges.values()) {
    const ids = b.external_ids as Readonly<Record<string, string>>;
    const ours = ids[OWNER_KEY] === NODE_AGENT && ids[PROVIDER_KEY] !== undefined;
    if (ours && !wanted.has(b.name)) {
      txn.mutate("Open_vSwitch", byUuid(root._uuid), [["bridges", "delete", [b._uuid]]]);
      changes.push(`removed ${b.name}`);
      continue;
    }
    // On any bridge, also the agent's own: an uplink the mapping no longer names there goes (two uplinks on a
    // learning bridge would loop the network).
    for (const p of b.ports) {
      const port = ports.get(p);
      if (!port || !isAgentUplink(port)) continue;
      if (wanted.get(b.name)?.uplink === port.name) continue;
      txn.mutate("Bridge", byUuid(b._uuid), [["ports", "delete", [port._uuid]]]);
      changes.push(`uplink ${port.name} off ${b.name}`);
    }
  }
  if (changes.length > 0) await txn.commit();
  return { changes, problems };
}
