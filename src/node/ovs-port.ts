// A pod's port on br-int: one Port and one Interface named after the host end of the pod's veth, whose
// external_ids bind it to the pod's logical switch port (iface-id) and record which sandbox it belongs to
// (container id). Ports are found and removed by container id, never by pod name: a late DEL of an old
// sandbox must not touch the port of the pod's newer sandbox, which has the same iface-id.

import { TimeoutError } from "../ovsdb/errors.ts";
import type { Interface, Port } from "../ovsdb/models/vswitch.generated.ts";
import { byUuid } from "../ovsdb/transaction.ts";
import { StepError, StepTimeoutError } from "./errors.ts";
import { findBridge } from "./ovs-bridge.ts";
import {
  ensureIndex,
  NODE_AGENT,
  OWNER_KEY,
  setMapKeys,
  type VswitchClient,
  type VswitchTxn,
} from "./vswitch-db.ts";

/** Read by ovn-controller: the logical switch port this interface is. */
export const IFACE_ID_KEY = "iface-id";
/** Read by ovn-controller: binds only if the port's options:iface-id-ver, when set, matches (the pod UID). */
export const IFACE_ID_VER_KEY = "iface-id-ver";
/** Set by ovn-controller once the port's flows are installed. */
export const OVN_INSTALLED_KEY = "ovn-installed";
export const ATTACHED_MAC_KEY = "attached-mac";
export const CONTAINER_ID_KEY = "zstack.io/container-id";
export const POD_UID_KEY = "zstack.io/pod-uid";
export const POD_KEY = "zstack.io/pod";
export const IFNAME_KEY = "zstack.io/ifname";

const BY_CONTAINER = "zstack.io/container-id";
const BY_IFACE_ID = "iface-id";
const PORT_BY_INTERFACE = "interfaces";
const BRIDGE_BY_PORT = "ports";

export interface PodPortSpec {
  bridge: string;
  /** The host end of the veth; OVS opens the device by this name. */
  portName: string;
  /** The logical switch port name, `<namespace>_<pod>`. */
  ifaceId: string;
  containerId: string;
  /** Pod interface name (CNI_IFNAME). */
  ifname: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  mac: string;
}

export interface PodPortInfo {
  portName: string;
  interfaceUuid: string;
  ifaceId: string;
  containerId: string;
  ifname: string;
  podUid: string;
  /** "namespace/name". */
  pod: string;
  ovnInstalled: boolean;
  ofport: number | null;
  /** ovs-vswitchd's error opening the device, if any. */
  error: string | null;
  macInUse: string | null;
}

function interfaces(client: VswitchClient) {
  const tc = client.cache.table("Interface");
  ensureIndex(tc, BY_CONTAINER, (r) => r.external_ids[CONTAINER_ID_KEY]);
  ensureIndex(tc, BY_IFACE_ID, (r) => r.external_ids[IFACE_ID_KEY]);
  return tc;
}

function portOf(client: VswitchClient, ifaceUuid: string): Port | undefined {
  return ensureIndex(client.cache.table("Port"), PORT_BY_INTERFACE, (r) => r.interfaces).lookupOne(
    PORT_BY_INTERFACE,
    ifaceUuid,
  );
}

function isOurPodInterface(r: Interface): boolean {
  return r.external_ids[OWNER_KEY] === NODE_AGENT && r.external_ids[CONTAINER_ID_KEY] !== undefined;
}

function info(client: VswitchClient, r: Interface): PodPortInfo {
  const ids = r.external_ids;
  return {
    portName: portOf(client, r._uuid)?.name ?? r.name,
    interfaceUuid: r._uuid,
    ifaceId: ids[IFACE_ID_KEY] ?? "",
    containerId: ids[CONTAINER_ID_KEY] ?? "",
    ifname: ids[IFNAME_KEY] ?? "",
    podUid: ids[POD_UID_KEY] ?? "",
    pod: ids[POD_KEY] ?? "",
    ovnInstalled: ids[OVN_INSTALLED_KEY] === "true",
    ofport: r.ofport,
    error: r.error,
    macInUse: r.mac_in_use,
  };
}

export function podInterfaceIds(spec: PodPortSpec): Record<string, string> {
  return {
    [IFACE_ID_KEY]: spec.ifaceId,
    [IFACE_ID_VER_KEY]: spec.podUid,
    [ATTACHED_MAC_KEY]: spec.mac,
    [OWNER_KEY]: NODE_AGENT,
    [CONTAINER_ID_KEY]: spec.containerId,
    [IFNAME_KEY]: spec.ifname,
    [POD_UID_KEY]: spec.podUid,
    [POD_KEY]: `${spec.podNamespace}/${spec.podName}`,
  };
}

/** Unlinks the port holding `iface` from every bridge and deletes both rows. */
function removeInTxn(client: VswitchClient, txn: VswitchTxn, iface: Interface): string {
  const port = portOf(client, iface._uuid);
  if (port) {
    const bridges = ensureIndex(client.cache.table("Bridge"), BRIDGE_BY_PORT, (r) => r.ports).lookup(
      BRIDGE_BY_PORT,
      port._uuid,
    );
    for (const br of bridges) txn.mutate("Bridge", byUuid(br._uuid), [["ports", "delete", [port._uuid]]]);
    txn.delete("Port", byUuid(port._uuid));
  }
  txn.delete("Interface", byUuid(iface._uuid));
  return port?.name ?? iface.name;
}

