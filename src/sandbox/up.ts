// `zovn sandbox up`: brings the whole sandbox up, or completes a partial one. Every step first checks what
// exists (netns, links, live recorded processes), so running it on a running sandbox changes nothing.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { startApiserverForward } from "./apiserver-forward.ts";
import { resolveBinaries } from "./binaries.ts";
import {
  archiveDigest,
  CHART_NAMESPACE,
  CHART_RELEASE,
  centralNode,
  installChart,
  type ProductImages,
  refreshNodeImages,
  resolveProductImages,
  sandboxChartValues,
  workloadsOf,
} from "./chart-install.ts";
import { applyChartRbac } from "./chart-rbac.ts";
import { ensureClusterDns } from "./cluster-dns.ts";
import { run } from "./command.ts";
import { startApiserver, startControllers, waitApiserverReady } from "./control-plane.ts";
import { ensureExternalVlan } from "./external-vlan.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import { adminKubeconfig } from "./kubectl.ts";
import { type Layout, layoutFor } from "./layout.ts";
import { isMountPoint } from "./netns.ts";
import { nodePlace, startNode } from "./node.ts";
import { ensureCniExecutable, ensureNodeAgent } from "./node-agent.ts";
import { imageRef, resolveNodeImages } from "./node-images.ts";
import { ovnCtl, startOvnCentral } from "./ovn-central.ts";
import { ensureOvnkubeController } from "./ovnkube-controller.ts";
import { ensurePki, type Pki } from "./pki.ts";
import type { Progress } from "./progress.ts";
import {
  acquireLock,
  type DaemonRecord,
  liveDaemon,
  loadState,
  recordDaemon,
  type SandboxState,
  saveState,
} from "./state.ts";
import {
  APISERVER_PORT,
  allNetns,
  CLUSTER_DNS_IP,
  chassisOf,
  planTopology,
  type SandboxSpec,
  type Topology,
  ZSTACK_NETWORKS,
} from "./topology.ts";
import { ensureUnderlay } from "./underlay.ts";
import {
  recordZStackNb,
  seedZStack,
  startZStackHosts,
  zstackBeforeDumpPath,
  zstackSubnetManifests,
  zstackSwitchUuid,
} from "./zstack/world.ts";

export interface UpOptions {
  /** Explicitly chosen options; the rest come from the running instance's spec or the defaults. */
  spec: SandboxSpec;
  explicit: ReadonlySet<keyof SandboxSpec>;
  baseDir?: string;
  readyTimeoutMs?: number;
}

export interface UpResult {
  layout: Layout;
  topo: Topology;
  state: SandboxState;
  /** Milliseconds from the start of `up` until every node was Ready. */
  readyMs: number;
  kubeconfig: string;
}

function mergeSpec(opts: UpOptions, existing: SandboxSpec | undefined): SandboxSpec {
  if (!existing) return opts.spec;
  const merged = { ...existing };
  for (const key of opts.explicit) (merged as Record<string, unknown>)[key] = opts.spec[key];
  return merged;
}

async function ensureForward(layout: Layout, topo: Topology, state: SandboxState): Promise<number> {
  const name = "cp/apiserver-forward";
  if (liveDaemon(state, name) && state.apiserverPort) return state.apiserverPort;
  const log = `${layout.cpLogDir}/apiserver-forward.log`;
  const { port, id } = await startApiserverForward({
    preferredPort: state.apiserverPort,
    netns: topo.controlPlane.netns,
    target: `${topo.controlPlane.ip}:${APISERVER_PORT}`,
    log,
    tag: layout.root,
  });
  state.apiserverPort = port;
  recordDaemon(layout, state, { name, log, ...id });
  return port;
}

/**
 * Polls `check` against the apiserver until it says done, noting each new report; the apiserver may still be
 * settling, so a failed call is tried again. Throws `what` with the last report at the deadline.
 */
