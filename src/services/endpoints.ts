// Which endpoints a Service port sends to, chosen as kube-proxy chooses them, from the Service's EndpointSlices.

import type { V1EndpointSlice } from "@kubernetes/client-node";
import { compareIp, formatIp, type IpAddress, tryParseIp } from "../ipam/address.ts";
import type { L4Protocol, ServicePortModel } from "./service-model.ts";

export interface Endpoint {
  ip: IpAddress;
  port: number;
  nodeName?: string;
}

interface Candidate extends Endpoint {
  ready: boolean;
  servingTerminating: boolean;
}

/**
 * kube-proxy's choice: the ready endpoints; if there are none, the serving and terminating ones. With `node`,
 * the same rule applied to that node's endpoints only. Each endpoint's port comes from its slice's port with
 * the same name and protocol as `port` (a named targetPort may map to different numbers per slice).
 * Endpoints with an address or port that cannot be read are left out. Sorted, without duplicates.
 */
export function selectEndpoints(
  slices: readonly V1EndpointSlice[],
  port: ServicePortModel,
  opts: { node?: string } = {},
): Endpoint[] {
  const candidates = new Map<string, Candidate>();
  for (const slice of slices) {
    if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") continue;
    const family = slice.addressType === "IPv4" ? 4 : 6;
    const slicePort = (slice.ports ?? []).find(
      (p) => (p.name ?? "") === port.name && protocolOf(p.protocol) === port.protocol,
    );
    const number = slicePort?.port;
    if (typeof number !== "number" || !Number.isInteger(number) || number < 1 || number > 65535) continue;
    for (const ep of slice.endpoints ?? []) {
      if (opts.node !== undefined && ep.nodeName !== opts.node) continue;
      // kube-proxy uses the first address only; the API says they are fungible.
      const text = ep.addresses?.[0];
      const ip = typeof text === "string" ? tryParseIp(text) : undefined;
      if (!ip || ip.family !== family) continue;
      const c = ep.conditions ?? {};
      const ready = c.ready !== false;
      const serving = c.serving !== false;
      const terminating = c.terminating === true;
      const key = `${formatIp(ip)}|${number}`;
      const prior = candidates.get(key);
      // The same endpoint can sit in two slices while the slice controller moves it; the readier copy wins.
      if (prior && (prior.ready || !ready)) continue;
      candidates.set(key, {
        ip,
        port: number,
        ...(typeof ep.nodeName === "string" ? { nodeName: ep.nodeName } : {}),
        ready,
        servingTerminating: serving && terminating,
      });
    }
  }
  const all = [...candidates.values()];
  const ready = all.filter((c) => c.ready);
  const chosen = ready.length > 0 ? ready : all.filter((c) => c.servingTerminating);
  return chosen
    .map(({ ip, port: p, nodeName }) =>
      nodeName === undefined ? { ip, port: p } : { ip, port: p, nodeName },
    )
    .sort((a, b) => compareIp(a.ip, b.ip) || a.port - b.port);
}

function protocolOf(raw: string | undefined): L4Protocol | undefined {
  const p = raw ?? "TCP";
  return p === "TCP" ? "tcp" : p === "UDP" ? "udp" : p === "SCTP" ? "sctp" : undefined;
}
