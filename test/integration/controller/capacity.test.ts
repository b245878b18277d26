// Limits and other writers, with zstack-ovnkube-controller as a process under VXLAN against a real apiserver and
// NB: a port someone else adds to our switch at run time holds its address; a switch at OVN's 2,048-port VXLAN
// limit refuses the next pod with an Event and a Subnet condition, and lets it in when a port goes; a cluster at
// the 4,096-datapath limit refuses a new Subnet by name until a switch goes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SUBNET_PATH, type Subnet } from "../../../src/api/subnet.ts";
import { VXLAN_PORTS_PER_SWITCH } from "../../../src/controller/pod-port-allocator.ts";
import { VXLAN_MAX_DATAPATHS } from "../../../src/controller/subnet-status.ts";
import { INSIDE_ADDRESS_SET_V4, subnetSwitchName } from "../../../src/ovn/topology.ts";
import {
  createNamespace,
  createPods,
  createSubnet,
  deletePods,
  listPods,
  podAddress,
  readyCondition as ready,
  spawnController,
  until,
  useCluster,
} from "./harness.ts";

interface EventList {
  items: { reason: string; type: string; message: string; involvedObject: { name: string } }[];
}

test("under VXLAN: foreign ports hold their addresses, a full switch and a full cluster refuse by name and recover", async (t) => {
  const c = await useCluster(t);
  await createNamespace(c.api, "small");
  const ctl = await spawnController(t, c, { identity: "solo" });
  await createSubnet(c.api, "small", { cidr: "10.80.0.0/20", gateway: "10.80.0.1", namespaces: ["small"] });
  const get = (name: string) => c.api.request<Subnet>(`${SUBNET_PATH}/${name}`);
  await until("small Ready", async () => (ready(await get("small"))?.status === "True" ? true : undefined));
  // Its CIDR lies outside the cluster CIDR: pod traffic to it must stay inside, not be rerouted out via a node.
  await until("the inside address set lists small's CIDR", async () => {
    await c.nb.echo();
    const inside = c.nb.cache.table("Address_Set").findOne((r) => r.name === INSIDE_ADDRESS_SET_V4);
    return inside?.addresses.includes("10.80.0.0/20") ? true : undefined;
  });
  const lsOf = async () => {
    await c.nb.echo();
    const ls = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("small"));
    assert.ok(ls, "the subnet's switch exists");
    return ls;
  };
  const addressOf = async (name: string, timeoutMs = 30_000) =>
    until(
      `${name} annotated`,
      async () => {
        const p = (await listPods(c.api)).find((x) => x.metadata.name === name);
        return p ? podAddress(p) : undefined;
      },
      timeoutMs,
    );
  const eventOn = (pod: string, reason: string) =>
    until(`${reason} Event on ${pod}`, async () => {
      const l = await c.api.request<EventList>("/api/v1/namespaces/small/events");
      return l.items.find((e) => e.involvedObject.name === pod && e.reason === reason);
    });

  await t.test(
    "a port someone else adds while the controller runs holds its address, and one that claims a pod's gets an Event",
    async () => {
      await createPods(c.api, [["small", "first"]]);
      assert.equal(await addressOf("first"), "10.80.0.2");
      // A VM port appears with the next free address, written by another client.
      const ls = await lsOf();
      await c.nb.transact((txn) => {
        const vm = txn.insert("Logical_Switch_Port", {
          name: "vm-1",
          addresses: ["fa:16:3e:00:00:03 10.80.0.3"],
        });
        txn.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", [vm]]]);
      });
      await until("usedIPs counts the VM", async () =>
        (await get("small")).status?.usedIPs === 2 ? true : undefined,
      );
      const used = () => ctl.metricSum("zstack_ovn_ipam_addresses", 'state="used"');
      await until("the IPAM metric counts the VM", async () => ((await used()) === 2 ? true : undefined));
      await createPods(c.api, [["small", "second"]]);
      assert.equal(await addressOf("second"), "10.80.0.4", "10.80.0.3 belongs to the VM");
      // The VM goes: its address is free again (the lowest free one is handed out next).
      const vmPort = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "vm-1");
      await c.nb.transact((txn) => {
        txn.mutate(
          "Logical_Switch",
          [["_uuid", "==", ls._uuid]],
          [["ports", "delete", [vmPort?._uuid as string]]],
        );
      });
      await until("usedIPs without the VM", async () =>
        (await get("small")).status?.usedIPs === 2 ? true : undefined,
      );
      await createPods(c.api, [["small", "third"]]);
      assert.equal(await addressOf("third"), "10.80.0.3");

      // Someone else's port claims an address a pod holds: a Warning Event on the Subnet names both.
      await c.nb.transact((txn) => {
        const dup = txn.insert("Logical_Switch_Port", {
          name: "vm-dup",
          addresses: ["fa:16:3e:00:00:02 10.80.0.2"],
        });
        txn.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", [dup]]]);
      });
      const conflict = await until("AddressConflict Event on Subnet small", async () => {
        const l = await c.api.request<EventList>("/api/v1/namespaces/default/events");
        return l.items.find((e) => e.involvedObject.name === "small" && e.reason === "AddressConflict");
      });
      assert.equal(conflict.type, "Warning");
      assert.match(conflict.message, /10\.80\.0\.2 is claimed by .*small\/first.*vm-dup/);
      const dupPort = c.nb.cache.table("Logical_Switch_Port").findOne((r) => r.name === "vm-dup");
      await c.nb.transact((txn) => {
        txn.mutate(
          "Logical_Switch",
          [["_uuid", "==", ls._uuid]],
          [["ports", "delete", [dupPort?._uuid as string]]],
        );
      });
    },
  );

  await t.test("a switch at 2,048 ports refuses the next pod, and lets it in when a port goes", async () => {
    // Fill the switch with address-less ports of someone else up to the limit.
    const ls = await lsOf();
    const missing = VXLAN_PORTS_PER_SWITCH - ls.ports.length;
    await c.nb.transact((txn) => {
      const refs = Array.from({ length: missing }, (_, i) =>
        txn.insert("Logical_Switch_Port", { name: `filler-${i}` }),
      );
      txn.mutate("Logical_Switch", [["_uuid", "==", ls._uuid]], [["ports", "insert", refs]]);
    });
    assert.equal((await lsOf()).ports.length, VXLAN_PORTS_PER_SWITCH);
    const full = await until("small PortCapacityExceeded", async () => {
      const s = await get("small");
      return ready(s)?.reason === "PortCapacityExceeded" ? s : undefined;
    });
    assert.equal(ready(full)?.status, "False");
    assert.match(ready(full)?.message ?? "", /2048 ports.*VXLAN.*Geneve/);
    assert.equal(full.status?.portCapacity, VXLAN_PORTS_PER_SWITCH);

    await createPods(c.api, [["small", "one-too-many"]]);
    const ev = await eventOn("one-too-many", "PortCapacityExceeded");
    assert.equal(ev.type, "Warning");
    assert.match(ev.message, /2048 ports.*another subnet.*Geneve/);
    const pod = (await listPods(c.api)).find((x) => x.metadata.name === "one-too-many");
    assert.equal(pod && podAddress(pod), undefined, "no address while the switch is full");

    // A pod leaves: its port goes, and the waiting pod gets in (woken by the freed port; how soon is a
    // diagnostic, not asserted: a wall-clock bound fails on a loaded machine).
    const started = Date.now();
    await deletePods(c.api, [["small", "first"]]);
    await addressOf("one-too-many", 90_000);
    t.diagnostic(`the waiting pod got its port ${Date.now() - started} ms after a port was freed`);
    assert.equal((await lsOf()).ports.length, VXLAN_PORTS_PER_SWITCH, "never more than the limit");
  });

  await t.test(
    "at 4,096 datapaths a new Subnet is refused by name, and is made once a switch goes",
    async () => {
      await c.nb.echo();
      const now = c.nb.cache.table("Logical_Switch").size + c.nb.cache.table("Logical_Router").size;
      const fill = VXLAN_MAX_DATAPATHS - now;
      await c.nb.transact((txn) => {
        for (let i = 0; i < fill; i++) txn.insert("Logical_Switch", { name: `zstack-net-${i}` });
      });
      await createSubnet(c.api, "late", { cidr: "10.81.0.0/24", gateway: "10.81.0.1" });
      const refused = await until("late Failed", async () => {
        const s = await get("late");
        return s.status?.phase === "Failed" ? s : undefined;
      });
      assert.equal(ready(refused)?.reason, "DatapathCapacityExceeded");
      assert.match(ready(refused)?.message ?? "", /4096 logical switches and routers.*Geneve/);
      await c.nb.echo();
      assert.equal(
        c.nb.cache.table("Logical_Switch").findOne((r) => r.name === subnetSwitchName("late")),
        undefined,
        "no switch beyond the limit",
      );
      assert.equal(
        ready(await get("small"))?.reason,
        "PortCapacityExceeded",
        "the older subnet is unaffected",
      );

      // ZStack deletes one of its networks: the refused Subnet is judged again without any Subnet event.
      const one = c.nb.cache.table("Logical_Switch").findOne((r) => r.name === "zstack-net-0");
      await c.nb.transact((txn) => txn.delete("Logical_Switch", [["_uuid", "==", one?._uuid as string]]));
      const ok = await until("late Ready", async () => {
        const s = await get("late");
        return ready(s)?.status === "True" ? s : undefined;
      });
      assert.equal(ok.status?.phase, "Active");
      await c.nb.echo();
      assert.equal(
        c.nb.cache.table("Logical_Switch").size + c.nb.cache.table("Logical_Router").size,
        VXLAN_MAX_DATAPATHS,
      );
    },
  );
});