async function pollApiserver(
  kubeconfig: string,
  deadline: number,
  progress: Progress,
  what: string,
  intervalMs: number,
  check: (core: CoreV1Api) => Promise<{ done: boolean; report: string }>,
): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  let lastReport = "";
  while (Date.now() < deadline) {
    try {
      const { done, report } = await check(core);
      if (report !== lastReport) {
        progress.note(report);
        lastReport = report;
      }
      if (done) return;
    } catch {
      // the apiserver may still be settling
    }
    await sleep(intervalMs);
  }
  throw new Error(`${what} in time (${lastReport || "no answer from the apiserver"})`);
}

function waitNodesReady(
  kubeconfig: string,
  names: string[],
  deadline: number,
  progress: Progress,
): Promise<void> {
  return pollApiserver(kubeconfig, deadline, progress, "nodes not Ready", 250, async (core) => {
    const list = await core.listNode();
    const ready = list.items
      .filter((n) => n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
      .map((n) => n.metadata?.name as string);
    return {
      done: names.every((n) => ready.includes(n)),
      report: `${ready.length}/${names.length} nodes Ready`,
    };
  });
}

/**
 * With the chart, a node turns Ready as soon as the DaemonSet's init container has installed the conflist; the
 * agent's pod is Ready only later (its readiness probe). `up` returns when every pod of the release is Ready and
 * none is terminating, with one node pod per node, so what follows (and a caller's checks) sees the product whole.
 */
function waitChartPodsReady(
  kubeconfig: string,
  nodes: string[],
  deadline: number,
  progress: Progress,
): Promise<void> {
  return pollApiserver(
    kubeconfig,
    deadline,
    progress,
    "the chart's pods are not all Ready",
    500,
    async (core) => {
      const list = await core.listNamespacedPod({
        namespace: CHART_NAMESPACE,
        labelSelector: `app.kubernetes.io/instance=${CHART_RELEASE}`,
      });
      const live = list.items.filter((p) => !p.metadata?.deletionTimestamp);
      const ready = live.filter((p) =>
        p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      );
      const nodePods = new Set(
        live
          .filter((p) => p.metadata?.labels?.["app.kubernetes.io/component"] === "node")
          .map((p) => p.spec?.nodeName),
      );
      return {
        done:
          live.length > 0 &&
          ready.length === live.length &&
          live.length === list.items.length &&
          nodes.every((n) => nodePods.has(n)),
        report: `${ready.length}/${list.items.length} chart pods Ready`,
      };
    },
  );
}

/**
 * The default ServiceAccount appearing shows the controller manager at work; without it no pod can be
 * admitted. Both controllers must still run by then.
 */
async function waitControllers(
  kubeconfig: string,
  state: SandboxState,
  controllers: DaemonRecord[],
  deadline: number,
): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  while (Date.now() < deadline) {
    const dead = controllers.filter((d) => !liveDaemon(state, d.name));
    if (dead.length > 0) throw new Error(`${dead.map((d) => `${d.name} exited; see ${d.log}`).join("; ")}`);
    try {
      await core.readNamespacedServiceAccount({ name: "default", namespace: "default" });
      return;
    } catch {
      await sleep(250);
    }
  }
  throw new Error("the default ServiceAccount did not appear: is kube-controller-manager working?");
}

async function waitChassis(layout: Layout, topo: Topology, deadline: number): Promise<void> {
  let seen: string[] = [];
  while (Date.now() < deadline) {
    try {
      const out = await ovnCtl(layout, topo, "sb", ["--bare", "--columns=name", "list", "Chassis"]);
      seen = out.split("\n").filter(Boolean);
      if (topo.nodes.every((n) => seen.includes(chassisOf(topo, n)))) return;
    } catch {
      // northd may not have created the SB schema's contents yet
    }
    await sleep(250);
  }
  throw new Error(`chassis missing in the SB database (have: ${seen.join(", ") || "none"})`);
}

export async function sandboxUp(opts: UpOptions, progress: Progress): Promise<UpResult> {
  const layout = layoutFor(opts.spec.name, opts.baseDir);
  const lock = acquireLock(layout);
  try {
    return await bringUp(opts, layout, progress);
  } finally {
    lock.release();
  }
}

