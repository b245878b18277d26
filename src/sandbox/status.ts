// `zovn sandbox status`: the components and whether each still runs, the Kubernetes nodes and the OVN chassis.

import { kubectl } from "./kubectl.ts";
import { layoutFor } from "./layout.ts";
import { ovnCtl } from "./ovn-central.ts";
import { isAlive } from "./process-table.ts";
import { loadState } from "./state.ts";
import { prefixedNetns } from "./sweep.ts";
import { planTopology } from "./topology.ts";

export async function sandboxStatus(
  name: string,
  baseDir: string | undefined,
  out: NodeJS.WritableStream,
): Promise<boolean> {
  const layout = layoutFor(name, baseDir);
  const state = loadState(layout);
  const netns = prefixedNetns(`${name}-`);
  if (!state) {
    out.write(
      `sandbox "${name}" is not up${netns.length > 0 ? ` (leftover netns: ${netns.join(", ")}; run down)` : ""}\n`,
    );
    return false;
  }
  const topo = planTopology(state.spec);
  out.write(
    `sandbox "${name}": ${state.spec.nodes} nodes, ${state.spec.zstack ? `External mode on a simulated ZStack (NB/SB ${state.spec.raft ? "3-member Raft on" : "on"} ${topo.centralIps.join(", ")})` : `OVN central ${state.spec.raft ? "Raft" : "standalone"}`}\n`,
  );
  out.write(`root ${layout.root}\nlogs ${layout.logDir}\nnetns ${netns.join(" ")}\n\ncomponents:\n`);
  let healthy = true;
  for (const d of state.daemons) {
    const alive = isAlive(d);
    healthy &&= alive;
    out.write(`  ${d.name.padEnd(30)} ${alive ? `running pid ${d.pid}` : "NOT RUNNING"}  ${d.log}\n`);
  }
  out.write("\nnodes (kubectl get nodes -o wide):\n");
  try {
    out.write(await kubectl(layout, state, ["get", "nodes", "-o", "wide"]));
  } catch (err) {
    healthy = false;
    out.write(`  ${(err as Error).message}\n`);
  }
  out.write("\nchassis (ovn-sbctl show):\n");
  try {
    out.write(await ovnCtl(layout, topo, "sb", ["show"]));
  } catch (err) {
    healthy = false;
    out.write(`  ${(err as Error).message}\n`);
  }
  return healthy;
}
