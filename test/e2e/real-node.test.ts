// The real-node sandbox (`zovn sandbox up --kubelet`): a real kubelet v1.37 and containerd with runc on every
// node, pods built from local images and networked by our node agent and CNI. Smoke test: nodes Ready, two
// pods on different nodes talk over TCP, `kubectl exec`, `logs` and `port-forward` reach the kubelet, a pod
// resolves Service names through the sandbox's cluster DNS and connects by name, kubelet HTTP probes work on
// the default and a second Subnet, the apiserver proxies to a pod, and `down` leaves no process, mount, netns
// or cgroup behind.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { cgroupLeftovers, instanceCgroup, processesInCgroup } from "../../src/sandbox/cgroups.ts";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { listNetns, readMountInfo } from "../../src/sandbox/netns.ts";
import { isAlive, type ProcessIdentity } from "../../src/sandbox/process-table.ts";
import { findNamespaces, processesIn } from "../../src/sandbox/sweep.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbkl";
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

/** Every process of the running sandbox: recorded daemons, its namespaces' processes, its containers. */
function sandboxProcesses(): ProcessIdentity[] {
  const ns = findNamespaces(`${NAME}-`, layout.nsDir);
  return [
    ...ctx().state.daemons,
    ...processesIn(new Set(ns.netns.values()), new Set(ns.mountNs.values())),
    ...processesInCgroup(instanceCgroup(NAME)),
  ];
}