async function bringUp(opts: UpOptions, layout: Layout, progress: Progress): Promise<UpResult> {
  const previous = loadState(layout);
  const spec = mergeSpec(opts, previous?.spec);
  // Any state at all refuses a change: what an earlier `up` made (a node's mount namespace without the kubelet's
  // sysctl copies, say) outlives its daemons and would be reused as it is.
  if (previous && JSON.stringify(previous.spec) !== JSON.stringify(spec)) {
    throw new Error(
      `sandbox "${spec.name}" exists with ${JSON.stringify(previous.spec)}; run \`zovn sandbox down\` before changing it`,
    );
  }
  if (spec.chart && (!spec.kubelet || spec.raft || spec.nodeAgent === false))
    throw new Error(
      "--chart needs --kubelet and the node agent, and installs a single OVN central (no --raft)",
    );
  const topo = planTopology(spec);
  // The state is written before anything is created, so a `down` after an interrupted `up` finds it all.
  const state: SandboxState = previous ?? {
    version: 1,
    spec,
    runNetnsWasMounted: isMountPoint("/run/netns"),
    netns: [],
    daemons: [],
  };
  state.spec = spec;
  state.netns = allNetns(topo);
  saveState(layout, state);
  progress.note(
    topo.zstack
      ? `sandbox "${spec.name}": ${spec.nodes} nodes in External mode on a simulated ZStack (controller ${topo.centralIps.join(", ")}${spec.raft ? ": 3-member Raft NB and SB" : ""}, hypervisors ${topo.zstack.hypervisors.map((h) => h.ip).join(", ")})`
      : `sandbox "${spec.name}": ${spec.nodes} nodes, OVN central ${spec.raft ? "3-member Raft" : "standalone"}`,
  );
  progress.note(`logs: ${layout.logDir}`);

  const bins = await progress.step("binaries ready", () => resolveBinaries());
  state.binaries = bins;
  saveState(layout, state);
  const images = spec.kubelet
    ? await progress.step("node images ready (pause, busybox, coredns)", () => resolveNodeImages())
    : undefined;
  // Chart mode: the product and OVN central images from `make images` (built here when a source changed).
  const productImages: ProductImages | undefined = spec.chart
    ? await progress.step("product images ready (zstack-ovn-kubernetes, zstack-ovn-central)", () =>
        resolveProductImages(),
      )
    : undefined;
  const pki = await progress.step("PKI ready", () => ensurePki(layout.pkiDir, topo));
  // With the chart, the DaemonSet's pods install the CNI executable from the product image.
  if (spec.nodeAgent && !spec.chart)
    await progress.step("zstack-ovn-cni executable built", () => ensureCniExecutable());
  await progress.step("underlay and host namespaces ready", () => ensureUnderlay(topo));
  await progress.step("underlay VLAN on the external host", () => ensureExternalVlan(layout, topo, state));

  const kubeconfig = adminKubeconfig(layout);
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 180_000);
  let controllers: DaemonRecord[] = [];
  const controlPlane = async () => {
    startApiserver({ layout, topo, pki, bins, state });
    const port = await ensureForward(layout, topo, state);
    writeAdminKubeconfig(kubeconfig, port, pki);
    const apiserver = state.daemons.find((d) => d.name === "cp/kube-apiserver");
    await waitApiserverReady(
      {
        host: "127.0.0.1",
        port,
        ca: readFileSync(pki.caCert),
        cert: readFileSync(pki.cert("admin").cert),
        key: readFileSync(pki.cert("admin").key),
      },
      Math.max(deadline - Date.now(), 1000),
      () => apiserver === undefined || liveDaemon(state, apiserver.name) !== undefined,
    );
    progress.note(`kube-apiserver ready (https://127.0.0.1:${port} on this machine)`);
    // The chart's ServiceAccounts and roles: every token the controller and the node agents get is minted for
    // them. A chart install brings its own (helm refuses objects it did not create).
    if (!spec.chart) await applyChartRbac(bins.KUBECTL, kubeconfig);
    controllers = startControllers({ layout, topo, pki, bins, state });
  };
  const central = async () => {
    if (spec.chart) return;
    if (!spec.zstack) {
      await progress.step("OVN central ready", () => startOvnCentral(layout, topo, state));
      return;
    }
    let seeded = false;
    await progress.step("ZStack's NB, SB and northd ready, with ZStack's content", () =>
      startOvnCentral(layout, topo, state, async () => {
        seeded = await seedZStack(layout, topo);
      }),
    );
    await progress.step("ZStack's hypervisors and VMs ready", () =>
      startZStackHosts(layout, topo, state, bins.PODSERVER, deadline),
    );
    // Only when this `up` wrote ZStack's content: the plugin has not started on it yet (the node agents and the
    // controller start after this); a later `up` keeps the first record.
    if (seeded)
      await progress.step(
        `ZStack's NB recorded before the plugin first starts (${zstackBeforeDumpPath(layout)})`,
        () => recordZStackNb(layout, topo, deadline),
      );
  };
  const nodes = () =>
    progress.step(
      spec.kubelet
        ? "node namespaces, OVS, ovn-controller, containerd and kubelet started"
        : "node namespaces, OVS and ovn-controller ready",
      () =>
        Promise.all(
          topo.nodes.map((n) =>
            startNode(
              {
                layout,
                topo,
                state,
                pki,
                bins,
                ...(images ? { images } : {}),
                ...(productImages ? { productImages } : {}),
              },
              n,
            ),
          ),
        ),
    );
  await Promise.all([controlPlane(), central(), nodes()]);
  if (productImages) {
    // The chart's pods need the controller manager (ServiceAccount tokens, kube-root-ca.crt) and the scheduler.
    await progress.step("controller manager and scheduler working", () =>
      waitControllers(kubeconfig, state, controllers, deadline),
    );
    const installed = await progress.step(
      `chart installed (helm upgrade --install ${CHART_RELEASE} -n ${CHART_NAMESPACE}, values-standalone.yaml)`,
      () =>
        installChart(
          { helm: bins.HELM, kubeconfig, valuesFile: join(layout.kubeDir, "chart-values.json") },
          sandboxChartValues(topo, productImages),
        ),
    );
    if (!installed) progress.note("chart already deployed with these values");
    const replaced = await refreshChartImages(layout, topo, productImages);
    if (!installed && replaced.length > 0)
      await progress.step(`chart pods restarted on the rebuilt ${replaced.join(" and ")} image`, () =>
        restartWorkloads(
          bins.KUBECTL,
          kubeconfig,
          replaced.flatMap((i) => workloadsOf(i)),
        ),
      );
  }
  // The chart's pods pull nothing, but a busy machine takes minutes to start them all.
  const nodesDeadline = spec.chart ? Math.max(deadline, Date.now() + 900_000) : deadline;
  // Each agent waits by itself for its Node object and the controller's annotation.
  if (spec.nodeAgent && !spec.chart)
    await progress.step("zstack-ovnkube-node started on every node", () =>
      Promise.all(
        topo.nodes.map((n) =>
          ensureNodeAgent(
            { layout, topo, state, pki, kubectl: bins.KUBECTL, adminKubeconfig: kubeconfig },
            n,
          ),
        ),
      ),
    );

  const waits: Promise<void>[] = [
    waitNodesReady(
      kubeconfig,
      topo.nodes.map((n) => n.name),
      nodesDeadline,
      progress,
    ),
  ];
  waits.push(
    progress.step(`${spec.nodes} chassis registered`, () => waitChassis(layout, topo, nodesDeadline)),
  );
  await Promise.all(waits);
  const readyMs = progress.elapsedMs();
  progress.note(`all ${spec.nodes} nodes Ready ${(readyMs / 1000).toFixed(1)}s after \`up\` started`);
  if (spec.chart)
    await progress.step("every pod of the chart Ready", () =>
      waitChartPodsReady(
        kubeconfig,
        topo.nodes.map((n) => n.name),
        nodesDeadline,
        progress,
      ),
    );
  // With the chart, both were waited for before the install, and the controller is the chart's pod.
  if (!spec.chart) {
    await progress.step("controller manager and scheduler working", () =>
      waitControllers(kubeconfig, state, controllers, deadline),
    );
    await progress.step("zstack-ovnkube-controller started", () =>
      ensureOvnkubeController({
        layout,
        topo,
        pki,
        bins,
        state,
        adminKubeconfig: kubeconfig,
        encap: spec.encap,
      }),
    );
  }
  await progress.step("default Subnet Ready", () =>
    waitSubnet(kubeconfig, bins.KUBECTL, "default", nodesDeadline),
  );
  if (spec.zstack) {
    const networks = [];
    for (const plan of ZSTACK_NETWORKS)
      networks.push({
        plan,
        switchUuid: await zstackSwitchUuid((args) => ovnCtl(layout, topo, "nb", args), plan.network),
      });
    await run(bins.KUBECTL, ["--kubeconfig", kubeconfig, "apply", "-f", "-"], {
      input: zstackSubnetManifests(networks),
    });
    for (const n of networks)
      await progress.step(
        `Subnet ${n.plan.subnet} on ZStack's ${n.plan.network} switch ${n.switchUuid} Ready`,
        () => waitSubnet(kubeconfig, bins.KUBECTL, n.plan.subnet, nodesDeadline),
      );
  }
  // Real nodes run real pods, which resolve Service names through the cluster DNS (the kubelet's clusterDNS).
  // Its pod needs the CNI and the default Subnet first; a busy machine may take minutes to start it.
  if (images && spec.nodeAgent)
    await progress.step(`cluster DNS ready (kube-system/kube-dns at ${CLUSTER_DNS_IP})`, () =>
      ensureClusterDns(
        bins.KUBECTL,
        kubeconfig,
        { image: imageRef(images.coredns) },
        Math.max(deadline, Date.now() + 600_000),
      ),
    );
  return { layout, topo, state, readyMs, kubeconfig };
}

