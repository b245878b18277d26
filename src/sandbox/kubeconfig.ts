// Kubeconfig files for the sandbox's clients. Certificates are embedded rather than referenced by path, so a
// kubeconfig works the same from the machine, the control-plane host and inside a node's mount namespace.
// kubectl and client-go read JSON as well as YAML.

import { readFileSync, writeFileSync } from "node:fs";

/** A client certificate, or a bearer token (a ServiceAccount's, minted by the TokenRequest API). */
export type KubeconfigCredentials = { clientCert: string; clientKey: string } | { token: string };

export type KubeconfigInput = KubeconfigCredentials & {
  server: string;
  caCert: string;
  user: string;
  cluster?: string;
};

export function kubeconfig(input: KubeconfigInput): object {
  const b64 = (path: string) => readFileSync(path).toString("base64");
  const cluster = input.cluster ?? "zovn-sandbox";
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: cluster, cluster: { server: input.server, "certificate-authority-data": b64(input.caCert) } },
    ],
    users: [
      {
        name: input.user,
        user:
          "token" in input
            ? { token: input.token }
            : { "client-certificate-data": b64(input.clientCert), "client-key-data": b64(input.clientKey) },
      },
    ],
    contexts: [{ name: `${input.user}@${cluster}`, context: { cluster, user: input.user } }],
    "current-context": `${input.user}@${cluster}`,
    preferences: {},
  };
}

export function writeKubeconfig(path: string, input: KubeconfigInput): void {
  writeFileSync(path, `${JSON.stringify(kubeconfig(input), null, 2)}\n`, { mode: 0o600 });
}
