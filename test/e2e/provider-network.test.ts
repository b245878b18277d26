// Provider networks in the sandbox: a Subnet on the underlay VLAN (vlanID, provider) whose pods talk to the
// external host on that VLAN directly, unSNATed, and to each other across nodes through the underlay (tagged
// frames on the underlay bridge), not through the tunnel. Real kube-apiserver, OVN, OVS, controller and agents.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { EXT_VLAN_IF, SANDBOX_PROVIDER, UNDERLAY_VLAN } from "../../src/sandbox/topology.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbvlan";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;
const NS = "vlan";
const EXT_PORT = 9090;
const POD_PORT = 8080;

async function kubectl(args: readonly string[], input?: string): Promise<string> {
  const kc = ctx().state.binaries?.KUBECTL;
  if (!kc) throw new Error("sandbox records no kubectl");
  const argv = [`--kubeconfig=${adminKubeconfig(layout)}`, ...args];
  return run(kc, argv, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
}

function pod(name: string, node: string): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS },
    spec: {
      nodeName: node,
      containers: [{ name: "server", image: "zstack-ovn/podserver", args: ["--tcp", String(POD_PORT)] }],
    },
  };
}

/** A TCP dial from a pod; the podserver answers "<server name> <client ip:port> <payload>". */
function dial(from: string, addr: string, payload: string): Promise<string> {
  return sandbox.inside(
    `${NS}/${from}`,
    [sandbox.binary("PODSERVER"), "dial", "tcp", addr, "--payload", payload, "--timeout", "3s"],
    { timeoutMs: 15_000 },
  );
}

