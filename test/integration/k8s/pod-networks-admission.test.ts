// The admission policy that reserves k8s.ovn.org/pod-networks to the controller, in a real apiserver: anyone
// else (even a cluster admin) is refused when creating a pod with the annotation, adding it, changing it or
// removing it, with a message that names the annotation and the way out; the controller's service account
// may write it, and edits that leave it alone pass.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { eventually } from "./cluster-objects.ts";

const POLICY = join(repoRoot, "deploy", "admission", "pod-networks-annotation.yaml");
const CONTROLLER = "system:serviceaccount:kube-system:zstack-ovnkube-controller";
const KEY = "k8s.ovn.org/pod-networks";
const FORGED = JSON.stringify({
  default: {
    ip_addresses: ["10.244.0.9/16"],
    mac_address: "0a:58:0a:f4:00:09",
    gateway_ips: ["10.244.0.1"],
    routes: [{ dest: "10.0.0.0/8 via 10.244.0.1\nnetns add pwn", nextHop: "10.244.0.1" }],
    logical_switch: "zovn-subnet-default",
  },
});

let kube: KubeApiserver;
/** A user who may do anything RBAC allows, as a namespace owner or cluster admin would. */
const alice = ["--as=alice", "--as-group=system:masters"];
const asController = [`--as=${CONTROLLER}`, "--as-group=system:masters"];

function pod(name: string, annotations?: Record<string, string>): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", ...(annotations ? { annotations } : {}) },
    spec: { containers: [{ name: "c", image: "x" }] },
  });
}

async function denied(args: string[], input?: string): Promise<string> {
  try {
    await kube.kubectl(args, input === undefined ? {} : { input });
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail(`kubectl ${args.join(" ")} was allowed`);
}

before(async () => {
  kube = await startKubeApiserver();
  // No controller manager here: the namespace's service account, which pod admission needs, is made by hand.
  await kube.kubectl(["create", "serviceaccount", "default", "-n", "default"]);
  await kube.kubectl(["apply", "-f", POLICY]);
  // The apiserver loads policies asynchronously: wait until a forged pod is refused.
  await eventually(
    "the policy to take effect",
    async () => {
      try {
        await kube.kubectl([...alice, "create", "-f", "-"], { input: pod("probe", { [KEY]: FORGED }) });
      } catch (e) {
        return /written only by zstack-ovnkube-controller/.test((e as Error).message);
      }
      await kube.kubectl(["delete", "pod", "probe", "--wait=false"]);
      return false;
    },
    30_000,
    500,
  );
});

after(() => kube?.stop());

describe("pod-networks admission policy", () => {
  it("refuses a pod created with the annotation by anyone but the controller, naming the annotation and the fix", async () => {
    const msg = await denied([...alice, "create", "-f", "-"], pod("forged", { [KEY]: FORGED }));
    assert.match(msg, /k8s\.ovn\.org\/pod-networks annotation is written only by zstack-ovnkube-controller/);
    assert.match(msg, /not by alice/);
    assert.match(msg, /network\.zstack\.io\/ip_address/);
    await assert.rejects(kube.kubectl(["get", "pod", "forged"]), /NotFound|not found/);
  });

  it("refuses adding, changing or removing the annotation on an existing pod, and lets the controller write it", async () => {
    await kube.kubectl([...alice, "create", "-f", "-"], { input: pod("victim") });
    assert.match(
      await denied([...alice, "annotate", "pod", "victim", `${KEY}=${FORGED}`]),
      /written only by/,
    );
    await kube.kubectl([...asController, "annotate", "pod", "victim", `${KEY}={"default":{}}`]);
    assert.match(
      await denied([...alice, "annotate", "--overwrite", "pod", "victim", `${KEY}=${FORGED}`]),
      /written only by/,
    );
    assert.match(await denied([...alice, "annotate", "pod", "victim", `${KEY}-`]), /written only by/);
    const value = await kube.kubectl([
      "get",
      "pod",
      "victim",
      "-o",
      `jsonpath={.metadata.annotations.k8s\\.ovn\\.org/pod-networks}`,
    ]);
    assert.equal(value, '{"default":{}}');
    // The controller may also remove it (it does so with annotations it did not write).
    await kube.kubectl([...asController, "annotate", "pod", "victim", `${KEY}-`]);
  });

  it("lets others edit a pod that carries the annotation as long as they leave it alone", async () => {
    await kube.kubectl([...alice, "create", "-f", "-"], { input: pod("labelled") });
    await kube.kubectl([...asController, "annotate", "pod", "labelled", `${KEY}={"default":{}}`]);
    await kube.kubectl([...alice, "label", "pod", "labelled", "team=a"]);
    await kube.kubectl([...alice, "annotate", "pod", "labelled", "note=hello"]);
    const labels = await kube.kubectl(["get", "pod", "labelled", "-o", "jsonpath={.metadata.labels.team}"]);
    assert.equal(labels, "a");
  });
});
