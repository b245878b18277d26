// External mode against the ZStack simulator (its own NB/SB/northd, ZStack's rows as ZStack writes them) and a real
// apiserver, the controller in-process with ovn.mode=external: Subnets naming ZStack's switches are judged against
// the switches' rows (ambiguous name, missing switch, CIDR and gateway mismatches, following NB changes); pods get
// ports on ZStack's overlay switch and never an address that a VM, a router, DHCP or exclude_ips holds, also while
// VMs come and go (a property over random interleavings); a VM given a pod's address is reported; while the
// controller runs ZStack's rows differ only by our ports in the switch's `ports`; and after 200 pod create/delete
// cycles (ZStack's writer active), `zovn uninstall` and a restart of ZStack's NB from its database file, every ZStack
// row is byte-identical to the dump taken before the controller first started.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import fc from "fast-check";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { OvnController } from "../../../src/controller/controller.ts";
import { EventRecorder } from "../../../src/k8s/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { CHASSIS_GUARD_MONITOR } from "../../../src/ovn/chassis-mac-guard.ts";
import { rowUuid } from "../../../src/ovn/ownership.ts";
import {
  POD_NETWORKS_ANNOTATION,
  parsePodNetwork,
  parsePodNetworksAnnotation,
} from "../../../src/ovn/pod-port.ts";
import { CLUSTER_IP_LB_GROUP, CLUSTER_LB_GROUP, OUR_LB_GROUPS } from "../../../src/ovn/topology.ts";
import { OvsdbClient } from "../../../src/ovsdb/client.ts";
import { type NbTables, nbModel } from "../../../src/ovsdb/models/nb.generated.ts";
import { type SbTables, sbModel } from "../../../src/ovsdb/models/sb.generated.ts";
import type { DatabaseDump } from "../../rig/dump-format.ts";
import {
  diffDumps,
  foreignRows,
  onlyDocumentedMutations,
  ownedRows,
  useZStackSim,
  type VmPort,
  type ZStackSim,
} from "../../rig/zstack-sim.ts";
import {
  createNamespace,
  createPods,
  createSubnet,
  deletePods,
  listPods,
  type PodView,
  podAddress,
  readyCondition,
  until,
  useApiserver,
} from "./harness.ts";

const run = promisify(execFile);
const ROOT = new URL("../../../", import.meta.url).pathname;
const NS = "zs";

type Api = Awaited<ReturnType<typeof useApiserver>>["api"];

async function startController(
  t: { after(fn: () => unknown): void },
  api: Api,
  sim: ZStackSim,
  opts: { sb?: boolean } = {},
) {
  const nb = new OvsdbClient<NbTables>({ remotes: sim.nbRemotes.join(","), model: nbModel });
  await nb.connect();
  // ZStack's SB for the chassis MAC guard, as the controller's entry point reads it (read only).
  const sb = opts.sb
    ? new OvsdbClient<SbTables>({
        remotes: sim.sbRemotes.join(","),
        model: sbModel,
        leaderOnly: false,
        monitor: CHASSIS_GUARD_MONITOR,
      })
    : undefined;
  await sb?.connect();
  const events = new EventRecorder({ client: api, component: "zstack-ovnkube-controller" });
  const ctl = new OvnController({
    api,
    nb,
    ...(sb ? { sb } : {}),
    clusterCIDR: "10.244.0.0/16",
    serviceCIDRs: ["10.96.0.0/16"],
    joinCIDR: "100.64.0.0/16",
    tunnel: "geneve",
    ovnMode: "external",
    log: silentLogger,
    events,
  });
  const abort = new AbortController();
  let onSynced = () => {};
  const synced = new Promise<void>((resolve) => {
    onSynced = resolve;
  });
  const running = ctl.run(abort.signal, onSynced);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    abort.abort();
    await running;
    await events.close();
    await nb.close();
    await sb?.close();
  };
  t.after(stop);
  return { stop, synced };
}

const getSubnet = (api: Api, name: string) => api.request<Subnet>(`${SUBNET_PATH}/${name}`);

async function untilReason(api: Api, name: string, reason: string) {
  return until(
    `Subnet ${name} ${reason}`,
    async () => {
      const s = await getSubnet(api, name);
      return readyCondition(s)?.reason === reason ? s : undefined;
    },
    60_000,
  );
}

async function deleteSubnet(api: Api, name: string): Promise<void> {
  await api.request(`${SUBNET_PATH}/${name}`, { method: "DELETE" });
  await until(
    `Subnet ${name} gone`,
    async () => {
      try {
        await getSubnet(api, name);
        return undefined;
      } catch {
        return true;
      }
    },
    60_000,
  );
}

/** Column values of a dump row as plain JS: sets as arrays, maps as objects, uuids as text. */
function plain(v: unknown): unknown {
  if (!Array.isArray(v)) return v;
  if (v[0] === "set") return (v[1] as unknown[]).map(plain);
  if (v[0] === "map")
    return Object.fromEntries((v[1] as [unknown, unknown][]).map(([k, x]) => [plain(k), plain(x)]));
  if (v[0] === "uuid" || v[0] === "named-uuid") return v[1];
  return v;
}
const listOf = (v: unknown): unknown[] => {
  const p = plain(v);
  return Array.isArray(p) ? p : p === undefined || p === null ? [] : [p];
};

/**
 * Every IPv4 address in 10.60.0.0/24 that ZStack's rows show, read from the dump independently of the code
 * under test: words of the overlay switch's foreign ports, the router port's networks, DHCP's server and
 * router, the exclude_ips (ranges expanded), the network and broadcast addresses.
 */
function zstackTaken(dump: DatabaseDump, overlay: string): Set<string> {
  const taken = new Set(["10.60.0.0", "10.60.0.255"]);
  const v4 = /\b10\.60\.0\.(\d{1,3})\b/g;
  const scan = (text: string) => {
    for (const m of text.matchAll(v4)) taken.add(`10.60.0.${Number(m[1])}`);
  };
  const ls = dump.Logical_Switch?.[overlay] as Record<string, unknown>;
  const oc = plain(ls.other_config) as Record<string, string>;
  for (const part of (oc.exclude_ips ?? "").split(/\s+/).filter(Boolean)) {
    const [a, b] = part.split("..");
    const lo = Number(a?.split(".")[3]);
    const hi = Number((b ?? a)?.split(".")[3]);
    for (let i = lo; i <= hi; i++) taken.add(`10.60.0.${i}`);
  }
  for (const u of listOf(ls.ports)) {
    const p = dump.Logical_Switch_Port?.[u as string] as Record<string, unknown> | undefined;
    if (!p || JSON.stringify(p.external_ids).includes("zstack-ovnkube-controller")) continue;
    for (const col of ["addresses", "dynamic_addresses", "port_security"])
      for (const x of listOf(p[col])) scan(String(x));
    scan(String((plain(p.options) as Record<string, string>)["virtual-ip"] ?? ""));
  }
  for (const r of Object.values(dump.Logical_Router_Port ?? {}))
    for (const n of listOf(r.networks)) scan(String(n));
  for (const d of Object.values(dump.DHCP_Options ?? {})) {
    const o = plain(d.options) as Record<string, string>;
    scan(o.server_id ?? "");
    scan(o.router ?? "");
  }
  return taken;
}

/** The only difference allowed while we run: the overlay switch's `ports` grew by our pod ports, nothing else. */
function assertOnlyOurPorts(before: DatabaseDump, now: DatabaseDump, overlay: string, ourPorts: Set<string>) {
  // The Service load-balancer groups are ours by their names (Load_Balancer_Group has no external_ids).
  const groups = Object.entries(now.Load_Balancer_Group ?? {}).filter(([, r]) =>
    OUR_LB_GROUPS.includes(String(r.name)),
  );
  assert.equal(groups.length, 2);
  const diff = diffDumps(before, now).filter(
    (l) => !groups.some(([u]) => l === `Load_Balancer_Group ${u}: added`),
  );
  // Our router port's switch makes the switch refer to our cluster-IP load-balancer group (docs/external-mode.md).
  const ipGroup = groups.find(([, r]) => r.name === CLUSTER_IP_LB_GROUP)?.[0];
  const lbLink = `Logical_Switch ${overlay} load_balancer_group: ["set",[]] -> ["uuid","${ipGroup}"]`;
  const other = diff.filter((l) => !l.startsWith(`Logical_Switch ${overlay} ports:`) && l !== lbLink);
  assert.deepEqual(other, [], "no ZStack row other than the switch's ports and load-balancer groups changed");
  const was = new Set(listOf(before.Logical_Switch?.[overlay]?.ports) as string[]);
  const is = new Set(listOf(now.Logical_Switch?.[overlay]?.ports) as string[]);
  for (const u of was) assert.ok(is.has(u), `ZStack's port ${u} is still on the switch`);
  for (const u of is)
    if (!was.has(u)) assert.ok(ourPorts.has(u), `${u}, added to the switch, is a port of ours`);
}

