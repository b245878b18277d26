// Pods' hostPorts end to end, with nothing but our agent on the nodes (no portmap plugin, no kube-proxy): the
// sandbox (`zsbhp`) with zstack-ovnkube-node on every node keeping its hostPort nft table from the pods bound to
// it. Every check is a real TCP or UDP connection made with `podserver dial`, whose reply names the pod that
// answered and the client address it saw.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { run } from "../../src/sandbox/command.ts";
import { adminKubeconfig } from "../../src/sandbox/kubectl.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";
import { type DialAttempt, dialMany } from "../rig/service-dial.ts";

const NAME = "zsbhp";
const sandbox = sandboxHandle(NAME);
const { layout, zovn, ctx } = sandbox;

/** How long a change may take to reach the datapath before a check gives up (a condition wait, not a bound). */
const PROPAGATION_MS = 60_000;
const LABEL = "hostport-e2e";
const HOST_PORT = 54321;
const WILDCARD_PORT = 18080;

interface PortSpec {
  containerPort: number;
  protocol: "TCP" | "UDP";
  hostPort: number;
  hostIP?: string;
}

function pod(name: string, node: string, ports: readonly PortSpec[]): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { [LABEL]: "1" } },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "server",
          image: "zstack-ovn/podserver",
          args: ports.flatMap((p) => [p.protocol === "UDP" ? "--udp" : "--tcp", String(p.containerPort)]),
          ports,
        },
      ],
    },
  };
}

function kubectl(args: readonly string[], input?: string): Promise<string> {
  const kc = ctx().state.binaries?.KUBECTL;
  if (!kc) throw new Error("sandbox records no kubectl");
  const argv = [`--kubeconfig=${adminKubeconfig(layout)}`, ...args];
  return run(kc, argv, input === undefined ? { timeoutMs: 120_000 } : { input, timeoutMs: 120_000 });
}

const apply = (objects: readonly object[]) =>
  kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }));

const nodeIP = (node: string): string => {
  const host = ctx().topo.nodes.find((n) => n.name === node);
  if (!host) throw new Error(`no node ${node}`);
  return host.ip;
};

const shown = (a: readonly DialAttempt[]) =>
  a.map((x) => (x.ok ? `${x.server} (${x.client})` : x.error)).join(", ");

/** Waits until one dial from `from` to `addr` is answered by `server`; returns that attempt. */
async function reaches(
  from: string,
  proto: "tcp" | "udp",
  addr: string,
  server: string,
): Promise<DialAttempt> {
  let last: DialAttempt[] = [];
  try {
    return await eventually(`${from} reaches ${server} at ${proto} ${addr}`, PROPAGATION_MS, async () => {
      last = await dialMany(sandbox, from, proto, addr, { timeout: "2s" });
      return last[0]?.ok && last[0].server === server ? last[0] : undefined;
    });
  } catch (e) {
    throw new Error(`${(e as Error).message}; last saw: ${shown(last)}`);
  }
}

describe("hostPorts in the sandbox (no portmap plugin)", { timeout: 30 * 60_000 }, () => {
  before(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
    await zovn(["up"]);
    await apply([
      pod("hp-wild", "node1", [{ containerPort: 8080, protocol: "TCP", hostPort: WILDCARD_PORT }]),
      // The upstream conformance case: one hostPort, different hostIP and protocol, three pods on one node.
      pod("hp-lo", "node2", [
        { containerPort: 8080, protocol: "TCP", hostPort: HOST_PORT, hostIP: "127.0.0.1" },
      ]),
      pod("hp-node", "node2", [
        { containerPort: 8080, protocol: "TCP", hostPort: HOST_PORT, hostIP: nodeIP("node2") },
      ]),
      pod("hp-udp", "node2", [
        { containerPort: 8081, protocol: "UDP", hostPort: HOST_PORT, hostIP: nodeIP("node2") },
      ]),
    ]);
    await kubectl(["wait", "--for=condition=Ready", "pod", "-l", `${LABEL}=1`, "--timeout=180s"]);
  });
  after(async () => {
    await zovn(["down", "--purge"]).catch(() => undefined);
  });

  it("a pod's wildcard hostPort is reached through its node's address from the external host and from another node", async () => {
    const addr = `${nodeIP("node1")}:${WILDCARD_PORT}`;
    const fromExt = await reaches("ext", "tcp", addr, "hp-wild");
    // As with portmap, a client from outside keeps its address.
    assert.ok(fromExt.ok && fromExt.client.startsWith(`${ctx().topo.external.ip}:`), shown([fromExt]));
    await reaches("node3", "tcp", addr, "hp-wild");
    await reaches("node1", "tcp", addr, "hp-wild");
  });

  it("same hostPort, different hostIP and protocol (the conformance case): each pod is reached on its own", async () => {
    const n2 = nodeIP("node2");
    await reaches("node2", "tcp", `127.0.0.1:${HOST_PORT}`, "hp-lo");
    await reaches("node2", "tcp", `${n2}:${HOST_PORT}`, "hp-node");
    await reaches("node2", "udp", `${n2}:${HOST_PORT}`, "hp-udp");
    await reaches("ext", "tcp", `${n2}:${HOST_PORT}`, "hp-node");
    await reaches("ext", "udp", `${n2}:${HOST_PORT}`, "hp-udp");
  });

  it("a second pod claiming a held hostPort on the node gets a Warning Event naming the field and the holder", async () => {
    await apply([
      pod("hp-dup", "node1", [{ containerPort: 8080, protocol: "TCP", hostPort: WILDCARD_PORT }]),
    ]);
    const message = await eventually("a HostPortConflict Event on hp-dup", PROPAGATION_MS, async () => {
      const out = await kubectl([
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=hp-dup,reason=HostPortConflict",
        "-o",
        "jsonpath={.items[0].message}",
      ]);
      return out.trim() || undefined;
    });
    assert.match(message, /spec\.containers\[0\]\.ports\[0\]\.hostPort/);
    assert.match(message, /default\/hp-wild/);
    // The holder keeps the port.
    await reaches("ext", "tcp", `${nodeIP("node1")}:${WILDCARD_PORT}`, "hp-wild");
    await kubectl(["delete", "pod", "hp-dup", "--wait=true", "--timeout=120s"]);
  });

  it("once the pod is deleted its rule is gone", async () => {
    await kubectl(["delete", "pod", "hp-wild", "--wait=true", "--timeout=120s"]);
    await eventually("node1's hostPort table no longer maps the port", PROPAGATION_MS, async () => {
      const table = await sandbox.inside("node1", ["nft", "list", "table", "inet", "zstack_ovn_hostport"]);
      return table.includes(`. ${WILDCARD_PORT} :`) ? undefined : true;
    });
    const after = await dialMany(sandbox, "ext", "tcp", `${nodeIP("node1")}:${WILDCARD_PORT}`, {
      timeout: "2s",
    });
    assert.equal(after[0]?.ok, false, shown(after));
  });
});
