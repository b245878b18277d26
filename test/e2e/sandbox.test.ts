// The sandbox end to end, as a user runs it: `up` gives Ready nodes and registered chassis, the real
// scheduler spreads a Deployment over the nodes, pods report the CNI error while no CNI is installed, and
// `down` puts the machine's netns list, mount table and process table back as they were.
// Uses its own instance name, so a sandbox the user has running is not touched.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { run } from "../../src/sandbox/command.ts";
import { layoutFor } from "../../src/sandbox/layout.ts";
import { listNetns, readMountInfo } from "../../src/sandbox/netns.ts";
import { localRemote } from "../../src/sandbox/ovn-central.ts";
import {
  isAlive,
  listPids,
  type ProcessIdentity,
  readCmdline,
  readProcess,
} from "../../src/sandbox/process-table.ts";
import { repoRoot } from "../../src/sandbox/repo.ts";
import { loadState as loadSandboxState, type SandboxState } from "../../src/sandbox/state.ts";
import { findNamespaces, processesIn } from "../../src/sandbox/sweep.ts";
import { planTopology } from "../../src/sandbox/topology.ts";
import { eventually } from "../rig/sandbox-handle.ts";

const NAME = "zsbe2e";
const PREFIX = `${NAME}-`;
const layout = layoutFor(NAME);
const ZOVN = join(repoRoot, "bin", "zovn");
const UP_TIMEOUT_MS = 40 * 60_000; // the first run may build Kubernetes into the binary cache

interface Snapshot {
  netns: string[];
  mounts: string[];
  processes: Map<string, string>;
}

function snapshot(): Snapshot {
  const processes = new Map<string, string>();
  for (const pid of listPids()) {
    const info = readProcess(pid);
    if (!info || info.state === "Z") continue;
    processes.set(`${pid}@${info.startTime}`, readCmdline(pid).join(" ") || `[${info.comm}]`);
  }
  return {
    netns: listNetns(),
    mounts: readMountInfo().map((m) => `${m.mountPoint} ${m.fsType}`),
    processes,
  };
}

function added<T>(before: Iterable<T>, after: Iterable<T>): T[] {
  const b = new Set(before);
  return [...after].filter((x) => !b.has(x));
}

/** Anything this sandbox could have created: its netns names, its directory, its namespaces' files. */
function mentionsSandbox(text: string): boolean {
  return text.includes(PREFIX) || text.includes(layout.root);
}

/**
 * Asserts that nothing of the sandbox is left and that nothing else changed, except what concurrently
 * running tests of other files did: their netns and processes never mention this instance.
 */
function assertRestored(before: Snapshot, ours: readonly ProcessIdentity[]): void {
  const after = snapshot();
  assert.deepEqual(after.netns.filter(mentionsSandbox), [], "sandbox netns left");
  assert.deepEqual(added(before.netns, after.netns).filter(mentionsSandbox), []);
  const newMounts = added(before.mounts, after.mounts);
  const foreignNetns = after.netns.filter((n) => !before.netns.includes(n));
  // /run/netns itself becomes a mount point with the first netns; it may stay only for another test's netns.
  const unexplained = newMounts.filter(
    (m) => mentionsSandbox(m) || (m.startsWith("/run/netns ") && foreignNetns.length === 0),
  );
  assert.deepEqual(unexplained, [], "mounts left behind");
  assert.deepEqual(
    ours.filter(isAlive).map((p) => p.pid),
    [],
    "sandbox processes still running",
  );
  const newProcs = [...after.processes].filter(([k]) => !before.processes.has(k)).map(([, cmd]) => cmd);
  assert.deepEqual(newProcs.filter(mentionsSandbox), [], "processes mentioning the sandbox");
}

/** Every process that belongs to the running sandbox: recorded daemons and anything in its namespaces. */
function sandboxProcesses(): ProcessIdentity[] {
  const ns = findNamespaces(PREFIX, layout.nsDir);
  const state = loadState();
  return [
    ...(state?.daemons ?? []),
    ...processesIn(new Set(ns.netns.values()), new Set(ns.mountNs.values())),
  ];
}

