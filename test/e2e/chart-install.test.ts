// The product installed by its own chart on real nodes (`zovn sandbox up --kubelet`, the chart by default): `helm install`
// of deploy/helm/zstack-ovn-kubernetes with values-standalone.yaml and local images runs OVN central, the
// controller and the node DaemonSet (ovn-controller, the agent, the CNI install) as pods on real kubelets.
// Smoke test: nodes Ready through the DaemonSet's CNI, two pods on different nodes talk, `kubectl exec` works,
// `helm uninstall` removes every pod of the chart, and `down` leaves no process, mount, netns, cgroup or CNI file.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { cgroupLeftovers, instanceCgroup, processesInCgroup } from "../../src/sandbox/cgroups.ts";
import { CHART_NAMESPACE, CHART_RELEASE, PRODUCT_REPOSITORY } from "../../src/sandbox/chart-install.ts";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { listNetns, readMountInfo } from "../../src/sandbox/netns.ts";
import { isAlive, type ProcessIdentity } from "../../src/sandbox/process-table.ts";
import { findNamespaces, processesIn } from "../../src/sandbox/sweep.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbhelm";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;
const BUSYBOX = "docker.io/library/busybox:1.35.0";

function kubectl(args: readonly string[], input?: string): Promise<string> {
  const bin = ctx().state.binaries?.KUBECTL as string;
  return run(bin, [`--kubeconfig=${adminKubeconfig(layout)}`, ...args], {
    timeoutMs: 120_000,
    ...(input !== undefined ? { input } : {}),
  });
}

function helm(args: readonly string[]): Promise<string> {
  const bin = ctx().state.binaries?.HELM as string;
  return run(bin, [`--kubeconfig=${adminKubeconfig(layout)}`, "--namespace", CHART_NAMESPACE, ...args], {
    timeoutMs: 700_000,
  });
}

interface PodList {
  items: Array<{
    metadata: { name: string; labels?: Record<string, string> };
    spec: { nodeName?: string; containers: Array<{ name: string; image: string }> };
    status: {
      phase: string;
      podIP?: string;
      conditions?: Array<{ type: string; status: string }>;
    };
  }>;
}

async function chartPods(): Promise<PodList["items"]> {
  const list = JSON.parse(
    await kubectl([
      ...["get", "pods", "-n", CHART_NAMESPACE, "-o", "json"],
      `--selector=app.kubernetes.io/instance=${CHART_RELEASE}`,
    ]),
  ) as PodList;
  return list.items;
}

function pod(name: string, node: string, command: string[]): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app: name } },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "c", image: BUSYBOX, imagePullPolicy: "Never", command }],
    },
  };
}

function sandboxProcesses(): ProcessIdentity[] {
  const ns = findNamespaces(`${NAME}-`, layout.nsDir);
  return [
    ...ctx().state.daemons,
    ...processesIn(new Set(ns.netns.values()), new Set(ns.mountNs.values())),
    ...processesInCgroup(instanceCgroup(NAME)),
  ];
}

