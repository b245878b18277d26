// ZStack's hypervisors on the simulator: two hosts register as chassis named by their management IP, and VMs
// (namespaces bound to the simulator's VM ports) talk TCP across hosts on the overlay switch (Geneve) and on
// the flat switch (localnet, through br-flat and the flat link).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { useZStackHosts, type Vm } from "./zstack-hosts.ts";
import { HOSTS, useZStackSim, vmMac, vmPortName } from "./zstack-sim.ts";

const run = promisify(execFile);

async function inNetns(ns: string, args: string[], input?: string, timeoutMs = 15_000): Promise<string> {
  const p = run("nsenter", [`--net=${ns}`, "--", ...args], { timeout: timeoutMs });
  if (input !== undefined) p.child.stdin?.end(input);
  return (await p).stdout;
}

/** One TCP exchange: `server` listens on `port`, `client` connects and sends a line, retried while OVN settles. */
async function tcp(client: Vm, server: Vm, port: number): Promise<string> {
  let last = "";
  for (let i = 0; i < 20; i++) {
    const listening = inNetns(
      server.netns.path,
      ["timeout", "8", "nc", "-n", "-l", server.ip, String(port)],
      undefined,
      10_000,
    ).catch((e: Error) => `listener: ${e.message}`);
    for (let j = 0; j < 50; j++) {
      const ss = await inNetns(server.netns.path, ["ss", "-tln", `sport = :${port}`]);
      if (ss.includes(`:${port}`)) break;
      await sleep(50);
    }
    try {
      await inNetns(
        client.netns.path,
        ["nc", "-N", "-w", "3", server.ip, String(port)],
        `hello from ${client.ip}\n`,
      );
      const got = await listening;
      if (got.includes(`hello from ${client.ip}`)) return got.trim();
      last = got;
    } catch (e) {
      last = (e as Error).message;
      await listening;
    }
    await sleep(500);
  }
  throw new Error(`no TCP from ${client.ip} to ${server.ip}: ${last}`);
}

describe("ZStack's hypervisors on the simulator", () => {
  test("chassis named by management IP; VMs reach each other over TCP across hosts, overlay and flat", async (t) => {
    const started = Date.now();
    const sim = await useZStackSim(t);
    const zs = await useZStackHosts(t, sim);
    const [hv1, hv2] = zs.hosts as [(typeof zs.hosts)[0], (typeof zs.hosts)[0]];
    const flatVm = await sim.writer.addVmPort({
      network: "flat",
      ip4: "192.168.100.22",
      chassis: [HOSTS[0]],
    });
    const vms = [
      { host: hv1, name: vmPortName(1, 0), mac: vmMac(1), ip: "10.60.0.11", prefix: 24, tap: "vnic1.0" },
      { host: hv2, name: vmPortName(2, 0), mac: vmMac(2), ip: "10.60.0.12", prefix: 24, tap: "vnic2.0" },
      { host: hv2, name: vmPortName(3, 0), mac: vmMac(3), ip: "192.168.100.21", prefix: 24, tap: "vnic3.0" },
      { host: hv1, name: flatVm.name, mac: flatVm.mac, ip: "192.168.100.22", prefix: 24, tap: "vnic100.0" },
    ];
    const started2 = await Promise.all(vms.map((v) => zs.startVm(v.host, v)));
    await Promise.all(started2.map((vm, i) => zs.waitInstalled(vm, vms[i]?.tap as string)));
    t.diagnostic(`hosts and 4 VMs up in ${Date.now() - started} ms`);

    const sb = new OvsdbClient({ remotes: sim.sbRemotes, database: "OVN_Southbound", monitor: {} });
    t.after(() => sb.close());
    await sb.connect({ retry: true });
    const [sel] = (await sb.transactRaw([
      { op: "select", table: "Chassis", where: [], columns: ["name", "hostname"] },
    ])) as { rows: { name: string; hostname: string }[] }[];
    assert.deepEqual((sel?.rows ?? []).map((r) => `${r.name} ${r.hostname}`).sort(), [
      `${hv1.systemId} ${hv1.ip}`,
      `${hv2.systemId} ${hv2.ip}`,
    ]);

    const [vm1, vm2, vm3, vm4] = started2 as [Vm, Vm, Vm, Vm];
    // VMs 1 and 2 are in ZStack's security group, which lets members in on TCP 22 only.
    t.diagnostic(await tcp(vm1, vm2, 22));
    t.diagnostic(await tcp(vm2, vm1, 22));
    t.diagnostic(await tcp(vm4, vm3, 7000));
    t.diagnostic(await tcp(vm3, vm4, 7000));
  });
});
