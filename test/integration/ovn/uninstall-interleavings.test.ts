// Random interleavings on the ZStack simulator: the plugin creates and deletes pod ports on ZStack's switches
// (our real row builder and planner), links ACLs into ZStack's switch and security group and pods into the
// group, while ZStack adds and removes VM ports and rewrites its switches, some of it concurrently. After every
// run: no VM port and no pod port was lost, ZStack's rows are exactly what they would be without our references,
// and after the uninstall plan (in-process) they are byte-identical to that and nothing of ours is left.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { plan } from "../../../src/ovn/nb-diff.ts";
import { ownedIds } from "../../../src/ovn/ownership.ts";
import { podPortId, podPortRow } from "../../../src/ovn/pod-port.ts";
import { applyUninstall, planUninstall } from "../../../src/ovn/uninstall.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { byUuid } from "../../../src/ovsdb/transaction.ts";
import type { DatabaseDump } from "../../rig/dump-format.ts";
import {
  diffDumps,
  foreignRows,
  ownedRows,
  useZStackSim,
  type VmPort,
  type ZStackSim,
} from "../../rig/zstack-sim.ts";

type Net = "overlay" | "flat";
type Op =
  | { k: "pod"; net: Net; inGroup: boolean }
  | { k: "unpod"; pick: number }
  | { k: "acl"; onGroup: boolean }
  | { k: "vm"; net: Net }
  | { k: "unvm"; pick: number }
  | { k: "rewrite"; net: Net }
  | { k: "concurrent"; net: Net };

const netArb = fc.constantFrom<Net>("overlay", "flat");
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ k: fc.constant("pod" as const), net: netArb, inGroup: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("unpod" as const), pick: fc.nat() }) },
  fc.record({ k: fc.constant("acl" as const), onGroup: fc.boolean() }),
  { weight: 2, arbitrary: fc.record({ k: fc.constant("vm" as const), net: netArb }) },
  fc.record({ k: fc.constant("unvm" as const), pick: fc.nat() }),
  fc.record({ k: fc.constant("rewrite" as const), net: netArb }),
  { weight: 2, arbitrary: fc.record({ k: fc.constant("concurrent" as const), net: netArb }) },
);

/** The dump's value without the UUIDs in `ours`, in the form ovsdb-client prints (a one-element set bare). */
function withoutOurs(v: unknown, ours: ReadonlySet<string>): unknown {
  const isOurRef = (x: unknown) => Array.isArray(x) && x[0] === "uuid" && ours.has(x[1] as string);
  if (isOurRef(v)) return ["set", []];
  if (!(Array.isArray(v) && v[0] === "set")) return v;
  const kept = (v[1] as unknown[]).filter((x) => !isOurRef(x));
  return kept.length === 1 ? kept[0] : ["set", kept];
}

function strip(dump: DatabaseDump, ours: ReadonlySet<string>): DatabaseDump {
  const out: DatabaseDump = {};
  for (const [table, rows] of Object.entries(foreignRows(dump))) {
    out[table] = {};
    for (const [uuid, row] of Object.entries(rows))
      out[table][uuid] = Object.fromEntries(Object.entries(row).map(([c, v]) => [c, withoutOurs(v, ours)]));
  }
  return out;
}

const uuidsOf = (v: unknown): string[] =>
  (Array.isArray(v) && v[0] === "set" ? (v[1] as unknown[]) : v === undefined ? [] : [v]).map(
    (u) => (u as [string, string])[1],
  );

// Names and ids stay unique across runs: a run's rows are gone from NB before the next one starts.
let counter = 0;

class Plugin {
  readonly pods: { ns: string; name: string; net: Net }[] = [];
  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly sim: ZStackSim,
  ) {}

  async pod(net: Net, inGroup: boolean): Promise<string> {
    const i = ++counter;
    const name = `p${i}`;
    const sw = this.sim.uuid(`${net}-switch`);
    const ip = net === "overlay" ? `10.60.0.${64 + (i % 120)}/24` : `192.168.100.${64 + (i % 120)}/24`;
    const row = podPortRow(
      { namespace: "churn", name, uid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}` },
      {
        subnet: `zs-${net}`,
        logicalSwitch: net,
        mac: `0a:58:00:00:${((i >> 8) & 255).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
        ipsWithPrefix: [ip],
        gateways: [],
        node: "node1",
      },
      { table: "Logical_Switch", column: "ports", uuid: sw },
    );
    const txn = this.nb.transaction();
    const summary = plan(this.nb.cache as never, this.nb.schema, txn as never, [row]);
    const ref = summary.refOf("Logical_Switch_Port", row.id);
    if (inGroup && ref !== undefined)
      txn.mutate("Port_Group", byUuid(this.sim.uuid("security-group")), [
        ["ports", "insert", [ref as never]],
      ]);
    await txn.commit();
    this.pods.push({ ns: "churn", name, net });
    const port = this.nb.cache.table("Logical_Switch_Port").lookupOne("name", `churn_${name}`);
    assert.ok(port, `pod port churn_${name} is in the cache after its commit`);
    return port._uuid;
  }

  async unpod(pick: number): Promise<void> {
    if (this.pods.length === 0) return;
    const [p] = this.pods.splice(pick % this.pods.length, 1);
    if (!p) return;
    const id = podPortId(p.ns, p.name);
    const txn = this.nb.transaction();
    plan(this.nb.cache as never, this.nb.schema, txn as never, [], {
      tables: ["Logical_Switch_Port"],
      owns: (rowId) => rowId === id,
    });
    await txn.commit();
  }

  async acl(onGroup: boolean): Promise<void> {
    const n = ++counter;
    const id = `churn/acl/${n}`;
    const txn = this.nb.transaction();
    plan(this.nb.cache as never, this.nb.schema, txn as never, [
      {
        table: "ACL",
        id,
        row: {
          direction: "to-lport",
          priority: 1001,
          match: `ip4.src == 10.60.0.${n % 250}`,
          action: "allow-related",
          external_ids: ownedIds("network-policy-acl", id),
        },
        parent: onGroup
          ? { table: "Port_Group", column: "acls", uuid: this.sim.uuid("security-group") }
          : { table: "Logical_Switch", column: "acls", uuid: this.sim.uuid("overlay-switch") },
      },
    ]);
    await txn.commit();
  }
}

