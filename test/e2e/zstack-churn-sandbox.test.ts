// `zovn sandbox up --zstack` churn and uninstall end to end (issue 14, "Acceptance (e2e in the sandbox)"): 200 pod
// create/delete cycles on ZStack's overlay switch through the apiserver, run by the sandbox's real programs (the
// controller, the node agents, the CNI, the node simulator), while ZStack's writer adds and removes VM ports on
// that switch and rewrites the switch; every pod comes up with its port on the switch and a free address, no VM
// port and no pod port is lost. Then the controller and the node agents are stopped, the shipped `zovn uninstall`
// runs against ZStack's NB, ZStack's NB ovsdb-server is restarted from its database file, and every ZStack row is
// byte-identical to the dump `up` recorded before the plugin first started, with no row of ours left. `down`
// leaves no netns, process or mount of the sandbox.
// Sandbox name zsbzc (docs/sandbox.md); run it under its lock: flock /work/locks/zsbzc.lock node --import tsx
// --test test/e2e/zstack-churn-sandbox.test.ts

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { after, before, describe, it } from "node:test";
import { POD_KEY } from "../../src/ovn/ownership.ts";
import { OUR_LB_GROUPS } from "../../src/ovn/topology.ts";
import { OvsdbClient } from "../../src/ovsdb/client.ts";
import { run } from "../../src/sandbox/command.ts";
import { localRemote, startOvnCentral } from "../../src/sandbox/ovn-central.ts";
import { CONTROLLER_DAEMON } from "../../src/sandbox/ovnkube-controller.ts";
import { terminate } from "../../src/sandbox/process-table.ts";
import { repoRoot } from "../../src/sandbox/repo.ts";
import { liveDaemon } from "../../src/sandbox/state.ts";
import { ZSTACK_NETWORKS } from "../../src/sandbox/topology.ts";
import { zstackBeforeDumpPath } from "../../src/sandbox/zstack/world.ts";
import { type DatabaseDump, parseJsonDump } from "../rig/dump-format.ts";
import { eventually, sandboxHandle } from "../rig/sandbox-handle.ts";
import { assertNothingLeft, dumpNb, zstackRows } from "../rig/zstack-sandbox.ts";
import {
  diffDumps,
  foreignRows,
  NB_DB,
  onlyDocumentedMutations,
  ownedRows,
  SIM_ROLE_KEY,
  type VmPort,
  ZStackWriter,
} from "../rig/zstack-sim.ts";

const NAME = "zsbzc";
const sb = sandboxHandle(NAME);
const UP_TIMEOUT_MS = 40 * 60_000; // the first run may build Kubernetes into the binary cache
const CYCLES = 200;
const BATCH = 20;
const OVERLAY = ZSTACK_NETWORKS.find((n) => n.network === "overlay") as (typeof ZSTACK_NETWORKS)[number];
const NS = OVERLAY.namespace;
const load = () => loadavg()[0]?.toFixed(2);

type Row = Record<string, unknown>;

/** The elements of a set column (a lone atom is a one-element set), UUIDs as text. */
function listOf(v: unknown): unknown[] {
  const items = Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v];
  return items.map((x) => (Array.isArray(x) && x[0] === "uuid" ? x[1] : x));
}

function mapOf(v: unknown): Record<string, string> {
  return Array.isArray(v) && v[0] === "map" ? Object.fromEntries(v[1] as [string, string][]) : {};
}

function roleUuid(dump: DatabaseDump, table: string, role: string): string {
  const found = Object.entries(dump[table] ?? {}).filter(
    ([, r]) => mapOf(r.external_ids)[SIM_ROLE_KEY] === role,
  );
  assert.equal(found.length, 1, `one ${table} with role ${role}`);
  return (found[0] as [string, Row])[0];
}

/** Every IPv4 address any row not ours on the switch shows (addresses, dynamic_addresses, port_security, VIP). */
function foreignAddressesOn(dump: DatabaseDump, switchUuid: string): Set<string> {
  const out = new Set<string>();
  const ls = dump.Logical_Switch?.[switchUuid] as Row;
  for (const u of listOf(ls.ports)) {
    const p = dump.Logical_Switch_Port?.[u as string];
    if (!p || ownedRows({ Logical_Switch_Port: { [u as string]: p } }).length > 0) continue;
    const text = [
      ...["addresses", "dynamic_addresses", "port_security"].flatMap((c) => listOf(p[c]).map(String)),
      mapOf(p.options)["virtual-ip"] ?? "",
    ].join(" ");
    for (const m of text.matchAll(/\b(\d+\.\d+\.\d+\.\d+)\b/g)) out.add(m[1] as string);
  }
  return out;
}

