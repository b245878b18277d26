// NetworkPolicy end to end: the sandbox (`zsbnp`) with zstack-ovnkube-controller, real kube-apiserver, OVN and
// OVS. Every case applies policies and labels, then asserts the FULL reachability matrix (9 pods and 3 nodes
// to 9 pods × TCP/UDP 80/81, real connections) against the independent model in test/policy-model; a
// disagreement prints a per-port table of the wrong cells. The cases follow the families of the upstream
// Kubernetes suite (test/e2e/network/netpol/network_policy.go), plus node → pod under deny-all, a Service
// judged on its backend, and randomized scenarios (NP_RANDOM_SCENARIOS, NP_RANDOM_SEED) at the end.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, beforeEach, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort } from "../policy-model/reachability.ts";
import {
  MATRIX_LABEL,
  matrixNode,
  NAMESPACES,
  POD_NAMES,
  PolicyMatrix,
  podManifest,
} from "../rig/policy-matrix.ts";
import { mulberry32 } from "../rig/prng.ts";
import { sandboxHandle } from "../rig/sandbox-handle.ts";

const NAME = "zsbnp";
const sandbox = sandboxHandle(NAME);
/** How long a matrix may take to agree with the model after a change (a condition wait, not a bound). */
const CONVERGE_MS = Number(process.env.NP_CONVERGE_MS ?? 60_000);
const matrix = new PolicyMatrix(sandbox, {
  timeout: "1500ms",
  convergeMs: CONVERGE_MS,
  // Cached datapath flows are dropped before each probe round. The sandbox's OVS 3.1.0 userspace datapath keeps
  // the old action on one of two overlapping megaflows after an ACL change (its revalidator modifies the flow found
  // by key, not by UFID; fixed upstream in OVS 3.1.3 and 3.2.0): docs/network-policy.md, "Stale datapath flows".
  // This test judges the flows ovn-controller programs. NP_FLUSH_DP_FLOWS=0 shows the defect.
  flushDatapathFlows: process.env.NP_FLUSH_DP_FLOWS !== "0",
});

type Spec = NetworkPolicy["spec"];

function policy(ns: string, name: string, spec: Spec): NetworkPolicy & { apiVersion: string; kind: string } {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { namespace: ns, name, labels: { [MATRIX_LABEL]: "1" } } as NetworkPolicy["metadata"],
    spec,
  };
}

const apply = (...objects: object[]) => matrix.apply(objects);
const podSel = (labels: Record<string, string>) => ({ matchLabels: labels });
const inNs = (ns: string) => ({ namespaceSelector: podSel({ ns }) });
const pod = (name: string): NetworkPolicyPeer => ({ podSelector: podSel({ pod: name }) });
const tcp = (port: number | string, endPort?: number): NetworkPolicyPort =>
  endPort === undefined ? { protocol: "TCP", port } : { protocol: "TCP", port, endPort };
const udp = (port: number | string): NetworkPolicyPort => ({ protocol: "UDP", port });
const cidr = (ip: string) => `${ip}/32`;

/**
 * Components of the sandbox that are not running, each with the last emergency or error line of its log, so a
 * crashed daemon does not read as a matrix of mysterious denials.
 */
async function sandboxTrouble(): Promise<string[]> {
  const status = await sandbox
    .zovn(["status"], 60_000)
    .catch((err: Error & { stdout?: string }) => err.stdout ?? "");
  return status
    .split("\n")
    .filter((l) => /NOT RUNNING/.test(l))
    .map((line) => {
      const log = line.trim().split(/\s+/).pop() as string;
      let last = "";
      try {
        last =
          readFileSync(log, "utf8")
            .split("\n")
            .filter((l) => /EMER|ERR/.test(l))
            .pop() ?? "";
      } catch {}
      return `${line.trim()}${last ? `\n    ${last}` : ""}`;
    });
}

/**
 * ovs-vswitchd 3.1 (Debian 12) aborts in its userspace conntrack under sustained connection churn:
 * "conntrack.c:1063: assertion conn->conn_type == CT_CONN_TYPE_DEFAULT failed in conn_update_state()", an OVS bug
 * of the userspace datapath the sandbox runs (no kernel module), seen with no policy at all. Only that abort,
 * and only ovs-vswitchd, is restarted and the same matrix asserted again; anything else fails the case.
 */
