// A compact account of a sandbox's state, printed by an e2e file when one of its tests failed and before the
// sandbox is torn down: which daemons died, what the controller says of its leadership and its queues, the last
// errors of the controller and every node agent, the southbound's chassis and bindings, and the NB load
// balancers of the Services the file names. CI keeps only the tail of a run's output, so it is short.
import { existsSync, readFileSync } from "node:fs";
import { run } from "../../src/sandbox/command.ts";
import { isAlive } from "../../src/sandbox/process-table.ts";
import type { SandboxHandle } from "./sandbox-handle.ts";

/**
 * The last `n` lines of a log at error level or worse (JSON lines' "level", or OVS's "|ERR|"/"|EMER|"); when it
 * has none, its last warnings. A JSON line's stack is left out: the message says enough at this length.
 */
export function lastErrorLines(text: string, n: number): string[] {
  const lines = text.split("\n");
  const errors = lines.filter((l) => /"level":"(error|fatal)"|\|(ERR|EMER)\|/.test(l));
  const picked = errors.length > 0 ? errors : lines.filter((l) => /"level":"warn"|\|WARN\|/.test(l));
  return picked
    .slice(-n)
    .map((l) => l.replace(/,?"stack":"(?:[^"\\]|\\.)*"/g, ""))
    .map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l));
}

const tailOf = (path: string, n: number): string[] =>
  existsSync(path) ? lastErrorLines(readFileSync(path, "utf8"), n) : [`(no log ${path})`];

async function attempt(what: string, fn: () => Promise<string>): Promise<string> {
  try {
    return (await fn()).trim();
  } catch (err) {
    return `(${what} failed: ${(err as Error).message.split("\n")[0]})`;
  }
}

export async function diagnoseSandbox(
  sandbox: SandboxHandle,
  services: readonly string[] = [],
): Promise<string> {
  const out: string[] = [`---- diagnosis of sandbox ${sandbox.name} ----`];
  let state: ReturnType<SandboxHandle["ctx"]>["state"];
  try {
    state = sandbox.ctx().state;
  } catch (err) {
    return `${out[0]}\n${(err as Error).message}`;
  }
  const dead = state.daemons.filter((d) => !isAlive(d)).map((d) => `${d.name} (pid ${d.pid})`);
  out.push(`dead daemons: ${dead.length === 0 ? "none" : dead.join(", ")}`);
  const get = (path: string) =>
    attempt(`GET ${path}`, () =>
      sandbox.inside(
        "cp",
        ["curl", "-s", "--max-time", "3", "-w", " [HTTP %{http_code}]", `http://127.0.0.1:10660${path}`],
        {
          timeoutMs: 15_000,
        },
      ),
    );
  out.push(`controller /leaderz: ${(await get("/leaderz")).replace(/\n/g, " ")}`);
  out.push(`controller /healthz?verbose: ${(await get("/healthz?verbose")).replace(/\n/g, "; ")}`);
  const metrics = await get("/metrics");
  const interesting = metrics
    .split("\n")
    .filter((l) => /^zstack_ovn_(leader|workqueue_depth|workqueue_unfinished|reconcile_errors)/.test(l));
  if (interesting.length > 0) out.push(`controller metrics:\n  ${interesting.slice(0, 30).join("\n  ")}`);
  const controller = state.daemons.find((d) => d.name === "cp/zstack-ovnkube-controller");
  if (controller) out.push(`controller log, last errors:\n  ${tailOf(controller.log, 8).join("\n  ")}`);
  for (const d of state.daemons.filter((x) => /\/(zstack-ovnkube-node|ovn-controller)$/.test(x.name)))
    out.push(`${d.name} log, last errors:\n  ${tailOf(d.log, 4).join("\n  ")}`);
  // Each node's datapath: is ovn-controller connected to SB, and how many OpenFlow flows br-int holds (a node
  // whose ovn-controller stopped or whose flows were wiped stands out next to the others).
  for (const node of sandbox.ctx().topo.nodes.map((n) => n.name)) {
    const status = await attempt("ovn-appctl connection-status", () =>
      sandbox.inside(node, ["ovn-appctl", "-t", "ovn-controller", "connection-status"], {
        timeoutMs: 15_000,
      }),
    );
    const flows = await attempt("ovs-ofctl dump-aggregate", () =>
      sandbox.inside(node, ["ovs-ofctl", "dump-aggregate", "br-int"], { timeoutMs: 15_000 }),
    );
    out.push(`${node}: ovn-controller ${status}; br-int ${flows.replace(/^.*?(flow_count=\d+).*$/s, "$1")}`);
  }
  const kubectl = state.binaries?.KUBECTL;
  const admin = `--kubeconfig=${sandbox.layout.pkiDir}/admin.kubeconfig`;
  if (kubectl) {
    out.push(
      `controller Lease: ${await attempt("kubectl get lease", () =>
        run(
          kubectl,
          [
            admin,
            "-n",
            "kube-system",
            "get",
            "lease",
            "zstack-ovnkube-controller",
            "-o",
            "jsonpath={.spec.holderIdentity} renewed {.spec.renewTime} transitions {.spec.leaseTransitions}",
          ],
          { timeoutMs: 20_000 },
        ),
      )} (now ${new Date().toISOString()})`,
    );
    // Pods by node and address; an address held twice is named (a duplicate breaks both pods' traffic).
    const pods = await attempt("kubectl get pods", () =>
      run(
        kubectl,
        [
          admin,
          "get",
          "pods",
          "-A",
          "-o",
          "jsonpath={range .items[*]}{.metadata.name}@{.spec.nodeName}={.status.podIP}{' '}{end}",
        ],
        { timeoutMs: 20_000 },
      ),
    );
    const byIp = new Map<string, string[]>();
    for (const p of pods.split(" ").filter((x) => x.includes("="))) {
      const ip = p.slice(p.indexOf("=") + 1);
      if (ip) byIp.set(ip, [...(byIp.get(ip) ?? []), p]);
    }
    const dup = [...byIp.values()].filter((l) => l.length > 1);
    out.push(
      `pods: ${pods}${dup.length > 0 ? `\nADDRESS HELD TWICE: ${dup.map((l) => l.join(" & ")).join("; ")}` : ""}`,
    );
  }
  const central = sandbox.layout.centralDir;
  out.push(
    `ovn-sbctl show:\n${await attempt("ovn-sbctl show", () =>
      run("ovn-sbctl", [`--db=unix:${central}/sb.sock`, "--timeout=10", "show"], { timeoutMs: 20_000 }),
    )}`,
  );
  if (services.length > 0) {
    const lbs = await attempt("ovn-nbctl list Load_Balancer", () =>
      run(
        "ovn-nbctl",
        [
          `--db=unix:${central}/nb.sock`,
          "--timeout=10",
          "--format=csv",
          "--columns=name,vips",
          "list",
          "Load_Balancer",
        ],
        { timeoutMs: 20_000 },
      ),
    );
    const wanted = lbs.split("\n").filter((l) => services.some((s) => l.includes(`zovn-svc_default_${s}_`)));
    out.push(`NB load balancers of ${services.join(", ")}:\n  ${wanted.join("\n  ") || "(none)"}`);
    out.push(
      `NB Chassis_Template_Var:\n${await attempt("ovn-nbctl list Chassis_Template_Var", () =>
        run(
          "ovn-nbctl",
          [
            `--db=unix:${central}/nb.sock`,
            "--timeout=10",
            "--format=csv",
            "--columns=chassis,variables",
            "list",
            "Chassis_Template_Var",
          ],
          { timeoutMs: 20_000 },
        ),
      )}`,
    );
  }
  return out.join("\n");
}
