// External mode, node side, against the ZStack simulator's SB (ovsdb-server, northd) with its two hypervisors
// (real OVS + ovn-controller) and a node of ours (real OVS + ovn-controller): the agent's SB check holds the
// chassis name back while a chassis of that name is not ours, then hands it to ovn-controller, which registers
// next to ZStack's hosts; an encapsulation other than the hosts' is reported and clears when fixed, also when
// ZStack's side changes. Nothing of the simulator's is modified: its NB rows and its hosts' chassis compare equal.

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type ChassisCheck, ChassisWatch } from "../../../src/node/external-chassis.ts";
import type { EncapType } from "../../../src/node/mtu.ts";
import { NodeSetup, type NodeSetupConfig } from "../../../src/node/node-setup.ts";
import { rootRow } from "../../../src/node/vswitch-db.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type SbTables, sbModel } from "../../../src/ovsdb/models/sb.generated.ts";
import { type VswitchTables, vswitchModel } from "../../../src/ovsdb/models/vswitch.generated.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import { startOvsNode } from "../../rig/ovs-node.ts";
import { runTool, spawnDaemon } from "../../rig/process.ts";
import { teardownFor } from "../../rig/teardown.ts";
import { useZStackHosts } from "../../rig/zstack-hosts.ts";
import { diffDumps, HOSTS, useZStackSim } from "../../rig/zstack-sim.ts";

const NODE = "node1";
const CHASSIS = `k8s-${NODE}`;
const ENCAP_IP = "192.168.200.21";

