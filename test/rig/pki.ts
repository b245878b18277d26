import { randomBytes } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { runTool } from "./process.ts";

/** PEM files for TLS tests. "other" is a second CA, unrelated to the first, and a client certificate it signed. */
export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  otherCaCert: string;
  otherCaKey: string;
  otherClientCert: string;
  otherClientKey: string;
}

// Short validity on purpose: these certificates must never be useful outside a test run.
const VALID_DAYS = "1";
const EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/**
 * Creates two CAs, a server certificate (SAN IP:127.0.0.1 and DNS:localhost, so hostname checks of a TLS client
 * pass) and client certificates, all EC P-256, with the openssl CLI.
 */
export async function createPki(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const f = (name: string): string => join(dir, name);
  const leafExt = f("leaf.ext");
  await writeFile(
    leafExt,
    [
      "basicConstraints=critical,CA:FALSE",
      "keyUsage=critical,digitalSignature,keyEncipherment",
      "extendedKeyUsage=serverAuth,clientAuth",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "",
    ].join("\n"),
  );
  const pki: Pki = {
    dir,
    caCert: f("ca-cert.pem"),
    caKey: f("ca-key.pem"),
    serverCert: f("server-cert.pem"),
    serverKey: f("server-key.pem"),
    clientCert: f("client-cert.pem"),
    clientKey: f("client-key.pem"),
    otherCaCert: f("other-ca-cert.pem"),
    otherCaKey: f("other-ca-key.pem"),
    otherClientCert: f("other-client-cert.pem"),
    otherClientKey: f("other-client-key.pem"),
  };
  await Promise.all([
    selfSignedCa("zo-test-ca", pki.caCert, pki.caKey),
    selfSignedCa("zo-test-other-ca", pki.otherCaCert, pki.otherCaKey),
  ]);
  await Promise.all([
    leaf("localhost", pki.serverCert, pki.serverKey, pki.caCert, pki.caKey, leafExt),
    leaf("zo-test-client", pki.clientCert, pki.clientKey, pki.caCert, pki.caKey, leafExt),
    leaf(
      "zo-test-other-client",
      pki.otherClientCert,
      pki.otherClientKey,
      pki.otherCaCert,
      pki.otherCaKey,
      leafExt,
    ),
  ]);
  await rm(leafExt, { force: true });
  return pki;
}

async function selfSignedCa(cn: string, cert: string, key: string): Promise<void> {
  await runTool("openssl", [
    "req",
    "-x509",
    ...EC_KEY,
    "-keyout",
    key,
    "-out",
    cert,
    "-days",
    VALID_DAYS,
    "-subj",
    `/CN=${cn}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
}

async function leaf(
  cn: string,
  cert: string,
  key: string,
  caCert: string,
  caKey: string,
  extFile: string,
): Promise<void> {
  const csr = `${cert}.csr`;
  await runTool("openssl", ["req", "-new", ...EC_KEY, "-keyout", key, "-out", csr, "-subj", `/CN=${cn}`]);
  await runTool("openssl", [
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    caCert,
    "-CAkey",
    caKey,
    // A random serial instead of -CAcreateserial keeps serial files out of the directory.
    "-set_serial",
    `0x${randomBytes(8).toString("hex")}`,
    "-days",
    VALID_DAYS,
    "-extfile",
    extFile,
    "-out",
    cert,
  ]);
  await rm(csr, { force: true });
}
