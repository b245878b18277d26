// The elector's renew deadline, against an in-memory Lease store whose requests the test controls (the real
// apiserver cannot be made to answer a GET and then hang a PUT on demand; test/integration/k8s has the
// elector against a real one).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "../observability/log.ts";
import { type ApiClient, ApiError } from "./api-client.ts";
import { LeaderElector, type Lease } from "./leader-election.ts";

/** A Lease store: GET, POST and PUT as the apiserver answers them, with PUTs that can be made to hang. */
function leaseStore() {
  let lease: Lease | undefined;
  const state = { hangPuts: false, putsInFlight: 0, hung: [] as ((e: Error) => void)[] };
  const client = {
    async request<T>(path: string, opts: { method?: string; body?: unknown } = {}): Promise<T> {
      const method = opts.method ?? "GET";
      if (method === "GET") {
        if (!lease) throw new ApiError(404, "NotFound", `${path} not found`);
        return structuredClone(lease) as T;
      }
      if (method === "PUT" && state.hangPuts) {
        state.putsInFlight++;
        return new Promise<T>((_, reject) => state.hung.push(reject));
      }
      lease = structuredClone(opts.body) as Lease;
      return structuredClone(lease) as T;
    },
  };
  return { client: client as unknown as ApiClient, state };
}

describe("LeaderElector", () => {
  it("ends leadership at the renew deadline even while a renewal is still in flight", async () => {
    const { client, state } = leaseStore();
    let signal: AbortSignal | undefined;
    let started: () => void = () => {};
    const leading = new Promise<void>((resolve) => {
      started = resolve;
    });
    const elector = new LeaderElector({
      client,
      namespace: "kube-system",
      name: "lease",
      identity: "a",
      leaseDurationMs: 1000,
      renewDeadlineMs: 600,
      retryPeriodMs: 200,
      logger: silentLogger,
      onStartedLeading: (s) => {
        signal = s;
        started();
        return new Promise<void>((resolve) => s.addEventListener("abort", () => resolve(), { once: true }));
      },
    });
    elector.start();
    await leading;
    // From now on the apiserver reads the Lease but never answers a renewal.
    state.hangPuts = true;
    const ended = new Promise<void>((resolve) =>
      signal?.addEventListener("abort", () => resolve(), { once: true }),
    );
    await ended;
    assert.ok(state.putsInFlight >= 1, "a renewal was still unanswered when leadership ended");
    // The hung renewals time out at last, and the apiserver answers again.
    state.hangPuts = false;
    for (const reject of state.hung.splice(0)) reject(new Error("PUT: no answer"));
    await elector.stop();
  });
});