/** Re-imports a product or central image rebuilt since the nodes imported it; names the ones replaced. */
async function refreshChartImages(
  layout: Layout,
  topo: Topology,
  images: ProductImages,
): Promise<Array<"product" | "central">> {
  const digests = new Map<string, string>();
  for (const i of [images.product, images.central]) digests.set(i.archive, await archiveDigest(i.archive));
  const replaced = new Set<"product" | "central">();
  await Promise.all(
    topo.nodes.map(async (n) => {
      const wanted = n.name === centralNode(topo) ? [images.product, images.central] : [images.product];
      for (const i of await refreshNodeImages(nodePlace(layout, n), wanted, digests))
        replaced.add(i === images.product ? "product" : "central");
    }),
  );
  return [...replaced];
}

/** A rolling restart, as an operator would after replacing an image under the same tag, then its completion. */
async function restartWorkloads(kubectl: string, kubeconfig: string, workloads: string[]): Promise<void> {
  const base = ["--kubeconfig", kubeconfig, "-n", CHART_NAMESPACE];
  await run(kubectl, [...base, "rollout", "restart", ...workloads]);
  for (const w of workloads)
    await run(kubectl, [...base, "rollout", "status", w, "--timeout=900s"], { timeoutMs: 960_000 });
}

function writeAdminKubeconfig(path: string, port: number, pki: Pki): void {
  const admin = pki.cert("admin");
  writeKubeconfig(path, {
    server: `https://127.0.0.1:${port}`,
    caCert: pki.caCert,
    clientCert: admin.cert,
    clientKey: admin.key,
    user: "kubernetes-admin",
  });
}

/**
 * The controller creates the default Subnet from the cluster CIDR and reports it Ready once its switch exists;
 * a Subnet on ZStack's switch once the switch matches and our router port is on it.
 */
async function waitSubnet(
  kubeconfig: string,
  kubectl: string,
  name: string,
  deadline: number,
): Promise<void> {
  for (;;) {
    const out = await run(kubectl, [
      "--kubeconfig",
      kubeconfig,
      "get",
      "subnets.network.zstack.io",
      name,
      "-o",
      "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
    ]).catch(() => "");
    if (out.trim() === "True") return;
    if (Date.now() > deadline)
      throw new Error(`the Subnet ${name} did not become Ready; see the zstack-ovnkube-controller log`);
    await sleep(250);
  }
}
