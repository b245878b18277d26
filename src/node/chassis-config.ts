// ovn-controller's settings: the keys in the Open_vSwitch root row's external_ids that tell it where the
// southbound database is, how to reach this chassis (encap type and IP), its name, and which datapath type
// to give br-int, and, when provider networks are configured, which bridge carries each (ovn-bridge-mappings) with
// this chassis's MAC on each (ovn-chassis-mac-mappings, chassis-mac.ts).
// The agent owns exactly these keys; every other key (hostname set by the packaging, ovn-bridge-mappings set by
// an admin when the agent has none configured, ovn-controller's own) is left as it is.

import { chassisMacMappings } from "./chassis-mac.ts";
import type { EncapType } from "./mtu.ts";
import type { DatapathType } from "./ovs-bridge.ts";
import { ensureRootRow, setMapKeys, type VswitchClient } from "./vswitch-db.ts";

export interface ChassisConfig {
  /** The SB database, e.g. "tcp:192.168.200.10:6642" or "ssl:a:6642,ssl:b:6642". */
  ovnRemote: string;
  encapType: EncapType;
  /** The tunnel endpoint address of this node. */
  encapIp: string;
  /** The chassis name; the node name, so that requested-chassis = node name binds the node's ports. */
  systemId: string;
  bridgeDatapathType: DatapathType;
  /** Written only when given. */
  hostname?: string;
  /**
   * ovn-bridge-mappings ("provider:bridge,..."); written only when given, so a mapping an admin (or ZStack's
   * agent) set stays theirs when the agent has no provider networks configured. ovn-chassis-mac-mappings follows
   * it: the same providers, each with this chassis's MAC (written and left alone together).
   */
  bridgeMappings?: string;
}

/** The external_ids keys the agent owns, with their desired values. */
export function chassisExternalIds(c: ChassisConfig): Record<string, string> {
  const ids: Record<string, string> = {
    "ovn-remote": c.ovnRemote,
    "ovn-encap-type": c.encapType,
    "ovn-encap-ip": c.encapIp,
    "system-id": c.systemId,
    "ovn-bridge-datapath-type": c.bridgeDatapathType,
  };
  if (c.hostname !== undefined) ids.hostname = c.hostname;
  if (c.bridgeMappings !== undefined) {
    ids["ovn-bridge-mappings"] = c.bridgeMappings;
    ids["ovn-chassis-mac-mappings"] = chassisMacMappings(c.bridgeMappings, c.systemId);
  }
  return ids;
}

/** Brings the owned keys to their desired values; returns the keys it changed ([] when all matched). */
export async function ensureChassisConfig(client: VswitchClient, c: ChassisConfig): Promise<string[]> {
  const root = await ensureRootRow(client);
  const txn = client.transaction();
  const changed = setMapKeys(
    txn,
    "Open_vSwitch",
    root._uuid,
    "external_ids",
    root.external_ids,
    chassisExternalIds(c),
  );
  if (changed.length > 0) await txn.commit();
  return changed;
}