/** Our router ports' switch-side ports (`zovn-etor-<subnet>`) in the full dump. */
function routerPortUuids(dump: DatabaseDump): string[] {
  return Object.entries(dump.Logical_Switch_Port ?? {})
    .filter(([, r]) => {
      const ids = plain(r.external_ids) as Record<string, string>;
      return (
        ids["zstack.io/owner"] === "zstack-ovnkube-controller" &&
        /^subnet\/.+\/ext-etor$/.test(ids["zstack.io/id"] ?? "")
      );
    })
    .map(([u]) => u);
}

/** Our pod ports in NB, of pods whose name starts with `prefix`. */
async function podPortUuids(sim: ZStackSim, prefix = ""): Promise<Set<string>> {
  const dump = await sim.dump();
  const out = new Set<string>();
  for (const [u, r] of Object.entries(dump.Logical_Switch_Port ?? {})) {
    const ids = plain(r.external_ids) as Record<string, string>;
    if (
      ids["zstack.io/kind"] === "pod-port" &&
      ids["zstack.io/owner"] === "zstack-ovnkube-controller" &&
      ids["zstack.io/pod"]?.startsWith(`${NS}/${prefix}`)
    )
      out.add(u);
  }
  return out;
}

/**
 * Deletes the pods of NS named, and waits until no pod port of ours is left whose pod's name starts with `prefix`
 * (the names' common prefix; "" for every pod port).
 */
async function deletePodsAndPorts(api: Api, sim: ZStackSim, names: readonly string[], prefix: string) {
  await deletePods(
    api,
    names.map((n) => [NS, n] as const),
  );
  await until(
    `ports of pods ${prefix}* gone`,
    async () => ((await podPortUuids(sim, prefix)).size === 0 ? true : undefined),
    60_000,
  );
}

async function annotated(api: Api, names: readonly string[]): Promise<Map<string, PodView>> {
  return until(
    `${names.length} pods annotated`,
    async () => {
      const pods = (await listPods(api)).filter((p) => p.metadata.namespace === NS);
      const want = new Set(names);
      const mine = pods.filter((p) => want.has(p.metadata.name));
      return mine.length === names.length && mine.every((p) => podAddress(p) !== undefined)
        ? new Map(mine.map((p) => [p.metadata.name, p]))
        : undefined;
    },
    120_000,
    300,
  );
}

