// The node agent's Services side against a real kube-apiserver, running with a token of the chart's node
// ServiceAccount as in the sandbox: the chart's RBAC is what lets it read Services, EndpointSlices and
// ServiceCIDRs; Services with their EndpointSlices become one nft ruleset (checked by the kernel's nft), a burst of changes is coalesced, an unchanged state writes nothing, a restart reapplies, healthCheckNodePort
// answers 200/503 with the local endpoint count, and ServiceCIDRs become routes.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { HealthCheckServers } from "../../../src/agent/health-check-server.ts";
import { ServiceProxy, type ServiceProxyOptions } from "../../../src/agent/service-proxy.ts";
import { parseIp } from "../../../src/ipam/address.ts";
import { type Cidr, formatCidr, parseCidr } from "../../../src/ipam/cidr.ts";
import { ApiClient, ApiError } from "../../../src/k8s/api-client.ts";
import { parseInterfaceName } from "../../../src/node/interface-name.ts";
import { conntrackDeletionArgs, deleteConntrack } from "../../../src/node/service-conntrack.ts";
import { spawnedTools } from "../../../src/node/tool.ts";
import { kernelUnnatedArgs, ovsUnnatedArgs } from "../../../src/node/udp-first-endpoint.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  chartRbacObjects,
  NODE_SA,
  type RbacObject,
  writeServiceAccountKubeconfig,
} from "../../../src/sandbox/chart-rbac.ts";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";

const SUBNET_CRD = join(repoRoot, "deploy", "crds", "subnet.network.zstack.io.yaml");
const NODE = "node1";

let kube: KubeApiserver;
let dir: string;
let nodeKc: KubeConfig;

/** A token of the chart's node ServiceAccount, as the DaemonSet's pods (and the sandbox's agents) hold. */
async function nodeAgentCredentials(): Promise<KubeConfig> {
  const path = join(dir, "node-agent.kubeconfig");
  await writeServiceAccountKubeconfig({
    kubectl: kube.binaries.KUBECTL,
    adminKubeconfig: kube.kubeconfigPath,
    serviceAccount: NODE_SA,
    path,
    server: kube.server,
    caCert: kube.ca.cert,
  });
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

const asList = (items: readonly RbacObject[]) => JSON.stringify({ apiVersion: "v1", kind: "List", items });

function nftCheck(script: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile("unshare", ["--net", "nft", "-c", "-f", "-"], (err, _stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : null) : 0, stderr }),
    );
    child.stdin?.end(script);
  });
}

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const run = promisify(execFile);

const kubectl = (args: string[], input?: string) => kube.kubectl(args, input === undefined ? {} : { input });

function serviceYaml(name: string, extra = ""): string {
  return `apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: default}
spec:
  selector: {app: ${name}}
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080}]
${extra}`;
}