const loadState = (): SandboxState | undefined => loadSandboxState(layout);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function zovn(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(ZOVN, ["sandbox", "--name", NAME, ...args], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? "");
  });
}

async function ok(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  const r = await zovn(args, opts);
  assert.equal(r.code, 0, `zovn sandbox ${args.join(" ")} failed:\n${r.stderr}\n${r.stdout}`);
  return r.stdout;
}

async function kubectlJson<T>(args: string[]): Promise<T> {
  return JSON.parse(await ok(["kubectl", ...args, "-o", "json"])) as T;
}

interface NodeList {
  items: Array<{
    metadata: { name: string };
    status: { conditions: Array<{ type: string; status: string }> };
  }>;
}

interface PodList {
  items: Array<{
    metadata: { name: string; uid: string };
    spec: { nodeName?: string };
    status: {
      phase: string;
      podIP?: string;
      conditions?: Array<{ type: string; status: string }>;
      containerStatuses?: Array<{ state: { waiting?: { reason: string; message?: string } } }>;
    };
  }>;
}

interface EventList {
  items: Array<{ reason: string; message: string; count?: number; involvedObject: { name: string } }>;
}

async function readyNodes(): Promise<string[]> {
  const nodes = await kubectlJson<NodeList>(["get", "nodes"]);
  return nodes.items
    .filter((n) => n.status.conditions.some((c) => c.type === "Ready" && c.status === "True"))
    .map((n) => n.metadata.name)
    .sort();
}

async function chassisNames(): Promise<string[]> {
  const state = loadState();
  assert.ok(state, "state file exists while up");
  const out = await run("ovn-sbctl", [
    `--db=${localRemote(layout, planTopology(state.spec), "sb")}`,
    "--bare",
    "--columns=name",
    "list",
    "Chassis",
  ]);
  return out.split("\n").filter(Boolean).sort();
}

const deployment = JSON.stringify({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas: 6,
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: {
        containers: [{ name: "web", image: "podserver", ports: [{ containerPort: 8080, name: "http" }] }],
      },
    },
  },
});

const service = JSON.stringify({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default" },
  spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: 8080 }] },
});

/**
 * A stand-in CNI plugin for one node, so the simulator's success path (IP from the CNI result, Ready,
 * EndpointSlice, exec into the pod) is tested before the project's own plugin exists.
 */
const TEST_PLUGIN = `#!/bin/sh
set -e
conf=$(cat)
subnet=$(printf '%s' "$conf" | sed -n 's/.*"subnet" *: *"\\([0-9.]*\\)\\.0\\/24".*/\\1/p')
host=zv$(printf '%s' "$CNI_CONTAINERID" | cut -c1-10)
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
ADD)
  n=$(( $(cat /var/lib/cni/test-veth.next 2>/dev/null || echo 10) + 1 ))
  echo $n > /var/lib/cni/test-veth.next
  ip link add "$host" type veth peer name "$CNI_IFNAME" netns "$CNI_NETNS"
  ip link set "$host" up
  nsenter --net="$CNI_NETNS" ip addr add "$subnet.$n/24" dev "$CNI_IFNAME"
  nsenter --net="$CNI_NETNS" ip link set "$CNI_IFNAME" up
  printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"address":"%s/24","interface":0}]}\\n' \\
    "$CNI_IFNAME" "$CNI_NETNS" "$subnet.$n"
  ;;
DEL) ip link del "$host" 2>/dev/null || true ;;
esac
`;

function installTestPlugin(node: string, subnet: string): void {
  const dirs = layout.node(node);
  writeFileSync(join(dirs.cniBin, "test-veth"), TEST_PLUGIN, { mode: 0o755 });
  const conflist = {
    cniVersion: "1.0.0",
    name: "test",
    plugins: [{ type: "test-veth", subnet: `${subnet}.0/24` }],
  };
  writeFileSync(join(dirs.cniConf, "10-test.conflist"), JSON.stringify(conflist));
}

interface SandboxRecordFile {
  containerId: string;
  netns?: string;
}

