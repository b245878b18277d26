// Calling the CNI the way a container runtime does, through the libcni driver fixture (cni-driver), from
// inside the node's namespaces so it reads the node's own /etc/cni/net.d and /opt/cni/bin.

import { CommandError, run } from "./command.ts";

export interface CniAttachment {
  containerId: string;
  netnsPath: string;
  ifname: string;
  podNamespace: string;
  podName: string;
  podUid: string;
}

export function cniArgs(a: CniAttachment): string {
  return [
    `K8S_POD_NAMESPACE=${a.podNamespace}`,
    `K8S_POD_NAME=${a.podName}`,
    `K8S_POD_INFRA_CONTAINER_ID=${a.containerId}`,
    `K8S_POD_UID=${a.podUid}`,
  ].join(";");
}

export function driverArgs(op: "add" | "del" | "check", a: CniAttachment): string[] {
  return [
    op,
    "--container-id",
    a.containerId,
    "--netns",
    a.netnsPath,
    "--ifname",
    a.ifname,
    "--args",
    cniArgs(a),
  ];
}

export class CniError extends Error {
  constructor(
    readonly op: string,
    message: string,
  ) {
    super(message);
    this.name = "CniError";
  }
}

/** The addresses a CNI result assigns, without prefix length, primary first. Accepts 0.4.x and 1.x results. */
export function resultIps(result: unknown): string[] {
  const r = result as { ips?: Array<{ address?: string }>; ip4?: { ip?: string }; ip6?: { ip?: string } };
  const cidrs: string[] = [];
  if (Array.isArray(r.ips)) {
    for (const ip of r.ips) if (typeof ip.address === "string") cidrs.push(ip.address);
  } else {
    if (r.ip4?.ip) cidrs.push(r.ip4.ip);
    if (r.ip6?.ip) cidrs.push(r.ip6.ip);
  }
  return cidrs.map((c) => c.split("/")[0] as string);
}

async function drive(driver: string, op: "add" | "del" | "check", a: CniAttachment): Promise<string> {
  try {
    return await run(driver, driverArgs(op, a), { timeoutMs: 120_000 });
  } catch (err) {
    if (err instanceof CommandError) {
      throw new CniError(
        op,
        (err.stderr.trim() || err.stdout.trim() || `exit ${err.code}`).replace(/^cni-driver: /, ""),
      );
    }
    throw err;
  }
}

export async function cniAdd(driver: string, a: CniAttachment): Promise<{ result: unknown; ips: string[] }> {
  const out = await drive(driver, "add", a);
  const result = JSON.parse(out) as unknown;
  return { result, ips: resultIps(result) };
}

export async function cniDel(driver: string, a: CniAttachment): Promise<void> {
  await drive(driver, "del", a);
}
