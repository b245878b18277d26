// A real Kubernetes control plane for integration tests: etcd and kube-apiserver on 127.0.0.1 (free ports,
// a temp dir, no netns), with the default admission chain, RBAC and service-account tokens, and optionally
// kube-controller-manager. Flags, PKI and kubeconfigs come from the sandbox, so tests run the apiserver the
// sandbox runs. Every process is a non-detached child, killed at process exit at the latest (process.ts).

import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { type Binaries, parseBinaryLines } from "../../src/sandbox/binaries.ts";
import {
  type ApiEndpoint,
  apiserverArgs,
  controllerManagerArgs,
  etcdArgs,
  waitApiserverReady,
} from "../../src/sandbox/control-plane.ts";
import { writeKubeconfig } from "../../src/sandbox/kubeconfig.ts";
import { layoutFor } from "../../src/sandbox/layout.ts";
import { ensurePki, type Pki } from "../../src/sandbox/pki.ts";
import { repoRoot } from "../../src/sandbox/repo.ts";
import { DEFAULT_SPEC, planTopology } from "../../src/sandbox/topology.ts";
import { freePort } from "./ports.ts";
import { claimDir, type Daemon, removeOwnedDir, spawnDaemon } from "./process.ts";
import { teardownFor } from "./teardown.ts";

export interface KubeApiserverOptions {
  /** Also run kube-controller-manager (namespace deletion, service-account tokens, garbage collection...). */
  controllerManager?: boolean;
  /** Extra kube-apiserver flags; a flag given here overrides the sandbox's value of the same flag. */
  apiserverArgs?: string[];
  readyTimeoutMs?: number;
}

export interface KubeApiserver {
  /** Temp dir holding etcd data, PKI, kubeconfigs and the daemons' output files. */
  readonly dir: string;
  /** An admin (system:masters) kubeconfig. */
  readonly kubeconfigPath: string;
  /** https://127.0.0.1:PORT */
  readonly server: string;
  readonly port: number;
  /** Loaded from kubeconfigPath. */
  readonly kubeConfig: KubeConfig;
  /** The admin credentials with another server address, e.g. a fault-injecting proxy in front of this one. */
  kubeConfigAt(server: string): KubeConfig;
  /** The CA the apiserver trusts for client certificates (and that signed its own), to issue test clients. */
  readonly ca: { cert: string; key: string };
  readonly binaries: Pick<Binaries, "KUBE_APISERVER" | "KUBECTL" | "ETCD" | "KUBE_CONTROLLER_MANAGER">;
  /** Output files of the daemons, for failure messages. */
  readonly logs: { etcd: string; apiserver: string; controllerManager: string };
  /** Runs kubectl against this apiserver as admin; resolves to stdout, rejects with stderr. */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<string>;
  /** PIDs of the processes still running. */
  pids(): number[];
  /** Stops kube-apiserver only; etcd keeps its data and the port stays reserved for startApiserver(). */
  stopApiserver(): Promise<void>;
  /** Starts kube-apiserver again on the same port and etcd, and waits until /readyz answers 200. */
  startApiserver(): Promise<void>;
  restartApiserver(): Promise<void>;
  /** Stops everything and removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** node:test's TestContext, or anything else with an after hook. */
export interface AfterHook {
  after(fn: () => unknown): void;
}

type RigBinaries = KubeApiserver["binaries"];
const RIG_KEYS = ["KUBE_APISERVER", "KUBE_CONTROLLER_MANAGER", "KUBECTL", "ETCD"] as const;
let binariesOnce: Promise<RigBinaries> | undefined;

/**
 * Only looks the binaries up (an environment variable KEY=path wins, as in the sandbox). A test never starts
 * the Kubernetes build: on a cold cache that takes most of an hour, far beyond any test timeout.
 */
function binaries(): Promise<RigBinaries> {
  binariesOnce ??= (async () => {
    const found: Partial<Binaries> = {};
    for (const key of RIG_KEYS) if (process.env[key]) found[key] = process.env[key];
    if (RIG_KEYS.some((k) => !found[k])) {
      const script = join(repoRoot, "hack", "ensure-binaries.sh");
      const listed = await new Promise<string>((resolve, reject) => {
        execFile(script, ["--print"], { encoding: "utf8" }, (err, stdout) => {
          if (err)
            reject(
              new Error(
                "the Kubernetes binaries are not built yet: run `make binaries` (hack/ensure-binaries.sh) once, " +
                  "or point KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBECTL and ETCD at them",
              ),
            );
          else resolve(stdout);
        });
      });
      const parsed = parseBinaryLines(listed);
      for (const key of RIG_KEYS) found[key] ??= parsed[key];
    }
    const missing = RIG_KEYS.filter((k) => !found[k]);
    if (missing.length > 0) throw new Error(`binaries not found: ${missing.join(", ")}`);
    return found as RigBinaries;
  })();
  return binariesOnce;
}

// One PKI per test process: the certificates do not depend on ports, and openssl runs add up.
let pkiOnce: Promise<{ pki: Pki; dir: string }> | undefined;

function sharedPki(): Promise<{ pki: Pki; dir: string }> {
  pkiOnce ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "zovn-kube-pki-"));
    claimDir(dir);
    const topo = planTopology({ ...DEFAULT_SPEC, name: "zrig", nodes: 1 });
    return { pki: await ensurePki(dir, topo), dir };
  })();
  return pkiOnce;
}

