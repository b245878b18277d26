import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { EventRecorder } from "../k8s/events.ts";
import type { Informer, InformerHandlers } from "../k8s/informer.ts";
import { rulesetDigest } from "../node/host-port-nat.ts";
import { parseInterfaceName } from "../node/interface-name.ts";
import { silentLogger } from "../observability/log.ts";
import { POD_NETWORKS_ANNOTATION } from "../ovn/pod-port.ts";
import { HostPorts } from "./host-ports.ts";
import type { NodePod } from "./pod-networks.ts";

/** The node pods informer as HostPorts uses it: a store, handlers, synced. */
class FakePods {
  readonly store = new Map<string, NodePod>();
  private readonly handlers = new Set<InformerHandlers<NodePod>>();
  addHandlers(h: InformerHandlers<NodePod>) {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }
  waitForSync() {
    return Promise.resolve();
  }
  list() {
    return [...this.store.values()];
  }
  put(p: NodePod) {
    const key = `${p.metadata.namespace}/${p.metadata.name}`;
    const old = this.store.get(key);
    this.store.set(key, p);
    for (const h of this.handlers) old ? h.onUpdate?.(old, p) : h.onAdd?.(p);
  }
  remove(p: NodePod) {
    this.store.delete(`${p.metadata.namespace}/${p.metadata.name}`);
    for (const h of this.handlers) h.onDelete?.(p, { finalStateUnknown: false } as never);
  }
  asInformer() {
    return this as unknown as Informer<NodePod>;
  }
}

function pod(name: string, created: string, hostPort: number, ip: string, hostIP?: string): NodePod {
  return {
    metadata: {
      name,
      namespace: "ns",
      uid: `uid-${name}`,
      creationTimestamp: created,
      annotations: {
        [POD_NETWORKS_ANNOTATION]: JSON.stringify({
          default: {
            ip_addresses: [`${ip}/16`],
            mac_address: "0a:58:0a:f4:00:05",
            gateway_ips: ["10.244.0.1"],
            routes: [],
            logical_switch: "subnet-default",
          },
        }),
      },
    },
    spec: { containers: [{ ports: [{ hostPort, containerPort: 80, ...(hostIP ? { hostIP } : {}) }] }] },
  };
}

function agent(pods: FakePods, installed: { script?: string; present: boolean }) {
  const applied: string[] = [];
  const localnet = { calls: [] as string[] };
  const warnings: { name: string; reason: string; message: string }[] = [];
  const events = {
    warning: (o: { name: string }, reason: string, message: string) =>
      warnings.push({ name: o.name, reason, message }),
  } as unknown as EventRecorder;
  const hp = new HostPorts({
    pods: pods.asInformer(),
    mgmtIfname: parseInterfaceName("zovn-mgmt"),
    events,
    apply: async (s) => {
      applied.push(s);
      installed.script = s;
      installed.present = true;
    },
    tablePresent: async () => installed.present,
    installedDigest: async () =>
      installed.present && installed.script ? rulesetDigest(installed.script) : undefined,
    routeLocalnet: async (on) => {
      localnet.calls.push(`applied ${applied.length}, ${on ? "on" : "off"}`);
    },
    resyncMs: 0,
    coalesceMs: 1,
    log: silentLogger,
  });
  return { hp, applied, warnings, localnet };
}