describe("the product installed by its chart on real nodes (up --kubelet, the chart by default)", {
  timeout: 45 * 60_000,
}, () => {
  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });
  after(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  it("helm installs the chart and its pods bring every node Ready: OVN central, controller, node DaemonSet", async () => {
    const started = Date.now();
    // --kubelet alone: the chart is its default.
    await zovn(["up", "--kubelet"], 40 * 60_000);
    process.stderr.write(`up --kubelet (chart) took ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    const release = JSON.parse(await helm(["list", "--output", "json"])) as Array<{
      name: string;
      status: string;
    }>;
    assert.deepEqual(
      release.map((r) => [r.name, r.status]),
      [[CHART_RELEASE, "deployed"]],
    );
    // No component of the product is a sandbox process: the chart runs them all.
    const daemons = ctx().state.daemons.map((d) => d.name);
    for (const gone of ["zstack-ovnkube-node", "zstack-ovnkube-controller", "ovn-controller", "ovn-northd"])
      assert.ok(!daemons.some((d) => d.endsWith(`/${gone}`)), `${gone} is not a sandbox process`);
    const { topo } = ctx();
    const pods = await chartPods();
    const byComponent = (c: string) =>
      pods.filter((p) => p.metadata.labels?.["app.kubernetes.io/component"] === c);
    const ready = (p: PodList["items"][number]) =>
      p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
    const nodePods = byComponent("node");
    assert.deepEqual(
      nodePods.map((p) => p.spec.nodeName).sort(),
      topo.nodes.map((n) => n.name),
    );
    assert.ok(nodePods.every(ready), "every node agent pod is Ready");
    assert.deepEqual(
      nodePods[0]?.spec.containers.map((c) => c.name),
      ["ovn-controller", "node"],
      "ovn-controller runs in the DaemonSet's pods, OVS is the node's own (hostOVS)",
    );
    for (const c of ["ovn-nb-db", "ovn-sb-db", "ovn-northd", "controller"]) {
      assert.equal(byComponent(c).length, 1, c);
      assert.ok(byComponent(c).every(ready), `${c} Ready`);
    }
    assert.ok(
      pods.every((p) => p.spec.containers.every((c) => c.image.startsWith("localhost/zstack-ovn-"))),
      "local images only",
    );
    assert.ok(byComponent("controller")[0]?.spec.containers[0]?.image.startsWith(`${PRODUCT_REPOSITORY}:`));
    // The DaemonSet installed the CNI executable and the conflist into each node's own directories.
    for (const n of topo.nodes) {
      const dirs = layout.node(n.name);
      assert.ok(existsSync(join(dirs.cniBin, "zstack-ovn-cni")), `${n.name}: /opt/cni/bin/zstack-ovn-cni`);
      assert.ok(existsSync(join(dirs.cniConf, "10-zstack-ovn.conflist")), `${n.name}: the conflist`);
    }
    const nodes = JSON.parse(await kubectl(["get", "nodes", "-o", "json"])) as {
      items: Array<{
        metadata: { name: string };
        status: { conditions: Array<{ type: string; status: string }> };
      }>;
    };
    for (const n of nodes.items)
      assert.ok(
        n.status.conditions.some((c) => c.type === "Ready" && c.status === "True"),
        `${n.metadata.name} Ready`,
      );
  });

  it("zovn sandbox demo: every demo pod reaches every other over TCP, and egress leaves through the pod's node", async () => {
    const { topo } = ctx();
    // demo exits non-zero when any cell fails, which rejects here with its output.
    const out = await zovn(["demo"], 10 * 60_000);
    process.stderr.write(`${out}\n`);
    const pods = topo.nodes.length * 2;
    assert.match(out, new RegExp(`\\b${pods * (pods - 1)}/${pods * (pods - 1)} pairs reachable`));
    for (const n of topo.nodes)
      assert.match(out, new RegExp(`on ${n.name}: seen as ${n.ip.replaceAll(".", "\\.")} ok`));
    await kubectl(["delete", "deployment", "demo", "-n", "default", "--wait=true", "--timeout=120s"]);
  });

  it("two pods on different nodes get addresses from the chart's CNI and talk over TCP; kubectl exec works", async () => {
    const server = pod("server", "node1", ["sh", "-c", "echo serving; exec nc -ll -p 8080 -e echo pong"]);
    const client = pod("client", "node2", ["sleep", "3600"]);
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [server, client] }),
    );
    const started = Date.now();
    await kubectl(["wait", "--for=condition=Ready", "pod/server", "pod/client", "--timeout=600s"]);
    process.stderr.write(`two pods Ready in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    const list = JSON.parse(await kubectl(["get", "pods", "-o", "json"])) as PodList;
    const serverIp = list.items.find((p) => p.metadata.name === "server")?.status.podIP ?? "";
    assert.match(serverIp, /^10\.244\./, "the default Subnet's address");
    const ifaces = await kubectl(["exec", "client", "--", "ip", "-o", "-4", "addr", "show", "eth0"]);
    assert.match(ifaces, /inet 10\.244\./, "kubectl exec runs in the pod's network namespace");
    const reply = await eventually(
      "TCP from node2's pod to node1's pod",
      120_000,
      async () =>
        (await kubectl(["exec", "client", "--", "sh", "-c", `nc -w 5 ${serverIp} 8080 </dev/null`])).trim() ||
        undefined,
    );
    assert.equal(reply, "pong");
  });

  it("kubelet HTTP readiness and liveness probes reach pods on the default Subnet and on another Subnet", async () => {
    const subnet = {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "probe-b" },
      spec: { cidr: "10.246.0.0/24", gateway: "10.246.0.1", namespaces: ["probe-b"] },
    };
    const namespace = { apiVersion: "v1", kind: "Namespace", metadata: { name: "probe-b" } };
    const probed = (ns: string) => {
      const probe = { httpGet: { path: "/", port: 8080 }, periodSeconds: 2, failureThreshold: 3 };
      return {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "probed", namespace: ns },
        spec: {
          nodeName: "node3",
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: "web",
              image: BUSYBOX,
              imagePullPolicy: "Never",
              command: [
                "sh",
                "-c",
                "mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www",
              ],
              readinessProbe: probe,
              livenessProbe: probe,
            },
          ],
        },
      };
    };
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [namespace, subnet] }),
    );
    await kubectl(["wait", "--for=condition=Ready", "subnets.network.zstack.io/probe-b", "--timeout=300s"]);
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [probed("default"), probed("probe-b")] }),
    );
    for (const [ns, cidr] of [
      ["default", /^10\.244\./],
      ["probe-b", /^10\.246\.0\./],
    ] as const) {
      // Ready only once the kubelet's readiness probe, sent from the node, got its answer from the pod.
      await kubectl(["wait", "-n", ns, "--for=condition=Ready", "pod/probed", "--timeout=600s"]);
      // Several liveness periods later the container has not been restarted: every probe was answered.
      await new Promise((r) => setTimeout(r, 10_000));
      const p = JSON.parse(await kubectl(["get", "-n", ns, "pod/probed", "-o", "json"])) as {
        status: { podIP: string; containerStatuses: Array<{ restartCount: number; ready: boolean }> };
      };
      assert.match(p.status.podIP, cidr, `${ns}: the pod's address is from its Subnet`);
      assert.equal(p.status.containerStatuses[0]?.restartCount, 0, `${ns}: no liveness failure`);
      assert.equal(p.status.containerStatuses[0]?.ready, true, `${ns}: ready`);
    }
    await kubectl(["delete", "namespace", "probe-b", "--wait=true", "--timeout=300s"]);
    await kubectl(["delete", "pod", "probed", "--wait=true", "--timeout=300s"]);
    await kubectl(["delete", "subnets.network.zstack.io", "probe-b", "--wait=true", "--timeout=300s"]);
  });

  it("a node agent pod deleted while pods are being created: its DaemonSet replacement takes over, and each pod comes up once", async () => {
    const node = "node2";
    const agent = (await chartPods()).find(
      (p) => p.metadata.labels?.["app.kubernetes.io/component"] === "node" && p.spec.nodeName === node,
    );
    assert.ok(agent, `the node agent pod on ${node}`);
    const names = ["burst-0", "burst-1", "burst-2", "burst-3"];
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: names.map((n) => pod(n, node, ["sleep", "3600"])),
      }),
    );
    // At once, while the kubelet is creating their sandboxes (CNI ADD goes to this very agent).
    await kubectl(["delete", "pod", "-n", CHART_NAMESPACE, agent.metadata.name, "--wait=false"]);
    const started = Date.now();
    await kubectl(["wait", "--for=condition=Ready", ...names.map((n) => `pod/${n}`), "--timeout=900s"]);
    process.stderr.write(
      `pods Ready ${((Date.now() - started) / 1000).toFixed(1)}s after the agent's deletion\n`,
    );
    // How the deletion met the pods' creation, as a diagnostic: each refused or cut CNI ADD is an event.
    const events = JSON.parse(
      await kubectl(["get", "events", "-o", "json", "--field-selector=reason=FailedCreatePodSandBox"]),
    ) as { items: Array<{ involvedObject: { name: string }; count?: number }> };
    const failed = events.items
      .filter((e) => names.includes(e.involvedObject.name))
      .reduce((n, e) => n + (e.count ?? 1), 0);
    process.stderr.write(`sandbox attempts that failed while the agent was replaced: ${failed}\n`);
    const replacement = (await chartPods()).filter(
      (p) => p.metadata.labels?.["app.kubernetes.io/component"] === "node" && p.spec.nodeName === node,
    );
    assert.equal(replacement.length, 1);
    assert.notEqual(replacement[0]?.metadata.name, agent.metadata.name, "a new agent pod serves the node");
    const list = JSON.parse(await kubectl(["get", "pods", "-o", "json"])) as PodList;
    const ips = names.map((n) => list.items.find((p) => p.metadata.name === n)?.status.podIP ?? "");
    assert.equal(new Set(ips).size, names.length, `one distinct address each: ${ips.join(" ")}`);
    // Exactly one OVS port per pod on the node: no port left from a sandbox whose ADD the old agent never finished.
    const ifaceIds = await eventually("one OVS port per pod", 120_000, async () => {
      const out = await sandbox.inside(node, [
        "ovs-vsctl",
        "--bare",
        "--columns=external_ids",
        "list",
        "Interface",
      ]);
      const ids = [...out.matchAll(/iface-id="?([^",}\s]+)/g)]
        .map((m) => m[1] as string)
        .filter((id) => id.startsWith("default_burst-"));
      return ids.length === names.length ? ids : undefined;
    });
    assert.deepEqual(ifaceIds.sort(), names.map((n) => `default_${n}`).sort());
    for (const [i, n] of names.entries()) {
      const addr = await kubectl(["exec", n, "--", "ip", "-o", "-4", "addr", "show", "eth0"]);
      assert.match(addr, new RegExp(`inet ${(ips[i] as string).replaceAll(".", "\\.")}/`), n);
    }
    await kubectl(["delete", "pod", ...names, "--wait=true", "--timeout=300s"]);
  });

  it("helm uninstall removes every pod of the chart, and down leaves no process, mount, netns, cgroup or CNI file", async () => {
    await kubectl(["delete", "pod", "server", "client", "--wait=true", "--timeout=300s"]);
    await helm(["uninstall", CHART_RELEASE, "--wait", "--timeout", "10m"]);
    await eventually("the chart's pods are gone", 600_000, async () =>
      (await chartPods()).length === 0 ? true : undefined,
    );
    // ovn-controller and the agent ran only in those pods: none of their processes is left on any node.
    const leftovers: string[] = [];
    for (const { pid } of processesInCgroup(instanceCgroup(NAME))) {
      const comm = await run("cat", [`/proc/${pid}/comm`]).catch(() => "");
      if (/^(ovn-controller|zstack-ovn|ovsdb-server|ovn-northd)/.test(comm.trim()))
        leftovers.push(comm.trim());
    }
    assert.deepEqual(leftovers, [], "no container of the chart still runs");
    const ours = sandboxProcesses();
    const nodeDirs = ctx().topo.nodes.map((n) => ({ name: n.name, ...layout.node(n.name) }));
    await zovn(["down"]);
    assert.deepEqual(
      ours.filter(isAlive).map((p) => p.pid),
      [],
      "sandbox processes still running",
    );
    assert.deepEqual(
      listNetns().filter((n) => n.startsWith(`${NAME}-`)),
      [],
    );
    assert.deepEqual(
      readMountInfo()
        .map((m) => m.mountPoint)
        .filter((m) => m.startsWith(`${layout.root}/`) || m === layout.root),
      [],
    );
    assert.deepEqual(cgroupLeftovers(instanceCgroup(NAME)), []);
    for (const dirs of nodeDirs)
      assert.ok(!existsSync(dirs.cniBin) && !existsSync(dirs.cniConf), `${dirs.name}: no CNI file left`);
  });
});