const KNOWN_OVS_ABORT =
  /ovs-vswitchd\s+NOT RUNNING[^\n]*\n\s+\S+\|util\|EMER\|[^|]*conntrack\.c:\d+: assertion conn->conn_type == CT_CONN_TYPE_DEFAULT/;
/** Per matrix assertion; the file's total is reported at the end. */
const MAX_OVS_RESTARTS = 2;
let ovsRestartsTotal = 0;

async function restartAfterKnownAbort(
  trouble: readonly string[],
  restarts: number,
  note: (msg: string) => void,
): Promise<boolean> {
  if (trouble.length === 0 || !trouble.every((t) => KNOWN_OVS_ABORT.test(t))) return false;
  if (restarts >= MAX_OVS_RESTARTS) return false;
  ovsRestartsTotal++;
  note(`ovs-vswitchd aborted (OVS 3.1 userspace conntrack bug); restarted:\n${trouble.join("\n")}`);
  await sandbox.zovn(["up"]);
  return true;
}

let diagnostic: (msg: string) => void = (msg) => console.error(msg);

/** Asserts the full matrix against the model of what the apiserver now holds. */
async function check(what: string): Promise<number> {
  for (let restarts = 0; ; restarts++) {
    try {
      const t0 = Date.now();
      const probes = await matrix.assertMatchesModel(what);
      if (probes > 3)
        diagnostic(`${what}: agreed with the model after ${probes} probes, ${Date.now() - t0} ms`);
      return probes;
    } catch (err) {
      const trouble = await sandboxTrouble();
      if (await restartAfterKnownAbort(trouble, restarts, diagnostic)) continue;
      if (trouble.length > 0) (err as Error).message += `\nsandbox components down:\n${trouble.join("\n")}`;
      throw err;
    }
  }
}