describe("provider network (VLAN) Subnets in the sandbox", { timeout: 30 * 60_000 }, () => {
  const started: ChildProcess[] = [];
  after(async () => {
    for (const p of started) p.kill();
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  const ips = new Map<string, string>();

  it("a Subnet with vlanID and provider becomes Ready and its pods on two nodes get addresses on the VLAN", async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up", "--nodes", "2"]);
    await kubectl(["create", "namespace", NS]);
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "network.zstack.io/v1",
        kind: "Subnet",
        metadata: { name: "vlan100" },
        spec: {
          cidr: UNDERLAY_VLAN.cidr,
          gateway: UNDERLAY_VLAN.gateway,
          excludeIPs: ["172.30.100.1-172.30.100.9"],
          vlanID: UNDERLAY_VLAN.id,
          provider: SANDBOX_PROVIDER,
          namespaces: [NS],
        },
      }),
    );
    await eventually("Subnet vlan100 Ready", 60_000, async () => {
      const s = await kubectl([
        "get",
        "subnet",
        "vlan100",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
      ]);
      return s.trim() === "True" ? true : undefined;
    });
    await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: [pod("v1", "node1"), pod("v2", "node1"), pod("v3", "node2")],
      }),
    );
    for (const name of ["v1", "v2", "v3"]) {
      const ip = await eventually(`${name} Running`, 120_000, async () => {
        const out = await kubectl([
          "-n",
          NS,
          "get",
          "pod",
          name,
          "-o",
          "jsonpath={.status.phase} {.status.podIP}",
        ]);
        const [phase, addr] = out.trim().split(" ");
        return phase === "Running" && addr ? addr : undefined;
      });
      assert.match(ip, /^172\.30\.100\.(\d+)$/);
      assert.ok(Number(ip.split(".")[3]) >= 10, `${name} got ${ip}, outside the excluded range`);
      ips.set(name, ip);
    }
  });

  it("pods on the VLAN reach the external host on it directly, which sees the pod's own address, on both nodes", async () => {
    const { topo, state } = ctx();
    const ps = state.binaries?.PODSERVER as string;
    const server = spawn(
      "ip",
      ["netns", "exec", topo.external.netns, ps, "--tcp", String(EXT_PORT), "--name", "external"],
      {
        stdio: "ignore",
      },
    );
    started.push(server);
    for (const name of ["v1", "v3"]) {
      const reply = await eventually(`${name} to the external host`, 30_000, () =>
        dial(name, `${UNDERLAY_VLAN.gateway}:${EXT_PORT}`, `from-${name}`),
      );
      const [who, seen, payload] = reply.split(" ");
      assert.equal(who, "external");
      assert.equal(payload, `from-${name}`);
      assert.equal(seen?.split(":")[0], ips.get(name), "no SNAT: the external host sees the pod's address");
    }
  });

  it("pods on the VLAN reach each other on one node and across nodes, through the underlay VLAN and not the tunnel", async () => {
    const { topo } = ctx();
    const v1 = ips.get("v1") as string;
    const v3 = ips.get("v3") as string;
    // Watch node2's link on the underlay bridge for the pods' frames, VLAN-tagged.
    const cap = spawn(
      "ip",
      [
        "netns",
        "exec",
        topo.underlayNetns,
        "tcpdump",
        "-l",
        "-n",
        "-e",
        "-i",
        "node2",
        "-c",
        "1",
        `vlan ${UNDERLAY_VLAN.id} and tcp and host ${v1} and host ${v3}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    started.push(cap);
    let seen = "";
    cap.stdout?.on("data", (d: Buffer) => {
      seen += d.toString();
    });
    const exited = new Promise<void>((resolve) => cap.on("exit", () => resolve()));
    await sleep(1500); // tcpdump attaches before the dial
    const cross = await eventually("v1 to v3 (node2)", 30_000, () =>
      dial("v1", `${v3}:${POD_PORT}`, "cross"),
    );
    assert.equal(cross.split(" ")[0], "v3");
    assert.equal(cross.split(" ")[1]?.split(":")[0], v1);
    await Promise.race([exited, sleep(10_000)]);
    cap.kill();
    assert.match(
      seen,
      new RegExp(`vlan ${UNDERLAY_VLAN.id}.*${v1.replaceAll(".", "\\.")}`),
      "tagged frames on the underlay",
    );
    const same = await eventually("v1 to v2 (node1)", 30_000, () =>
      dial("v1", `${ips.get("v2")}:${POD_PORT}`, "same"),
    );
    assert.equal(same.split(" ")[0], "v2");
    assert.equal(same.split(" ")[1]?.split(":")[0], v1);
  });

  it("a host on the VLAN forging node1's management IP (or an overlay address) reaches no provider pod, though deny-all ingress admits the pod's own node", async () => {
    const { topo } = ctx();
    const ext = topo.external.netns;
    const v1 = ips.get("v1") as string; // on node1
    /** A TCP exchange from the external host with source `src`; "" when it does not get through. */
    const extDial = async (src: string, ip: string): Promise<string> => {
      try {
        return (
          await run("ip", ["netns", "exec", ext, "nc", "-N", "-w", "3", "-s", src, ip, String(POD_PORT)], {
            input: "probe\n",
            timeoutMs: 15_000,
          })
        ).trim();
      } catch {
        return "";
      }
    };
    const text = await kubectl([
      "get",
      "node",
      "node1",
      "-o",
      String.raw`jsonpath={.metadata.annotations.network\.zstack\.io/mgmt-port}`,
    ]);
    const mgmt = (JSON.parse(text) as { ip: string }).ip.split("/")[0] as string;
    assert.match(mgmt, /^100\.64\./);
    const overlay = "10.244.0.200";
    // The forged sources, as a host on the VLAN would claim them; its replies come back through the VLAN's
    // router, which is this host, so a TCP handshake completes if the first segment gets in.
    for (const a of [mgmt, overlay])
      await run("ip", ["netns", "exec", ext, "ip", "address", "replace", `${a}/32`, "dev", EXT_VLAN_IF]);
    try {
      const own = await eventually("the external host reaches v1 with its own address", 30_000, async () => {
        const r = await extDial(UNDERLAY_VLAN.gateway, v1);
        return r === "" ? undefined : r;
      });
      assert.equal(own.split(" ")[0], "v1");
      assert.equal(own.split(" ")[1]?.split(":")[0], UNDERLAY_VLAN.gateway);
      assert.equal(await extDial(overlay, v1), "", "an overlay pod's address from the VLAN is dropped");
      await kubectl(
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "networking.k8s.io/v1",
          kind: "NetworkPolicy",
          metadata: { name: "deny-all", namespace: NS },
          spec: { podSelector: {}, policyTypes: ["Ingress"] },
        }),
      );
      await eventually("deny-all ingress holds for the external host", 60_000, async () =>
        (await extDial(UNDERLAY_VLAN.gateway, v1)) === "" ? true : undefined,
      );
      // No stale cached datapath flow or conntrack entry may answer for the ACLs (docs/network-policy.md).
      for (const node of ["node1", "node2"]) {
        await sandbox.inside(node, ["ovs-appctl", "dpctl/flush-conntrack"]);
        await sandbox.inside(node, ["ovs-appctl", "dpctl/del-flows"]);
      }
      for (let i = 0; i < 3; i++)
        assert.equal(await extDial(mgmt, v1), "", "node1's management IP forged on the VLAN is dropped");
    } finally {
      for (const a of [mgmt, overlay])
        await run("ip", ["netns", "exec", ext, "ip", "address", "del", `${a}/32`, "dev", EXT_VLAN_IF]).catch(
          () => undefined,
        );
    }
  });
});