/** Our Service load-balancer groups: ours by name (Load_Balancer_Group has no external_ids). */
function ourLbGroups(dump: DatabaseDump): string[] {
  return Object.entries(dump.Load_Balancer_Group ?? {})
    .filter(([, r]) => OUR_LB_GROUPS.includes(String(r.name)))
    .map(([u]) => u);
}

/** Our pod ports by pod ("namespace/name" -> LSP UUID) among the rows of the dump. */
function podPorts(dump: DatabaseDump): Map<string, string> {
  const out = new Map<string, string>();
  for (const [u, r] of Object.entries(dump.Logical_Switch_Port ?? {})) {
    const pod = mapOf(r.external_ids)[POD_KEY];
    if (pod !== undefined && ownedRows({ Logical_Switch_Port: { [u]: r } }).length > 0) out.set(pod, u);
  }
  return out;
}

function podManifest(names: readonly string[], batch: number, nodes: readonly string[]): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "List",
    items: names.map((name, i) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: NS, labels: { app: "zschurn", batch: `b${batch}` } },
      spec: {
        nodeName: nodes[i % nodes.length],
        terminationGracePeriodSeconds: 0,
        containers: [{ name: "podserver", image: "zstack-ovn/podserver" }],
      },
    })),
  });
}

interface PodView {
  metadata: { name: string };
  status: { phase?: string; podIP?: string };
}

