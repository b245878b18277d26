// `zovn sandbox restart-node NODE`: a node reboot. Everything running on the node stops and its /run is
// emptied; then OVS, ovn-controller, the node simulator and the node agent (a fresh ServiceAccount token) start again, and the simulator gives each pod
// still bound to the node a new sandbox (new netns, new container id), as a kubelet does after a reboot.

import { adminKubeconfig } from "./kubectl.ts";
import { layoutFor } from "./layout.ts";
import { startNode, stopNode } from "./node.ts";
import { ensureNodeAgent } from "./node-agent.ts";
import { ensurePki } from "./pki.ts";
import type { Progress } from "./progress.ts";
import { acquireLock, loadState } from "./state.ts";
import { planTopology } from "./topology.ts";

export async function restartNode(
  name: string,
  baseDir: string | undefined,
  nodeName: string,
  progress: Progress,
): Promise<void> {
  const layout = layoutFor(name, baseDir);
  const lock = acquireLock(layout);
  try {
    const state = loadState(layout);
    if (!state?.binaries) throw new Error(`sandbox "${name}" is not up`);
    const topo = planTopology(state.spec);
    // A real node's containers live outside its namespaces (stopNode would leave them running) and the
    // kubelet's own restart path is not wired here yet.
    if (topo.spec.kubelet)
      throw new Error("restart-node is not supported in real-node mode (up --kubelet) yet");
    const node = topo.nodes.find((n) => n.name === nodeName);
    if (!node) throw new Error(`no node "${nodeName}" (have ${topo.nodes.map((n) => n.name).join(", ")})`);
    await progress.step(`${nodeName} stopped`, () => stopNode(layout, node, state));
    const pki = await ensurePki(layout.pkiDir, topo);
    const bins = state.binaries;
    await progress.step(`${nodeName} started`, () => startNode({ layout, topo, state, pki, bins }, node));
    if (topo.spec.nodeAgent)
      await progress.step(`${nodeName}: zstack-ovnkube-node started`, () =>
        ensureNodeAgent(
          { layout, topo, state, pki, kubectl: bins.KUBECTL, adminKubeconfig: adminKubeconfig(layout) },
          node,
        ),
      );
  } finally {
    lock.release();
  }
}
