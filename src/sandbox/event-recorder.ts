// Events on pods, as the kubelet's recorder writes them: a repeat of the same reason and message bumps the
// count and last timestamp of the existing Event instead of creating another.

import { randomBytes } from "node:crypto";
import { type CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiTime } from "./pod-status.ts";

interface Series {
  name: string;
  count: number;
}

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export class EventRecorder {
  private readonly series = new Map<string, Series>();

  constructor(
    private readonly core: CoreV1Api,
    private readonly nodeName: string,
    private readonly log: Logger,
  ) {}

  /** Never throws: a lost Event must not fail the pod's sync. */
  async record(pod: V1Pod, type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    const uid = pod.metadata?.uid as string;
    const namespace = pod.metadata?.namespace as string;
    const key = `${uid}|${reason}|${message}`;
    const now = new Date();
    try {
      const known = this.series.get(key);
      if (known) {
        known.count++;
        await this.core.patchNamespacedEvent(
          { name: known.name, namespace, body: { count: known.count, lastTimestamp: apiTime(now) } },
          mergePatch,
        );
        return;
      }
      const name = `${pod.metadata?.name}.${randomBytes(8).toString("hex")}`;
      await this.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace },
          involvedObject: { apiVersion: "v1", kind: "Pod", name: pod.metadata?.name, namespace, uid },
          reason,
          message,
          type,
          source: { component: "kubelet", host: this.nodeName },
          reportingComponent: "kubelet",
          reportingInstance: this.nodeName,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.series.set(key, { name, count: 1 });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, reason }, "event not recorded");
    }
  }

  /** Drops what is known about a pod that is gone. */
  forget(uid: string): void {
    for (const key of [...this.series.keys()]) if (key.startsWith(`${uid}|`)) this.series.delete(key);
  }
}
