// Three Service fields kube-proxy honours, end to end in their own sandbox (`zsbsvf`): loadBalancerSourceRanges
// (an allowed and a refused source, from the external host and from pods), an ingress IP with ipMode Proxy (not
// captured: clients reach the real load balancer, played by a podserver on the external host) and
// trafficDistribution (PreferSameZone and PreferSameNode: a client reaches only its zone's / its node's endpoint,
// through the real EndpointSlice controller's hints). Real TCP connections with `podserver dial --count N`.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { run } from "../../src/sandbox/command.ts";
import { execArgv } from "../../src/sandbox/exec.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";
import { type DialAttempt, describeTally, dialMany } from "../rig/service-dial.ts";

const NAME = "zsbsvf";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;
const PATIENCE_MS = 45_000;
const LABEL = "svf-e2e";
const ZONE = "topology.kubernetes.io/zone";

const EXT_IP = "192.168.200.100";
const CLUSTER_CIDR = "10.244.0.0/16";
// Outside every cluster range; the external host routes each through one node.
const ALLOW_LB_IP = "192.168.201.20"; // sourceRanges: the external host only
const DENY_LB_IP = "192.168.201.21"; // sourceRanges: the pod network and a documentation range, not ext
const PROXY_LB_IP = "192.168.201.22"; // ipMode Proxy: held by the external host itself (the "real" LB)

const TCP = { name: "tcp", port: 80, protocol: "TCP", targetPort: 8080 };

function serverPod(name: string, node: string, app: string): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app, [LABEL]: "1" } },
    spec: {
      nodeName: node,
      containers: [
        {
          name: "server",
          image: "zstack-ovn/podserver",
          args: ["--tcp", "8080"],
          ports: [{ containerPort: 8080, protocol: "TCP" }],
        },
      ],
    },
  };
}

function clientPod(name: string, node: string): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { role: "client", [LABEL]: "1" } },
    spec: { nodeName: node, containers: [{ name: "client", image: "zstack-ovn/podserver" }] },
  };
}

function service(name: string, app: string, spec: object = {}): object {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default", labels: { [LABEL]: "1" } },
    spec: { selector: { app }, ports: [TCP], ...spec },
  };
}

const LB = { type: "LoadBalancer", allocateLoadBalancerNodePorts: false };

function workload(): object[] {
  return [
    serverPod("sr-1", "node1", "sr"),
    serverPod("sr-2", "node2", "sr"),
    serverPod("zone-1", "node1", "zone"),
    serverPod("zone-2", "node2", "zone"),
    serverPod("near-1", "node1", "near"),
    serverPod("near-2", "node2", "near"),
    clientPod("client-1", "node1"),
    clientPod("client-3", "node3"),
    service("sr-allow", "sr", { ...LB, loadBalancerSourceRanges: [`${EXT_IP}/32`] }),
    service("sr-deny", "sr", { ...LB, loadBalancerSourceRanges: ["203.0.113.0/24", CLUSTER_CIDR] }),
    service("proxy", "sr", LB),
    service("zone", "zone", { trafficDistribution: "PreferSameZone" }),
    service("near", "near", { trafficDistribution: "PreferSameNode" }),
  ];
}

async function kubectl(args: readonly string[], input?: string): Promise<string> {
  const kc = ctx().state.binaries?.KUBECTL;
  if (!kc) throw new Error("sandbox records no kubectl");
  const argv = [`--kubeconfig=${adminKubeconfig(layout)}`, ...args];
  return run(kc, argv, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
}

async function publishIngress(svc: string, ingress: object[]): Promise<void> {
  await kubectl([
    "patch",
    "service",
    svc,
    "--subresource=status",
    "--type=merge",
    "-p",
    JSON.stringify({ status: { loadBalancer: { ingress } } }),
  ]);
}

const nodeIP = (node: string): string => {
  const host = ctx().topo.nodes.find((n) => n.name === node);
  if (!host) throw new Error(`no node ${node}`);
  return host.ip;
};

async function clusterIP(svc: string): Promise<string> {
  const ip = (await kubectl(["get", "svc", svc, "-o", "jsonpath={.spec.clusterIP}"])).trim();
  assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/, `service ${svc} has a clusterIP`);
  return ip;
}