function sliceYaml(service: string, endpoints: { ip: string; node: string }[]): string {
  return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${service}-manual, namespace: default, labels: {kubernetes.io/service-name: ${service}}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [${endpoints.map((e) => `{addresses: ["${e.ip}"], nodeName: ${e.node}, conditions: {ready: true}}`).join(", ")}]
`;
}

interface Rig {
  proxy: ServiceProxy;
  scripts: string[];
  cidrs: Cidr[][];
  health: HealthCheckServers;
  api: ApiClient;
  /** What the proxy's table check sees. */
  table: { present: boolean };
  /** The `conntrack -D` arguments of every deletion the proxy asked for. */
  forgotten: string[];
  /** Every first-endpoint deletion asked for, as `<tracker> <args>`, with the number of scripts applied then. */
  unnated: { args: string; scripts: number }[];
}

function startProxy(
  t: { after(fn: () => unknown): void },
  coalesceMs = 20,
  faults: { applies?: number; healthSyncs?: number; forgets?: number } = {},
  over: Partial<ServiceProxyOptions> = {},
): Rig {
  const api = new ApiClient(nodeKc);
  const scripts: string[] = [];
  const table = { present: true };
  const cidrs: Cidr[][] = [];
  const forgotten: string[] = [];
  const unnated: Rig["unnated"] = [];
  const health = new HealthCheckServers(silentLogger, "127.0.0.1");
  let failApplies = faults.applies ?? 0;
  let failSyncs = faults.healthSyncs ?? 0;
  let failForgets = faults.forgets ?? 0;
  const sync = health.sync.bind(health);
  health.sync = async (plans) => {
    if (failSyncs > 0) {
      failSyncs--;
      throw new Error("injected health-check sync failure");
    }
    await sync(plans);
  };
  const proxy = new ServiceProxy({
    api,
    node: NODE,
    mgmtIfname: parseInterfaceName("zovn-mgmt"),
    apply: async (s) => {
      if (failApplies > 0) {
        failApplies--;
        throw new Error("injected nft failure");
      }
      scripts.push(s);
    },
    retryMs: 10,
    readAffinity: async () => new Map(),
    forgetFlows: async (d) => {
      if (failForgets > 0) {
        failForgets--;
        throw new Error("injected conntrack failure");
      }
      forgotten.push(conntrackDeletionArgs(d).join(" "));
      return 1;
    },
    forgetUnnated: async (target) => {
      const args = target.tracker === "ovs" ? ovsUnnatedArgs(target) : kernelUnnatedArgs(target);
      unnated.push({ args: `${target.tracker} ${args.join(" ")}`, scripts: scripts.length });
      return 0;
    },
    tablePresent: async () => table.present,
    resyncMs: 50,
    healthChecks: health,
    coalesceMs,
    routeGuard: () => ({
      joinCidr: parseCidr("100.64.0.0/16"),
      serviceCidrs: [parseCidr("10.96.0.0/16")],
      nodeIps: [parseIp("192.168.200.11")],
    }),
    clusterCidrs: [parseCidr("10.244.0.0/16")],
    onServiceCidrs: (c) => cidrs.push([...c]),
    log: silentLogger,
    ...over,
  });
  proxy.setNodeIps([parseIp("192.168.200.11")]);
  t.after(async () => {
    await proxy.stop();
    api.close();
  });
  return { proxy, scripts, cidrs, health, api, table, forgotten, unnated };
}

before(async () => {
  kube = await startKubeApiserver();
  dir = mkdtempSync(join(tmpdir(), "zovn-svc-proxy-"));
  // The ServiceAccount alone first: the first test shows what its roles add.
  await kubectl(["apply", "-f", "-"], asList(chartRbacObjects().filter((o) => o.kind === "ServiceAccount")));
  nodeKc = await nodeAgentCredentials();
});

after(async () => {
  await kube?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("Service proxy with the chart's node ServiceAccount", () => {
  test("the chart's node ServiceAccount may list none of Services, EndpointSlices, ServiceCIDRs, Subnets and Nodes without its roles; with them, all five", async (t) => {
    const api = new ApiClient(nodeKc);
    t.after(() => api.close());
    const status = (path: string) =>
      api.request(path).then(
        () => 200,
        (e) => (e instanceof ApiError ? e.status : -1),
      );
    const paths = [
      "/api/v1/services",
      "/apis/discovery.k8s.io/v1/endpointslices",
      "/apis/networking.k8s.io/v1/servicecidrs",
      "/apis/network.zstack.io/v1/subnets",
      "/api/v1/nodes",
    ];
    await kubectl(["apply", "-f", SUBNET_CRD]);
    await kubectl(["wait", "--for=condition=Established", "crd/subnets.network.zstack.io", "--timeout=60s"]);
    assert.deepEqual(await Promise.all(paths.map(status)), [403, 403, 403, 403, 403]);
    await kubectl(["apply", "-f", "-"], asList(chartRbacObjects()));
    await until("the grant to take effect", async () =>
      (await Promise.all(paths.map(status))).every((s) => s === 200),
    );
  });

  test("Services and EndpointSlices become one ruleset nft accepts; health check follows local endpoints", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    await kubectl(
      ["apply", "-f", "-"],
      serviceYaml("web", "  type: LoadBalancer\n  externalTrafficPolicy: Local\n"),
    );
    await kubectl(
      ["apply", "-f", "-"],
      sliceYaml("web", [
        { ip: "10.244.0.5", node: NODE },
        { ip: "10.244.1.5", node: "node2" },
      ]),
    );
    await until("DNAT to both endpoints", () => {
      const last = rig.scripts.at(-1) ?? "";
      return last.includes("dnat ip to 10.244.0.5:8080") && last.includes("dnat ip to 10.244.1.5:8080");
    });
    const script = rig.scripts.at(-1) ?? "";
    const check = await nftCheck(script);
    assert.equal(check.code, 0, check.stderr);
    const svc = JSON.parse(await kubectl(["get", "service", "web", "-o", "json"])) as {
      spec: { clusterIP: string; healthCheckNodePort: number; ports: { nodePort: number }[] };
    };
    assert.match(script, new RegExp(`${svc.spec.clusterIP.replaceAll(".", "\\.")} \\. 6 \\. 80 : goto`));
    assert.match(script, new RegExp(`6 \\. ${svc.spec.ports[0]?.nodePort} : goto \\w+_ext`));

    const hc = `http://127.0.0.1:${svc.spec.healthCheckNodePort}/`;
    await until("the health check port", () =>
      fetch(hc).then(
        () => true,
        () => false,
      ),
    );
    const ok = await fetch(hc);
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), {
      service: { namespace: "default", name: "web" },
      localEndpoints: 1,
      serviceProxyHealthy: true,
    });
    await kubectl(["apply", "-f", "-"], sliceYaml("web", [{ ip: "10.244.1.5", node: "node2" }]));
    await until("503 without a local endpoint", async () => (await fetch(hc)).status === 503);

    await kubectl(["delete", "service", "web"]);
    await until("the health check port closed", () =>
      fetch(hc).then(
        () => false,
        () => true,
      ),
    );
    await kubectl(["delete", "endpointslice", "web-manual"]);
    await until("the Service gone from the rules", () => !(rig.scripts.at(-1) ?? "").includes("dnat"));
  });

  test("reply addresses from the controller: the node's own ETP Local connections keep its address while it is one of its InternalIPs; nft accepts the rules", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    await kubectl(
      ["apply", "-f", "-"],
      serviceYaml("sc", "  type: NodePort\n  externalTrafficPolicy: Local\n"),
    );
    await kubectl(["apply", "-f", "-"], sliceYaml("sc", [{ ip: "10.244.1.7", node: "node2" }]));
    await until("DNAT to the endpoint", () =>
      (rig.scripts.at(-1) ?? "").includes("dnat ip to 10.244.1.7:8080"),
    );
    assert.doesNotMatch(rig.scripts.at(-1) ?? "", /node_reply_v4|_sc\b/);
    const applied = rig.scripts.length;
    rig.proxy.setNodeReplyIps([parseIp("192.168.200.11")]);
    await until("the short-circuit chain", () => /goto s[0-9a-f]{16}_sc\n/.test(rig.scripts.at(-1) ?? ""));
    const script = rig.scripts.at(-1) ?? "";
    assert.equal(rig.scripts.length, applied + 1, "one apply");
    assert.match(script, /snat ip to 192\.168\.200\.11:61440-65535/);
    const check = await nftCheck(script);
    assert.equal(check.code, 0, check.stderr);
    // The same addresses again: nothing to apply.
    rig.proxy.setNodeReplyIps([parseIp("192.168.200.11")]);
    await rig.proxy.settled();
    assert.equal(rig.scripts.length, applied + 1);
    // The node's InternalIP changes before the controller's annotation follows: masquerade again meanwhile.
    rig.proxy.setNodeIps([parseIp("192.168.200.99")]);
    await until(
      "no short-circuit for an address no longer the node's",
      () => !(rig.scripts.at(-1) ?? "").includes("_sc"),
    );
    rig.proxy.setNodeIps([parseIp("192.168.200.11")]);
    await kubectl(["delete", "service", "sc"]);
    await kubectl(["delete", "endpointslice", "sc-manual"]);
  });

  test("topology hints follow this node's zone label; loadBalancerSourceRanges become a filter nft accepts", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    const zone = "topology.kubernetes.io/zone";
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: v1\nkind: Node\nmetadata: {name: ${NODE}, labels: {${zone}: zone-a}}\n`,
    );
    await kubectl(["apply", "-f", "-"], serviceYaml("zoned", "  trafficDistribution: PreferSameZone\n"));
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: zoned-manual, namespace: default, labels: {kubernetes.io/service-name: zoned}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints:
- {addresses: ["10.244.0.7"], nodeName: node3, conditions: {ready: true}, hints: {forZones: [{name: zone-a}]}}
- {addresses: ["10.244.1.7"], nodeName: node2, conditions: {ready: true}, hints: {forZones: [{name: zone-b}]}}
`,
    );
    // Neither endpoint is on this node, so no chain for a local endpoint shows up in the script.
    const only = (ip: string, other: string) => () => {
      const last = rig.scripts.at(-1) ?? "";
      return last.includes(`dnat ip to ${ip}:8080`) && !last.includes(`dnat ip to ${other}:8080`);
    };
    await until("only zone-a's endpoint", only("10.244.0.7", "10.244.1.7"));
    await kubectl(["label", "node", NODE, `${zone}=zone-b`, "--overwrite"]);
    await until("only zone-b's endpoint after the node's zone changed", only("10.244.1.7", "10.244.0.7"));
    await kubectl(["delete", "service", "zoned"]);
    await kubectl(["delete", "endpointslice", "zoned-manual"]);

    await kubectl(
      ["apply", "-f", "-"],
      serviceYaml(
        "ranged",
        "  type: LoadBalancer\n  allocateLoadBalancerNodePorts: false\n  loadBalancerSourceRanges: [203.0.113.0/24]\n",
      ),
    );
    await kubectl([
      "patch",
      "service",
      "ranged",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({
        status: {
          loadBalancer: {
            ingress: [{ ip: "192.168.201.30" }, { ip: "192.168.201.31", ipMode: "Proxy" }],
          },
        },
      }),
    ]);
    await until("the LB IP filtered", () =>
      (rig.scripts.at(-1) ?? "").includes("ip saddr { 203.0.113.0/24 } return"),
    );
    const script = rig.scripts.at(-1) ?? "";
    assert.match(script, /192\.168\.201\.30 \. 6 \. 80 : goto s[0-9a-f]{16}_fw/);
    assert.doesNotMatch(script, /192\.168\.201\.31/, "the ipMode Proxy address is not captured");
    const check = await nftCheck(script);
    assert.equal(check.code, 0, check.stderr);
    await kubectl(["delete", "service", "ranged"]);
  });

  test("an externalIP that is a node's address (this node's or another's) or the API server's is not served", async (t) => {
    await kubectl(
      ["create", "-f", "-"],
      `apiVersion: v1
kind: Node
metadata: {name: node2}
status: {addresses: [{type: InternalIP, address: 192.168.200.12}]}
`,
    );
    t.after(() => kubectl(["delete", "node", "node2"]));
    // The rig's apiserver runs no endpoint reconciler: the kubernetes Service's slice is written as it would be.
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: kubernetes, namespace: default, labels: {kubernetes.io/service-name: kubernetes}}
addressType: IPv4
ports: [{name: https, protocol: TCP, port: 6443}]
endpoints: [{addresses: ["192.168.200.2"], conditions: {ready: true}}]
`,
    );
    t.after(() => kubectl(["delete", "endpointslice", "kubernetes"]));
    const rig = startProxy(t);
    await rig.proxy.start();
    await kubectl(
      ["apply", "-f", "-"],
      serviceYaml("grab", "  externalIPs: [192.168.200.12, 192.168.200.2, 192.168.200.11, 192.168.200.61]\n"),
    );
    t.after(() => kubectl(["delete", "service", "grab"]));
    await kubectl(["apply", "-f", "-"], sliceYaml("grab", [{ ip: "10.244.0.5", node: NODE }]));
    t.after(() => kubectl(["delete", "endpointslice", "grab-manual"]));
    await until("the Service's externalIP served", () => {
      const last = rig.scripts.at(-1) ?? "";
      return last.includes("192.168.200.61 . 6 . 80 : goto") && last.includes("dnat ip to 10.244.0.5:8080");
    });
    await rig.proxy.settled();
    const script = rig.scripts.at(-1) ?? "";
    for (const taken of ["192.168.200.12", "192.168.200.2", "192.168.200.11"])
      assert.ok(!script.includes(`${taken} . 6 . 80`), `${taken} is not a VIP`);

    // A Node status change that leaves its addresses alone recomputes nothing (nodes update their status often).
    const patchStatus = async (status: unknown) => {
      const out = await kubectl([
        ...[
          "patch",
          "node",
          "node2",
          "--subresource=status",
          "--type=merge",
          "-o",
          "jsonpath={.metadata.resourceVersion}",
        ],
        ...["-p", JSON.stringify({ status })],
      ]);
      await until(
        "the agent to see the Node",
        () => rig.proxy.nodes.get("node2")?.metadata?.resourceVersion === out.trim(),
      );
      await rig.proxy.settled();
    };
    const plans = rig.proxy.stats.plans;
    await patchStatus({
      conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "ok" }],
    });
    assert.equal(rig.proxy.stats.plans, plans, "no recompute for a status change without new addresses");
    // A node taking an address a Service held as its externalIP: the Service loses it.
    await patchStatus({ addresses: [{ type: "InternalIP", address: "192.168.200.61" }] });
    await until(
      "192.168.200.61 no longer served",
      () => !(rig.scripts.at(-1) ?? "").includes("192.168.200.61 . 6 . 80"),
    );
  });

  test("the headless label added to an EndpointSlice alone takes its endpoints out of the rules; removing it brings them back", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    await kubectl(["apply", "-f", "-"], serviceYaml("hl"));
    await kubectl(["apply", "-f", "-"], sliceYaml("hl", [{ ip: "10.244.0.9", node: NODE }]));
    const served = () => (rig.scripts.at(-1) ?? "").includes("dnat ip to 10.244.0.9:8080");
    await until("DNAT to the endpoint", served);
    // Only the slice's labels change (upstream e2e "should implement service.kubernetes.io/headless").
    await kubectl(["label", "endpointslice", "hl-manual", "service.kubernetes.io/headless="]);
    await until("the endpoint gone from the rules", () => !served());
    await kubectl(["label", "endpointslice", "hl-manual", "service.kubernetes.io/headless-"]);
    await until("the endpoint back in the rules", served);
    await kubectl(["delete", "service", "hl"]);
    await kubectl(["delete", "endpointslice", "hl-manual"]);
  });

  test("a UDP endpoint removed or its target port changed: the proxy deletes the conntrack entries of its flows once the new rules are in; a failed deletion is tried again at the next recompute", async (t) => {
    const rig = startProxy(t, 20, { forgets: 1 });
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec:
  type: NodePort
  selector: {app: dns}
  ports: [{name: dns, protocol: UDP, port: 53, targetPort: 5353}]
`,
    );
    const udpSlice = (eps: { ip: string; port: number }[]) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-manual, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, protocol: UDP, port: ${eps[0]?.port ?? 5353}}]