function podRecord(node: string, uid: string): SandboxRecordFile | undefined {
  const file = join(layout.node(node).podRecords, `${uid}.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as SandboxRecordFile) : undefined;
}

interface EndpointSliceList {
  items: Array<{ endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean } }> }>;
}

async function runningPodsOn(node: string, subnet: string, count: number): Promise<PodList["items"]> {
  return eventually(`${count} pods Running on ${node}`, 60_000, async () => {
    const list = await kubectlJson<PodList>([
      "get",
      "pods",
      "-l",
      "app=web",
      "--field-selector",
      `spec.nodeName=${node}`,
    ]);
    const running = list.items.filter(
      (p) =>
        p.status.phase === "Running" &&
        p.status.podIP?.startsWith(`${subnet}.`) &&
        p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    return running.length === count && list.items.length === count ? running : undefined;
  });
}

describe("zovn sandbox", { timeout: UP_TIMEOUT_MS + 10 * 60_000 }, () => {
  let baseline: Snapshot;

  before(async () => {
    // A sandbox of this name left by an earlier aborted run would make the snapshot meaningless.
    await ok(["down"]);
    baseline = snapshot();
  });

  after(async () => {
    // --purge: the test leaves no state or logs behind either.
    await zovn(["down", "--purge"]);
  });

  it("up brings three nodes to Ready and registers three chassis", async (t) => {
    // This suite covers the sandbox itself, before any CNI: the node agent stays off (see connectivity.test.ts).
    const out = await ok(["up", "--nodes", "3", "--no-node-agent"], { timeoutMs: UP_TIMEOUT_MS });
    const ready = /nodes Ready ([\d.]+)s after `up` started/.exec(out);
    assert.ok(ready, `summary names the time to Ready:\n${out}`);
    t.diagnostic(`up to all nodes Ready: ${ready[1]} s`);
    assert.deepEqual(await readyNodes(), ["node1", "node2", "node3"]);
    assert.deepEqual(await chassisNames(), ["node1", "node2", "node3"]);
  });

  it("up on a running sandbox changes nothing", async () => {
    const pids = loadState()?.daemons.map((d) => `${d.pid}@${d.startTime}`);
    await ok(["up"]);
    assert.deepEqual(
      loadState()?.daemons.map((d) => `${d.pid}@${d.startTime}`),
      pids,
    );
  });

  it("a 6-replica Deployment is spread over the nodes and its pods report the CNI error", async () => {
    await ok(["kubectl", "apply", "-f", "-"], { input: deployment });
    const pods = await eventually("6 pods bound and reporting the CNI error", 90_000, async () => {
      const list = await kubectlJson<PodList>(["get", "pods", "-l", "app=web"]);
      const failing = list.items.filter((p) =>
        p.status.containerStatuses?.some((c) =>
          c.state.waiting?.message?.includes("no network configuration found in /etc/cni/net.d"),
        ),
      );
      return failing.length === 6 ? list.items : undefined;
    });
    const nodes = new Set(pods.map((p) => p.spec.nodeName));
    assert.deepEqual([...nodes].sort(), ["node1", "node2", "node3"], "the scheduler used every node");
    for (const p of pods) {
      assert.equal(p.status.phase, "Pending");
      assert.equal(p.status.containerStatuses?.[0]?.state.waiting?.reason, "ContainerCreating");
    }
    const events = await kubectlJson<EventList>([
      "get",
      "events",
      "--field-selector",
      "reason=FailedCreatePodSandBox",
    ]);
    const withEvent = new Set(events.items.map((e) => e.involvedObject.name));
    assert.ok(
      pods.every((p) => withEvent.has(p.metadata.name)),
      "each pod has a FailedCreatePodSandBox event",
    );
    // The retries (backing off from 1 s) repeat the same event, which bumps its count instead of adding one.
    await eventually("a repeated FailedCreatePodSandBox event counted", 30_000, async () => {
      const again = await kubectlJson<EventList>([
        "get",
        "events",
        "--field-selector",
        "reason=FailedCreatePodSandBox",
      ]);
      return again.items.some((e) => (e.count ?? 1) >= 2) ? true : undefined;
    });
  });

  it("a hostNetwork pod runs in its node's netns with the node's IP, without the CNI", async () => {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "hostnet", namespace: "default" },
      spec: {
        hostNetwork: true,
        nodeName: "node2",
        containers: [{ name: "srv", image: "podserver", args: ["--tcp", "18081"] }],
      },
    };
    await ok(["kubectl", "apply", "-f", "-"], { input: JSON.stringify(pod) });
    await eventually("the hostNetwork pod Running", 30_000, async () => {
      const p = JSON.parse(
        await ok(["kubectl", "get", "pod", "hostnet", "-o", "json"]),
      ) as PodList["items"][number];
      return p.status.phase === "Running" && p.status.podIP === "192.168.200.12" ? true : undefined;
    });
    const podserver = loadState()?.binaries?.PODSERVER as string;
    const reply = await eventually("an answer on the node's address", 10_000, () =>
      ok(["exec", "node2", "--", podserver, "dial", "tcp", "192.168.200.12:18081"]),
    );
    assert.match(reply, /^hostnet /);
    await ok(["kubectl", "delete", "pod", "hostnet", "--wait=true", "--timeout=30s"]);
  });

  it("a container that keeps exiting is restarted with back-off and shows CrashLoopBackOff", async () => {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "crasher", namespace: "default" },
      spec: {
        hostNetwork: true, // no CNI needed
        nodeName: "node3",
        containers: [{ name: "c", image: "busybox", command: ["false"] }],
      },
    };
    await ok(["kubectl", "apply", "-f", "-"], { input: JSON.stringify(pod) });
    const status = await eventually("CrashLoopBackOff after a restart", 60_000, async () => {
      const p = JSON.parse(await ok(["kubectl", "get", "pod", "crasher", "-o", "json"])) as {
        status: {
          containerStatuses?: { restartCount: number; state?: { waiting?: { reason?: string } } }[];
        };
      };
      const c = p.status.containerStatuses?.[0];
      return c && c.restartCount >= 1 && c.state?.waiting?.reason === "CrashLoopBackOff" ? c : undefined;
    });
    assert.ok(status.restartCount >= 1);
    await ok(["kubectl", "delete", "pod", "crasher", "--wait=true", "--timeout=30s"]);
  });

  it("once a node has a CNI configuration its pods get IPs, turn Ready and become endpoints", async () => {
    const onNode1 = (await kubectlJson<PodList>(["get", "pods", "-l", "app=web"])).items.filter(
      (p) => p.spec.nodeName === "node1",
    ).length;
    await ok(["kubectl", "apply", "-f", "-"], { input: service });
    installTestPlugin("node1", "10.244.1");
    const running = await runningPodsOn("node1", "10.244.1", onNode1);
    const ips = running.map((p) => p.status.podIP as string).sort();
    await eventually("the EndpointSlice to list node1's pods as ready", 60_000, async () => {
      const slices = await kubectlJson<EndpointSliceList>([
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
      ]);
      const ready = slices.items
        .flatMap((s) => s.endpoints ?? [])
        .filter((e) => e.conditions?.ready)
        .flatMap((e) => e.addresses)
        .sort();
      return JSON.stringify(ready) === JSON.stringify(ips) ? true : undefined;
    });
    const pod = running[0];
    assert.ok(pod);
    const podserver = loadState()?.binaries?.PODSERVER as string;
    const reply = await ok([
      "exec",
      `default/${pod.metadata.name}`,
      "--",
      podserver,
      "dial",
      "http",
      `${pod.status.podIP}:8080`,
    ]);
    assert.match(
      reply,
      new RegExp(`^${pod.metadata.name} `),
      "the pod's own podserver answered in its netns",
    );
  });

  it("a killed kubelet simulator: status exits 1 naming it, and up restarts it, which adopts the running pods", async () => {
    const list = (await kubectlJson<PodList>(["get", "pods", "-l", "app=web"])).items.filter(
      (p) => p.spec.nodeName === "node1",
    );
    assert.ok(list.length > 0, "node1 runs pods");
    const before = new Map(
      list.map((p) => [p.metadata.uid, podRecord("node1", p.metadata.uid)?.containerId]),
    );
    const sim = loadState()?.daemons.find((d) => d.name === "node1/kubelet-sim");
    assert.ok(sim, "the state records node1's kubelet simulator");
    process.kill(sim.pid, "SIGKILL"); // a process this suite's sandbox started
    await eventually("the simulator gone", 10_000, async () => (isAlive(sim) ? undefined : true));
    const status = await zovn(["status"]);
    assert.equal(status.code, 1, "status exits 1 when a component is down");
    assert.match(status.stdout, /node1\/kubelet-sim\s+NOT RUNNING/);
    await ok(["up"]);
    assert.equal((await zovn(["status"])).code, 0, "all running again");
    // The restarted simulator took the running pods over: same sandboxes, still Running.
    await runningPodsOn("node1", "10.244.1", list.length);
    for (const p of list)
      assert.equal(
        podRecord("node1", p.metadata.uid)?.containerId,
        before.get(p.metadata.uid),
        p.metadata.name,
      );
  });

  it("a pod whose netns disappears gets a new sandbox with a new container id", async () => {
    const list = (await kubectlJson<PodList>(["get", "pods", "-l", "app=web"])).items.filter(
      (p) => p.spec.nodeName === "node1",
    );
    const victim = list[0];
    assert.ok(victim, "node1 runs a pod");
    const old = podRecord("node1", victim.metadata.uid);
    assert.ok(old?.netns);
    await ok(["exec", "node1", "--", "ip", "netns", "del", old.netns]);
    const fresh = await eventually("a new sandbox", 30_000, async () => {
      const rec = podRecord("node1", victim.metadata.uid);
      return rec && rec.containerId !== old.containerId ? rec : undefined;
    });
    assert.notEqual(fresh.netns, old.netns);
    await runningPodsOn("node1", "10.244.1", list.length);
  });

  it("a restarted node comes back Ready with its chassis, and its pods get new sandboxes", async () => {
    const list = (await kubectlJson<PodList>(["get", "pods", "-l", "app=web"])).items.filter(
      (p) => p.spec.nodeName === "node1",
    );
    const before = new Map(
      list.map((p) => [p.metadata.uid, podRecord("node1", p.metadata.uid)?.containerId]),
    );
    await ok(["restart-node", "node1"]);
    await eventually("node1 Ready and its pods running in new sandboxes", 60_000, async () => {
      const changed = list.every((p) => {
        const id = podRecord("node1", p.metadata.uid)?.containerId;
        return id !== undefined && id !== before.get(p.metadata.uid);
      });
      return changed ? true : undefined;
    });
    await runningPodsOn("node1", "10.244.1", list.length);
    assert.deepEqual(await readyNodes(), ["node1", "node2", "node3"]);
    await eventually("three chassis", 30_000, async () =>
      (await chassisNames()).length === 3 ? true : undefined,
    );
  });

  it("down leaves the netns list, mount table and process table as they were before up", async () => {
    const ours = sandboxProcesses();
    assert.ok(ours.length >= 10, `expected the sandbox's processes, found ${ours.length}`);
    await ok(["down"]);
    assertRestored(baseline, ours);
    assert.ok(existsSync(layout.logDir), "down without --purge keeps the logs");
  });

  it("a killed up, followed by down and up, still brings the sandbox up", async () => {
    const child: ChildProcess = spawn(ZOVN, ["sandbox", "--name", NAME, "up"], { stdio: "ignore" });
    // Kill it mid-way: once some daemons run but before the nodes are Ready.
    await eventually("up to start daemons", UP_TIMEOUT_MS, async () =>
      (loadState()?.daemons.length ?? 0) >= 6 ? true : undefined,
    );
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const ours = sandboxProcesses();
    await ok(["down"]);
    assertRestored(baseline, ours);

    await ok(["up"], { timeoutMs: UP_TIMEOUT_MS });
    assert.deepEqual(await readyNodes(), ["node1", "node2", "node3"]);
    assert.deepEqual(await chassisNames(), ["node1", "node2", "node3"]);
    const again = sandboxProcesses();
    await ok(["down"]);
    assertRestored(baseline, again);
  });
});
