// The OVS conntrack flush of a first endpoint reaches ovs-vswitchd through OVS's run directory as the agent is
// configured (OVS_RUNDIR from node.ovsDb's socket; the chart puts it at dpdk.socketDir with DPDK), on a real
// ovs-vswitchd: a run directory laid out as OVS lays out its own (the pid file and ovs-vswitchd.<pid>.ctl) works,
// one without the pid file fails with ovs-appctl's error, which the agent reports and backs off from.

import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseIp } from "../../../src/ipam/address.ts";
import { ToolError } from "../../../src/node/tool.ts";
import { deleteUnnated, ovsRunDir, type UnnatedUdpTarget } from "../../../src/node/udp-first-endpoint.ts";
import { useOvsNode } from "../../rig/ovs-node.ts";

test("the OVS flush goes to the ovs-vswitchd of the configured run directory, and fails naming the pid file when it has none", async (t) => {
  const node = await useOvsNode(t);
  // A datapath to flush (the userspace one, as the agent's br-int has).
  await node.vsctl("add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev");
  const pid = (await readFile(join(node.ovs.dir, "ovs-vswitchd.pid"), "utf8")).trim();
  assert.match(pid, /^\d+$/);
  const run = await mkdtemp(join(tmpdir(), "zovn-ovsrun-"));
  const empty = await mkdtemp(join(tmpdir(), "zovn-ovsrun-"));
  t.after(() =>
    Promise.all([rm(run, { recursive: true, force: true }), rm(empty, { recursive: true, force: true })]),
  );
  // What OVS keeps in its run directory: the pid file (ovs-appctl checks that the daemon holds its lock, so the
  // rig's own) and the control socket named by the pid.
  await symlink(join(node.ovs.dir, "ovs-vswitchd.pid"), join(run, "ovs-vswitchd.pid"));
  await symlink(join(node.ovs.dir, "ovs-vswitchd.ctl"), join(run, `ovs-vswitchd.${pid}.ctl`));
  await writeFile(join(run, "db.sock"), "");

  const target: UnnatedUdpTarget = { tracker: "ovs", ip: parseIp("10.96.0.10"), port: 53 };
  const dir = ovsRunDir(`unix:${join(run, "db.sock")}`);
  assert.equal(dir, run);
  assert.equal(await deleteUnnated(target, { ovsRunDir: run }), 0);
  await assert.rejects(
    deleteUnnated(target, { ovsRunDir: empty }),
    (e) => e instanceof ToolError && e.message.includes(join(empty, "ovs-vswitchd.pid")),
  );
});