describe("HostPorts", () => {
  test("applies once the pods are listed, follows adds and deletes, and a restart with nothing changed writes nothing", async () => {
    const pods = new FakePods();
    pods.put(pod("a", "2026-01-01T00:00:00Z", 8080, "10.244.0.5"));
    const kernel = { present: false } as { script?: string; present: boolean };
    const first = agent(pods, kernel);
    await first.hp.start();
    await first.hp.settled();
    assert.equal(first.applied.length, 1);
    assert.match(first.applied[0]!, /dnat ip to 10\.244\.0\.5:80/);
    pods.put(pod("b", "2026-01-01T00:00:01Z", 8081, "10.244.0.6"));
    await first.hp.settled();
    assert.equal(first.applied.length, 2);
    assert.match(first.applied[1]!, /dnat ip to 10\.244\.0\.6:80/);
    await first.hp.stop();

    const second = agent(pods, kernel);
    await second.hp.start();
    await second.hp.settled();
    assert.deepEqual(second.applied, [], "the installed table carries the same digest");
    pods.remove(pods.list().find((p) => p.metadata.name === "b")!);
    await second.hp.settled();
    assert.equal(second.applied.length, 1);
    assert.doesNotMatch(second.applied[0]!, /10\.244\.0\.6/);
    await second.hp.stop();
  });

  test("a removed table is applied again at the next resync check, and route_localnet set again", async () => {
    const pods = new FakePods();
    pods.put(pod("a", "2026-01-01T00:00:00Z", 8080, "10.244.0.5"));
    const kernel = { present: false } as { script?: string; present: boolean };
    const { hp, applied, localnet } = agent(pods, kernel);
    await hp.start();
    await hp.settled();
    assert.deepEqual(localnet.calls, [], "route_localnet stays off: no hostIP 127.0.0.1 is served");
    kernel.present = false;
    await (hp as unknown as { checkTable(): Promise<void> }).checkTable();
    await hp.settled();
    assert.equal(applied.length, 2);
    assert.equal(applied[1], applied[0]);
    await hp.stop();
  });

  test("route_localnet is on only after the table with its loopback guard is in, and off while the table is gone", async () => {
    const pods = new FakePods();
    pods.put(pod("lo", "2026-01-01T00:00:00Z", 8080, "10.244.0.5", "127.0.0.1"));
    const kernel = { present: false } as { script?: string; present: boolean };
    const { hp, applied, localnet } = agent(pods, kernel);
    await hp.start();
    await hp.settled();
    assert.equal(applied.length, 1);
    assert.deepEqual(localnet.calls, ["applied 1, on"], "set once the table is in");
    kernel.present = false;
    await (hp as unknown as { checkTable(): Promise<void> }).checkTable();
    await hp.settled();
    assert.deepEqual(localnet.calls, ["applied 1, on", "applied 1, off", "applied 2, on"]);
    await hp.stop();
  });

  test("a conflict is reported once as a Warning Event on the newer pod, and again only if it comes back", async () => {
    const pods = new FakePods();
    const older = pod("old", "2026-01-01T00:00:00Z", 9000, "10.244.0.5");
    const newer = pod("new", "2026-01-02T00:00:00Z", 9000, "10.244.0.6");
    pods.put(older);
    pods.put(newer);
    const { hp, applied, warnings } = agent(pods, { present: false });
    await hp.start();
    await hp.settled();
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!.name, "new");
    assert.equal(warnings[0]!.reason, "HostPortConflict");
    assert.match(warnings[0]!.message, /spec\.containers\[0\]\.ports\[0\]\.hostPort.*held by pod ns\/old/);
    assert.match(applied.at(-1)!, /10\.244\.0\.5:80/);
    assert.doesNotMatch(applied.at(-1)!, /10\.244\.0\.6/);
    pods.put({
      ...older,
      metadata: { ...older.metadata, annotations: { ...older.metadata.annotations, x: "1" } },
    });
    await hp.settled();
    assert.equal(warnings.length, 1, "an unrelated update reports nothing new");
    // The holder goes: the newer pod gets the port.
    pods.remove(older);
    await hp.settled();
    assert.match(applied.at(-1)!, /10\.244\.0\.6:80/);
    await hp.stop();
  });

  test("a conflict that lasts is reported again at each resync", async () => {
    const pods = new FakePods();
    pods.put(pod("old", "2026-01-01T00:00:00Z", 9000, "10.244.0.5"));
    pods.put(pod("new", "2026-01-02T00:00:00Z", 9000, "10.244.0.6"));
    const { hp, applied, warnings } = agent(pods, { present: false });
    await hp.start();
    await hp.settled();
    assert.equal(warnings.length, 1);
    await (hp as unknown as { checkTable(): Promise<void> }).checkTable();
    await hp.settled();
    assert.equal(warnings.length, 2);
    assert.deepEqual(warnings[1], warnings[0]);
    assert.equal(applied.length, 1, "the table is not written again");
    await hp.stop();
  });
});