/** Waits until clients at `from` reach exactly `expected` at `addr` (every attempt of a batch answered by one). */
async function reachesExactly(from: string, addr: string, expected: readonly string[]): Promise<void> {
  const want = new Set(expected);
  const seen = new Set<string>();
  await eventually(
    `${from} → ${addr} answered by exactly {${expected.join(", ")}}`,
    PATIENCE_MS,
    async () => {
      const batch = await dialMany(sandbox, from, "tcp", addr, { count: Math.max(8, expected.length * 10) });
      if (batch.some((a) => !a.ok || !want.has(a.server))) {
        seen.clear();
        throw new Error(`last batch: ${describeTally(batch)}`);
      }
      for (const a of batch) if (a.ok) seen.add(a.server);
      return seen.size === want.size ? true : undefined;
    },
  );
}

/** Waits until no attempt from `from` to `addr` gets an answer. */
async function unanswered(from: string, addr: string): Promise<DialAttempt[]> {
  return eventually(`${from} → ${addr} unanswered`, PATIENCE_MS, async () => {
    const batch = await dialMany(sandbox, from, "tcp", addr, { count: 3, timeout: "1s" });
    if (batch.some((a) => a.ok)) throw new Error(`last batch: ${describeTally(batch)}`);
    return batch;
  });
}

class Checks {
  private readonly failures: string[] = [];
  async check(what: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.failures.push(`${what}: ${(err as Error).message}`);
    }
  }
  done(): void {
    if (this.failures.length > 0)
      assert.fail(`${this.failures.length} check(s) failed:\n- ${this.failures.join("\n- ")}`);
  }
}