async function until<T>(
  what: string,
  get: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await get();
    if (v !== undefined && v !== false) return v;
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** A chassis as SB shows it, by content (Encap UUIDs change whenever ovn-controller rewrites them). */
function chassisContent(sb: OvsdbClient<SbTables>, name: string): string | undefined {
  const c = sb.cache.table("Chassis").lookupOne("name", name);
  if (!c) return undefined;
  const encaps = c.encaps
    .map((u) => sb.cache.table("Encap").get(u))
    .map((e) => (e ? `${e.type}/${e.ip}/${JSON.stringify(e.options)}/${e.chassis_name}` : "?"))
    .sort();
  return JSON.stringify({
    name: c.name,
    hostname: c.hostname,
    encaps,
    external_ids: c.external_ids,
    other_config: c.other_config,
  });
}

function encapTypesOf(sb: OvsdbClient<SbTables>, name: string): string[] {
  const c = sb.cache.table("Chassis").lookupOne("name", name);
  return (c?.encaps ?? []).map((u) => sb.cache.table("Encap").get(u)?.type ?? "?").sort();
}

describe("External mode: the node's chassis on ZStack's SB", () => {
  // With raft: ZStack's SB is a 3-member cluster; ovn-controller and the agent get every member's remote.
  for (const raft of [false, true])
    test(`a foreign chassis of our name is refused; ours registers next to ZStack's hosts; an encapsulation mismatch is reported and clears; no ZStack row changes${raft ? " (3-member SB cluster)" : ""}`, async (t) => {
      const started = Date.now();
      const td = teardownFor(t);
      const sim = await useZStackSim(td, { raft });
      assert.equal(sim.sbRemotes.length, raft ? 3 : 1);
      const zs = await useZStackHosts(td, sim);
      const sb = new OvsdbClient<SbTables>({
        remotes: sim.sbRemotes,
        model: sbModel,
        leaderOnly: false,
        monitor: { Chassis: true, Encap: true },
      });
      td.after(() => sb.close());
      await sb.connect();
      const hostNames = zs.hosts.map((h) => h.systemId);
      await until("both ZStack hosts' chassis with geneve", () =>
        hostNames.every((n) => encapTypesOf(sb, n).join() === "geneve"),
      );
      const hostsBefore = hostNames.map((n) => chassisContent(sb, n));
      const nbBefore = await sim.snapshot();
      console.log(`# simulator and hosts up in ${Date.now() - started} ms`);

      // ZStack holds a chassis of our name (a host registered under it): ZStack's row, written as its ovn-controller
      // would, with a management IP for hostname.
      const txn = sb.transaction();
      const encap = txn.insert("Encap", { type: "geneve", ip: "192.168.200.13", chassis_name: CHASSIS });
      txn.insert("Chassis", { name: CHASSIS, hostname: "192.168.200.13", encaps: [encap] });
      await txn.commit();
      await until("the foreign chassis in the cache", () => chassisContent(sb, CHASSIS));
      const foreignBefore = chassisContent(sb, CHASSIS);

      // Our node: its own OVS and ovn-controller, which waits for the agent's settings.
      const node = await startOvsNode();
      td.after(() => node.stop());
      const ovnDir = join(node.dir, "ovn-controller");
      await runTool("mkdir", ["-p", ovnDir]);
      const controller = spawnDaemon(
        "nsenter",
        [
          `--net=${node.netns.path}`,
          "--",
          "ovn-controller",
          node.ovs.unix,
          "--no-chdir",
          `--pidfile=${join(ovnDir, "ovn-controller.pid")}`,
          `--log-file=${join(ovnDir, "ovn-controller.log")}`,
        ],
        {
          env: {
            ...process.env,
            OVS_RUNDIR: node.ovs.dir,
            OVS_LOGDIR: node.ovs.dir,
            OVN_RUNDIR: ovnDir,
            OVN_LOGDIR: ovnDir,
          },
          outputFile: join(ovnDir, "ovn-controller.out"),
        },
      );
      td.after(() => controller.terminate());
      const vswitch = new OvsdbClient<VswitchTables>({ remotes: node.ovsRemote, model: vswitchModel });
      td.after(() => vswitch.close());
      await vswitch.connect();
      const chassis = (encapType: EncapType): NonNullable<NodeSetupConfig["chassis"]> => ({
        ovnRemote: sim.sbRemotes.join(","),
        encapType,
        encapIp: ENCAP_IP,
        systemId: CHASSIS,
        bridgeDatapathType: "netdev",
        hostname: NODE,
      });
      const setup = new NodeSetup({
        client: vswitch,
        hostNetns: node.netns.path,
        bridge: { name: "br-int", datapathType: "netdev" },
      });
      td.after(() => setup.stop());
      setup.start();
      // The agent's own SB connection, as zstack-ovnkube-node makes it in External mode.
      const agentSb = new OvsdbClient<SbTables>({
        remotes: sim.sbRemotes,
        model: sbModel,
        leaderOnly: false,
        monitor: { Chassis: { columns: ["name", "hostname", "encaps"] }, Encap: true },
      });
      td.after(() => agentSb.close());
      const checks: ChassisCheck[] = [];
      let cleared = 0;
      const watchFor = (encapType: EncapType) =>
        new ChassisWatch({
          client: agentSb,
          vswitch,
          self: { name: CHASSIS, hostname: NODE, encapType, encapSetting: "tunnel.type" },
          onChange: (c) => checks.push(c),
          onCleared: () => {
            cleared++;
            setup.update({ chassis: chassis(encapType) });
          },
        });
      // 0. This OVS already serves one of ZStack's chassis (as a hypervisor's own OVS would): refused, not renamed.
      await node.vsctl("set", "Open_vSwitch", ".", `external_ids:system-id=${hostNames[0]}`);
      await until("the system-id in the cache", () => rootRow(vswitch)?.external_ids["system-id"]);
      let watch = watchFor("vxlan");
      td.after(() => watch.stop());
      watch.start();
      await agentSb.connect();

      const served = await until("the served-chassis conflict", () => watch.check?.conflict);
      assert.match(served, /already serves chassis zstack-host-1 \(hostname 192\.168\.200\.11\)/);
      assert.equal(cleared, 0);
      await node.vsctl("remove", "Open_vSwitch", ".", "external_ids", "system-id");

      // 1. Refused: the conflict names both, and ovn-controller never gets the name.
      const conflict = await until("the name conflict", () =>
        watch.check?.conflict?.includes("chassis named") ? watch.check.conflict : undefined,
      );
      assert.match(
        conflict,
        /chassis named k8s-node1 .*hostname is "192\.168\.200\.13".*this node \(node1\)/,
      );
      assert.equal(cleared, 0);
      await setup.reconcile();
      const ids = async () =>
        JSON.parse(
          (await node.vsctl("--format=json", "--columns=external_ids", "list", "Open_vSwitch")).trim(),
        ).data[0][0][1] as [string, string][];
      assert.equal(
        (await ids()).find(([k]) => k === "system-id" || k === "ovn-remote"),
        undefined,
        "no chassis settings while the name is taken",
      );
      await sleep(1000);
      assert.equal(chassisContent(sb, CHASSIS), foreignBefore, "the foreign chassis is untouched");

      // 2. ZStack removes its chassis: the name is free, ours registers (hostname = the node), next to the hosts.
      const del = sb.transaction();
      del.delete("Chassis", byUuid(sb.cache.table("Chassis").lookupOne("name", CHASSIS)?._uuid as string));
      await del.commit();
      await until("our chassis in SB with our hostname", () =>
        sb.cache.table("Chassis").lookupOne("name", CHASSIS)?.hostname === NODE ? true : undefined,
      );
      assert.equal(cleared, 1);
      assert.deepEqual(
        [...sb.cache.table("Chassis").values()].map((c) => c.name).sort(),
        [CHASSIS, ...hostNames].sort(),
      );
      await until("our chassis with vxlan", () => encapTypesOf(sb, CHASSIS).join() === "vxlan");

      // 3. ZStack's hosts use geneve, we vxlan: reported, naming both types, the hosts and the setting.
      const mismatch = await until("the encapsulation mismatch", () => watch.check?.encapMismatch);
      assert.match(mismatch, /2 of 2 other chassis .*no vxlan encapsulation, .*\(tunnel\.type=vxlan\)/);
      for (const [i, n] of hostNames.entries())
        assert.match(
          mismatch,
          new RegExp(`${n} \\(hostname ${HOSTS[i]?.replaceAll(".", "\\.")}\\) uses geneve`),
        );
      assert.match(mismatch, /set tunnel\.type=geneve$/);
      assert.equal(watch.check?.conflict, undefined);

      // 4. Fixed (the agent restarted with tunnel.type=geneve): our chassis speaks geneve, the problem clears.
      watch.stop();
      watch = watchFor("geneve");
      watch.start();
      await until("our chassis with geneve", () => encapTypesOf(sb, CHASSIS).join() === "geneve");
      await until("the mismatch cleared", () =>
        watch.check && !watch.check.encapMismatch ? true : undefined,
      );

      // 5. Level-triggered: ZStack moves a host to vxlan, the mismatch appears naming it; back to geneve, it clears.
      const host2 = zs.hosts[1];
      assert.ok(host2);
      await host2.node.vsctl("set", "Open_vSwitch", ".", "external_ids:ovn-encap-type=vxlan");
      const again = await until("the mismatch after ZStack's change", () => watch.check?.encapMismatch);
      assert.match(again, /^1 of 2 other chassis .*no geneve .*zstack-host-2 .*uses vxlan/);
      await host2.node.vsctl("set", "Open_vSwitch", ".", "external_ids:ovn-encap-type=geneve");
      await until("the mismatch cleared again", () =>
        watch.check && !watch.check.encapMismatch ? true : undefined,
      );
      await until("host 2 back on geneve", () => encapTypesOf(sb, "zstack-host-2").join() === "geneve");

      // Nothing of ZStack's changed: its hosts' chassis by content, and every NB row.
      assert.deepEqual(
        hostNames.map((n) => chassisContent(sb, n)),
        hostsBefore,
      );
      assert.deepEqual(diffDumps(nbBefore, await sim.snapshot()), []);
      console.log(`# done in ${Date.now() - started} ms`);
    });
});
