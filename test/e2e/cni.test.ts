// The CNI contract as a container runtime exercises it, against the real node agent in the sandbox: calls go
// through the libcni driver fixture (and cnitool) inside a node's namespaces, into the SEA shim and the agent.
// A sandbox recreated under a new container id survives a late DEL of the old one, GC removes exactly what is
// not in its valid list, every supported spec version passes ADD/CHECK/DEL, and a pod whose ADD loses its
// agent comes up exactly once after the runtime retries.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type CniAttachment, driverArgs } from "../../src/sandbox/cni-driver.ts";
import { run } from "../../src/sandbox/command.ts";
import { execArgv, findPod } from "../../src/sandbox/exec.ts";
import { kubectl } from "../../src/sandbox/kubectl.ts";
import { isAlive } from "../../src/sandbox/process-table.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbcni";
const NODE = "node1";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx, binary, inside } = sandbox;

function k(args: string[]): Promise<string> {
  return kubectl(layout, ctx().state, args);
}

/** A pod pinned to NODE; the node simulator gives it a sandbox, the controller its annotation. */
async function runningPod(name: string, node = NODE): Promise<{ uid: string; ip: string }> {
  const overrides = JSON.stringify({ spec: { nodeName: node } });
  await k([
    "run",
    name,
    "--image=x",
    "--restart=Never",
    `--overrides=${overrides}`,
    "--command",
    "--",
    "sleep",
    "3600",
  ]);
  return eventually(`${name} Running`, 60_000, async () => {
    const out = await k([
      "get",
      "pod",
      name,
      "-o",
      "jsonpath={.status.phase} {.metadata.uid} {.status.podIP}",
    ]);
    const [phase, uid, ip] = out.split(" ");
    return phase === "Running" && uid && ip ? { uid, ip } : undefined;
  });
}

interface OvsPort {
  name: string;
  containerId: string;
  ifaceId: string;
  ovnInstalled: boolean;
}

/** The agent's pod ports on a node, from the local Open_vSwitch database. */
async function podPorts(node = NODE): Promise<OvsPort[]> {
  const out = await inside(node, [
    "ovs-vsctl",
    "--format=json",
    "--columns=name,external_ids",
    "find",
    "Interface",
    "external_ids:zstack.io/owner=zstack-ovnkube-node",
  ]);
  const table = JSON.parse(out) as { data: [string, ["map", [string, string][]]][] };
  return table.data
    .map(([name, [, pairs]]) => {
      const ids = new Map(pairs);
      return {
        name,
        containerId: ids.get("zstack.io/container-id") ?? "",
        ifaceId: ids.get("iface-id") ?? "",
        ovnInstalled: ids.get("ovn-installed") === "true",
      };
    })
    .filter((p) => p.containerId !== "");
}

async function hostVeths(node = NODE): Promise<string[]> {
  const out = await inside(node, ["ip", "-o", "link", "show", "type", "veth"]);
  return out
    .split("\n")
    .map((l) => /^\d+: ([^@:]+)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined);
}

/** The simulator's container id for a pod: the one whose OVS port carries the pod's iface-id. */
async function simulatorAttachment(pod: string): Promise<OvsPort> {
  return eventually(`OVS port of ${pod}`, 30_000, async () =>
    (await podPorts()).find((p) => p.ifaceId === `default_${pod}`),
  );
}

const netnsMade: string[] = [];

async function newNetns(): Promise<string> {
  const name = `zt-${randomBytes(4).toString("hex")}`;
  netnsMade.push(name);
  await inside(NODE, ["ip", "netns", "add", name]);
  await inside(NODE, ["ip", "-n", name, "link", "set", "lo", "up"]);
  return `/run/netns/${name}`;
}

function vethOf(containerId: string): string {
  return `${containerId.slice(0, 12)}_zv`;
}

/** The container ids of the simulator's live sandboxes on NODE, from its sandbox records. */
function simulatorContainerIds(): string[] {
  const dir = layout.node(NODE).podRecords;
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => (JSON.parse(readFileSync(join(dir, f), "utf8")) as { containerId: string }).containerId);
}

function containerId(): string {
  return randomBytes(32).toString("hex");
}

