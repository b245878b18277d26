// The apiserver client against a real kube-apiserver: a client certificate rotated on disk (as kubelet and
// cert-manager rotate them) is used for the next request, without restarting the process; a fenced view
// stops writing when its fence closes.

import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { ApiClient, isNotFound, WriteFencedError } from "../../../src/k8s/api-client.ts";
import { certConfig } from "../../../src/sandbox/pki.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { runTool } from "../../rig/process.ts";

let kube: KubeApiserver;
let dir: string;

before(async () => {
  kube = await startKubeApiserver();
  dir = mkdtempSync(join(tmpdir(), "zovn-rotation-"));
});

after(async () => {
  await kube?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A client certificate for `user` (a cluster admin), signed by the apiserver's client CA. */
async function issueClient(user: string): Promise<{ cert: string; key: string }> {
  const cnf = join(dir, `${user}.cnf`);
  writeFileSync(
    cnf,
    certConfig({ file: user, commonName: user, organization: "system:masters", usage: "client" }),
  );
  const cert = join(dir, `${user}.crt`);
  const key = join(dir, `${user}.key`);
  await runTool("openssl", [
    ...["req", "-x509", "-config", cnf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
    ...["-noenc", "-keyout", key, "-out", cert, "-days", "1", "-CA", kube.ca.cert, "-CAkey", kube.ca.key],
  ]);
  return { cert, key };
}

interface SelfSubjectReview {
  status?: { userInfo?: { username?: string } };
}

async function whoAmI(api: ApiClient): Promise<string | undefined> {
  const review = await api.request<SelfSubjectReview>("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
    method: "POST",
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  return review.status?.userInfo?.username;
}

describe("ApiClient", () => {
  it("a fenced view writes until its fence closes, then refuses writes without sending them and still reads", async (t) => {
    const api = new ApiClient(kube.kubeConfig);
    t.after(() => api.close());
    const fence = new AbortController();
    const view = api.fenced(fence.signal);
    const configMap = (name: string) => ({ metadata: { name }, data: { written: "yes" } });
    const path = "/api/v1/namespaces/default/configmaps";
    await view.request(path, { method: "POST", body: configMap("before") });
    fence.abort(new Error("leadership lost"));
    await assert.rejects(view.request(path, { method: "POST", body: configMap("after") }), WriteFencedError);
    await assert.rejects(
      view.request(`${path}/before`, { method: "PATCH", body: { data: { written: "again" } } }),
      WriteFencedError,
    );
    const before = await view.request<{ data: Record<string, string> }>(`${path}/before`);
    assert.deepEqual(
      before.data,
      { written: "yes" },
      "reads go on; the refused PATCH never reached the server",
    );
    await assert.rejects(api.request(`${path}/after`), (e) => isNotFound(e), "the refused POST was not sent");
    await api.request(path, { method: "POST", body: configMap("by-client") });
  });

  it("discardResponse: a 2xx answer resolves to undefined with the write done, an error answer still rejects with its Status", async (t) => {
    const api = new ApiClient(kube.kubeConfig);
    t.after(() => api.close());
    const path = "/api/v1/namespaces/default/configmaps";
    await api.request(path, { method: "POST", body: { metadata: { name: "discarded" }, data: { v: "1" } } });
    const answer = await api.request(`${path}/discarded`, {
      method: "PATCH",
      body: { data: { v: "2" } },
      discardResponse: true,
    });
    assert.equal(answer, undefined, "the answered object is not parsed");
    const now = await api.request<{ data: Record<string, string> }>(`${path}/discarded`);
    assert.deepEqual(now.data, { v: "2" }, "the PATCH was applied");
    await assert.rejects(
      api.request(`${path}/absent`, { method: "PATCH", body: { data: { v: "2" } }, discardResponse: true }),
      (e) => isNotFound(e),
      "a 404 is parsed into its ApiError",
    );
    // The connection the discarded body was read from is reused for the next request.
    const again = await api.request<{ data: Record<string, string> }>(`${path}/discarded`);
    assert.equal(again.data.v, "2");
  });

  it("presents a client certificate rotated on disk from the next request on", async (t) => {
    const [first, second] = await Promise.all([
      issueClient("zovn-rotation-a"),
      issueClient("zovn-rotation-b"),
    ]);
    // The kubeconfig names certificate files, as a kubelet-style rotating kubeconfig does.
    const certFile = join(dir, "client.crt");
    const keyFile = join(dir, "client.key");
    copyFileSync(first.cert, certFile);
    copyFileSync(first.key, keyFile);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "rig", server: kube.server, caFile: kube.ca.cert }],
      users: [{ name: "rotating", certFile, keyFile }],
      contexts: [{ name: "rotating", cluster: "rig", user: "rotating" }],
      currentContext: "rotating",
    });
    const api = new ApiClient(kc);
    t.after(() => api.close());
    assert.equal(await whoAmI(api), "zovn-rotation-a");
    assert.equal(await whoAmI(api), "zovn-rotation-a", "a kept-alive connection is reused meanwhile");

    copyFileSync(second.cert, certFile);
    copyFileSync(second.key, keyFile);
    assert.equal(await whoAmI(api), "zovn-rotation-b", "the rotated certificate is used");
  });
});