test("External mode: Subnets on ZStack's switches, pods next to its VMs, and nothing of ZStack's changed", async (t) => {
  const { api } = await useApiserver(t);
  const sim = await useZStackSim(t);
  const overlay = sim.uuid("overlay-switch");
  const twin = sim.uuid("twin-switch");
  const before = await sim.snapshot();
  // ZStack's writer replaces the overlay switch's other_config (as ZStack edits a network).
  const setOc = (m: Record<string, string>) =>
    sim.writer.transact([
      {
        op: "update",
        table: "Logical_Switch",
        where: [["_uuid", "==", ["uuid", overlay]]],
        row: { other_config: ["map", Object.entries(m)] },
      },
    ]);
  let ctl = await startController(t, api, sim);
  const t0 = Date.now();

  await t.test(
    "a name two switches share is Failed naming both; renaming one makes it Ready, and back",
    async () => {
      await createSubnet(api, "zs-byname", {
        cidr: "10.60.0.0/24",
        gateway: "10.60.0.1",
        externalLogicalSwitch: "l3-vpc-network",
      });
      const amb = await untilReason(api, "zs-byname", "ExternalSwitchAmbiguous");
      assert.equal(amb.status?.phase, "Failed");
      const msg = readyCondition(amb)?.message ?? "";
      assert.ok(msg.includes(overlay) && msg.includes(twin), msg);
      // ZStack renames its twin network: the name now names one switch, and the Subnet follows NB alone.
      const rename = (name: string) =>
        sim.writer.transact([
          { op: "update", table: "Logical_Switch", where: [["_uuid", "==", ["uuid", twin]]], row: { name } },
        ]);
      await rename("l3-vpc-network-2");
      const ok = await untilReason(api, "zs-byname", "Ready");
      assert.equal(ok.status?.logicalSwitch, "l3-vpc-network");
      await rename("l3-vpc-network");
      await untilReason(api, "zs-byname", "ExternalSwitchAmbiguous");
      await deleteSubnet(api, "zs-byname");
    },
  );

  await t.test(
    "a missing switch, a CIDR and a gateway that do not match the switch are Failed, naming the row",
    async () => {
      await createSubnet(api, "zs-missing", {
        cidr: "10.63.0.0/24",
        gateway: "10.63.0.1",
        externalLogicalSwitch: "zstack-l3-0000",
      });
      const missing = await untilReason(api, "zs-missing", "ExternalSwitchNotFound");
      assert.match(readyCondition(missing)?.message ?? "", /zstack-l3-0000 does not exist/);
      await createSubnet(api, "zs-cidr", {
        cidr: "10.62.0.0/24",
        gateway: "10.62.0.1",
        externalLogicalSwitch: twin,
      });
      const cidr = await untilReason(api, "zs-cidr", "ExternalSwitchMismatch");
      assert.match(
        readyCondition(cidr)?.message ?? "",
        new RegExp(`Logical_Switch ${twin} .* other_config:subnet=10\\.61\\.0\\.0/24`),
      );
      await createSubnet(api, "zs-gw", {
        cidr: "10.60.0.0/24",
        gateway: "10.60.0.254",
        externalLogicalSwitch: overlay,
      });
      const gw = await untilReason(api, "zs-gw", "ExternalSwitchMismatch");
      assert.match(
        readyCondition(gw)?.message ?? "",
        new RegExp(
          `spec.gateway 10\\.60\\.0\\.254 is not ZStack's router port .*Logical_Router_Port ${sim.uuid("router-port-overlay")}`,
        ),
      );
      for (const n of ["zs-missing", "zs-cidr", "zs-gw"]) await deleteSubnet(api, n);
    },
  );

  await createNamespace(api, NS);

  await t.test(
    "a Subnet stays on the switch it was bound to: ZStack giving its name to another switch makes it Failed naming both, and no pod port joins the second switch",
    async () => {
      // A name ZStack allows and the agent's parser does not: pods carry the switch's UUID instead.
      const name = "ZStack 网络 1";
      const [a] = await sim.writer.transact([
        {
          op: "insert",
          table: "Logical_Switch",
          row: { name, other_config: ["map", [["subnet", "10.70.0.0/24"]]] },
        },
      ]);
      assert.ok(a);
      await createSubnet(api, "zs-bound", {
        cidr: "10.70.0.0/24",
        gateway: "10.70.0.1",
        externalLogicalSwitch: name,
        namespaces: [NS],
      });
      const ready = await untilReason(api, "zs-bound", "Ready");
      assert.equal(ready.status?.logicalSwitch, name);
      assert.equal(ready.status?.logicalSwitchUUID, a);
      const names = ["b0", "b1", "b2"];
      await createPods(
        api,
        names.map((n) => [NS, n] as const),
      );
      for (const p of (await annotated(api, names)).values()) {
        // What the agent does with it (src/ovn/pod-port.ts): parse it, or refuse every CNI ADD of the pod.
        const net = parsePodNetwork(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
        assert.equal(net?.logicalSwitch, a);
        assert.match(podAddress(p) ?? "", /^10\.70\.0\.\d+$/);
      }
      const ours = await podPortUuids(sim, "b");
      assert.equal(ours.size, names.length);
      /** Each of our pod ports, with the switches whose `ports` hold it. */
      const holders = async () => {
        await sim.sync();
        const dump = await sim.dump();
        const out = new Map<string, string[]>([...ours].map((u) => [u, []]));
        for (const [su, ls] of Object.entries(dump.Logical_Switch ?? {})) {
          const ports = plain(ls.ports);
          for (const pu of Array.isArray(ports) ? ports : [ports]) out.get(String(pu))?.push(su);
        }
        return out;
      };
      const onlyOn = async (sw: string, when: string) => {
        for (const [pu, sws] of await holders())
          assert.deepEqual(
            sws,
            [sw],
            `${when}: pod port ${pu} is in the ports of ${sws.join(", ") || "no switch"}`,
          );
      };
      await onlyOn(a, "bound");
      // ZStack renames the network and creates another one under the old name.
      const [, b] = await sim.writer.transact([
        {
          op: "update",
          table: "Logical_Switch",
          where: [["_uuid", "==", ["uuid", a]]],
          row: { name: `${name} old` },
        },
        {
          op: "insert",
          table: "Logical_Switch",
          row: { name, other_config: ["map", [["subnet", "10.70.0.0/24"]]] },
        },
      ]);
      assert.ok(b);
      const changed = await untilReason(api, "zs-bound", "ExternalSwitchChanged");
      assert.equal(changed.status?.phase, "Failed");
      assert.equal(changed.status?.logicalSwitchUUID, a, "the binding is kept");
      const msg = readyCondition(changed)?.message ?? "";
      assert.ok(msg.includes(a) && msg.includes(b), msg);
      await onlyOn(a, "renamed");
      // A restart reconciles every pod: the binding comes back from the status, and no port moves.
      await ctl.stop();
      ctl = await startController(t, api, sim);
      await ctl.synced;
      await onlyOn(a, "after a restart");
      assert.equal(readyCondition(await getSubnet(api, "zs-bound"))?.reason, "ExternalSwitchChanged");
      // ZStack puts it back: the Subnet is Ready on its switch again.
      await sim.writer.transact([
        { op: "delete", table: "Logical_Switch", where: [["_uuid", "==", ["uuid", b]]] },
        { op: "update", table: "Logical_Switch", where: [["_uuid", "==", ["uuid", a]]], row: { name } },
      ]);
      const back = await untilReason(api, "zs-bound", "Ready");
      assert.equal(back.status?.logicalSwitchUUID, a);
      await onlyOn(a, "named back");
      await deletePodsAndPorts(api, sim, names, "b");
      await deleteSubnet(api, "zs-bound");
      await sim.writer.transact([
        { op: "delete", table: "Logical_Switch", where: [["_uuid", "==", ["uuid", a]]] },
      ]);
    },
  );

  await createSubnet(api, "zs-overlay", {
    cidr: "10.60.0.0/24",
    gateway: "10.60.0.1",
    externalLogicalSwitch: overlay,
    namespaces: [NS],
  });
  const ready = await untilReason(api, "zs-overlay", "Ready");
  assert.equal(ready.status?.logicalSwitch, "l3-vpc-network");
  assert.equal(ready.status?.logicalSwitchUUID, overlay);

  await t.test(
    "pods on the overlay switch get free addresses, ZStack's router as gateway, ports on the switch",
    async () => {
      const names = Array.from({ length: 12 }, (_, i) => `p${i}`);
      await createPods(
        api,
        names.map((n) => [NS, n] as const),
      );
      const pods = await annotated(api, names);
      await sim.sync();
      const dump = await sim.dump();
      const taken = zstackTaken(dump, overlay);
      const seen = new Set<string>();
      for (const p of pods.values()) {
        const ann = parsePodNetworksAnnotation(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
        const ip = podAddress(p) as string;
        assert.ok(!taken.has(ip), `pod ${p.metadata.name} got ${ip}, which ZStack's rows hold`);
        assert.ok(!seen.has(ip), `${ip} given twice`);
        seen.add(ip);
        assert.deepEqual(ann?.gateway_ips, ["10.60.0.1"]);
        assert.equal(ann?.logical_switch, overlay, "the switch's UUID, whatever ZStack names it");
        assert.match(ann?.ip_addresses[0] ?? "", /^10\.60\.0\.\d+\/24$/);
      }
      const ours = await podPortUuids(sim);
      assert.equal(ours.size, names.length);
      assertOnlyOurPorts(before, foreignRows(dump), overlay, new Set([...ours, ...routerPortUuids(dump)]));
      await deletePodsAndPorts(api, sim, names, "p");
    },
  );

  await t.test(
    "a VM given a pod's address sets AddressConflict naming both and an Event; it clears when the VM goes",
    async () => {
      await createPods(api, [[NS, "held"]]);
      const held = (await annotated(api, ["held"])).get("held") as PodView;
      const ip = podAddress(held) as string;
      const vm = await sim.writer.addVmPort({ ip4: ip });
      const s = await until(
        "AddressConflict True",
        async () => {
          const x = await getSubnet(api, "zs-overlay");
          return x.status?.conditions?.find((c) => c.type === "AddressConflict" && c.status === "True")
            ? x
            : undefined;
        },
        60_000,
      );
      const cond = s.status?.conditions?.find((c) => c.type === "AddressConflict");
      assert.ok(
        cond?.message.includes(ip) && cond.message.includes(`${NS}/held`) && cond.message.includes(vm.name),
        cond?.message,
      );
      const ev = await until(
        "AddressConflict Event",
        async () => {
          const l = await api.request<{
            items: { reason: string; message: string; involvedObject: { name: string } }[];
          }>("/api/v1/namespaces/default/events");
          return l.items.find(
            (e) => e.reason === "AddressConflict" && e.involvedObject.name === "zs-overlay",
          );
        },
        60_000,
      );
      assert.ok(ev.message.includes(vm.name) && ev.message.includes(`${NS}/held`), ev.message);
      await sim.writer.removeVmPort(vm);
      await until(
        "AddressConflict False",
        async () => {
          const x = await getSubnet(api, "zs-overlay");
          return x.status?.conditions?.find((c) => c.type === "AddressConflict" && c.status === "False")
            ? x
            : undefined;
        },
        60_000,
      );
      await deletePodsAndPorts(api, sim, ["held"], "held");
    },
  );

  await t.test(
    "ZStack rewriting the switch and adding VMs while pods are created loses no VM port and no pod port",
    async () => {
      const names = Array.from({ length: 8 }, (_, i) => `w${i}`);
      const creating = createPods(
        api,
        names.map((n) => [NS, n] as const),
        4,
      );
      const added: VmPort[] = [];
      for (let i = 0; i < 6; i++) {
        await sim.writer.rewriteSwitch(overlay, i);
        added.push(await sim.writer.addVmPort({ ip4: `10.60.0.${200 + i}` }));
      }
      await creating;
      await annotated(api, names);
      const dump = await sim.dump();
      const ports = new Set(listOf(dump.Logical_Switch?.[overlay]?.ports) as string[]);
      for (const u of listOf(before.Logical_Switch?.[overlay]?.ports) as string[])
        assert.ok(ports.has(u), `ZStack's port ${u} is on the switch`);
      for (const v of added)
        assert.ok(ports.has(v.uuid), `the VM port ${v.name} added meanwhile is on the switch`);
      const ours = await podPortUuids(sim, "w");
      assert.equal(ours.size, names.length);
      for (const u of ours) assert.ok(ports.has(u), `pod port ${u} is on the switch`);

      // Level-triggered: a restart with nothing changed writes nothing to NB. Northd first (it sets the new VM
      // ports' `up`), so the comparison sees only what the restarted controller writes.
      await sim.sync();
      const full = await sim.dump();
      await ctl.stop();
      ctl = await startController(t, api, sim);
      await ctl.synced;
      await until("a Subnet status written by the new term", async () =>
        readyCondition(await getSubnet(api, "zs-overlay"))?.status === "True" ? true : undefined,
      );
      await sim.sync();
      const after = await sim.dump();
      assert.deepEqual(diffDumps(full, after), [], "the restarted controller wrote nothing to NB");

      await deletePodsAndPorts(api, sim, names, "w");
      for (const v of added) await sim.writer.removeVmPort(v);
      // ZStack's last rewrite stays ZStack's: put the switch back as it was, as ZStack would on its own.
      await sim.writer.transact([
        {
          op: "update",
          table: "Logical_Switch",
          where: [["_uuid", "==", ["uuid", overlay]]],
          row: { external_ids: before.Logical_Switch?.[overlay]?.external_ids },
        },
      ]);
    },
  );

  // Whatever an earlier subtest left (it failed midway) would hold addresses the property does not know of.
  await deletePodsAndPorts(api, sim, [...Array.from({ length: 12 }, (_, i) => `p${i}`), "held"], "");
  await t.test(
    "property: over interleavings of VM add/remove and pod create/delete, no pod gets an address a VM held first",
    async () => {
      let seq = 0;
      const step = fc.oneof(
        fc.record({ kind: fc.constant("vm+" as const), host: fc.integer({ min: 13, max: 40 }) }),
        fc.record({ kind: fc.constant("vm-" as const), i: fc.nat() }),
        fc.record({ kind: fc.constant("pod+" as const) }),
        fc.record({ kind: fc.constant("pod-" as const), i: fc.nat() }),
      );
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 4, maxLength: 10 }), async (steps) => {
          const liveVms: { port: VmPort; ip: string }[] = [];
          const livePods: string[] = [];
          for (const s of steps) {
            if (s.kind === "vm+") {
              // ZStack picks from its own pool and cannot see pods: the address may be a pod's (a conflict).
              const ip = `10.60.0.${s.host}`;
              if (liveVms.some((v) => v.ip === ip)) continue;
              liveVms.push({ port: await sim.writer.addVmPort({ ip4: ip }), ip });
            } else if (s.kind === "vm-" && liveVms.length > 0) {
              const [v] = liveVms.splice(s.i % liveVms.length, 1);
              if (v) await sim.writer.removeVmPort(v.port);
            } else if (s.kind === "pod+") {
              const name = `q${seq++}`;
              await createPods(api, [[NS, name]]);
              const p = (await annotated(api, [name])).get(name) as PodView;
              const ip = podAddress(p) as string;
              // The VMs present before the pod was created hold their addresses: the pod never gets one.
              assert.ok(
                !liveVms.some((v) => v.ip === ip),
                `pod ${name} got ${ip}, held by a VM that existed first`,
              );
              livePods.push(name);
            } else if (s.kind === "pod-" && livePods.length > 0) {
              const [name] = livePods.splice(s.i % livePods.length, 1);
              if (name) await deletePods(api, [[NS, name]]);
            }
          }
          await deletePodsAndPorts(api, sim, livePods, "q");
          for (const v of liveVms) await sim.writer.removeVmPort(v.port);
        }),
        { numRuns: 6 },
      );
    },
  );

  await t.test(
    "ZStack changing the switch's subnet makes the Subnet Failed and new pods wait; changed back, they get addresses",
    async () => {
      const oc = plain(before.Logical_Switch?.[overlay]?.other_config) as Record<string, string>;
      await setOc({ ...oc, subnet: "10.60.0.0/23" });
      const failed = await untilReason(api, "zs-overlay", "ExternalSwitchMismatch");
      assert.match(readyCondition(failed)?.message ?? "", /other_config:subnet=10\.60\.0\.0\/23/);
      await createPods(api, [[NS, "waiter"]]);
      await until(
        "waiter's SubnetNotReady Event",
        async () => {
          const l = await api.request<{ items: { reason: string; involvedObject: { name: string } }[] }>(
            `/api/v1/namespaces/${NS}/events`,
          );
          return l.items.find((e) => e.reason === "SubnetNotReady" && e.involvedObject.name === "waiter");
        },
        60_000,
      );
      assert.equal((await podPortUuids(sim, "waiter")).size, 0, "no port while the Subnet does not match");
      await setOc(oc);
      await untilReason(api, "zs-overlay", "Ready");
      await annotated(api, ["waiter"]);
      await deletePodsAndPorts(api, sim, ["waiter"], "waiter");
    },
  );

  await t.test(
    "a range ZStack adds to exclude_ips while the controller runs is never handed out",
    async () => {
      const oc = plain(before.Logical_Switch?.[overlay]?.other_config) as Record<string, string>;
      const free = (await getSubnet(api, "zs-overlay")).status?.availableIPs ?? 0;
      await setOc({ ...oc, exclude_ips: `${oc.exclude_ips} 10.60.0.13..10.60.0.60` });
      // The pod is created once the controller has seen the range (its count of free addresses dropped): a pod
      // allocated while ZStack's write is still on its way to the controller is a race no one can win.
      await until(
        "the controller counts the excluded range",
        async () =>
          ((await getSubnet(api, "zs-overlay")).status?.availableIPs ?? free) < free ? true : undefined,
        60_000,
      );
      await createPods(api, [[NS, "late"]]);
      const ip = podAddress((await annotated(api, ["late"])).get("late") as PodView) as string;
      const last = Number(ip.split(".")[3]);
      assert.ok(last > 60, `the pod got ${ip}, inside the range ZStack excluded`);
      await deletePodsAndPorts(api, sim, ["late"], "late");
      await setOc(oc);
    },
  );

  await t.test(
    "our router port on ZStack's switch: our rows, joined by mutate only, the pods' routes through it; a Subnet deleted takes its port and the group reference",
    async () => {
      await sim.sync();
      const dump = await sim.dump();
      const ownerIs = (r: Record<string, unknown>, id: string) => {
        const ids = plain(r.external_ids) as Record<string, string>;
        return ids["zstack.io/owner"] === "zstack-ovnkube-controller" && ids["zstack.io/id"] === id;
      };
      const find = (d: DatabaseDump, table: string, id: string) =>
        Object.entries(d[table] ?? {}).filter(([, r]) => ownerIs(r, id));
      const lrps = find(dump, "Logical_Router_Port", "subnet/zs-overlay/ext-rtoe");
      const lsps = find(dump, "Logical_Switch_Port", "subnet/zs-overlay/ext-etor");
      assert.equal(lrps.length, 1, "one router port of ours for the Subnet");
      assert.equal(lsps.length, 1, "one switch-side port of ours for the Subnet");
      const [lrpUuid, lrp] = lrps[0] as [string, Record<string, unknown>];
      const [lspUuid, lsp] = lsps[0] as [string, Record<string, unknown>];
      const networks = listOf(lrp.networks) as string[];
      assert.equal(networks.length, 1);
      const routerIp = (networks[0] as string).replace(/\/24$/, "");
      assert.match(networks[0] as string, /^10\.60\.0\.\d+\/24$/);
      assert.ok(!zstackTaken(before, overlay).has(routerIp), `${routerIp} is an address ZStack's rows held`);
      // On the cluster router (ours), and the peer on ZStack's switch pointing at it.
      const router = Object.entries(dump.Logical_Router ?? {}).find(([, r]) => ownerIs(r, "cluster-router"));
      assert.ok(router && listOf(router[1].ports).includes(lrpUuid), "the port is on our cluster router");
      assert.equal(lsp.type, "router");
      assert.deepEqual(plain(lsp.options), { "router-port": lrp.name });
      assert.ok(
        listOf(dump.Logical_Switch?.[overlay]?.ports).includes(lspUuid),
        "the peer is on ZStack's switch",
      );
      // ZStack's switch refers to the group of cluster-IP load balancers only, never the full one.
      const group = Object.entries(dump.Load_Balancer_Group ?? {}).find(
        ([, r]) => r.name === CLUSTER_IP_LB_GROUP,
      );
      assert.ok(group);
      assert.deepEqual(listOf(dump.Logical_Switch?.[overlay]?.load_balancer_group), [group[0]]);
      // What enters through our router port from anything but our pods of the Subnet is dropped: our pods allowed
      // (1011), the rest dropped (1010).
      const guards = find(dump, "Logical_Router_Policy", "subnet/zs-overlay/ext-guard-v4");
      const allows = find(dump, "Logical_Router_Policy", "subnet/zs-overlay/ext-guard-v4-allow");
      assert.equal(guards.length, 1);
      assert.equal(allows.length, 1);
      assert.equal(guards[0]?.[1].action, "drop");
      assert.equal(guards[0]?.[1].match, `inport == "${lrp.name}" && ip4`);
      assert.equal(allows[0]?.[1].action, "allow");
      assert.equal(
        allows[0]?.[1].match,
        `inport == "${lrp.name}" && ip4.src == $zovn_external_pods_v4 && ip4.src == 10.60.0.0/24`,
      );
      for (const g of [guards[0], allows[0]])
        assert.ok(router && listOf(router[1].policies).includes(g?.[0]), "on our cluster router");
      // ZStack's rows differ only by those mutations (and our pods' ports).
      assertOnlyOurPorts(
        before,
        foreignRows(dump),
        overlay,
        new Set([...(await podPortUuids(sim)), lspUuid]),
      );
      // zovn uninstall --dry-run plans to take both mutations back, and changes nothing.
      const dry = await run(
        "node",
        ["--import", "tsx", "src/cli/zovn.ts", "uninstall", "--nb", sim.nbRemotes.join(","), "--dry-run"],
        { cwd: ROOT, timeout: 300_000 },
      );
      const unlinks = dry.stdout
        .split("\n")
        .filter((l) => l.startsWith(`unlink  Logical_Switch ${overlay} `));
      assert.ok(
        unlinks.some((l) => / ports -= /.test(l) && l.includes(lspUuid)),
        `the dry run unlinks our router port's peer from the switch:\n${dry.stdout}`,
      );
      assert.ok(
        unlinks.some((l) => l.endsWith(` load_balancer_group -= ${group[0]}`)),
        `the dry run unlinks our group from the switch:\n${dry.stdout}`,
      );
      assert.match(dry.stdout, new RegExp(`delete  Logical_Router_Port ${lrpUuid} `));
      await sim.sync();
      assert.deepEqual(diffDumps(dump, await sim.dump()), [], "the dry run changed nothing");

      // A pod there: ZStack's router as its default gateway, the cluster's networks via our router port.
      await createPods(api, [[NS, "routed"]]);
      const pod = (await annotated(api, ["routed"])).get("routed") as PodView;
      const ann = parsePodNetworksAnnotation(pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
      assert.deepEqual(ann?.gateway_ips, ["10.60.0.1"]);
      assert.deepEqual(ann?.routes, [
        { dest: "100.64.0.0/16", nextHop: routerIp },
        { dest: "10.244.0.0/16", nextHop: routerIp },
        { dest: "10.96.0.0/16", nextHop: routerIp },
      ]);
      assert.notEqual(podAddress(pod), routerIp);
      await sim.sync();
      const sets = Object.values((await sim.dump()).Address_Set ?? {}).filter(
        (r) => r.name === "zovn_external_pods_v4",
      );
      assert.equal(sets.length, 1);
      assert.ok(listOf(sets[0]?.addresses).includes(podAddress(pod)), "the pod is in the external pods' set");
      await deletePodsAndPorts(api, sim, ["routed"], "routed");
      await sim.sync();
      const afterPod = Object.values((await sim.dump()).Address_Set ?? {}).find(
        (r) => r.name === "zovn_external_pods_v4",
      );
      assert.ok(!listOf(afterPod?.addresses).includes(podAddress(pod)), "the deleted pod left the set");

      // A Subnet on the flat switch (a localnet port): a router port of ours there too (the nodes' chassis MACs
      // keep its MAC off the physical network), with its source guard and the group reference; no ClusterPath
      // condition (an earlier version's False one goes); its pods get the cluster routes.
      const flat = sim.uuid("flat-switch");
      await createNamespace(api, "zsflat");
      await createSubnet(api, "zs-flat", {
        cidr: "192.168.100.0/24",
        gateway: "192.168.100.1",
        externalLogicalSwitch: "l2-flat-network",
        namespaces: ["zsflat"],
      });
      const flatReady = await until(
        "zs-flat Ready",
        async () => {
          const x = await getSubnet(api, "zs-flat");
          return readyCondition(x)?.reason === "Ready" ? x : undefined;
        },
        60_000,
      );
      assert.equal(
        flatReady.status?.conditions?.some((c) => c.type === "ClusterPath"),
        false,
        "no ClusterPath condition",
      );
      // Upgrade: the False ClusterPath condition an earlier version wrote (no router port on a localnet switch)
      // goes with the next status write.
      await api.request(`${SUBNET_PATH}/zs-flat/status`, {
        method: "PATCH",
        body: {
          status: {
            conditions: [
              ...(flatReady.status?.conditions ?? []),
              {
                type: "ClusterPath",
                status: "False",
                reason: "LocalnetSwitch",
                message: "an earlier version's",
                lastTransitionTime: "2026-01-01T00:00:00Z",
              },
            ],
          },
        },
      });
      await until(
        "the earlier version's ClusterPath condition gone",
        async () => {
          const x = await getSubnet(api, "zs-flat");
          return readyCondition(x)?.reason === "Ready" &&
            !x.status?.conditions?.some((c) => c.type === "ClusterPath")
            ? true
            : undefined;
        },
        60_000,
      );
      await createPods(api, [["zsflat", "onflat"]]);
      const onFlat = await until(
        "the pod on the flat switch annotated",
        async () =>
          (await listPods(api)).find(
            (p) => p.metadata.namespace === "zsflat" && p.metadata.name === "onflat" && podAddress(p),
          ),
        60_000,
      );
      const flatAnn = parsePodNetworksAnnotation(onFlat.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
      assert.match(podAddress(onFlat) ?? "", /^192\.168\.100\.\d+$/);
      assert.deepEqual(flatAnn?.gateway_ips, ["192.168.100.1"]);
      await sim.sync();
      const flatDump = await sim.dump();
      const [flatLrp] = find(flatDump, "Logical_Router_Port", "subnet/zs-flat/ext-rtoe");
      assert.ok(flatLrp, "our router port on the flat switch");
      const flatRouterIp = String((listOf(flatLrp[1].networks) as string[])[0]).replace(/\/24$/, "");
      assert.match(flatRouterIp, /^192\.168\.100\.\d+$/);
      assert.deepEqual(flatAnn?.routes, [
        { dest: "100.64.0.0/16", nextHop: flatRouterIp },
        { dest: "10.244.0.0/16", nextHop: flatRouterIp },
        { dest: "10.96.0.0/16", nextHop: flatRouterIp },
      ]);
      const [etor] = find(flatDump, "Logical_Switch_Port", "subnet/zs-flat/ext-etor");
      assert.ok(
        etor && listOf(flatDump.Logical_Switch?.[flat]?.ports).includes(etor[0]),
        "joined to the flat switch",
      );
      assert.equal(find(flatDump, "Logical_Router_Policy", "subnet/zs-flat/ext-guard-v4").length, 1);
      assert.deepEqual(listOf(flatDump.Logical_Switch?.[flat]?.load_balancer_group), [group[0]]);
      // ZStack's localnet port, held by a group of ours (a weak reference in our row: ZStack's rows unchanged) whose
      // two allow-stateless ACLs keep the cluster's routed traffic out of the localnet port's conntrack zone.
      const localnet = listOf(flatDump.Logical_Switch?.[flat]?.ports).filter(
        (u) => flatDump.Logical_Switch_Port?.[u as string]?.type === "localnet",
      );
      assert.equal(localnet.length, 1, "the flat switch's localnet port");
      const [lnGroup] = find(flatDump, "Port_Group", "subnet/zs-flat/ext-localnet");
      assert.ok(lnGroup, "our group on the flat switch's localnet port");
      assert.deepEqual(listOf(lnGroup[1].ports), localnet);
      const lnAcls = listOf(lnGroup[1].acls).map((u) => flatDump.ACL?.[u as string]);
      assert.deepEqual(lnAcls.map((a) => [a?.direction, a?.action, a?.priority]).sort(), [
        ["from-lport", "allow-stateless", 0],
        ["from-lport", "drop", 32_100],
        ["to-lport", "allow-stateless", 0],
      ]);
      // Each of our ACLs under its chosen UUID: a retried insert after a lost reply is refused, never a second row.
      for (const suffix of ["from-lport", "to-lport", "router-guard"]) {
        const id = `subnet/zs-flat/ext-localnet/${suffix}`;
        const rows = find(flatDump, "ACL", id);
        assert.equal(rows.length, 1, `ACL ${id}`);
        assert.equal(rows[0]?.[0], rowUuid("external-localnet-acl", id), `ACL ${id}'s UUID`);
      }
      // ZStack's NB turns on default_acl_drop (every switch with ACLs then drops by default): our group would make
      // ZStack's flat switch one with ACLs and cut its VMs off, so it goes (the router port stays); turned off
      // again, it comes back.
      const nbGlobal = Object.keys(flatDump.NB_Global ?? {})[0] as string;
      const setDrop = (on: boolean) =>
        run("ovsdb-client", [
          "transact",
          sim.nbRemotes[0] as string,
          JSON.stringify([
            "OVN_Northbound",
            {
              op: "mutate",
              table: "NB_Global",
              where: [["_uuid", "==", ["uuid", nbGlobal]]],
              mutations: on
                ? [["options", "insert", ["map", [["default_acl_drop", "true"]]]]]
                : [["options", "delete", ["set", ["default_acl_drop"]]]],
            },
          ]),
        ]);
      await setDrop(true);
      await until(
        "our localnet group gone while default_acl_drop is on",
        async () =>
          find(await sim.dump(), "Port_Group", "subnet/zs-flat/ext-localnet").length === 0 ? true : undefined,
        60_000,
      );
      assert.equal(find(await sim.dump(), "Logical_Router_Port", "subnet/zs-flat/ext-rtoe").length, 1);
      await setDrop(false);
      await until(
        "our localnet group back once default_acl_drop is off",
        async () =>
          find(await sim.dump(), "Port_Group", "subnet/zs-flat/ext-localnet").length === 1 ? true : undefined,
        60_000,
      );
      // ZStack puts a load balancer of its own on the flat switch: its localnet port was in conntrack for it before
      // we came, so our stateless ACLs narrow to the cluster's own sources; ZStack takes it away, they widen again.
      const lnMatches = async () => {
        const d = await sim.dump();
        return ["from-lport", "to-lport"].map(
          (sfx) => find(d, "ACL", `subnet/zs-flat/ext-localnet/${sfx}`)[0]?.[1].match,
        );
      };
      assert.deepEqual(await lnMatches(), [
        `inport == @${lnGroup[1].name} && ip`,
        `outport == @${lnGroup[1].name} && ip`,
      ]);
      const zsLb = "5a1b0000-0000-4000-8000-00000000005a";
      await run("ovsdb-client", [
        "transact",
        sim.nbRemotes[0] as string,
        JSON.stringify([
          "OVN_Northbound",
          {
            op: "insert",
            table: "Load_Balancer",
            uuid: zsLb,
            row: {
              name: "zstack-lb",
              protocol: "tcp",
              vips: ["map", [["192.168.100.200:80", "192.168.100.21:80"]]],
            },
          },
          {
            op: "mutate",
            table: "Logical_Switch",
            where: [["_uuid", "==", ["uuid", flat]]],
            mutations: [["load_balancer", "insert", ["uuid", zsLb]]],
          },
        ]),
      ]);
      await until(
        "our stateless ACLs narrowed to the cluster's sources",
        async () =>
          (await lnMatches()).every((m) => String(m).includes("$zovn_inside_v4")) ? true : undefined,
        60_000,
      );
      await run("ovsdb-client", [
        "transact",
        sim.nbRemotes[0] as string,
        JSON.stringify([
          "OVN_Northbound",
          {
            op: "mutate",
            table: "Logical_Switch",
            where: [["_uuid", "==", ["uuid", flat]]],
            mutations: [["load_balancer", "delete", ["uuid", zsLb]]],
          },
          { op: "delete", table: "Load_Balancer", where: [["_uuid", "==", ["uuid", zsLb]]] },
        ]),
      ]);
      await until(
        "our stateless ACLs wide again",
        async () => ((await lnMatches()).every((m) => String(m).endsWith("&& ip")) ? true : undefined),
        60_000,
      );
      // ZStack takes its localnet port off the switch and puts it back (as ZStack's own rows, by a raw transaction:
      // the same UUID and columns, so its rows end as they were): the group follows the switch, without the port
      // while it is gone (nothing to skip conntrack for) and holding it again once it is back.
      const lnUuid = localnet[0] as string;
      const lnRow = flatDump.Logical_Switch_Port?.[lnUuid] as Record<string, unknown>;
      const transact = (ops: unknown[]) =>
        run("ovsdb-client", [
          "transact",
          sim.nbRemotes[0] as string,
          JSON.stringify(["OVN_Northbound", ...ops]),
        ]);
      const portsOp = (mutator: "insert" | "delete", ref: unknown) => ({
        op: "mutate",
        table: "Logical_Switch",
        where: [["_uuid", "==", ["uuid", flat]]],
        mutations: [["ports", mutator, ref]],
      });
      await transact([portsOp("delete", ["uuid", lnUuid])]);
      const groupPorts = async () => {
        const [g] = find(await sim.dump(), "Port_Group", "subnet/zs-flat/ext-localnet");
        return g ? listOf(g[1].ports) : undefined;
      };
      await until(
        "our group without the localnet port gone",
        async () => ((await groupPorts()) ?? []).length === 0 || undefined,
        60_000,
      );
      const { _uuid: _u, ...columns } = lnRow;
      await transact([
        { op: "insert", table: "Logical_Switch_Port", uuid: lnUuid, row: columns, "uuid-name": "ln" },
        portsOp("insert", ["named-uuid", "ln"]),
      ]);
      await until(
        "our group holding the localnet port put back",
        async () => (JSON.stringify(await groupPorts()) === JSON.stringify([lnUuid]) ? true : undefined),
        60_000,
      );
      await deletePods(api, [["zsflat", "onflat"]]);
      await until(
        "the flat pod's port gone",
        async () =>
          Object.values((await sim.dump()).Logical_Switch_Port ?? {}).some((r) =>
            JSON.stringify(r.external_ids).includes('"zsflat/onflat"'),
          )
            ? undefined
            : true,
        60_000,
      );
      await deleteSubnet(api, "zs-flat");
      await until(
        "the flat switch as ZStack left it",
        async () => {
          const d = await sim.snapshot();
          return diffDumps(before, d).filter((l) => l.includes(flat)).length === 0 ? true : undefined;
        },
        60_000,
      );
      assert.deepEqual(
        find(await sim.dump(), "Port_Group", "subnet/zs-flat/ext-localnet"),
        [],
        "our localnet group went with the Subnet",
      );
      // The overlay Subnet's reference stays: its router port is still there.
      assert.deepEqual(listOf((await sim.dump()).Logical_Switch?.[overlay]?.load_balancer_group), [group[0]]);
    },
  );

  await t.test(
    "a VM given our router port's address sets AddressConflict naming the router port and the VM, and an Event",
    async () => {
      await sim.sync();
      const lrp = Object.values((await sim.dump()).Logical_Router_Port ?? {}).find((r) =>
        JSON.stringify(r.external_ids).includes('"subnet/zs-overlay/ext-rtoe"'),
      );
      const routerIp = String((listOf(lrp?.networks) as string[])[0]).replace(/\/24$/, "");
      assert.match(routerIp, /^10\.60\.0\.\d+$/);
      const vm = await sim.writer.addVmPort({ ip4: routerIp });
      const s = await until(
        "AddressConflict True",
        async () => {
          const x = await getSubnet(api, "zs-overlay");
          return x.status?.conditions?.find((c) => c.type === "AddressConflict" && c.status === "True")
            ? x
            : undefined;
        },
        60_000,
      );
      const cond = s.status?.conditions?.find((c) => c.type === "AddressConflict");
      assert.ok(
        cond?.message.includes(routerIp) &&
          cond.message.includes("zovn-rtoe-zs-overlay") &&
          cond.message.includes(vm.name),
        cond?.message,
      );
      const ev = await until(
        "AddressConflict Event naming the router port",
        async () => {
          const l = await api.request<{
            items: { reason: string; message: string; involvedObject: { name: string } }[];
          }>("/api/v1/namespaces/default/events");
          return l.items.find(
            (e) =>
              e.reason === "AddressConflict" &&
              e.involvedObject.name === "zs-overlay" &&
              e.message.includes("zovn-rtoe-zs-overlay") &&
              e.message.includes(vm.name),
          );
        },
        60_000,
      );
      assert.ok(ev.message.includes(vm.name) && ev.message.includes(routerIp), ev.message);
      await sim.writer.removeVmPort(vm);
      await until(
        "AddressConflict False",
        async () => {
          const x = await getSubnet(api, "zs-overlay");
          return x.status?.conditions?.find((c) => c.type === "AddressConflict" && c.status === "False")
            ? x
            : undefined;
        },
        60_000,
      );
    },
  );

  await t.test(
    "a Subnet deleted after ZStack rewrote its switch's ports without ours still takes the group reference; an old full-group reference is replaced",
    async () => {
      const [sw] = await sim.writer.transact([
        {
          op: "insert",
          table: "Logical_Switch",
          row: { name: "zstack-rewritten", other_config: ["map", [["subnet", "10.71.0.0/24"]]] },
        },
      ]);
      assert.ok(sw);
      await createSubnet(api, "zs-rw", {
        cidr: "10.71.0.0/24",
        gateway: "10.71.0.1",
        externalLogicalSwitch: sw,
      });
      await untilReason(api, "zs-rw", "Ready");
      const groupOf = (d: DatabaseDump, name: string) =>
        Object.entries(d.Load_Balancer_Group ?? {}).find(([, r]) => r.name === name)?.[0];
      const linked = await until(
        "our router port and the cluster-IP group on the switch",
        async () => {
          const d = await sim.dump();
          const ls = d.Logical_Switch?.[sw];
          return listOf(ls?.ports).length === 1 &&
            JSON.stringify(listOf(ls?.load_balancer_group)) ===
              JSON.stringify([groupOf(d, CLUSTER_IP_LB_GROUP)])
            ? d
            : undefined;
        },
        60_000,
      );
      const full = groupOf(linked, CLUSTER_LB_GROUP);
      const ipGroup = groupOf(linked, CLUSTER_IP_LB_GROUP);
      assert.ok(full && ipGroup);
      await ctl.stop();
      // While no controller runs: ZStack rewrites the switch's ports without ours (our port row goes with its last
      // reference), the overlay switch refers to the full group as an earlier version left it, and the Subnet is
      // deleted (its finalizer keeps it for the controller).
      await sim.writer.transact([
        {
          op: "update",
          table: "Logical_Switch",
          where: [["_uuid", "==", ["uuid", sw]]],
          row: { ports: ["set", []] },
        },
        {
          op: "mutate",
          table: "Logical_Switch",
          where: [["_uuid", "==", ["uuid", overlay]]],
          mutations: [
            ["load_balancer_group", "delete", ["uuid", ipGroup]],
            ["load_balancer_group", "insert", ["uuid", full]],
          ],
        },
      ]);
      await api.request(`${SUBNET_PATH}/zs-rw`, { method: "DELETE" });
      ctl = await startController(t, api, sim);
      await until(
        "Subnet zs-rw gone",
        async () => {
          try {
            await getSubnet(api, "zs-rw");
            return undefined;
          } catch {
            return true;
          }
        },
        60_000,
      );
      await until(
        "no group reference on the rewritten switch; the overlay switch on the cluster-IP group only",
        async () => {
          const d = await sim.dump();
          return listOf(d.Logical_Switch?.[sw]?.load_balancer_group).length === 0 &&
            JSON.stringify(listOf(d.Logical_Switch?.[overlay]?.load_balancer_group)) ===
              JSON.stringify([ipGroup])
            ? true
            : undefined;
        },
        60_000,
      );
      await sim.writer.transact([
        { op: "delete", table: "Logical_Switch", where: [["_uuid", "==", ["uuid", sw]]] },
      ]);
    },
  );

  await t.test(
    "200 pod create/delete cycles with ZStack's writer active: every pod reaches its port on the switch, with a free address",
    async () => {
      // ZStack keeps working meanwhile: a VM comes and goes and the switch is rewritten, over and over.
      const cycles = 200;
      const batch = 20;
      let writing = true;
      let writes = 0;
      const writer = (async () => {
        for (let i = 0; writing; i++) {
          const vm = await sim.writer.addVmPort({ ip4: `10.60.0.${240 + (i % 9)}` });
          await sim.writer.rewriteSwitch(overlay, 1000 + i);
          await sim.writer.removeVmPort(vm);
          writes += 3;
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      writer.catch(() => {}); // awaited below; its failure fails the test there
      const taken = zstackTaken(before, overlay);
      const started = Date.now();
      try {
        for (let b = 0; b < cycles / batch; b++) {
          const names = Array.from({ length: batch }, (_, i) => `c${b}-${i}`);
          await createPods(
            api,
            names.map((n) => [NS, n] as const),
            10,
          );
          const pods = await annotated(api, names);
          const ips = [...pods.values()].map((p) => podAddress(p) as string);
          assert.equal(new Set(ips).size, batch, `batch ${b}: no address given twice`);
          for (const ip of ips) assert.ok(!taken.has(ip), `batch ${b}: ${ip} is held by a ZStack row`);
          const ours = await until(
            `batch ${b}: ${batch} pod ports`,
            async () => {
              const u = await podPortUuids(sim, `c${b}-`);
              return u.size === batch ? u : undefined;
            },
            60_000,
          );
          const onSwitch = new Set(listOf((await sim.dump()).Logical_Switch?.[overlay]?.ports) as string[]);
          for (const u of ours) assert.ok(onSwitch.has(u), `batch ${b}: pod port ${u} is on the switch`);
          await deletePodsAndPorts(api, sim, names, `c${b}-`);
        }
      } finally {
        writing = false;
        await writer;
      }
      t.diagnostic(
        `${cycles} cycles in batches of ${batch}: ${((Date.now() - started) / 1000).toFixed(1)} s, ZStack's writer made ${writes} writes meanwhile`,
      );
      // ZStack's last rewrite stays ZStack's: put the switch back as it was, as ZStack would on its own.
      await sim.writer.transact([
        {
          op: "update",
          table: "Logical_Switch",
          where: [["_uuid", "==", ["uuid", overlay]]],
          row: { external_ids: before.Logical_Switch?.[overlay]?.external_ids },
        },
      ]);
    },
  );

  await t.test(
    "after the pods are gone, zovn uninstall and a restart of ZStack's NB from its database file, every ZStack row is byte-identical and nothing of ours is left",
    async () => {
      await deleteSubnet(api, "zs-overlay");
      await ctl.stop();
      const remote = sim.nbRemotes.join(",");
      const { stdout } = await run(
        "node",
        ["--import", "tsx", "src/cli/zovn.ts", "uninstall", "--nb", remote],
        {
          cwd: ROOT,
          timeout: 300_000,
        },
      );
      assert.match(stdout, /rows of ours/);
      await sim.sync();
      const dump = await sim.dump();
      assert.deepEqual(ownedRows(dump), [], "no row of ours is left");
      assert.deepEqual(diffDumps(before, await sim.snapshot()), [], "ZStack's rows are byte-identical");
      // What is on disk, not only what the running server holds: ZStack's NB restarted from its database file.
      const server = sim.nbServer;
      assert.ok(server);
      await server.restart();
      await sim.sync();
      const restarted = await sim.dump();
      assert.deepEqual(ownedRows(restarted), [], "no row of ours is left after the restart");
      assert.deepEqual(
        diffDumps(before, restarted),
        [],
        "ZStack's rows are byte-identical after the restart",
      );
    },
  );
  t.diagnostic(`whole run ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

test("External mode, chassis MAC guard: no router port of ours on ZStack's flat switch while a node of ours maps its network without a chassis MAC", async (t) => {
  const { api } = await useApiserver(t);
  const sim = await useZStackSim(t);
  const flat = sim.uuid("flat-switch");
  const t0 = Date.now();
  const nbDump = async () => {
    await sim.sync();
    return sim.dump();
  };
  const before = foreignRows(await nbDump());
  const sbTransact = (ops: unknown[]) =>
    run("ovsdb-client", ["transact", sim.sbRemotes[0] as string, JSON.stringify(["OVN_Southbound", ...ops])]);
  // The chassis as ovn-controller (OVN 23.03) publishes its node's settings in SB: other_config (the column is
  // checked on real ovn-controllers by test/integration/external/pod-vm-traffic.test.ts). node1 maps the flat
  // network without a chassis MAC (an old agent, or ovn-bridge-mappings set by someone else), node2 with one, node3
  // maps another network only; ZStack's own hypervisor maps flat without a chassis MAC and never counts.
  const flatMac = (n: number) => `flat:0e:00:00:00:00:0${n}`;
  const config = (maps: string, macs?: string) => [
    "map",
    [["ovn-bridge-mappings", maps], ...(macs ? [["ovn-chassis-mac-mappings", macs]] : [])],
  ];
  const chassisRows: [string, string, unknown][] = [
    ["k8s-node1", "node1", config("flat:br-flat")],
    ["k8s-node2", "node2", config("flat:br-flat", flatMac(2))],
    ["k8s-node3", "node3", config("other:br-other")],
    ["5f0c1a9e2b7d4c3a8e6f0a1b2c3d4e5f", "172.20.0.99", config("flat:br-eth0")],
  ];
  await sbTransact(
    chassisRows.flatMap(([name, hostname, other_config], i) => [
      {
        op: "insert",
        table: "Encap",
        row: { type: "geneve", ip: `127.0.0.${201 + i}`, chassis_name: name },
        "uuid-name": `e${i}`,
      },
      {
        op: "insert",
        table: "Chassis",
        row: { name, hostname, encaps: ["named-uuid", `e${i}`], other_config },
      },
    ]),
  );
  const setNode1 = (macs?: string) =>
    sbTransact([
      {
        op: "update",
        table: "Chassis",
        where: [["name", "==", "k8s-node1"]],
        row: { other_config: config("flat:br-flat", macs) },
      },
    ]);
  for (const name of ["node1", "node2", "node3"])
    await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name } } });

  let ctl = await startController(t, api, sim, { sb: true });
  await createNamespace(api, "zsguard");
  await createSubnet(api, "zs-guard", {
    cidr: "192.168.100.0/24",
    gateway: "192.168.100.1",
    externalLogicalSwitch: "l2-flat-network",
    namespaces: ["zsguard"],
  });
  const find = (d: DatabaseDump, table: string, id: string) =>
    Object.entries(d[table] ?? {}).filter(([, r]) => {
      const ids = plain(r.external_ids) as Record<string, string>;
      return ids["zstack.io/owner"] === "zstack-ovnkube-controller" && ids["zstack.io/id"] === id;
    });
  const ROWS = [
    ["Logical_Router_Port", "subnet/zs-guard/ext-rtoe"],
    ["Logical_Switch_Port", "subnet/zs-guard/ext-etor"],
    ["Logical_Router_Policy", "subnet/zs-guard/ext-guard-v4"],
    ["Logical_Router_Policy", "subnet/zs-guard/ext-guard-v4-allow"],
    ["Port_Group", "subnet/zs-guard/ext-localnet"],
  ] as const;
  /** The router port is absent with everything that goes with it, and ZStack's rows are as before. */
  const assertNoRouterPort = async (when: string) => {
    const d = await nbDump();
    for (const [table, id] of ROWS) assert.equal(find(d, table, id).length, 0, `${when}: no ${table} ${id}`);
    assert.deepEqual(
      listOf(d.Logical_Switch?.[flat]?.load_balancer_group),
      [],
      `${when}: no group reference`,
    );
    // ZStack's rows as before but for the pod's own port in the switch's ports (our load-balancer groups have no
    // external_ids: they show as foreign rows added); the group reference was checked above.
    const ours = new Set([
      ...Object.entries(d.Logical_Switch_Port ?? {})
        .filter(([, r]) => (plain(r.external_ids) as Record<string, string>)["zstack.io/kind"] === "pod-port")
        .map(([u]) => u),
      ...Object.entries(d.Load_Balancer_Group ?? {})
        .filter(([, r]) => (OUR_LB_GROUPS as readonly string[]).includes(String(r.name)))
        .map(([u]) => u),
    ]);
    assert.deepEqual(
      onlyDocumentedMutations(before, foreignRows(d), ours),
      [],
      `${when}: ZStack's rows as before`,
    );
  };
  const guarded = async (when: string) => {
    const s = await untilReason(api, "zs-guard", "ChassisMacMissing");
    const path = s.status?.conditions?.find((c) => c.type === "ClusterPath");
    assert.equal(path?.status, "False", when);
    assert.equal(path?.reason, "ChassisMacMissing", when);
    const msg = path?.message ?? "";
    assert.match(msg, /node node1 maps physical network flat without a chassis MAC/, msg);
    assert.match(msg, /roll out the zstack-ovnkube-node DaemonSet/, msg);
    for (const other of ["node2", "node3", "172.20.0.99"]) assert.ok(!msg.includes(other), msg);
    return s;
  };
  const clear = async (when: string) => {
    const s = await untilReason(api, "zs-guard", "Ready");
    assert.equal(
      s.status?.conditions?.some((c) => c.type === "ClusterPath"),
      false,
      `${when}: no ClusterPath condition`,
    );
    const d = await until(
      `${when}: our router port on the flat switch`,
      async () => {
        const x = await nbDump();
        return find(x, "Logical_Router_Port", "subnet/zs-guard/ext-rtoe").length === 1 ? x : undefined;
      },
      60_000,
    );
    for (const [table, id] of ROWS) assert.equal(find(d, table, id).length, 1, `${when}: ${table} ${id}`);
    const [[etor]] = find(d, "Logical_Switch_Port", "subnet/zs-guard/ext-etor") as [[string, unknown]];
    assert.ok(listOf(d.Logical_Switch?.[flat]?.ports).includes(etor), `${when}: joined to the flat switch`);
    assert.equal(listOf(d.Logical_Switch?.[flat]?.load_balancer_group).length, 1, `${when}: group reference`);
    const [[, lrp]] = find(d, "Logical_Router_Port", "subnet/zs-guard/ext-rtoe") as [
      [string, Record<string, unknown>],
    ];
    return String((listOf(lrp.networks) as string[])[0]).replace(/\/24$/, "");
  };

  await t.test(
    "node1 without a chassis MAC: no router port, the condition and an Event name it",
    async () => {
      await guarded("at first");
      const ev = await until(
        "ChassisMacMissing Event",
        async () => {
          const l = await api.request<{
            items: { reason: string; message: string; involvedObject: { name: string } }[];
          }>("/api/v1/namespaces/default/events");
          return l.items.find(
            (e) => e.reason === "ChassisMacMissing" && e.involvedObject.name === "zs-guard",
          );
        },
        60_000,
      );
      assert.match(ev.message, /node node1 maps physical network flat/, ev.message);
      await assertNoRouterPort("guarded");
    },
  );

  await t.test(
    "a pod created meanwhile gets no port and no annotation (no routes to a port that is not there)",
    async () => {
      await createPods(api, [["zsguard", "waiter"]]);
      // The pod's reconcile has run once the Subnet has loaded; give it a moment more, then it must still wait.
      await new Promise((r) => setTimeout(r, 3000));
      const p = (await listPods(api)).find((x) => x.metadata.namespace === "zsguard");
      assert.ok(p, "the pod exists");
      assert.equal(p.metadata.annotations?.[POD_NETWORKS_ANNOTATION], undefined, "no annotation yet");
      const ports = Object.values((await sim.dump()).Logical_Switch_Port ?? {}).filter(
        (r) => (plain(r.external_ids) as Record<string, string>)["zstack.io/pod"] === "zsguard/waiter",
      );
      assert.equal(ports.length, 0, "no port yet");
    },
  );

  let routerIp = "";
  await t.test(
    "node1's chassis MAC appears: the port comes, and the waiting pod gets routes through it",
    async () => {
      await setNode1(flatMac(1));
      routerIp = await clear("MAC added");
      const pod = await until(
        "the waiting pod annotated",
        async () =>
          (await listPods(api)).find(
            (p) => p.metadata.namespace === "zsguard" && podAddress(p) !== undefined,
          ),
        60_000,
      );
      const ann = parsePodNetworksAnnotation(pod.metadata.annotations?.[POD_NETWORKS_ANNOTATION]);
      assert.deepEqual(ann?.routes, [
        { dest: "100.64.0.0/16", nextHop: routerIp },
        { dest: "10.244.0.0/16", nextHop: routerIp },
        { dest: "10.96.0.0/16", nextHop: routerIp },
      ]);
    },
  );

  await t.test(
    "node1 loses it (a malformed entry counts as none): the port goes with its guard, group and reference; the pod keeps its routes; it comes back on the same address",
    async () => {
      const annBefore = (await listPods(api)).find((p) => p.metadata.namespace === "zsguard")?.metadata
        .annotations?.[POD_NETWORKS_ANNOTATION];
      await setNode1("flat:0e:00:00:00:00");
      await guarded("MAC malformed");
      await until(
        "the router port removed",
        async () =>
          find(await nbDump(), "Logical_Router_Port", "subnet/zs-guard/ext-rtoe").length === 0
            ? true
            : undefined,
        60_000,
      );
      await assertNoRouterPort("MAC malformed");
      const annAfter = (await listPods(api)).find((p) => p.metadata.namespace === "zsguard")?.metadata
        .annotations?.[POD_NETWORKS_ANNOTATION];
      assert.equal(annAfter, annBefore, "the pod's annotation is kept");
      await setNode1(flatMac(1));
      assert.equal(await clear("MAC back"), routerIp, "the router port takes its earlier address again");
    },
  );

  await t.test("guarded again, a restart with nothing changed writes nothing", async () => {
    await setNode1();
    await guarded("MAC removed");
    await until(
      "the router port removed",
      async () =>
        find(await nbDump(), "Logical_Router_Port", "subnet/zs-guard/ext-rtoe").length === 0
          ? true
          : undefined,
      60_000,
    );
    const full = await nbDump();
    const status = (await getSubnet(api, "zs-guard")).metadata.resourceVersion;
    await ctl.stop();
    ctl = await startController(t, api, sim, { sb: true });
    await ctl.synced;
    // The new term has judged the Subnet (its status unchanged: no write) and the pod; let its queues settle.
    await new Promise((r) => setTimeout(r, 3000));
    assert.deepEqual(diffDumps(full, await nbDump()), [], "the restarted controller wrote nothing to NB");
    assert.equal((await getSubnet(api, "zs-guard")).metadata.resourceVersion, status, "nor the Subnet");
    await setNode1(flatMac(1));
    await clear("after the restart, MAC back");
  });
  t.diagnostic(`whole run ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

test("External mode on ZStack's 3-member Raft NB: the leader killed while pods are created, every pod comes up once, and uninstall leaves ZStack's rows byte-identical", async (t) => {
  const { api } = await useApiserver(t);
  const sim = await useZStackSim(t, { raft: true });
  const cluster = sim.nbCluster;
  assert.ok(cluster);
  const overlay = sim.uuid("overlay-switch");
  const before = await sim.snapshot();
  const ctl = await startController(t, api, sim);
  await createNamespace(api, NS);
  await createSubnet(api, "zs-overlay", {
    cidr: "10.60.0.0/24",
    gateway: "10.60.0.1",
    externalLogicalSwitch: overlay,
    namespaces: [NS],
  });
  await untilReason(api, "zs-overlay", "Ready");
  const names = Array.from({ length: 16 }, (_, i) => `r${i}`);
  // Half of the pods before the kill, the other half created while the leader dies and a new one is elected.
  await createPods(
    api,
    names.slice(0, 8).map((n) => [NS, n] as const),
  );
  await annotated(api, names.slice(0, 8));
  const creating = createPods(
    api,
    names.slice(8).map((n) => [NS, n] as const),
    2,
  );
  const leader = await cluster.leader();
  leader.server.kill();
  const portsAtKill = (await podPortUuids(sim, "r").catch(() => new Set<string>())).size;
  await leader.server.waitForExit();
  const t0 = Date.now();
  await creating;
  const pods = await annotated(api, names);
  t.diagnostic(
    `pod ports when the leader was killed: ${portsAtKill}; all 16 annotated ${((Date.now() - t0) / 1000).toFixed(1)} s after`,
  );
  await leader.server.restart();
  await cluster.waitForQuorum(60_000);
  const dump = await sim.dump();
  const taken = zstackTaken(dump, overlay);
  const ips = [...pods.values()].map((p) => podAddress(p) as string);
  assert.equal(new Set(ips).size, ips.length, "no address given twice");
  for (const ip of ips) assert.ok(!taken.has(ip), `${ip} is held by a ZStack row`);
  // Nothing duplicated: one port per pod, each on the switch.
  const perPod = new Map<string, number>();
  for (const r of Object.values(dump.Logical_Switch_Port ?? {})) {
    const ids = plain(r.external_ids) as Record<string, string>;
    if (ids["zstack.io/kind"] === "pod-port")
      perPod.set(ids["zstack.io/pod"] ?? "", (perPod.get(ids["zstack.io/pod"] ?? "") ?? 0) + 1);
  }
  assert.deepEqual(
    [...perPod].filter(([, n]) => n !== 1),
    [],
    "every pod has exactly one port",
  );
  assert.equal(perPod.size, names.length);
  assertOnlyOurPorts(
    before,
    foreignRows(dump),
    overlay,
    new Set([...(await podPortUuids(sim, "r")), ...routerPortUuids(dump)]),
  );

  await deletePodsAndPorts(api, sim, names, "r");
  await deleteSubnet(api, "zs-overlay");
  await ctl.stop();
  await run("node", ["--import", "tsx", "src/cli/zovn.ts", "uninstall", "--nb", sim.nbRemotes.join(",")], {
    cwd: ROOT,
    timeout: 300_000,
  });
  await sim.sync();
  assert.deepEqual(ownedRows(await sim.dump()), [], "no row of ours is left");
  assert.deepEqual(diffDumps(before, await sim.snapshot()), [], "ZStack's rows are byte-identical");
});