export async function startKubeApiserver(opts: KubeApiserverOptions = {}): Promise<KubeApiserver> {
  // Binaries first: when they are missing, fail before creating anything on disk.
  const bins = await binaries();
  const { pki } = await sharedPki();
  const dir = await mkdtemp(join(tmpdir(), "zovn-kube-"));
  claimDir(dir);
  const [port, etcdClient, etcdPeer] = await Promise.all([freePort(), freePort(), freePort()]);
  const server = `https://127.0.0.1:${port}`;
  const logs = {
    etcd: join(dir, "etcd.out"),
    apiserver: join(dir, "kube-apiserver.out"),
    controllerManager: join(dir, "kube-controller-manager.out"),
  };
  const kubeconfigPath = join(dir, "admin.kubeconfig");
  const admin = pki.cert("admin");
  writeKubeconfig(kubeconfigPath, {
    server,
    caCert: pki.caCert,
    clientCert: admin.cert,
    clientKey: admin.key,
    user: "admin",
    cluster: "zovn-rig",
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);

  const topo = planTopology({ ...DEFAULT_SPEC, name: "zrig", nodes: 1 });
  const etcdUrl = `http://127.0.0.1:${etcdClient}`;
  const apiArgs = [
    ...apiserverArgs(topo, pki, {
      advertiseAddress: "127.0.0.1",
      bindAddress: "127.0.0.1",
      securePort: port,
      etcdServers: etcdUrl,
    }),
    // The endpoint reconciler refuses a loopback address for the kubernetes Service, and nothing here needs
    // that Service to have endpoints.
    "--endpoint-reconciler-type=none",
    ...(opts.apiserverArgs ?? []),
  ];
  const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
  const ep: ApiEndpoint = {
    host: "127.0.0.1",
    port,
    ca: readFileSync(pki.caCert),
    cert: readFileSync(admin.cert),
    key: readFileSync(admin.key),
  };

  const etcd = spawnDaemon(
    bins.ETCD,
    etcdArgs(join(dir, "etcd"), { client: etcdUrl, peer: `http://127.0.0.1:${etcdPeer}` }),
    { outputFile: logs.etcd },
  );
  let apiserver: Daemon | undefined;
  let controllerManager: Daemon | undefined;
  let stopped = false;

  const failure = (what: string, err: unknown): Error => {
    const tail = (file: string) => {
      try {
        return readFileSync(file, "utf8").split("\n").slice(-15).join("\n");
      } catch {
        return "(no output)";
      }
    };
    return new Error(
      `${what}: ${(err as Error).message}\n--- etcd ---\n${tail(logs.etcd)}\n--- kube-apiserver ---\n${tail(logs.apiserver)}`,
    );
  };

  const startApiserver = async (): Promise<void> => {
    if (apiserver && !apiserver.hasExited()) return;
    const proc = spawnDaemon(bins.KUBE_APISERVER, apiArgs, { outputFile: logs.apiserver });
    apiserver = proc;
    try {
      await waitApiserverReady(ep, readyTimeoutMs, () => !proc.hasExited() && !etcd.hasExited());
    } catch (err) {
      throw failure("kube-apiserver did not become ready", err);
    }
  };

  const stopApiserver = async (): Promise<void> => {
    await apiserver?.terminate(5000);
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await controllerManager?.terminate(3000);
    await apiserver?.terminate(5000);
    await etcd.terminate(3000);
    await removeOwnedDir(dir);
  };

  try {
    await startApiserver();
    if (opts.controllerManager) {
      const kc = join(dir, "kube-controller-manager.kubeconfig");
      const client = pki.cert("kube-controller-manager");
      writeKubeconfig(kc, {
        server,
        caCert: pki.caCert,
        clientCert: client.cert,
        clientKey: client.key,
        user: "kube-controller-manager",
        cluster: "zovn-rig",
      });
      const args = [
        ...controllerManagerArgs(layoutFor("zrig", dir), pki, kc),
        // No serving port: several managers may run on one machine and nobody scrapes them here.
        "--secure-port=0",
      ];
      controllerManager = spawnDaemon(bins.KUBE_CONTROLLER_MANAGER, args, {
        outputFile: logs.controllerManager,
      });
    }
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    dir,
    kubeconfigPath,
    server,
    port,
    kubeConfig,
    ca: { cert: pki.caCert, key: pki.caKey },
    kubeConfigAt: (other) => {
      const doc = JSON.parse(readFileSync(kubeconfigPath, "utf8")) as {
        clusters: Array<{ cluster: { server: string } }>;
      };
      for (const c of doc.clusters) c.cluster.server = other;
      const kc = new KubeConfig();
      kc.loadFromString(JSON.stringify(doc));
      return kc;
    },
    binaries: bins,
    logs,
    kubectl: (args, o = {}) => kubectl(bins.KUBECTL, [`--kubeconfig=${kubeconfigPath}`, ...args], o),
    pids: () =>
      [etcd, apiserver, controllerManager]
        .filter((d): d is Daemon => d !== undefined && !d.hasExited())
        .map((d) => d.pid),
    stopApiserver,
    startApiserver,
    restartApiserver: async () => {
      await stopApiserver();
      await startApiserver();
    },
    stop,
  };
}

function kubectl(
  command: string,
  args: string[],
  opts: { input?: string; timeoutMs?: number },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        timeout: opts.timeoutMs ?? 30_000,
        killSignal: "SIGKILL",
        maxBuffer: 64 * 1024 * 1024,
        encoding: "utf8",
      },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.slice(1).join(" ")}: ${stderr.trim() || err.message}`));
        else resolve(stdout);
      },
    );
    child.stdin?.end(opts.input ?? "");
  });
}

/** Starts a control plane that is stopped (and its temp dir removed) when the test ends, passed or failed. */
export async function useKubeApiserver(
  t: AfterHook,
  opts: KubeApiserverOptions = {},
): Promise<KubeApiserver> {
  const kube = await startKubeApiserver(opts);
  teardownFor(t).after(() => kube.stop());
  return kube;
}