describe("zovn sandbox up --zstack: pod churn with ZStack's writer, uninstall, byte-identical", {
  timeout: UP_TIMEOUT_MS + 40 * 60_000,
}, () => {
  let recorded: DatabaseDump = {};
  let overlay = "";

  before(async () => {
    // A sandbox of this name left by an earlier aborted run.
    await sb.zovn(["down"]);
  });

  after(async () => {
    await sb.zovn(["down", "--purge"]).catch(() => "");
  });

  it("up --zstack records ZStack's NB before the plugin first starts, and a second up keeps that record", async (t) => {
    let started = Date.now();
    await sb.zovn(["up", "--zstack", "--nodes", "2"], UP_TIMEOUT_MS);
    t.diagnostic(`up --zstack in ${Date.now() - started} ms (load ${load()})`);
    const file = zstackBeforeDumpPath(sb.layout);
    const text = readFileSync(file, "utf8");
    recorded = parseJsonDump(text);
    assert.deepEqual(ownedRows(recorded), [], "nothing of ours in it: taken before the plugin started");
    assert.ok(zstackRows(recorded).length > 30, "ZStack's content is in it");
    overlay = roleUuid(recorded, "Logical_Switch", "overlay-switch");
    // The record stays the first one across a second `up`.
    started = Date.now();
    await sb.zovn(["up", "--zstack", "--nodes", "2"], UP_TIMEOUT_MS);
    t.diagnostic(`second up in ${Date.now() - started} ms`);
    assert.equal(readFileSync(file, "utf8"), text);
    // The plugin is running on it now: ZStack's rows differ only as documented.
    const during = await dumpNb(sb);
    const ours = new Set([
      ...ownedRows(during).map((r) => r.split(" ")[1] as string),
      ...ourLbGroups(during),
    ]);
    assert.ok(ours.size > 0, "the plugin's rows are there");
    assert.equal(ourLbGroups(during).length, OUR_LB_GROUPS.length, "our Service groups are there");
    assert.deepEqual(onlyDocumentedMutations(foreignRows(recorded), foreignRows(during), ours), []);
  });

  it(`${CYCLES} pod create/delete cycles on ZStack's overlay switch while ZStack's writer rewrites it: every pod up with its port and a free address, no VM port and no pod port lost`, async (t) => {
    const { topo } = sb.ctx();
    const hosts = topo.zstack?.hypervisors.map((h) => h.ip) ?? [];
    assert.equal(hosts.length, 2);
    const nodes = topo.nodes.map((n) => n.name);
    const client = new OvsdbClient({
      remotes: localRemote(sb.layout, topo, "nb"),
      database: NB_DB,
      monitor: {},
    });
    await client.connect({ retry: true });
    const writer = new ZStackWriter(
      client,
      (network) => (network === "overlay" ? overlay : network),
      hosts as [string, string],
    );
    const zstackOwn = zstackRows(recorded);
    const kc = `${sb.layout.pkiDir}/admin.kubeconfig`;
    const kubectlBin = sb.ctx().state.binaries?.KUBECTL as string;
    const k = (args: readonly string[], input?: string) =>
      run(kubectlBin, ["--kubeconfig", kc, ...args], {
        timeoutMs: 10 * 60_000,
        ...(input !== undefined ? { input } : {}),
      });

    // ZStack keeps working meanwhile: a VM comes and goes on the switch and the switch is rewritten, over and over.
    let writing = true;
    let writes = 0;
    let writerChecks = 0;
    const live = new Set<VmPort>();
    const writerLoop = (async () => {
      for (let i = 0; writing; i++) {
        const vm = await writer.addVmPort({
          ip4: `10.60.0.${240 + (i % 9)}`,
          chassis: [hosts[i % 2] as string],
        });
        live.add(vm);
        await writer.rewriteSwitch(overlay, 1000 + i);
        await new Promise((r) => setTimeout(r, 200));
        live.delete(vm); // before ZStack starts removing it: from here on it may be gone
        await writer.removeVmPort(vm);
        writes += 3;
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    writerLoop.catch(() => {}); // awaited below; its failure fails the test there
    const phases: string[] = [];
    const started = Date.now();
    try {
      for (let b = 0; b < CYCLES / BATCH; b++) {
        const t0 = Date.now();
        const names = Array.from({ length: BATCH }, (_, i) => `churn-${b}-${i}`);
        await k(["apply", "-f", "-"], podManifest(names, b, nodes));
        const pods = await eventually(
          `batch ${b}: ${BATCH} pods Running with an address`,
          10 * 60_000,
          async () => {
            const list = JSON.parse(
              await k(["-n", NS, "get", "pods", "-l", `batch=b${b}`, "-o", "json"]),
            ) as {
              items: PodView[];
            };
            const ready = list.items.filter((p) => p.status.phase === "Running" && p.status.podIP);
            return ready.length === BATCH ? ready : undefined;
          },
        );
        const t1 = Date.now();
        const held = [...live];
        const dump = await dumpNb(sb);
        // The writer's VM ports it held before the dump and had not started removing by its end.
        const writerPorts = held.filter((vm) => live.has(vm));
        // No VM port lost: every row of ZStack's is there, and each VM port the writer holds is on the switch.
        const rows = new Set(zstackRows(dump));
        assert.deepEqual(
          zstackOwn.filter((r) => !rows.has(r)),
          [],
          `batch ${b}: none of ZStack's rows is gone`,
        );
        const onSwitch = new Set(listOf(dump.Logical_Switch?.[overlay]?.ports) as string[]);
        for (const vm of writerPorts) {
          assert.ok(dump.Logical_Switch_Port?.[vm.uuid], `batch ${b}: VM port ${vm.name} is there`);
          assert.ok(onSwitch.has(vm.uuid), `batch ${b}: VM port ${vm.name} on the switch`);
        }
        writerChecks += writerPorts.length;
        for (const u of listOf(recorded.Logical_Switch?.[overlay]?.ports) as string[])
          assert.ok(onSwitch.has(u), `batch ${b}: ZStack's port ${u} still on the switch`);
        // Every pod has its port on the switch, and a free address: in the pods' part, held by no row of ZStack's
        // and by no other pod.
        const ports = podPorts(dump);
        const taken = foreignAddressesOn(dump, overlay);
        const ips = new Set<string>();
        for (const p of pods) {
          const port = ports.get(`${NS}/${p.metadata.name}`);
          assert.ok(port !== undefined, `batch ${b}: pod ${p.metadata.name} has a port`);
          assert.ok(onSwitch.has(port), `batch ${b}: pod ${p.metadata.name}'s port is on ZStack's switch`);
          const ip = p.status.podIP as string;
          const portAddresses = listOf(dump.Logical_Switch_Port?.[port]?.addresses).join(" ").split(" ");
          assert.ok(portAddresses.includes(ip), `batch ${b}: ${p.metadata.name}'s port holds ${ip}`);
          assert.ok(
            !taken.has(ip),
            `batch ${b}: ${p.metadata.name} got ${ip}, which a row of ZStack's holds`,
          );
          assert.ok(!ips.has(ip), `batch ${b}: ${ip} given twice`);
          assert.ok(
            ip.startsWith("10.60.0.") && Number(ip.split(".")[3]) >= 128,
            `${p.metadata.name} has ${ip}`,
          );
          ips.add(ip);
        }
        await k(["-n", NS, "delete", "pods", "-l", `batch=b${b}`, "--wait=true", "--timeout=600s"]);
        await eventually(`batch ${b}: the pods' ports removed`, 5 * 60_000, async () => {
          const left = [...podPorts(await dumpNb(sb)).keys()].filter((p) => p.startsWith(`${NS}/churn-`));
          return left.length === 0 ? true : undefined;
        });
        phases.push(
          `b${b} up ${((t1 - t0) / 1000).toFixed(1)}s gone ${((Date.now() - t1) / 1000).toFixed(1)}s`,
        );
      }
    } finally {
      writing = false;
      try {
        await writerLoop;
        // ZStack's last rewrite stays ZStack's: it puts the switch back as it was, as ZStack would on its own.
        await writer.transact([
          {
            op: "update",
            table: "Logical_Switch",
            where: [["_uuid", "==", ["uuid", overlay]]],
            row: { external_ids: recorded.Logical_Switch?.[overlay]?.external_ids },
          },
        ]);
      } finally {
        await client.close();
      }
    }
    const secs = (Date.now() - started) / 1000;
    t.diagnostic(
      `${CYCLES} cycles in batches of ${BATCH}: ${secs.toFixed(1)} s (${(CYCLES / secs).toFixed(2)} cycles/s), ZStack's writer made ${writes} writes meanwhile, ${writerChecks} of its VM ports seen on the switch at a check (load ${load()})`,
    );
    t.diagnostic(phases.join("; "));
  });

  it("controller and node agents stopped, zovn uninstall, ZStack's NB restarted from its file: every ZStack row byte-identical to before the plugin first started, none of ours left", async (t) => {
    const { state, topo } = sb.ctx();
    let started = Date.now();
    const plugin = state.daemons.filter(
      (d) => d.name === CONTROLLER_DAEMON || d.name.endsWith("/zstack-ovnkube-node"),
    );
    assert.equal(plugin.length, 1 + topo.nodes.length, plugin.map((d) => d.name).join(", "));
    await terminate(plugin, 10_000);
    t.diagnostic(`controller and ${topo.nodes.length} node agents stopped in ${Date.now() - started} ms`);
    const remote = localRemote(sb.layout, topo, "nb");
    started = Date.now();
    const out = await run(`${repoRoot}/bin/zovn`, ["uninstall", "--nb", remote], { timeoutMs: 5 * 60_000 });
    t.diagnostic(`zovn uninstall in ${Date.now() - started} ms: ${out.trim().split("\n").slice(-1)[0]}`);
    assert.match(out, /rows of ours/);
    assert.deepEqual(ownedRows(await dumpNb(sb)), [], "no row of ours is left");
    // What is on disk, not only what the running server holds: ZStack's NB restarted from its database file.
    const nbName = `${topo.central.name}/ovsdb-server-nb`;
    const nb = liveDaemon(state, nbName);
    assert.ok(nb, `${nbName} is running`);
    started = Date.now();
    await terminate([nb], 10_000);
    await startOvnCentral(sb.layout, topo, state);
    const restarted = await eventually("ZStack's NB back, northd caught up", 5 * 60_000, async () => {
      const client = new OvsdbClient({ remotes: remote, database: NB_DB, monitor: {} });
      try {
        await client.connect();
        const [, sel] = (await client.transactRaw([
          { op: "mutate", table: "NB_Global", where: [], mutations: [["nb_cfg", "+=", 1]] },
          { op: "select", table: "NB_Global", where: [], columns: ["nb_cfg"] },
        ])) as [unknown, { rows: { nb_cfg: number }[] }];
        const want = sel.rows[0]?.nb_cfg ?? 0;
        return await eventually("northd caught up", 60_000, async () => {
          const [g] = (await client.transactRaw([
            { op: "select", table: "NB_Global", where: [], columns: ["sb_cfg"] },
          ])) as { rows: { sb_cfg: number }[] }[];
          return Number(g?.rows[0]?.sb_cfg ?? 0) >= want ? dumpNb(sb) : undefined;
        });
      } finally {
        await client.close();
      }
    });
    t.diagnostic(`ZStack's NB restarted and northd caught up in ${Date.now() - started} ms (load ${load()})`);
    assert.deepEqual(ownedRows(restarted), [], "no row of ours is left after the restart");
    assert.deepEqual(ourLbGroups(restarted), [], "no Service group of ours is left");
    assert.deepEqual(diffDumps(recorded, foreignRows(restarted)), [], "ZStack's rows are byte-identical");
  });

  it("down leaves no netns, process or mount of the sandbox", async () => {
    const { state } = sb.ctx();
    await sb.zovn(["down"]);
    await assertNothingLeft(sb, state);
  });
});
