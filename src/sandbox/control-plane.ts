// The Kubernetes control plane on the control-plane host netns: etcd, kube-apiserver with the real admission
// chain, RBAC and Node authorization, kube-controller-manager (all default controllers, EndpointSlice
// included, each with its own service account) and kube-scheduler.

import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Binaries } from "./binaries.ts";
import { spawnDetached } from "./daemon.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import type { Layout } from "./layout.ts";
import type { Place } from "./netns.ts";
import type { Pki } from "./pki.ts";
import { type DaemonRecord, liveDaemon, recordDaemon, type SandboxState } from "./state.ts";
import { APISERVER_PORT, apiserverUrl, SERVICE_CIDR, type Topology } from "./topology.ts";

const ETCD_CLIENT = "http://127.0.0.1:2379";
const ETCD_PEER = "http://127.0.0.1:2380";

export interface EtcdUrls {
  client: string;
  peer: string;
}

export function etcdArgs(
  dataDir: string,
  urls: EtcdUrls = { client: ETCD_CLIENT, peer: ETCD_PEER },
): string[] {
  return [
    "--name=cp",
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${urls.client}`,
    `--advertise-client-urls=${urls.client}`,
    `--listen-peer-urls=${urls.peer}`,
    `--initial-advertise-peer-urls=${urls.peer}`,
    `--initial-cluster=cp=${urls.peer}`,
    "--log-level=warn",
    // A throwaway cluster: losing the last writes on a machine crash costs nothing, fsync costs seconds.
    "--unsafe-no-fsync",
  ];
}

/** Where the apiserver listens and finds etcd; the sandbox's values unless a caller (the test rig) says otherwise. */
export interface ApiserverListen {
  advertiseAddress: string;
  bindAddress: string;
  securePort: number;
  etcdServers: string;
}

export function apiserverArgs(topo: Topology, pki: Pki, listen?: ApiserverListen): string[] {
  const serving = pki.cert("apiserver");
  const at = listen ?? {
    advertiseAddress: topo.controlPlane.ip,
    bindAddress: "0.0.0.0",
    securePort: APISERVER_PORT,
    etcdServers: ETCD_CLIENT,
  };
  return [
    `--advertise-address=${at.advertiseAddress}`,
    `--bind-address=${at.bindAddress}`,
    `--secure-port=${at.securePort}`,
    `--etcd-servers=${at.etcdServers}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    `--client-ca-file=${pki.caCert}`,
    `--tls-cert-file=${serving.cert}`,
    `--tls-private-key-file=${serving.key}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${pki.saPub}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    "--authorization-mode=Node,RBAC",
    // The default admission plugins stay on; NodeRestriction is the one kubeadm adds.
    "--enable-admission-plugins=NodeRestriction",
    "--allow-privileged=true",
    "--kubelet-preferred-address-types=InternalIP,Hostname",
    `--kubelet-client-certificate=${pki.cert("apiserver-kubelet-client").cert}`,
    `--kubelet-client-key=${pki.cert("apiserver-kubelet-client").key}`,
    "--profiling=false",
  ];
}

function componentKubeconfig(layout: Layout, name: string): string {
  return join(layout.kubeDir, `${name}.kubeconfig`);
}

export function controllerManagerArgs(
  layout: Layout,
  pki: Pki,
  kc: string = componentKubeconfig(layout, "kube-controller-manager"),
): string[] {
  return [
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    "--controllers=*",
    "--use-service-account-credentials=true",
    `--service-account-private-key-file=${pki.saKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    // One instance only: leader election would make a restarted manager wait out its predecessor's lease.
    "--leader-elect=false",
    "--bind-address=127.0.0.1",
  ];
}

export function schedulerArgs(layout: Layout): string[] {
  const kc = componentKubeconfig(layout, "kube-scheduler");
  return [
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    "--leader-elect=false",
    "--bind-address=127.0.0.1",
  ];
}

export interface ControlPlaneContext {
  layout: Layout;
  topo: Topology;
  pki: Pki;
  bins: Binaries;
  state: SandboxState;
}

function cpPlace(topo: Topology): Place {
  return { netns: topo.controlPlane.netns };
}

/** Starts a component unless its recorded process still runs; returns its record. */
function ensureComponent(
  ctx: ControlPlaneContext,
  component: string,
  command: string,
  args: string[],
): DaemonRecord {
  const name = `cp/${component}`;
  const live = liveDaemon(ctx.state, name);
  if (live) return live;
  const log = join(ctx.layout.cpLogDir, `${component}.log`);
  const id = spawnDetached({ place: cpPlace(ctx.topo), command, args, log });
  const record: DaemonRecord = { name, log, ...id };
  recordDaemon(ctx.layout, ctx.state, record);
  return record;
}

export function writeComponentKubeconfigs(ctx: ControlPlaneContext): void {
  mkdirSync(ctx.layout.kubeDir, { recursive: true });
  for (const component of ["kube-controller-manager", "kube-scheduler"]) {
    const client = ctx.pki.cert(component);
    writeKubeconfig(componentKubeconfig(ctx.layout, component), {
      server: apiserverUrl(ctx.topo),
      caCert: ctx.pki.caCert,
      clientCert: client.cert,
      clientKey: client.key,
      user: component,
    });
  }
}

/**
 * Audit policy: every request of a ServiceAccount (the controller's and the node agents') at Metadata level
 * (who, verb, resource, response code), nothing else. A 403 a component got is one grep away, and the RBAC
 * tests read the denials from it.
 */
export const SERVICE_ACCOUNT_AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`;

export function auditLogPath(layout: Layout): string {
  return join(layout.cpLogDir, "kube-apiserver-audit.log");
}

/** etcd and kube-apiserver start together: the apiserver retries etcd until it answers. */
export function startApiserver(ctx: ControlPlaneContext): void {
  ensureComponent(ctx, "etcd", ctx.bins.ETCD, etcdArgs(ctx.layout.etcdDir));
  mkdirSync(ctx.layout.kubeDir, { recursive: true });
  mkdirSync(ctx.layout.cpLogDir, { recursive: true });
  const policy = join(ctx.layout.kubeDir, "audit-policy.yaml");
  writeFileSync(policy, SERVICE_ACCOUNT_AUDIT_POLICY);
  ensureComponent(ctx, "kube-apiserver", ctx.bins.KUBE_APISERVER, [
    ...apiserverArgs(ctx.topo, ctx.pki),
    `--audit-policy-file=${policy}`,
    `--audit-log-path=${auditLogPath(ctx.layout)}`,
    "--audit-log-mode=blocking",
    "--audit-log-maxsize=50",
    "--audit-log-maxbackup=1",
  ]);
}

/**
 * The controller manager and scheduler start once the apiserver is ready: started earlier they can read
 * RBAC before its bootstrap policy exists, and then exit instead of retrying.
 */
export function startControllers(ctx: ControlPlaneContext): DaemonRecord[] {
  writeComponentKubeconfigs(ctx);
  return [
    ensureComponent(
      ctx,
      "kube-controller-manager",
      ctx.bins.KUBE_CONTROLLER_MANAGER,
      controllerManagerArgs(ctx.layout, ctx.pki),
    ),
    ensureComponent(ctx, "kube-scheduler", ctx.bins.KUBE_SCHEDULER, schedulerArgs(ctx.layout)),
  ];
}

export interface ApiEndpoint {
  host: string;
  port: number;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

function getPath(ep: ApiEndpoint, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: ep.host,
        port: ep.port,
        path,
        method: "GET",
        ca: ep.ca,
        cert: ep.cert,
        key: ep.key,
        timeout: 3000,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          body += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** Waits for /readyz; `alive` is checked between attempts so a crashed apiserver fails fast with its log. */
export async function waitApiserverReady(
  ep: ApiEndpoint,
  timeoutMs: number,
  alive: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    try {
      const res = await getPath(ep, "/readyz");
      if (res.status === 200) return;
      last = `HTTP ${res.status}: ${res.body.slice(0, 300)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (!alive()) throw new Error(`kube-apiserver exited (${last})`);
    await sleep(250);
  }
  throw new Error(`kube-apiserver not ready after ${timeoutMs} ms: ${last}`);
}