describe("the real-node sandbox (up --kubelet)", { timeout: 40 * 60_000 }, () => {
  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });
  after(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  it("brings up three nodes Ready, each a real kubelet v1.37 on containerd 1.6", async () => {
    const started = Date.now();
    await zovn(["up", "--kubelet", "--no-chart"], 30 * 60_000);
    process.stderr.write(`up --kubelet --no-chart took ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    const nodes = JSON.parse(await kubectl(["get", "nodes", "-o", "json"])) as {
      items: Array<{
        metadata: { name: string };
        status: {
          nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string };
          addresses: Array<{ type: string; address: string }>;
          conditions: Array<{ type: string; status: string }>;
        };
      }>;
    };
    const { topo } = ctx();
    assert.deepEqual(
      nodes.items.map((n) => n.metadata.name).sort(),
      topo.nodes.map((n) => n.name),
    );
    for (const n of nodes.items) {
      assert.equal(n.status.nodeInfo.kubeletVersion, "v1.37.1");
      assert.match(n.status.nodeInfo.containerRuntimeVersion, /^containerd:\/\/1\.6\./);
      assert.ok(
        n.status.conditions.some((c) => c.type === "Ready" && c.status === "True"),
        n.metadata.name,
      );
      const ip = topo.nodes.find((h) => h.name === n.metadata.name)?.ip;
      assert.ok(n.status.addresses.some((a) => a.type === "InternalIP" && a.address === ip));
    }
    // Each node's kubelet has its own cgroupRoot with the QoS tree below it.
    for (const n of topo.nodes) {
      assert.ok(existsSync(`/sys/fs/cgroup/memory${instanceCgroup(NAME)}/${n.name}/kubepods/besteffort`));
    }
  });

  it("two pods on different nodes get addresses from our CNI and talk over TCP; exec and logs work", async () => {
    const server = pod("server", "node1", ["sh", "-c", "echo serving; exec nc -ll -p 8080 -e echo pong"]);
    const client = pod("client", "node2", ["sleep", "3600"]);
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [server, client] }),
    );
    const started = Date.now();
    await kubectl(["wait", "--for=condition=Ready", "pod/server", "pod/client", "--timeout=600s"]);
    process.stderr.write(`two pods Ready in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    const ips = JSON.parse(await kubectl(["get", "pods", "-o", "json"])) as {
      items: Array<{ metadata: { name: string }; status: { podIP: string } }>;
    };
    const serverIp = ips.items.find((p) => p.metadata.name === "server")?.status.podIP ?? "";
    assert.match(serverIp, /^10\.244\./, "the default Subnet's address, from our CNI");
    const ifaces = await kubectl(["exec", "client", "--", "ip", "-o", "-4", "addr", "show", "eth0"]);
    assert.match(ifaces, /inet 10\.244\./, "kubectl exec runs in the pod's network namespace");
    const reply = await eventually(
      "TCP from node2's pod to node1's pod",
      60_000,
      async () =>
        (await kubectl(["exec", "client", "--", "sh", "-c", `nc -w 5 ${serverIp} 8080 </dev/null`])).trim() ||
        undefined,
    );
    assert.equal(reply, "pong");
    assert.equal((await kubectl(["logs", "server"])).trim(), "serving");
  });

  it("kubectl port-forward reaches the pod through the kubelet's streaming server", async () => {
    const bin = ctx().state.binaries?.KUBECTL as string;
    // ":8080": kubectl picks a free port on the machine's loopback and names it.
    const args = ["port-forward", "--address=127.0.0.1", "pod/server", ":8080"];
    const pf = spawn(bin, [`--kubeconfig=${adminKubeconfig(layout)}`, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      let out = "";
      for (const stream of [pf.stdout, pf.stderr])
        stream.setEncoding("utf8").on("data", (d: string) => {
          out += d;
        });
      const port = await eventually("port-forward listening", 120_000, async () => {
        const m = /Forwarding from 127\.0\.0\.1:(\d+) -> 8080/.exec(out);
        if (!m && pf.exitCode !== null) throw new Error(`kubectl port-forward exited: ${out}`);
        return m ? Number(m[1]) : undefined;
      });
      const reply = await new Promise<string>((resolve, reject) => {
        let got = "";
        const sock = connect({ host: "127.0.0.1", port }, () => sock.end());
        sock.setEncoding("utf8").on("data", (d: string) => {
          got += d;
        });
        sock.on("error", reject);
        sock.on("close", () => resolve(got.trim()));
      });
      assert.equal(reply, "pong");
    } finally {
      pf.kill("SIGTERM");
    }
  });

  it("a pod resolves Service names through the cluster DNS and connects to a Service by its name", async () => {
    const dns = JSON.parse(
      await kubectl(["get", "service", "kube-dns", "-n", "kube-system", "-o", "json"]),
    ) as { spec: { clusterIP: string } };
    assert.equal(dns.spec.clusterIP, "10.96.0.10");
    const resolv = await kubectl(["exec", "client", "--", "cat", "/etc/resolv.conf"]);
    assert.match(resolv, /^nameserver 10\.96\.0\.10$/m, "the kubelet's clusterDNS");
    assert.match(resolv, /^search default\.svc\.cluster\.local svc\.cluster\.local cluster\.local$/m);
    const echo = {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "echo", namespace: "default" },
      spec: { selector: { app: "server" }, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }] },
    };
    await kubectl(["apply", "-f", "-"], JSON.stringify(echo));
    const svc = JSON.parse(await kubectl(["get", "service", "echo", "-o", "json"])) as {
      spec: { clusterIP: string };
    };
    assert.match(svc.spec.clusterIP, /^10\.96\./);
    // busybox's nslookup asks the pod's nameserver itself; "Name:" lines are followed by the answer's address.
    const lookup = async (name: string): Promise<string | undefined> => {
      const out = await kubectl(["exec", "client", "--", "nslookup", "-type=a", name]);
      return /Name:\s*\S+\s+Address:\s*(\d+\.\d+\.\d+\.\d+)/.exec(out)?.[1];
    };
    const started = Date.now();
    assert.equal(
      await eventually("kubernetes.default.svc.cluster.local resolves", 120_000, () =>
        lookup("kubernetes.default.svc.cluster.local"),
      ),
      "10.96.0.1",
    );
    assert.equal(
      await eventually("echo.default.svc.cluster.local resolves", 120_000, () =>
        lookup("echo.default.svc.cluster.local"),
      ),
      svc.spec.clusterIP,
    );
    process.stderr.write(`names resolved ${((Date.now() - started) / 1000).toFixed(1)}s after the Service\n`);
    // The reverse zone: the ClusterIP's PTR record names the Service.
    const ptr = await kubectl(["exec", "client", "--", "nslookup", svc.spec.clusterIP]);
    assert.match(ptr, /name = echo\.default\.svc\.cluster\.local/);
    // By the short name, as the upstream Service tests do (`nc endpoint-test2 80`): the search path and the
    // C library's resolver, then the Service's load balancer to the server pod on node1.
    for (const name of ["echo", "echo.default.svc.cluster.local"]) {
      const reply = await eventually(
        `TCP to the Service by the name ${name}`,
        60_000,
        async () =>
          (await kubectl(["exec", "client", "--", "sh", "-c", `nc -w 5 ${name} 80 </dev/null`])).trim() ||
          undefined,
      );
      assert.equal(reply, "pong", name);
    }
    // A name outside the cluster is not forwarded anywhere: the lookup fails inside the machine.
    const outside = await kubectl(["exec", "client", "--", "sh", "-c", "nslookup example.com; echo rc=$?"]);
    assert.doesNotMatch(outside, /Name:\s*example\.com/);
  });

  it("kubelet HTTP probes pass for pods on the default and a second Subnet; a failing liveness probe restarts the container", async () => {
    // The second Subnet: another CIDR than the cluster network, for one namespace.
    const subnet = {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "probes" },
      spec: { cidr: "10.245.0.0/24", gateway: "10.245.0.1", namespaces: ["probes"] },
    };
    const ns = { apiVersion: "v1", kind: "Namespace", metadata: { name: "probes" } };
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [ns, subnet] }),
    );
    await kubectl(["wait", "--for=condition=Ready", "subnet/probes", "--timeout=300s"]);
    // busybox httpd serves /healthz; -vv logs each request with its client address.
    const serve = "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -vv -p 8080 -h /www";
    const probe = (path: string, failureThreshold: number) => ({
      httpGet: { path, port: 8080 },
      periodSeconds: 2,
      timeoutSeconds: 5,
      failureThreshold,
    });
    const probed = (
      name: string,
      namespace: string,
      node: string,
      livenessPath: string,
      threshold: number,
    ) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace },
      spec: {
        nodeName: node,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: "c",
            image: BUSYBOX,
            imagePullPolicy: "Never",
            command: ["sh", "-c", serve],
            livenessProbe: probe(livenessPath, threshold),
            readinessProbe: probe("/healthz", 3),
          },
        ],
      },
    });
    const pods = [
      probed("probed", "default", "node2", "/healthz", 3),
      probed("probed", "probes", "node3", "/healthz", 3),
      // 404 on every liveness probe: the kubelet must restart it.
      probed("failing", "probes", "node2", "/missing", 1),
    ];
    await kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: pods }));
    const started = Date.now();
    await kubectl(["wait", "--for=condition=Ready", "pod/probed", "-n", "default", "--timeout=600s"]);
    await kubectl(["wait", "--for=condition=Ready", "pod/probed", "-n", "probes", "--timeout=600s"]);
    process.stderr.write(`probed pods Ready in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    interface PodState {
      status: {
        podIP: string;
        conditions?: Array<{ type: string; status: string }>;
        containerStatuses?: Array<{ restartCount: number }>;
      };
    }
    const state = async (namespace: string, name: string) =>
      JSON.parse(await kubectl(["get", "pod", name, "-n", namespace, "-o", "json"])) as PodState;
    const restarts = (p: PodState) => p.status.containerStatuses?.[0]?.restartCount ?? 0;
    // The failing pod's restart shows the kubelet reached it (a 404, not a timeout) and acted on it.
    const restarted = await eventually(
      "the failing liveness probe restarts the container",
      600_000,
      async () => (restarts(await state("probes", "failing")) >= 1 ? true : undefined),
    );
    assert.equal(restarted, true);
    const events = await kubectl([
      "get",
      "events",
      "-n",
      "probes",
      "--field-selector=involvedObject.name=failing,reason=Unhealthy",
      "-o",
      "jsonpath={.items[*].message}",
    ]);
    assert.match(events, /Liveness probe failed: HTTP probe failed with statuscode: 404/);
    process.stderr.write(
      `failing liveness probe restarted the container ${((Date.now() - started) / 1000).toFixed(1)}s after the pods were created\n`,
    );
    // The healthy pods: probed many times over (both probes every 2 s; three liveness failures in a row would
    // restart), then still Ready, never restarted, on their Subnets.
    const PROBES = 16;
    for (const [namespace, cidr] of [
      ["default", /^10\.244\./],
      ["probes", /^10\.245\.0\./],
    ] as const) {
      // The probes come from the node through its management port (a join network address) and get 200.
      const log = await eventually(`${namespace}/probed answered ${PROBES} probes`, 600_000, async () => {
        const text = await kubectl(["logs", "probed", "-n", namespace]);
        const n = text.match(/\[(::ffff:)?100\.64\.\d+\.\d+\]:\d+: url:\/healthz/g)?.length ?? 0;
        return n >= PROBES ? text : undefined;
      });
      assert.match(log, /response:200/);
      assert.doesNotMatch(log, /response:[45]\d\d/);
      const p = await state(namespace, "probed");
      assert.match(p.status.podIP, cidr, `${namespace}/probed's address is from its Subnet`);
      assert.ok(
        p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
        `${namespace}/probed is Ready`,
      );
      assert.equal(restarts(p), 0, `${namespace}/probed never restarted`);
    }
  });

  it("the apiserver proxies to a pod on another node than the one the control-plane host routes through", async () => {
    // default/probed runs on node2; the control-plane host routes the pod network via node1.
    const body = await eventually(
      "pods/proxy to default/probed",
      120_000,
      async () =>
        (
          await kubectl(["get", "--raw", "/api/v1/namespaces/default/pods/probed:8080/proxy/healthz"])
        ).trim() || undefined,
    );
    assert.equal(body, "ok");
  });

  it("down leaves no process, mount, netns or cgroup of the sandbox", async () => {
    const ours = sandboxProcesses();
    const containers = processesInCgroup(instanceCgroup(NAME));
    assert.ok(
      containers.length >= 2,
      `the pods' processes are in the sandbox's cgroups (${containers.length})`,
    );
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
    assert.ok(existsSync(join(layout.logDir, "node1", "kubelet.log")), "down keeps the logs");
  });
});