describe("NetworkPolicy in the sandbox: full reachability matrices against the API model", {
  timeout: 40 * 60_000,
}, () => {
  // NP_REUSE_SANDBOX=1 keeps a running `zsbnp` (up is idempotent) and leaves it up: for iterating on cases.
  const reuse = process.env.NP_REUSE_SANDBOX === "1";
  before(async () => {
    if (!reuse) await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
    await sandbox.zovn(["up"]);
    // A reused sandbox may hold policies of an earlier run; node addresses are learnt with none in place.
    if (reuse) await matrix.replacePolicies([]);
    await matrix.setup();
  });
  after(async () => {
    console.error(`ovs-vswitchd restarts after the known OVS 3.1 conntrack abort: ${ovsRestartsTotal}`);
    if (!reuse) await sandbox.zovn(["down", "--purge"]).catch(() => undefined);
  });
  beforeEach(async (t) => {
    diagnostic = (msg) => ("diagnostic" in t ? t.diagnostic(msg) : console.error(msg));
    // A component that crashed during an earlier case (that case failed, naming it) is started again, so the
    // next case judges the policies and not the wreck.
    if ((await sandboxTrouble()).length > 0) await sandbox.zovn(["up"]);
    await matrix.reset();
    await check("reset: no policy, base labels (everything allowed)");
  });

  it("with no policy every pod and node reaches every pod on TCP and UDP 80/81", async () => {
    const rounds = await check("no policy");
    assert.ok(rounds >= 1);
  });

  // ---- deny-all ----------------------------------------------------------------------------------------------

  it("deny-all ingress in x: nothing enters x's pods but their own node (kubelet path); x's egress is untouched", async () => {
    await apply(policy("x", "deny-ingress", { podSelector: {}, policyTypes: ["Ingress"] }));
    await check("deny-all ingress in x");
  });

  it("deny-all ingress in every namespace: node → pod stays open from each pod's own node only", async () => {
    await apply(...NAMESPACES.map((ns) => policy(ns, "deny-ingress", { podSelector: {} })));
    await check("deny-all ingress everywhere");
  });

  it("deny-all egress in x: x's pods reach no pod (not even in x), others still reach them", async () => {
    await apply(policy("x", "deny-egress", { podSelector: {}, policyTypes: ["Egress"] }));
    await check("deny-all egress in x");
  });

  it("deny-all both directions in x, then allow-all ingress and egress beside it (union)", async () => {
    await apply(policy("x", "deny-all", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }));
    await check("deny-all in x");
    await apply(policy("x", "allow-all", { podSelector: {}, ingress: [{}], egress: [{}] }));
    await check("deny-all + allow-all in x");
  });

  // ---- allow by namespace, pod, pod in namespace, matchExpressions ---------------------------------------------

  it("allow ingress to x/a from namespace y only (namespaceSelector)", async () => {
    await apply(
      policy("x", "from-y", { podSelector: podSel({ pod: "a" }), ingress: [{ from: [inNs("y")] }] }),
    );
    await check("x/a from namespace y");
  });

  it("allow ingress to x/a from pod b of x only (podSelector: the policy's namespace)", async () => {
    await apply(
      policy("x", "from-b", { podSelector: podSel({ pod: "a" }), ingress: [{ from: [pod("b")] }] }),
    );
    await check("x/a from x/b");
  });

  it("pod-in-namespace: one peer with both selectors is AND, two peers are OR", async () => {
    await apply(
      policy("x", "and", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ from: [{ ...inNs("y"), ...pod("c") }] }],
      }),
    );
    await check("x/a from y/c only");
    await apply(
      policy("x", "or", {
        podSelector: podSel({ pod: "b" }),
        ingress: [{ from: [inNs("y"), pod("c")] }],
      }),
    );
    await check("x/a from y/c; x/b from y/* or x/c");
  });

  it("matchExpressions: In, NotIn, Exists and DoesNotExist on namespaces and pods", async () => {
    await apply(
      policy("x", "exprs", {
        podSelector: { matchExpressions: [{ key: "pod", operator: "In", values: ["a", "b"] }] },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchExpressions: [{ key: "ns", operator: "NotIn", values: ["y"] }] },
                podSelector: { matchExpressions: [{ key: "pod", operator: "NotIn", values: ["a"] }] },
              },
            ],
          },
        ],
      }),
      policy("y", "exists", {
        podSelector: { matchExpressions: [{ key: "pod", operator: "Exists" }] },
        ingress: [
          { from: [{ namespaceSelector: { matchExpressions: [{ key: "ns", operator: "DoesNotExist" }] } }] },
        ],
      }),
    );
    await check("matchExpressions");
  });

  // ---- ports -------------------------------------------------------------------------------------------------

  it("named ports in ingress: serve-81-tcp and serve-80-udp open only those; an undeclared name opens nothing", async () => {
    await apply(
      policy("x", "named", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ ports: [tcp("serve-81-tcp"), udp("serve-80-udp")] }],
      }),
      policy("y", "named-missing", {
        podSelector: podSel({ pod: "b" }),
        ingress: [{ from: [inNs("x")], ports: [tcp("serve-82-tcp"), udp("serve-80-tcp")] }],
      }),
    );
    await check("named ports in ingress");
  });

  it("named ports in egress resolve on the destination pod", async () => {
    await apply(
      policy("x", "named-egress", {
        podSelector: podSel({ pod: "a" }),
        policyTypes: ["Egress"],
        egress: [{ to: [inNs("y")], ports: [udp("serve-81-udp")] }, { ports: [tcp("serve-80-tcp")] }],
      }),
    );
    await check("named ports in egress");
  });

  it("endPort: TCP 80-81 opens both TCP ports and no UDP; a range starting at 81 opens 81 only", async () => {
    await apply(
      policy("x", "range", { podSelector: podSel({ pod: "a" }), ingress: [{ ports: [tcp(80, 81)] }] }),
      policy("x", "range-81", {
        podSelector: podSel({ pod: "b" }),
        ingress: [{ ports: [tcp(81, 1000), { protocol: "UDP", port: 81, endPort: 81 }] }],
      }),
    );
    await check("endPort ranges");
  });

  // ---- ipBlock -----------------------------------------------------------------------------------------------

  it("ipBlock with except in ingress: everything but y/b reaches x/a; node addresses are judged by the block", async () => {
    await apply(
      policy("x", "cidr-except", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ from: [{ ipBlock: { cidr: "0.0.0.0/0", except: [cidr(matrix.podIP("y/b"))] } }] }],
      }),
      policy("y", "from-node2", {
        podSelector: {},
        ingress: [{ from: [{ ipBlock: { cidr: cidr(sandbox.ctx().topo.nodes[1]?.ip as string) } }] }],
      }),
    );
    await check("ipBlock except in ingress, node IP block in y");
  });

  it("egress to pods and to CIDRs: x/a reaches namespace z's pods; x/b only z/c's address, with an except", async () => {
    await apply(
      policy("x", "to-z", { podSelector: podSel({ pod: "a" }), egress: [{ to: [inNs("z")] }] }),
      policy("x", "to-cidr", {
        podSelector: podSel({ pod: "b" }),
        policyTypes: ["Egress"],
        egress: [
          { to: [{ ipBlock: { cidr: cidr(matrix.podIP("z/c")) } }] },
          {
            to: [{ ipBlock: { cidr: "10.0.0.0/8", except: [cidr(matrix.podIP("y/a"))] } }],
            ports: [udp(81)],
          },
        ],
      }),
    );
    await check("egress to pods and CIDRs");
  });

  // ---- several policies, updates, deletes ------------------------------------------------------------------

  it("several policies on one pod allow their union", async () => {
    await apply(
      policy("x", "p1", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ from: [pod("b")], ports: [tcp(80)] }],
      }),
      policy("x", "p2", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ from: [inNs("y")], ports: [udp(81)] }],
      }),
      policy("x", "p3", { podSelector: {}, policyTypes: ["Ingress"] }),
    );
    await check("union of three policies on x/a");
  });

  it("a policy updated and then deleted: the matrix follows each change", async () => {
    await apply(
      policy("x", "moving", { podSelector: podSel({ pod: "a" }), ingress: [{ from: [pod("b")] }] }),
    );
    await check("from x/b");
    await apply(
      policy("x", "moving", { podSelector: podSel({ pod: "a" }), ingress: [{ from: [inNs("z")] }] }),
    );
    await check("updated: from namespace z");
    await apply(
      policy("x", "moving", {
        podSelector: podSel({ pod: "c" }),
        policyTypes: ["Egress"],
        egress: [{ ports: [udp(80)] }],
      }),
    );
    await check("updated: x/c egress UDP 80 only");
    await matrix.kubectl(["delete", "networkpolicy", "-n", "x", "moving"]);
    await check("deleted");
  });

  // ---- relabelling -------------------------------------------------------------------------------------------

  it("pods relabelled into and out of selectors (the selected pod and the peer)", async () => {
    await apply(
      policy("x", "by-role", {
        podSelector: podSel({ guarded: "yes" }),
        ingress: [{ from: [{ namespaceSelector: {}, podSelector: podSel({ role: "client" }) }] }],
      }),
    );
    await check("nobody selected yet");
    await matrix.setLabels(new Map([["x/a", { guarded: "yes" }]]));
    await check("x/a guarded, no client");
    await matrix.setLabels(
      new Map<string, Record<string, string>>([
        ["x/a", { guarded: "yes" }],
        ["y/b", { role: "client" }],
        ["z/c", { role: "client" }],
      ]),
    );
    await check("x/a guarded, clients y/b and z/c");
    await matrix.setLabels(
      new Map<string, Record<string, string>>([
        ["x/a", { guarded: "yes" }],
        ["x/b", { guarded: "yes" }],
        ["z/c", { role: "client" }],
      ]),
    );
    await check("x/a and x/b guarded, y/b no longer a client");
    await matrix.setLabels();
    await check("labels back: nobody guarded");
  });

  it("namespaces relabelled into and out of a namespaceSelector", async () => {
    await apply(
      policy("x", "by-team", {
        podSelector: {},
        ingress: [{ from: [{ namespaceSelector: podSel({ team: "blue" }) }] }],
      }),
    );
    await check("no blue namespace");
    await matrix.setLabels(new Map([["y", { team: "blue" }]]));
    await check("y is blue");
    await matrix.setLabels(new Map([["z", { team: "blue" }]]));
    await check("z is blue, y no longer");
  });

  it("policies created before their pods: a recreated pod is selected, and is a peer, from its first packet on", async () => {
    await matrix.kubectl(["delete", "pod", "-n", "x", "c", "--wait=true"]);
    await apply(
      policy("x", "c-guarded", { podSelector: podSel({ pod: "c" }), ingress: [{ from: [inNs("z")] }] }),
      policy("y", "from-x-c", {
        podSelector: podSel({ pod: "a" }),
        ingress: [{ from: [{ ...inNs("x"), ...pod("c") }] }],
      }),
    );
    await apply(podManifest("x", "c", matrixNode(0, 2, matrix.nodes)));
    await matrix.kubectl(["wait", "-n", "x", "--for=condition=Ready", "pod", "c", "--timeout=120s"]);
    await check("x/c recreated under existing policies");
  });

  // ---- Services and nodes ------------------------------------------------------------------------------------

  it("a pod reached through a Service is judged as the backend pod, in ingress and in egress", async () => {
    await apply(
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "to-a", namespace: "x", labels: { [MATRIX_LABEL]: "1" } },
        spec: {
          selector: { pod: "a" },
          ports: [
            { name: "tcp", protocol: "TCP", port: 8080, targetPort: "serve-80-tcp" },
            { name: "udp", protocol: "UDP", port: 8080, targetPort: "serve-80-udp" },
          ],
        },
      },
      policy("x", "a-from-y", { podSelector: podSel({ pod: "a" }), ingress: [{ from: [inNs("y")] }] }),
      // y/b may only talk to x/a: through the Service too, since egress is judged after load balancing.
      policy("y", "b-to-x-a", {
        podSelector: podSel({ pod: "b" }),
        policyTypes: ["Egress"],
        egress: [{ to: [{ ...inNs("x"), ...pod("a") }] }],
      }),
    );
    await check("direct matrix with the Service's policies");
    const vip = (
      await matrix.kubectl(["get", "svc", "-n", "x", "to-a", "-o", "jsonpath={.spec.clusterIP}"])
    ).trim();
    assert.match(vip, /^\d+\.\d+\.\d+\.\d+$/);
    // x/a itself is left out: a pod reaching itself through its Service is hairpinned (OVN SNATs it to the VIP),
    // a case the API does not specify, so the model has no answer to compare with.
    const sources = matrix.sources.filter((s) => s !== "x/a");
    const model = await matrix.model();
    const targets = ["tcp", "udp"].map((p) => `${p}:${vip}:8080`);
    const want = (from: string, proto: "TCP" | "UDP") =>
      PolicyMatrix.expect(model, { from, to: "x/a", service: { protocol: proto, port: 80 } });
    const deadline = Date.now() + CONVERGE_MS;
    for (;;) {
      const rows = await matrix.probeRows(sources, targets);
      const wrong = sources.flatMap((from) => {
        const [t, u] = rows.get(from) as boolean[];
        const bad: string[] = [];
        if (t !== want(from, "TCP")) bad.push(`${from} → tcp ${vip}:8080 ${t ? "allowed" : "denied"}`);
        if (u !== want(from, "UDP")) bad.push(`${from} → udp ${vip}:8080 ${u ? "allowed" : "denied"}`);
        return bad;
      });
      if (wrong.length === 0) break;
      if (Date.now() > deadline)
        assert.fail(`through the Service, cells disagree with the backend's model:\n${wrong.join("\n")}`);
      await sleep(500);
    }
  });

  // ---- randomized scenarios ----------------------------------------------------------------------------------

  it("randomized scenarios: random labels and 1-4 random policies, full matrix against the model", async (t) => {
    const count = Number(process.env.NP_RANDOM_SCENARIOS ?? 50);
    const seed = Number(process.env.NP_RANDOM_SEED ?? Date.now() % 2 ** 31);
    t.diagnostic(
      `seed ${seed}, ${count} scenarios (NP_RANDOM_SEED=${seed} NP_RANDOM_SCENARIOS=${count} replays)`,
    );
    const t0 = Date.now();
    let rounds = 0;
    for (let i = 0; i < count; i++) {
      const scenario = randomScenario(seed, i);
      await matrix.setLabels(scenario.labels);
      await matrix.replacePolicies(scenario.policies);
      try {
        rounds += await check(`scenario ${i}`);
      } catch (err) {
        assert.fail(
          `seed ${seed} scenario ${i} (replay: NP_RANDOM_SEED=${seed}; scenario i uses mulberry32(seed + i))\n` +
            `labels: ${JSON.stringify([...scenario.labels])}\npolicies: ${JSON.stringify(scenario.policies.map((p) => ({ ns: p.metadata.namespace, ...p.spec })))}\n` +
            (err as Error).message,
        );
      }
    }
    t.diagnostic(`${count} scenarios in ${Math.round((Date.now() - t0) / 1000)} s, ${rounds} matrix probes`);
  });
});

