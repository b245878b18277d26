// A small typed client for Subnets on top of the generated CustomObjectsApi. Errors come back as ApiError
// carrying the apiserver's Status message, which for a refused Subnet names the field and the fix.

import {
  ApiException,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { isNotFound, statusError } from "../k8s/api-client.ts";
import { SUBNET_GROUP, SUBNET_PLURAL, SUBNET_VERSION, type Subnet, type SubnetStatus } from "./subnet.ts";

const ids = { group: SUBNET_GROUP, version: SUBNET_VERSION, plural: SUBNET_PLURAL };

function toApiError(err: unknown): unknown {
  if (!(err instanceof ApiException)) return err;
  let body: unknown = err.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body);
    } catch {
      body = { message: body };
    }
  }
  return statusError(err.code, body);
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toApiError(err);
  }
}

export class SubnetClient {
  private readonly api: CustomObjectsApi;

  constructor(kubeConfig: KubeConfig) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /** The Subnet, or undefined when it does not exist. */
  async get(name: string): Promise<Subnet | undefined> {
    try {
      return (await call(() => this.api.getClusterCustomObject({ ...ids, name }))) as Subnet;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(opts: { labelSelector?: string } = {}): Promise<Subnet[]> {
    const res = (await call(() =>
      this.api.listClusterCustomObject({
        ...ids,
        ...(opts.labelSelector ? { labelSelector: opts.labelSelector } : {}),
      }),
    )) as { items?: Subnet[] };
    return res.items ?? [];
  }

  async create(subnet: Subnet): Promise<Subnet> {
    return (await call(() => this.api.createClusterCustomObject({ ...ids, body: subnet }))) as Subnet;
  }

  async delete(name: string): Promise<void> {
    try {
      await call(() => this.api.deleteClusterCustomObject({ ...ids, name }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** Merge-patches the status subresource; fields left out keep their values. */
  async patchStatus(name: string, status: SubnetStatus): Promise<Subnet> {
    return (await call(() =>
      this.api.patchClusterCustomObjectStatus(
        { ...ids, name, body: { status } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    )) as Subnet;
  }

  /**
   * Replaces the status if the Subnet is still at subnet.metadata.resourceVersion; a concurrent change
   * fails with 409 Conflict (ApiError), so a reconciler never overwrites what it has not seen.
   */
  async replaceStatus(subnet: Subnet): Promise<Subnet> {
    return (await call(() =>
      this.api.replaceClusterCustomObjectStatus({ ...ids, name: subnet.metadata.name, body: subnet }),
    )) as Subnet;
  }
}