async function driver(op: "add" | "del" | "check", a: CniAttachment): Promise<string> {
  return inside(NODE, [binary("CNI_DRIVER"), ...driverArgs(op, a)]);
}

/** A TCP payload from a process in `from` (a pod, or a netns path on NODE) to a listener in pod `server`. */
async function dialFrom(from: string, server: string, serverIp: string): Promise<string> {
  const ps = binary("PODSERVER");
  const { topo } = ctx();
  const { spawn } = await import("node:child_process");
  const argv = execArgv(layout, topo, `default/${server}`, [ps, "--tcp", "9300", "--name", server]);
  const listener = spawn(argv[0] as string, argv.slice(1), { stdio: "ignore" });
  try {
    return await eventually(`dial ${server}`, 15_000, () =>
      from.startsWith("/")
        ? inside(
            NODE,
            ["nsenter", `--net=${from}`, "--", ps, "dial", "tcp", `${serverIp}:9300`, "--payload", "hello"],
            {
              timeoutMs: 5_000,
            },
          )
        : inside(from, [ps, "dial", "tcp", `${serverIp}:9300`, "--payload", "hello"], { timeoutMs: 5_000 }),
    );
  } finally {
    listener.kill();
  }
}

describe("the CNI contract through libcni against the real node agent", { timeout: 20 * 60_000 }, () => {
  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up"]);
  });

  after(async () => {
    for (const n of netnsMade) await inside(NODE, ["ip", "netns", "del", n]).catch(() => undefined);
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  it("a sandbox recreated under a new container id keeps its OVS port and connectivity after a late DEL of the old id", async () => {
    const pod = await runningPod("recreate");
    const peer = await runningPod("peer", "node2");
    const old = await simulatorAttachment("recreate");
    const netnsPath = await newNetns();
    const fresh: CniAttachment = {
      containerId: containerId(),
      netnsPath,
      ifname: "eth0",
      podNamespace: "default",
      podName: "recreate",
      podUid: pod.uid,
    };
    const result = JSON.parse(await driver("add", fresh)) as { ips: { address: string }[] };
    assert.equal(result.ips[0]?.address.split("/")[0], pod.ip, "the new sandbox gets the pod's address");

    // The late DEL: the runtime tears down the old sandbox after the new one is up.
    const oldNetns = findPod(layout, ctx().topo, "default/recreate")?.record.netns;
    assert.ok(oldNetns, "the simulator's sandbox record names its netns");
    await driver("del", { ...fresh, containerId: old.containerId, netnsPath: `/run/netns/${oldNetns}` });

    const ports = (await podPorts()).filter((p) => p.ifaceId === "default_recreate");
    assert.deepEqual(
      ports.map((p) => p.containerId),
      [fresh.containerId],
      "only the new sandbox's port is bound to the pod",
    );
    assert.ok(ports[0]?.ovnInstalled, "ovn-installed stays on the new port");
    assert.ok(
      (await hostVeths()).includes(ports[0]?.name as string),
      "the new sandbox's veth is still there",
    );
    const reply = await dialFrom(netnsPath, "peer", peer.ip);
    assert.match(reply, new RegExp(`^peer ${pod.ip.replaceAll(".", "\\.")}:\\d+ hello$`));
    await driver("check", fresh);
    await driver("del", fresh);
  });

  it("GC with a valid list removes exactly the attachments not in it, their OVS ports and veths", async () => {
    const made: CniAttachment[] = [];
    for (const name of ["gc-a", "gc-b", "gc-c"]) {
      const pod = await runningPod(name);
      made.push({
        containerId: containerId(),
        netnsPath: await newNetns(),
        ifname: "eth0",
        podNamespace: "default",
        podName: name,
        podUid: pod.uid,
      });
    }
    for (const a of made) await driver("add", a);
    const portsBefore = await podPorts();
    const vethsBefore = await hostVeths();
    const doomed = made.slice(0, 2).map((a) => a.containerId);
    for (const id of doomed) {
      assert.ok(
        portsBefore.some((p) => p.containerId === id),
        "a doomed attachment has its port before GC",
      );
      assert.ok(vethsBefore.includes(vethOf(id)), "a doomed attachment has its veth before GC");
    }
    // What the runtime still knows: the simulator's own sandboxes and the third attachment.
    const valid = [...simulatorContainerIds(), (made[2] as CniAttachment).containerId];
    await inside(NODE, [binary("CNI_DRIVER"), "gc", "--valid", valid.map((id) => `${id}:eth0`).join(",")]);

    const portsAfter = await podPorts();
    assert.deepEqual(
      portsAfter.map((p) => p.containerId).sort(),
      portsBefore
        .map((p) => p.containerId)
        .filter((id) => !doomed.includes(id))
        .sort(),
      "exactly the ports of the attachments outside the valid list are gone",
    );
    assert.deepEqual(
      (await hostVeths()).sort(),
      vethsBefore.filter((v) => !doomed.map(vethOf).includes(v)).sort(),
      "exactly the veths of the attachments outside the valid list are gone",
    );
    await driver("del", made[2] as CniAttachment);
  });

  for (const version of ["0.4.0", "1.0.0", "1.1.0"]) {
    it(`cnitool runs ADD, CHECK and DEL with spec version ${version}`, async () => {
      const podName = `tool-${version.replaceAll(".", "")}`;
      const pod = await runningPod(podName);
      const confDir = mkdtempSync(join(tmpdir(), "zsbcni-netconf-"));
      try {
        const conflist = JSON.parse(
          readFileSync(join(layout.node(NODE).cniConf, "10-zstack-ovn.conflist"), "utf8"),
        ) as Record<string, unknown>;
        conflist.cniVersion = version;
        // libcni picks the highest of cniVersions over cniVersion; pin the one under test.
        conflist.cniVersions = [version];
        writeFileSync(join(confDir, "10-zstack-ovn.conflist"), JSON.stringify(conflist));
        const netnsPath = await newNetns();
        const env = {
          ...process.env,
          NETCONFPATH: confDir,
          CNI_PATH: "/opt/cni/bin",
          CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${podName};K8S_POD_UID=${pod.uid}`,
        };
        const tool = (op: string) => inside(NODE, [binary("CNITOOL"), op, "zstack-ovn", netnsPath], { env });
        const added = JSON.parse(await tool("add")) as { cniVersion: string; ips: { address: string }[] };
        assert.equal(added.cniVersion, version);
        assert.equal(added.ips[0]?.address.split("/")[0], pod.ip);
        const mine = (await podPorts()).find(
          (p) => p.ifaceId === `default_${podName}` && !simulatorContainerIds().includes(p.containerId),
        );
        assert.ok(mine?.ovnInstalled, "cnitool's attachment is bound and installed");
        await tool("check");
        await tool("del");
        await tool("del");
        assert.ok(
          !(await podPorts()).some((p) => p.containerId === mine.containerId),
          "DEL removed cnitool's port",
        );
        assert.ok(!(await hostVeths()).includes(mine.name), "DEL removed cnitool's veth");
      } finally {
        rmSync(confDir, { recursive: true, force: true });
      }
    });
  }

  it("a node agent killed during pod creation: the runtime's retry brings the pod up exactly once", async () => {
    const agent = ctx().state.daemons.find((d) => d.name === `${NODE}/zstack-ovnkube-node`);
    assert.ok(agent && isAlive(agent), "the agent runs");
    const vethsBefore = await hostVeths();
    const overrides = JSON.stringify({ spec: { nodeName: NODE } });
    await k([
      "run",
      "crash",
      "--image=x",
      "--restart=Never",
      `--overrides=${overrides}`,
      "--command",
      "--",
      "sleep",
      "3600",
    ]);
    // The simulator picks the pod up within milliseconds and its ADD waits for the controller's annotation:
    // the agent dies under that ADD (or just before it), never after it.
    process.kill(agent.pid, "SIGKILL");
    await eventually("the agent is gone", 10_000, async () => (isAlive(agent) ? undefined : true));
    await eventually("a failed sandbox creation recorded", 30_000, async () => {
      const out = await k([
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=crash,reason=FailedCreatePodSandBox",
        "-o",
        "name",
      ]);
      return out.trim() ? true : undefined;
    });
    const phase = await k(["get", "pod", "crash", "-o", "jsonpath={.status.phase}"]);
    // `up` on a running sandbox restarts only what died.
    await zovn(["up"]);
    const restarted = ctx().state.daemons.find((d) => d.name === `${NODE}/zstack-ovnkube-node`);
    assert.ok(restarted && restarted.pid !== agent.pid && isAlive(restarted), "`up` restarted the agent");
    const running = await eventually("crash Running", 90_000, async () => {
      const out = await k(["get", "pod", "crash", "-o", "jsonpath={.status.phase} {.status.podIP}"]);
      return out.startsWith("Running ") ? out.split(" ")[1] : undefined;
    });
    const ports = (await podPorts()).filter((p) => p.ifaceId === "default_crash");
    assert.equal(ports.length, 1, `one OVS port for the pod (phase while the agent was down: ${phase})`);
    assert.ok(ports[0]?.ovnInstalled);
    assert.deepEqual(
      (await hostVeths()).filter((v) => !vethsBefore.includes(v)),
      [ports[0]?.name],
      "the pod has exactly one veth",
    );
    const peer = await k(["get", "pod", "peer", "-o", "jsonpath={.status.podIP}"]);
    const reply = await dialFrom("default/crash", "peer", peer);
    assert.match(reply, new RegExp(`^peer ${running.replaceAll(".", "\\.")}:\\d+ hello$`));
  });
  it("the shim invoked directly gets the right CNI error code and message, and the agent survives", async () => {
    const { topo } = ctx();
    const shim = "/opt/cni/bin/zstack-ovn-cni";
    const conf = (v: string) => JSON.stringify({ cniVersion: v, name: "zstack-ovn", type: "zstack-ovn-cni" });
    const call = async (stdin: string, env: Record<string, string>) => {
      const argv = execArgv(layout, topo, NODE, [
        "env",
        "-i",
        ...Object.entries(env).map(([a, b]) => `${a}=${b}`),
        shim,
      ]);
      try {
        const out = await run(argv[0] as string, argv.slice(1), { input: stdin, timeoutMs: 30_000 });
        return { exit: 0, json: JSON.parse(out || "{}") as { code?: number; msg?: string } };
      } catch (e) {
        const err = e as { code: number; stdout: string };
        return { exit: err.code, json: JSON.parse(err.stdout) as { code?: number; msg?: string } };
      }
    };
    const env = {
      CNI_COMMAND: "ADD",
      CNI_CONTAINERID: "e2eshim0000000000000000000000000000000000000000000000000000000000",
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
      CNI_ARGS: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=nope",
    };
    const agent = () => ctx().state.daemons.find((d) => d.name === `${NODE}/zstack-ovnkube-node`);
    const before = agent();
    assert.ok(before && isAlive(before));

    const garbage = await call("{not json", { ...env, CNI_NETNS: "/run/netns/none" });
    assert.equal(garbage.json.code, 6, JSON.stringify(garbage));
    const version = await call(conf("9.9.9"), { ...env, CNI_NETNS: "/run/netns/none" });
    assert.equal(version.json.code, 1, JSON.stringify(version));
    assert.match(version.json.msg ?? "", /9\.9\.9/);
    const noNetns = await call(conf("1.1.0"), { ...env, CNI_NETNS: "/run/netns/zcni-does-not-exist" });
    assert.equal(noNetns.json.code, 102, JSON.stringify(noNetns));
    assert.match(noNetns.json.msg ?? "", /zcni-does-not-exist/);
    // The agent is the same process and still serves: STATUS succeeds.
    assert.equal(agent()?.pid, before.pid);
    const status = await call(conf("1.1.0"), { CNI_COMMAND: "STATUS", CNI_PATH: "/opt/cni/bin" });
    assert.equal(status.exit, 0, JSON.stringify(status));

    // With the agent stopped the shim answers "try again later" and names the socket.
    process.kill(before.pid, "SIGKILL");
    await eventually("the agent is gone", 10_000, async () => (isAlive(before) ? undefined : true));
    const down = await call(conf("1.1.0"), { ...env, CNI_NETNS: "/run/netns/none" });
    assert.equal(down.json.code, 11, JSON.stringify(down));
    assert.match(down.json.msg ?? "", /cni-server\.sock/);
    await zovn(["up"]);
    await eventually("the restarted agent serves STATUS", 60_000, async () =>
      (await call(conf("1.1.0"), { CNI_COMMAND: "STATUS", CNI_PATH: "/opt/cni/bin" })).exit === 0
        ? true
        : undefined,
    );
  });
});