export interface AddPodPortResult {
  interfaceUuid: string;
  /** False when the port existed already (a retried ADD). */
  created: boolean;
  /** Ports of older sandboxes of the same pod that this ADD removed. */
  replaced: string[];
}

/**
 * Adds the Port and Interface and links them to the bridge in one transaction. An older sandbox's port with the
 * same iface-id goes in the same transaction: two interfaces claiming one logical port would make
 * ovn-controller flip the binding between them.
 */
export async function addPodPort(client: VswitchClient, spec: PodPortSpec): Promise<AddPodPortResult> {
  const br = findBridge(client, spec.bridge);
  if (!br) throw new StepError("ovs-port", `bridge ${spec.bridge} does not exist`);
  const ifaces = interfaces(client);
  const ids = podInterfaceIds(spec);
  const txn = client.transaction();
  const existing = ifaces.lookupOne("name", spec.portName);
  let ref: ReturnType<VswitchTxn["insert"]> | undefined;
  if (existing) {
    const owner = existing.external_ids[CONTAINER_ID_KEY];
    if (owner !== spec.containerId) {
      throw new StepError(
        "ovs-port",
        `interface ${spec.portName} exists and belongs to ${owner ? `container ${owner}` : "someone else"}`,
      );
    }
    setMapKeys(txn, "Interface", existing._uuid, "external_ids", existing.external_ids, ids);
    const port = portOf(client, existing._uuid);
    if (port && !br.ports.includes(port._uuid)) {
      txn.mutate("Bridge", byUuid(br._uuid), [["ports", "insert", [port._uuid]]]);
    }
  } else {
    ref = txn.insert("Interface", { name: spec.portName, type: "", external_ids: ids });
    const port = txn.insert("Port", {
      name: spec.portName,
      interfaces: [ref],
      external_ids: { [OWNER_KEY]: NODE_AGENT, [CONTAINER_ID_KEY]: spec.containerId },
    });
    txn.mutate("Bridge", byUuid(br._uuid), [["ports", "insert", [port]]]);
  }
  const replaced: string[] = [];
  for (const stale of ifaces.lookup(BY_IFACE_ID, spec.ifaceId)) {
    if (stale._uuid === existing?._uuid || !isOurPodInterface(stale)) continue;
    if (stale.external_ids[CONTAINER_ID_KEY] === spec.containerId) continue;
    replaced.push(removeInTxn(client, txn, stale));
  }
  const res = await txn.commit();
  return { interfaceUuid: ref ? res.uuid(ref) : (existing?._uuid as string), created: !existing, replaced };
}

/**
 * Resolves when ovn-controller has installed the port's flows (external_ids:ovn-installed=true on the
 * Interface), as seen by the monitor; a StepTimeoutError naming the step after `budgetMs`.
 */
export async function waitOvnInstalled(
  client: VswitchClient,
  interfaceUuid: string,
  budgetMs: number,
  signal?: AbortSignal,
): Promise<Interface> {
  try {
    return await client.waitForRow(
      "Interface",
      (r) => r._uuid === interfaceUuid && r.external_ids[OVN_INSTALLED_KEY] === "true",
      { timeoutMs: budgetMs, description: "with ovn-installed=true", ...(signal ? { signal } : {}) },
    );
  } catch (e) {
    if (!(e instanceof TimeoutError)) throw e;
    const row = client.cache.table("Interface").get(interfaceUuid);
    const detail = !row
      ? "the interface was removed meanwhile"
      : row.error
        ? `ovs-vswitchd: ${row.error}`
        : `interface ${row.name} has ofport ${row.ofport ?? "none"}; is the logical port ${row.external_ids[IFACE_ID_KEY]} bound to this chassis?`;
    throw new StepTimeoutError("ovn-installed", budgetMs, detail);
  }
}

/** The pod port of a container (and pod interface name, when given). */
export function findPodPort(
  client: VswitchClient,
  containerId: string,
  ifname?: string,
): PodPortInfo | undefined {
  const row = interfaces(client)
    .lookup(BY_CONTAINER, containerId)
    .find((r) => isOurPodInterface(r) && (ifname === undefined || r.external_ids[IFNAME_KEY] === ifname));
  return row ? info(client, row) : undefined;
}

/** Every pod port this agent created. */
export function listPodPorts(client: VswitchClient): PodPortInfo[] {
  return interfaces(client)
    .find(isOurPodInterface)
    .map((r) => info(client, r));
}

/**
 * Removes the ports of exactly these containers (optionally only the given pod interface name), in one
 * transaction; returns the port names removed, [] when there were none (nothing is sent then).
 */
export async function removePodPorts(
  client: VswitchClient,
  containerIds: readonly string[],
  ifname?: string,
): Promise<string[]> {
  const ifaces = interfaces(client);
  const txn = client.transaction();
  const removed: string[] = [];
  for (const id of containerIds) {
    for (const r of ifaces.lookup(BY_CONTAINER, id)) {
      if (!isOurPodInterface(r) || (ifname !== undefined && r.external_ids[IFNAME_KEY] !== ifname)) continue;
      removed.push(removeInTxn(client, txn, r));
    }
  }
  if (removed.length > 0) await txn.commit();
  return removed;
}
