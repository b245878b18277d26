// The Kubernetes side of make bench-services: selector-less Services with hand-written EndpointSlices (the rig
// has no EndpointSlice controller; a selector-less Service is how users give their own endpoints, and consumers
// read the slices alike), created with a bounded number of requests in flight, and endpoint changes made by
// replacing one address of a slice.
import type { ApiClient } from "../../src/k8s/api-client.ts";
import { BENCH_NAMESPACE } from "../controller/pod-load.ts";

export const SERVICE_PORT = 80;
export const TARGET_PORT = 8080;

export const serviceName = (i: number): string => `svc-${i}`;

/** The i-th endpoint address of service s: unique over 2^16 addresses of 10.244.0.0/16 (10 per service). */
export function endpointIp(service: number, k: number): string {
  const n = 2 + service * 10 + k;
  return `10.244.${(n >> 8) & 255}.${n & 255}`;
}

/** A replacement address, from 10.245.0.0/16 so it never equals an original one. */
export function churnIp(change: number): string {
  return `10.245.${(change >> 8) & 255}.${change & 255}`;
}

export interface Slice {
  metadata: { name: string; resourceVersion?: string };
  endpoints: Array<{ addresses: string[]; conditions: { ready: boolean } }>;
}

export function sliceBody(service: number, addresses: readonly string[]): object {
  const name = serviceName(service);
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${name}-bench`,
      labels: { "kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "bench" },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: TARGET_PORT, protocol: "TCP" }],
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  };
}

async function pool(n: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await fn(i);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, worker));
}

/** Creates `services` Services with one slice of `endpoints` ready addresses each; returns the slices as stored. */
export async function createServices(
  api: ApiClient,
  services: number,
  endpoints: number,
  inFlight: number,
): Promise<Slice[]> {
  const slices: Slice[] = new Array(services);
  await pool(services, inFlight, async (i) => {
    await api.request(`/api/v1/namespaces/${BENCH_NAMESPACE}/services`, {
      method: "POST",
      body: {
        metadata: { name: serviceName(i) },
        spec: { ports: [{ name: "http", port: SERVICE_PORT, protocol: "TCP", targetPort: TARGET_PORT }] },
      },
    });
    slices[i] = await api.request<Slice>(
      `/apis/discovery.k8s.io/v1/namespaces/${BENCH_NAMESPACE}/endpointslices`,
      {
        method: "POST",
        body: sliceBody(
          i,
          Array.from({ length: endpoints }, (_, k) => endpointIp(i, k)),
        ),
      },
    );
  });
  return slices;
}

/**
 * Replaces endpoint `k` of service `s`'s slice with `ip`: one PUT of the stored slice (nobody else writes these
 * slices, so the stored resourceVersion is current), which then replaces the stored one. Returns the slice's key
 * and the resourceVersion of the change, which the watch event carrying it has too.
 */
export async function replaceEndpoint(
  api: ApiClient,
  slices: Slice[],
  s: number,
  k: number,
  ip: string,
): Promise<{ key: string; resourceVersion: string }> {
  const cur = slices[s] as Slice;
  const path = `/apis/discovery.k8s.io/v1/namespaces/${BENCH_NAMESPACE}/endpointslices/${cur.metadata.name}`;
  const endpoints = cur.endpoints.map((e, i) => (i === k ? { ...e, addresses: [ip] } : e));
  const stored = await api.request<Slice>(path, { method: "PUT", body: { ...cur, endpoints } });
  slices[s] = stored;
  const rv = stored.metadata.resourceVersion;
  if (!rv) throw new Error(`the PUT of ${cur.metadata.name} answered no resourceVersion`);
  return { key: `${BENCH_NAMESPACE}/${stored.metadata.name}`, resourceVersion: rv };
}
