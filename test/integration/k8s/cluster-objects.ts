// Objects the Kubernetes integration tests create, and a wait for conditions that settle asynchronously.

import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";

/**
 * Creates a namespace with its default ServiceAccount: without kube-controller-manager nobody else creates
 * it, and the ServiceAccount admission plugin refuses pods until it exists.
 */
export async function createNamespace(kc: KubeConfig, name: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name } } });
  await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: "default" } } });
}

export function pod(name: string, labels: Record<string, string> = {}, nodeName?: string): V1Pod {
  return {
    metadata: { name, labels },
    spec: {
      containers: [{ name: "app", image: "registry.invalid/app:1" }],
      automountServiceAccountToken: false,
      ...(nodeName ? { nodeName } : {}),
    },
  };
}

export async function createPods(kc: KubeConfig, namespace: string, pods: V1Pod[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(pods.map((body) => core.createNamespacedPod({ namespace, body })));
}

/** Polls `check` until it returns true; fails with `what` and the last error after timeoutMs. */
export async function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<number> {
  const start = Date.now();
  let last: unknown;
  while (Date.now() - start < timeoutMs) {
    try {
      if (await check()) return Date.now() - start;
    } catch (err) {
      last = err;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}${last ? ` (${String(last)})` : ""}`);
}
