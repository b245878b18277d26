import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { run } from "./command.ts";
import { certConfig, ensurePki } from "./pki.ts";
import { DEFAULT_SPEC, planTopology } from "./topology.ts";

test("a node certificate request names the node in system:nodes for the Node authorizer", () => {
  const cnf = certConfig({
    file: "n",
    commonName: "system:node:node1",
    organization: "system:nodes",
    usage: "client",
  });
  assert.match(cnf, /^O = system:nodes$/m);
  assert.match(cnf, /^CN = system:node:node1$/m);
  assert.match(cnf, /extendedKeyUsage = clientAuth/);
  assert.match(cnf, /CA:FALSE/);
});

test("the generated PKI verifies against its CA and the apiserver certificate names its service IP", async () => {
  const dir = mkdtempSync(join(tmpdir(), "zsb-pki-"));
  try {
    const pki = await ensurePki(dir, planTopology(DEFAULT_SPEC));
    for (const f of [
      "apiserver",
      "admin",
      "kube-controller-manager",
      "kube-scheduler",
      "apiserver-kubelet-client",
      "node-node1",
      "node-node3",
    ]) {
      const out = await run("openssl", ["verify", "-CAfile", pki.caCert, pki.cert(f).cert]);
      assert.match(out, /: OK/);
    }
    const text = await run("openssl", [
      "x509",
      "-in",
      pki.cert("apiserver").cert,
      "-noout",
      "-ext",
      "subjectAltName",
    ]);
    assert.match(text, /IP Address:10\.96\.0\.1/);
    assert.match(text, /IP Address:192\.168\.200\.2/);
    assert.match(text, /IP Address:127\.0\.0\.1/);
    const admin = await run("openssl", ["x509", "-in", pki.cert("admin").cert, "-noout", "-subject"]);
    assert.match(admin, /O = system:masters/);
    const kubeletClient = pki.cert("apiserver-kubelet-client").cert;
    const subject = await run("openssl", ["x509", "-in", kubeletClient, "-noout", "-subject"]);
    assert.match(
      subject,
      /O = system:masters/,
      "the kubelet's webhook authorizer lets it exec and read logs",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
