import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { ApiClient } from "../k8s/api-client.ts";
import { silentLogger } from "../observability/log.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import { type NbTables, nbModel } from "../ovsdb/models/nb.generated.ts";
import { defaultSubnetSpec, OvnController } from "./controller.ts";

describe("defaultSubnetSpec", () => {
  it("names the protocol of the cluster CIDR's families, which the CRD requires for IPv6 and dual-stack", () => {
    assert.deepEqual(defaultSubnetSpec("10.244.0.0/16"), {
      cidr: "10.244.0.0/16",
      gateway: "10.244.0.1",
      protocol: "IPv4",
      default: true,
    });
    assert.deepEqual(defaultSubnetSpec("fd00:10:244::/48"), {
      cidr: "fd00:10:244::/48",
      gateway: "fd00:10:244::1",
      protocol: "IPv6",
      default: true,
    });
    assert.deepEqual(defaultSubnetSpec("10.244.0.0/16, fd00:10:244::/48"), {
      cidr: "10.244.0.0/16,fd00:10:244::/48",
      gateway: "10.244.0.1,fd00:10:244::1",
      protocol: "Dual",
      default: true,
    });
  });
});

describe("OvnController", () => {
  it("leaves no listener on the shared NB client when its term ends before it ever started", async () => {
    // Never connected: the run waits for NB, and ends there, as a term that fails to start does.
    const nb = new OvsdbClient<NbTables>({ remotes: "unix:/nonexistent/nb.sock", model: nbModel });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://127.0.0.1:1", skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const api = new ApiClient(kc);
    const before = nb.listenerCount("ready");
    for (let term = 0; term < 3; term++) {
      const ctl = new OvnController({
        api,
        nb,
        clusterCIDR: "10.244.0.0/16",
        serviceCIDRs: ["10.96.0.0/16"],
        joinCIDR: "100.64.0.0/16",
        tunnel: "vxlan",
        log: silentLogger,
      });
      const ended = new AbortController();
      const run = ctl.run(ended.signal);
      ended.abort();
      await run.catch(() => undefined);
    }
    assert.equal(nb.listenerCount("ready"), before, "each ended term removed what it registered");
    api.close();
    await nb.close();
  });
});