endpoints: [${eps.map((e) => `{addresses: ["${e.ip}"], nodeName: ${NODE}, conditions: {ready: true}}`).join(", ")}]
`;
    await kubectl(
      ["apply", "-f", "-"],
      udpSlice([
        { ip: "10.244.0.7", port: 5353 },
        { ip: "10.244.0.8", port: 5353 },
      ]),
    );
    await until("DNAT to both endpoints", () =>
      (rig.scripts.at(-1) ?? "").includes("dnat ip to 10.244.0.8:5353"),
    );
    await rig.proxy.settled();
    assert.deepEqual(rig.forgotten, [], "nothing was removed: nothing to forget");
    const svc = JSON.parse(await kubectl(["get", "service", "dns", "-o", "json"])) as {
      spec: { clusterIP: string; ports: { nodePort: number }[] };
    };
    const nodePort = svc.spec.ports[0]?.nodePort;
    assert.ok(nodePort);

    // The pod 10.244.0.7 is gone.
    await kubectl(["apply", "-f", "-"], udpSlice([{ ip: "10.244.0.8", port: 5353 }]));
    await until("the first deletion to fail", () => rig.proxy.stats.forgetFailures === 1);
    assert.deepEqual(rig.forgotten, []);
    // Any event is a recompute, even one that changes no rule.
    await kubectl(["annotate", "service", "dns", "note=retry"]);
    await until("the removed endpoint's flows forgotten", () => rig.forgotten.length === 1);
    // No rule DNATs to the address any more: one call covers its clusterIP and NodePort flows.
    assert.deepEqual(rig.forgotten, ["-D -f ipv4 -p udp --dst-nat 10.244.0.7"]);
    assert.ok(
      !(rig.scripts.at(-1) ?? "").includes("10.244.0.7"),
      "forgotten after the rules without it were applied",
    );

    // The target port changes.
    rig.forgotten.length = 0;
    await kubectl(["apply", "-f", "-"], udpSlice([{ ip: "10.244.0.8", port: 5354 }]));
    await until("the old port's flows forgotten", () => rig.forgotten.length === 2);
    // The address is still DNATed to (on the new port): each old flow by its ports, nothing broader.
    assert.deepEqual(rig.forgotten.sort(), [
      `-D -f ipv4 -p udp --orig-dst ${svc.spec.clusterIP} --orig-port-dst 53 --reply-src 10.244.0.8 --reply-port-src 5353`,
      `-D -f ipv4 -p udp --orig-port-dst ${nodePort} --reply-src 10.244.0.8 --reply-port-src 5353`,
    ]);
    assert.equal(rig.proxy.stats.forgetFailures, 1);
    await kubectl(["delete", "service", "dns"]);
    await kubectl(["delete", "endpointslice", "dns-manual"]);
  });

  test("a UDP Service's first endpoint: the proxy deletes the un-NATed entries of its cluster IP (kernel and OVS) and NodePort once the rules with it are in, OVS's again after the recheck; a TCP Service's none; a restart deletes for every served UDP destination", async (t) => {
    t.after(async () => {
      await kubectl(["delete", "service", "first", "first-tcp", "--ignore-not-found"]);
      await kubectl(["delete", "endpointslice", "first-manual", "first-tcp-manual", "--ignore-not-found"]);
    });
    const rig = startProxy(t, 20, {}, { unnatedRecheckMs: 300 });
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    await rig.proxy.settled();
    const before = rig.unnated.length;
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: v1
kind: Service
metadata: {name: first, namespace: default}
spec:
  type: NodePort
  selector: {app: first}
  ports: [{name: dns, protocol: UDP, port: 53, targetPort: 5353}]
---
${serviceYaml("first-tcp")}`,
    );
    await until("the Services refused for want of endpoints", () =>
      (rig.scripts.at(-1) ?? "").includes(" . 17 . 53"),
    );
    await rig.proxy.settled();
    assert.equal(rig.unnated.length, before, "no endpoint yet: nothing to delete");
    const svc = JSON.parse(await kubectl(["get", "service", "first", "-o", "json"])) as {
      spec: { clusterIP: string; ports: { nodePort: number }[] };
    };
    const vip = svc.spec.clusterIP;
    const nodePort = svc.spec.ports[0]?.nodePort;
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: first-manual, namespace: default, labels: {kubernetes.io/service-name: first}}
addressType: IPv4
ports: [{name: dns, protocol: UDP, port: 5353}]
endpoints: [{addresses: ["10.244.0.20"], nodeName: ${NODE}, conditions: {ready: true}}]
---
${sliceYaml("first-tcp", [{ ip: "10.244.0.21", node: NODE }])}`,
    );
    const expected = [
      `kernel -D -f ipv4 -p udp --orig-dst ${vip} --reply-src ${vip}`,
      `ovs dpctl/flush-conntrack ct_nw_dst=${vip},ct_nw_proto=17 ct_nw_src=${vip},ct_nw_proto=17`,
      `kernel -D -f ipv4 -p udp --orig-dst 192.168.200.11 --orig-port-dst ${nodePort} --reply-src 192.168.200.11 --reply-port-src ${nodePort}`,
    ];
    await until("the first endpoint's deletions", () => rig.unnated.length >= before + 3);
    const first = rig.unnated.slice(before, before + 3);
    assert.deepEqual(first.map((u) => u.args).sort(), [...expected].sort());
    const withEndpoint = rig.scripts.findIndex((s) => s.includes("dnat ip to 10.244.0.20:5353"));
    assert.ok(withEndpoint >= 0);
    assert.ok(
      first.every((u) => u.scripts > withEndpoint),
      "deleted after the rules with the endpoint were applied",
    );
    await until("OVS's deletion again after the recheck", () => rig.unnated.length >= before + 4);
    assert.deepEqual(rig.unnated[before + 3]?.args, expected[1]);
    await sleep(600);
    await rig.proxy.settled();
    assert.equal(rig.unnated.length, before + 4, "nothing else: the TCP Service's endpoint deletes nothing");

    // A second endpoint: the destination already had one.
    await kubectl([
      "patch",
      "endpointslice",
      "first-manual",
      "--type=json",
      "-p",
      '[{"op":"add","path":"/endpoints/-","value":{"addresses":["10.244.0.22"],"nodeName":"node1","conditions":{"ready":true}}}]',
    ]);
    await until("DNAT to the second endpoint", () => (rig.scripts.at(-1) ?? "").includes("10.244.0.22:5353"));
    await sleep(600);
    await rig.proxy.settled();
    assert.equal(rig.unnated.length, before + 4, "a second endpoint deletes nothing");
    assert.equal(rig.proxy.stats.unnatedDeletions, before + 4);

    // A restarted agent does not know what changed while it was down: every served UDP destination.
    await rig.proxy.stop();
    const again = startProxy(t, 20, {}, { unnatedRecheckMs: 0 });
    await again.proxy.start();
    await until("the restarted agent's deletions", () =>
      expected.every((e) => again.unnated.some((u) => u.args === e)),
    );
  });

  test("a UDP Service with many ports and endpoints emptied at once: another Service's rule is applied while the deletions are still running; real conntrack runs one call per removed endpoint, at most the cap per round", async (t) => {
    const netns = `zovnctfix${process.pid}`;
    await run("ip", ["netns", "add", netns]);
    t.after(() => run("ip", ["netns", "del", netns]));
    const PER_ROUND = 4;
    const PORTS = 8;
    const ENDPOINTS = 10;
    // The deletions wait on this gate: the other Service's rule must appear while they are held.
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const proxy: { rounds: () => number } = { rounds: () => 0 };
    const calls: number[] = [];
    const rig = startProxy(
      t,
      20,
      {},
      {
        forgetPerRound: PER_ROUND,
        forgetFlows: async (d) => {
          calls.push(proxy.rounds());
          await gate;
          return deleteConntrack(d, { netns: `/run/netns/${netns}` });
        },
      },
    );
    proxy.rounds = () => rig.proxy.stats.forgetRounds;
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    const ports = Array.from({ length: PORTS }, (_, i) => i);
    await kubectl(
      ["apply", "-f", "-"],
      `apiVersion: v1
