// The sandbox's PKI: one CA, the apiserver's serving certificate, client certificates for each component and
// node, and the service-account signing keys. ECDSA P-256 keeps generation to a few milliseconds per cert.

import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "./command.ts";
import { KUBERNETES_SERVICE_IP, type Topology } from "./topology.ts";

export interface CertRequest {
  /** Base file name in the PKI directory: NAME.crt, NAME.key, NAME.cnf. */
  file: string;
  commonName: string;
  organization?: string;
  usage: "server" | "client" | "ca";
  dnsNames?: string[];
  ips?: string[];
}

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  saKey: string;
  saPub: string;
  cert(file: string): { cert: string; key: string };
}

/** The openssl request configuration for one certificate. */
export function certConfig(req: CertRequest): string {
  const dn = [...(req.organization ? [`O = ${req.organization}`] : []), `CN = ${req.commonName}`];
  const ext =
    req.usage === "ca"
      ? ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign,cRLSign,digitalSignature"]
      : [
          "basicConstraints = critical,CA:FALSE",
          "keyUsage = critical,digitalSignature,keyEncipherment",
          `extendedKeyUsage = ${req.usage === "server" ? "serverAuth" : "clientAuth"}`,
          "authorityKeyIdentifier = keyid",
        ];
  const san = [...(req.dnsNames ?? []).map((d) => `DNS:${d}`), ...(req.ips ?? []).map((ip) => `IP:${ip}`)];
  if (san.length > 0) ext.push(`subjectAltName = ${san.join(",")}`);
  ext.push("subjectKeyIdentifier = hash");
  return [
    "[req]",
    "distinguished_name = dn",
    "prompt = no",
    "x509_extensions = ext",
    "[dn]",
    ...dn,
    "[ext]",
    ...ext,
    "",
  ].join("\n");
}

/** Every certificate the sandbox needs, CA excluded. */
export function certRequests(topo: Topology): CertRequest[] {
  const cp = topo.controlPlane;
  return [
    {
      file: "apiserver",
      commonName: "kube-apiserver",
      usage: "server",
      dnsNames: [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
        "control-plane",
      ],
      ips: [KUBERNETES_SERVICE_IP, cp.ip, "127.0.0.1"],
    },
    { file: "admin", commonName: "kubernetes-admin", organization: "system:masters", usage: "client" },
    { file: "kube-controller-manager", commonName: "system:kube-controller-manager", usage: "client" },
    { file: "kube-scheduler", commonName: "system:kube-scheduler", usage: "client" },
    // What the apiserver presents to kubelets (exec, logs, port-forward); kubeadm gives it the same group.
    {
      file: "apiserver-kubelet-client",
      commonName: "kube-apiserver-kubelet-client",
      organization: "system:masters",
      usage: "client",
    },
    ...topo.nodes.map(
      (n): CertRequest => ({
        file: `node-${n.name}`,
        commonName: `system:node:${n.name}`,
        organization: "system:nodes",
        usage: "client",
      }),
    ),
  ];
}

async function issue(dir: string, req: CertRequest, signer?: { cert: string; key: string }): Promise<void> {
  const cnf = join(dir, `${req.file}.cnf`);
  writeFileSync(cnf, certConfig(req));
  const args = ["req", "-x509", "-config", cnf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
  args.push("-noenc", "-keyout", join(dir, `${req.file}.key`), "-out", join(dir, `${req.file}.crt`));
  args.push("-days", "3650");
  if (signer) args.push("-CA", signer.cert, "-CAkey", signer.key);
  await run("openssl", args);
}

/** Creates what is missing; an existing PKI is kept so that `up` on a running sandbox changes nothing. */
export async function ensurePki(dir: string, topo: Topology): Promise<Pki> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pki: Pki = {
    dir,
    caCert: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    saKey: join(dir, "sa.key"),
    saPub: join(dir, "sa.pub"),
    cert: (file) => ({ cert: join(dir, `${file}.crt`), key: join(dir, `${file}.key`) }),
  };
  if (!existsSync(pki.caCert) || !existsSync(pki.caKey)) {
    await issue(dir, { file: "ca", commonName: "zovn-sandbox-ca", usage: "ca" });
  }
  const signer = { cert: pki.caCert, key: pki.caKey };
  await Promise.all(
    certRequests(topo)
      .filter((r) => !existsSync(join(dir, `${r.file}.crt`)))
      .map((r) => issue(dir, r, signer)),
  );
  if (!existsSync(pki.saKey) || !existsSync(pki.saPub)) {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    writeFileSync(pki.saKey, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    writeFileSync(pki.saPub, publicKey.export({ type: "spki", format: "pem" }));
  }
  return pki;
}