describe("uninstall after random interleavings of plugin and ZStack writes", () => {
  test("no port is lost; ZStack's rows differ only by our references; uninstall restores them byte for byte", async (t) => {
    const sim = await useZStackSim(t);
    const nb = new OvsdbClient<NbTables>({ remotes: sim.nbRemotes, model: nbModel });
    t.after(() => nb.close());
    await nb.connect();
    let runs = 0;
    let steps = 0;
    let revision = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 12 }), async (ops) => {
        runs++;
        const plugin = new Plugin(nb, sim);
        const vms: VmPort[] = [];
        const podPorts = new Map<string, Net>();
        for (const op of ops) {
          steps++;
          switch (op.k) {
            case "pod":
              podPorts.set(await plugin.pod(op.net, op.inGroup), op.net);
              break;
            case "unpod":
              await plugin.unpod(op.pick);
              break;
            case "acl":
              await plugin.acl(op.onGroup);
              break;
            case "vm":
              vms.push(
                await sim.writer.addVmPort({
                  network: op.net,
                  ip4: op.net === "overlay" ? "10.60.0.200" : "192.168.100.200",
                }),
              );
              break;
            case "unvm":
              if (vms.length > 0)
                await sim.writer.removeVmPort(vms.splice(op.pick % vms.length, 1)[0] as VmPort);
              break;
            case "rewrite":
              await sim.writer.rewriteSwitch(sim.uuid(`${op.net}-switch`), ++revision);
              break;
            case "concurrent": {
              // ZStack rewrites the switch and starts a VM on it while the plugin adds a pod to it.
              const [pod, vm] = await Promise.all([
                plugin.pod(op.net, false),
                sim.writer.addVmPort({
                  network: op.net,
                  ip4: op.net === "overlay" ? "10.60.0.201" : "192.168.100.201",
                }),
                sim.writer.rewriteSwitch(sim.uuid(`${op.net}-switch`), ++revision),
              ]);
              podPorts.set(pod, op.net);
              vms.push(vm);
              break;
            }
          }
        }
        await sim.sync();
        const during = await sim.dump();
        // Nothing lost: every VM port still running and every pod port of ours still there is on its switch.
        const live = new Set(plugin.pods.map((p) => `churn_${p.name}`));
        for (const vm of vms)
          assert.ok(
            uuidsOf(during.Logical_Switch?.[vm.switchUuid]?.ports).includes(vm.uuid),
            `VM port ${vm.name}`,
          );
        for (const [uuid, net] of podPorts) {
          const row = during.Logical_Switch_Port?.[uuid];
          if (!row || !live.has(row.name as string)) continue;
          assert.ok(
            uuidsOf(during.Logical_Switch?.[sim.uuid(`${net}-switch`)]?.ports).includes(uuid),
            `pod port ${row.name}`,
          );
        }
        const ours = new Set(ownedRows(during).map((r) => r.split(" ")[1] as string));
        const expected = strip(during, ours);

        const uninstall = planUninstall(nb.cache as never, nb.schema);
        assert.deepEqual(uninstall.refusals, []);
        const txn = nb.transaction();
        applyUninstall(txn as never, uninstall);
        if (!uninstall.empty) await txn.commit();
        const after = await sim.snapshot();
        assert.deepEqual(diffDumps(expected, after), [], `run ${runs}: ${JSON.stringify(ops)}`);
        const full = await sim.dump();
        assert.deepEqual(ownedRows(full), []);
        assert.deepEqual(diffDumps(after, full), [], "nothing but ZStack's rows");
        for (let i = 0; !planUninstall(nb.cache as never, nb.schema).empty; i++) {
          assert.ok(i < 600, "our cache shows the uninstall");
          await new Promise((r) => setTimeout(r, 100));
        }
        // ZStack's VMs of this run stop, so the next run starts from the same switches.
        for (const vm of vms) await sim.writer.removeVmPort(vm);
      }),
      { numRuns: 10 },
    );
    t.diagnostic(`${runs} runs, ${steps} steps, ${sim.writer.writes} ZStack transactions`);
  });
});