kind: Service
metadata: {name: many, namespace: default}
spec:
  type: NodePort
  selector: {app: many}
  ports: [${ports.map((i) => `{name: p${i}, protocol: UDP, port: ${1000 + i}, targetPort: ${2000 + i}}`).join(", ")}]
---
${serviceYaml("second")}`,
    );
    const manySlice = (n: number) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: many-manual, namespace: default, labels: {kubernetes.io/service-name: many}}
addressType: IPv4
ports: [${ports.map((i) => `{name: p${i}, protocol: UDP, port: ${2000 + i}}`).join(", ")}]
endpoints: [${Array.from({ length: n }, (_, i) => `{addresses: ["10.244.3.${i + 1}"], nodeName: ${NODE}, conditions: {ready: true}}`).join(", ")}]
`;
    await kubectl(["apply", "-f", "-"], manySlice(ENDPOINTS));
    await until("DNAT to every endpoint of every port", () =>
      (rig.scripts.at(-1) ?? "").includes(`dnat ip to 10.244.3.${ENDPOINTS}:${2000 + PORTS - 1}`),
    );
    await rig.proxy.settled();
    assert.equal(calls.length, 0);

    await kubectl(["apply", "-f", "-"], manySlice(0));
    await until("the deletion worker started (and held)", () => calls.length > 0);
    await kubectl(["apply", "-f", "-"], sliceYaml("second", [{ ip: "10.244.4.1", node: NODE }]));
    await until("the second Service's rule, while the deletions are held", () =>
      (rig.scripts.at(-1) ?? "").includes("dnat ip to 10.244.4.1:8080"),
    );
    assert.equal(calls.length, 1, "the held deletion is the only one started");
    assert.equal(rig.proxy.stats.flowsForgotten, 0);
    const spawned = spawnedTools();
    open();
    await until("every removed endpoint's deletion", () => calls.length === ENDPOINTS);
    await rig.proxy.settled();
    // 10 endpoints × 8 ports × (clusterIP + NodePort) = 160 pairs; one call per endpoint address.
    assert.equal(spawnedTools() - spawned, ENDPOINTS, "one conntrack process per removed endpoint");
    const perRound = new Map<number, number>();
    for (const r of calls) perRound.set(r, (perRound.get(r) ?? 0) + 1);
    assert.ok(
      [...perRound.values()].every((n) => n <= PER_ROUND),
      `at most ${PER_ROUND} per round: ${JSON.stringify([...perRound])}`,
    );
    assert.ok(rig.proxy.stats.forgetRounds >= Math.ceil(ENDPOINTS / PER_ROUND));
    assert.equal(rig.proxy.stats.forgetFailures, 0);
    assert.equal(rig.proxy.stats.flowsDropped, 0);
    await kubectl(["delete", "service", "many", "second"]);
    await kubectl(["delete", "endpointslice", "many-manual", "second-manual"]);
  });

  test("a burst of Service changes is coalesced; an update that changes nothing writes nothing; a restart reapplies", async (t) => {
    const rig = startProxy(t, 300);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    const names = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
    await kubectl(["apply", "-f", "-"], names.map((n) => serviceYaml(n)).join("---\n"));
    await until("all 20 Services refused for want of endpoints", () => {
      const last = rig.scripts.at(-1) ?? "";
      return (last.match(/ \. 6 \. 80/g)?.length ?? 0) === 20;
    });
    await rig.proxy.settled();
    const burst = rig.scripts.length - 1;
    assert.ok(burst >= 1 && burst < 20, `20 Services created: ${burst} nft transactions`);
    t.diagnostic(`20 Services created by one kubectl apply: ${burst} nft transactions`);

    const plans = rig.proxy.stats.plans;
    const applies = rig.proxy.stats.applies;
    await kubectl(["annotate", "service", "burst-0", "note=unrelated"]);
    await until("the update to be planned", () => rig.proxy.stats.plans > plans);
    await rig.proxy.settled();
    assert.equal(rig.proxy.stats.applies, applies, "same ruleset: no nft transaction");

    const again = startProxy(t);
    await again.proxy.start();
    await until("the restarted agent's ruleset", () => again.scripts.length === 1);
    assert.equal(
      again.scripts[0],
      rig.scripts.at(-1),
      "the same state gives the same text, applied at start",
    );
    await kubectl(["delete", "service", ...names]);
  });

  test("a table removed behind the agent's back is applied again, with no change in the API", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the first ruleset", () => rig.scripts.length === 1);
    rig.table.present = false;
    await until("the ruleset applied again", () => rig.scripts.length === 2);
    assert.equal(rig.scripts[1], rig.scripts[0]);
  });

  test("a failing nft apply or health-check sync is retried with backoff, never thrown out of the agent", async (t) => {
    const rig = startProxy(t, 20, { applies: 2, healthSyncs: 2 });
    await rig.proxy.start();
    await until("the ruleset applied after two failures", () => rig.scripts.length === 1);
    // The health-check sync runs after a successful apply; its two failures are retried too.
    await until("the health-check failures retried", () => rig.proxy.stats.failures >= 4);
    await kubectl(["apply", "-f", "-"], serviceYaml("retried", "  type: ClusterIP\n"));
    await until("a later change applied", () => rig.scripts.length === 2);
  });

  test("ServiceCIDRs become routes: the default range, and one added at run time", async (t) => {
    const rig = startProxy(t);
    await rig.proxy.start();
    await until("the default ServiceCIDR", () => rig.cidrs.length > 0);
    assert.deepEqual(rig.cidrs.at(-1)?.map(formatCidr), ["10.96.0.0/16"]);
    await kubectl(
      ["apply", "-f", "-"],
      "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra}\nspec: {cidrs: [10.97.0.0/16]}\n",
    );
    await until("the added range", () => (rig.cidrs.at(-1)?.length ?? 0) === 2);
    assert.deepEqual(rig.cidrs.at(-1)?.map(formatCidr), ["10.96.0.0/16", "10.97.0.0/16"]);
    await kubectl(["delete", "servicecidr", "extra", "--wait=false"]);
  });
});