// ---- the random scenario generator -------------------------------------------------------------------------

interface Scenario {
  labels: Map<string, Record<string, string>>;
  policies: Array<NetworkPolicy & { apiVersion: string; kind: string }>;
}

function randomScenario(seed: number, index: number): Scenario {
  const rnd = mulberry32(seed + index);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const chance = (p: number) => rnd() < p;
  const NS_LABELS = { team: ["red", "blue"], env: ["dev", "prod"] };
  const POD_LABELS = { role: ["web", "db", "cache"], tier: ["front", "back"] };

  const labels = new Map<string, Record<string, string>>();
  const randomLabels = (space: Record<string, string[]>) => {
    const l: Record<string, string> = {};
    for (const [k, vs] of Object.entries(space)) if (chance(0.6)) l[k] = pick(vs);
    return l;
  };
  for (const ns of NAMESPACES) labels.set(ns, randomLabels(NS_LABELS));
  for (const ns of NAMESPACES) for (const p of POD_NAMES) labels.set(`${ns}/${p}`, randomLabels(POD_LABELS));

  const selector = (space: Record<string, string[]>, base: { key: string; values: readonly string[] }) => {
    const r = rnd();
    if (r < 0.25) return {};
    const [k, vs] = pick(Object.entries(space));
    if (r < 0.6) return { matchLabels: { [k]: pick(vs) } };
    if (r < 0.7) return { matchLabels: { [base.key]: pick(base.values) } };
    const op = pick(["In", "NotIn", "Exists", "DoesNotExist"] as const);
    const values = op === "In" || op === "NotIn" ? [...new Set([pick(vs), pick(vs)])] : undefined;
    return { matchExpressions: [values ? { key: k, operator: op, values } : { key: k, operator: op }] };
  };
  const podSelector = () => selector(POD_LABELS, { key: "pod", values: POD_NAMES });
  const nsSelector = () => selector(NS_LABELS, { key: "ns", values: NAMESPACES });
  const peer = (): NetworkPolicyPeer => {
    const r = rnd();
    if (r < 0.3) return { podSelector: podSelector() };
    if (r < 0.55) return { namespaceSelector: nsSelector() };
    if (r < 0.8) return { namespaceSelector: nsSelector(), podSelector: podSelector() };
    const some = `${pick(NAMESPACES)}/${pick(POD_NAMES)}`;
    if (r < 0.9) return { ipBlock: { cidr: cidr(matrix.podIP(some)) } };
    if (r < 0.95) return { ipBlock: { cidr: "0.0.0.0/0", except: [cidr(matrix.podIP(some))] } };
    return { ipBlock: { cidr: cidr(pick(sandbox.ctx().topo.nodes).ip) } };
  };
  const port = (): NetworkPolicyPort => {
    const proto = pick(["TCP", "UDP", undefined] as const);
    const p = (proto ?? "TCP").toLowerCase();
    const r = rnd();
    const base: NetworkPolicyPort = proto ? { protocol: proto } : {};
    if (r < 0.15) return base;
    if (r < 0.45) return { ...base, port: pick([80, 81, 82]) };
    if (r < 0.7)
      return {
        ...base,
        port: pick([`serve-80-${p}`, `serve-81-${p}`, `serve-80-${p === "tcp" ? "udp" : "tcp"}`, "nope"]),
      };
    return { ...base, port: pick([79, 80, 81]), endPort: pick([80, 81, 90]) };
  };
  const list = <T>(make: () => T, max: number): T[] | undefined => {
    const n = Math.floor(rnd() * (max + 1));
    if (n === 0 && chance(0.5)) return undefined;
    return Array.from({ length: n }, make);
  };
  const rule = <K extends "from" | "to">(key: K) => {
    const r: Record<string, unknown> = {};
    const peers = list(peer, 2);
    const ports = list(port, 2);
    if (peers) r[key] = peers;
    if (ports) r.ports = ports;
    return r;
  };

  const policies: Scenario["policies"] = [];
  const n = 1 + Math.floor(rnd() * 4);
  for (let k = 0; k < n; k++) {
    const spec: Spec = { podSelector: podSelector() };
    const types = pick([undefined, ["Ingress"], ["Egress"], ["Ingress", "Egress"]] as const);
    if (types) spec.policyTypes = [...types];
    const ingress = list(() => rule("from"), 2);
    const egress = list(() => rule("to"), 2);
    if (ingress) spec.ingress = ingress as Spec["ingress"];
    if (egress) spec.egress = egress as Spec["egress"];
    policies.push(policy(pick(NAMESPACES), `random-${k}`, spec));
  }
  // endPort must not be below port: the API refuses it, so swap such a pair.
  for (const p of policies)
    for (const r of [...(p.spec.ingress ?? []), ...(p.spec.egress ?? [])])
      for (const pp of r.ports ?? [])
        if (pp.endPort !== undefined && typeof pp.port === "number" && pp.endPort < pp.port)
          [pp.port, pp.endPort] = [pp.endPort, pp.port];
  return { labels, policies };
}