describe("Service fields: loadBalancerSourceRanges, ipMode Proxy, trafficDistribution", {
  timeout: 15 * 60_000,
}, () => {
  let realLb: ChildProcess | undefined;

  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up"]);
    // Zones before the Services, so the EndpointSlice controller has them when it first writes hints.
    await kubectl(["label", "node", "node1", `${ZONE}=zone-a`, "--overwrite"]);
    await kubectl(["label", "node", "node2", `${ZONE}=zone-b`, "--overwrite"]);
    await kubectl(["label", "node", "node3", `${ZONE}=zone-b`, "--overwrite"]);
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: workload() }),
    );
    await kubectl(["wait", "--for=condition=Ready", "pod", "-l", `${LABEL}=1`, "--timeout=180s"]);
    await publishIngress("sr-allow", [{ ip: ALLOW_LB_IP }]);
    await publishIngress("sr-deny", [{ ip: DENY_LB_IP }]);
    await publishIngress("proxy", [{ ip: PROXY_LB_IP }]);
    await sandbox.inside("ext", ["ip", "route", "replace", `${ALLOW_LB_IP}/32`, "via", nodeIP("node1")]);
    await sandbox.inside("ext", ["ip", "route", "replace", `${DENY_LB_IP}/32`, "via", nodeIP("node2")]);
  });

  after(async () => {
    if (realLb?.pid !== undefined && realLb.exitCode === null) realLb.kill("SIGTERM");
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  it("loadBalancerSourceRanges: only listed sources reach the LB IP (external host, pods), others get no answer", async () => {
    const c = new Checks();
    await c.check("ext (listed) → allow LB IP", () =>
      reachesExactly("ext", `${ALLOW_LB_IP}:80`, ["sr-1", "sr-2"]),
    );
    await c.check("ext (not listed) → deny LB IP", () => unanswered("ext", `${DENY_LB_IP}:80`));
    // Pods take the node path for a filtered LB IP: the pod network is listed for one Service and not the other.
    await c.check("pod (listed) → deny LB IP", () =>
      reachesExactly("default/client-1", `${DENY_LB_IP}:80`, ["sr-1", "sr-2"]),
    );
    await c.check("pod (not listed) → allow LB IP", () =>
      unanswered("default/client-3", `${ALLOW_LB_IP}:80`),
    );
    // The node's own address is in no range: kube-proxy filters node-originated traffic by its source too.
    await c.check("node (not listed) → allow LB IP", () => unanswered("node1", `${ALLOW_LB_IP}:80`));
    // The cluster IP is never filtered.
    const ip = await clusterIP("sr-allow");
    await c.check("pod → cluster IP of the filtered Service", () =>
      reachesExactly("default/client-3", `${ip}:80`, ["sr-1", "sr-2"]),
    );
    c.done();
  });

  it("ipMode Proxy: the ingress IP is not captured; pods and nodes reach the real load balancer", async () => {
    const c = new Checks();
    // First as VIP: captured, pods reach the endpoints.
    await c.check("ipMode VIP: pod → ingress IP reaches the endpoints", () =>
      reachesExactly("default/client-1", `${PROXY_LB_IP}:80`, ["sr-1", "sr-2"]),
    );
    // The external host plays the real load balancer: it holds the address and answers as "real-lb".
    await sandbox.inside("ext", ["ip", "addr", "replace", `${PROXY_LB_IP}/32`, "dev", "lo"]);
    const argv = execArgv(layout, ctx().topo, "ext", [
      sandbox.binary("PODSERVER"),
      "--name",
      "real-lb",
      "--bind",
      PROXY_LB_IP,
      "--tcp",
      "80",
    ]);
    realLb = spawn(argv[0] as string, argv.slice(1), { stdio: "ignore" });
    await publishIngress("proxy", [{ ip: PROXY_LB_IP, ipMode: "Proxy" }]);
    for (const from of ["default/client-1", "default/client-3", "node1"])
      await c.check(`ipMode Proxy: ${from} → ingress IP reaches the real load balancer`, () =>
        reachesExactly(from, `${PROXY_LB_IP}:80`, ["real-lb"]),
      );
    c.done();
  });

  it("trafficDistribution: a client reaches only its own zone's (PreferSameZone) or node's (PreferSameNode) endpoint", async () => {
    // The real EndpointSlice controller wrote the hints (zone hints for both, node hints for PreferSameNode).
    for (const [svc, kind] of [
      ["zone", "forZones"],
      ["near", "forNodes"],
    ] as const)
      await eventually(
        `${svc}'s EndpointSlice has ${kind} hints on every endpoint`,
        PATIENCE_MS,
        async () => {
          const out = await kubectl([
            "get",
            "endpointslices",
            "-l",
            `kubernetes.io/service-name=${svc}`,
            "-o",
            "json",
          ]);
          const eps = (
            JSON.parse(out) as { items: { endpoints?: { hints?: Record<string, unknown[]> }[] }[] }
          ).items.flatMap((i) => i.endpoints ?? []);
          return eps.length === 2 && eps.every((e) => (e.hints?.[kind]?.length ?? 0) > 0) ? true : undefined;
        },
      );
    const zone = await clusterIP("zone");
    const near = await clusterIP("near");
    const c = new Checks();
    // node1 is zone-a (zone-1), node2 and node3 are zone-b (zone-2).
    await c.check("PreferSameZone: pod on node1", () =>
      reachesExactly("default/client-1", `${zone}:80`, ["zone-1"]),
    );
    await c.check("PreferSameZone: pod on node3", () =>
      reachesExactly("default/client-3", `${zone}:80`, ["zone-2"]),
    );
    await c.check("PreferSameZone: node3", () => reachesExactly("node3", `${zone}:80`, ["zone-2"]));
    await c.check("PreferSameNode: pod on node1", () =>
      reachesExactly("default/client-1", `${near}:80`, ["near-1"]),
    );
    await c.check("PreferSameNode: node2", () => reachesExactly("node2", `${near}:80`, ["near-2"]));
    // node3 has no endpoint of its own: its zone's (node hints do not name it, zone hints do).
    await c.check("PreferSameNode: pod on node3 (no local endpoint) falls back to its zone", () =>
      reachesExactly("default/client-3", `${near}:80`, ["near-2"]),
    );
    c.done();
  });
});
