// The Helm chart: it lints, each values file renders, every rendered object is valid against the schemas of
// the Kubernetes release we run (kubeconform, with schemas from a real apiserver's /openapi/v2 and the Subnet
// CRD's own) and is accepted by that apiserver (server-side dry run: the real schemas and admission chain), a
// wrong value fails with the key named, and deploy/manifests/ is what the chart renders today.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import {
  CHART_DIR,
  helmTemplate,
  kubeconform,
  kubeSchemaDir,
  objectsOf,
  pinnedKubeVersion,
  runHelm,
} from "../../rig/chart-tools.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { runTool } from "../../rig/process.ts";

const MODES = ["standalone", "standalone-ha", "external"] as const;
type Obj = ReturnType<typeof objectsOf>[number];
// biome-ignore lint/suspicious/noExplicitAny: rendered objects are walked by path; a wrong path fails the assertion.
type Tree = any;

const rendered = new Map<string, string>();
let kube: KubeApiserver;
let schemaDir: string;

const find = (objs: Obj[], kind: string, name: string): Tree =>
  objs.find((o) => o.kind === kind && (o.metadata as { name: string }).name === name);

/** TLS in Standalone: the HA layout with the Secret named, and the single one with the PEM texts in the values. */
const TLS_RENDERS = {
  "standalone-ha-tls": [
    "values-standalone-ha.yaml",
    ["ovn.ssl.enabled=true", "ovn.ssl.secretName=ovn-certs"],
  ],
  "standalone-tls-pem": [
    "values-standalone.yaml",
    [
      "ovn.ssl.enabled=true",
      "ovn.ssl.caCert=CA PEM",
      "ovn.ssl.clientCert=CERT PEM",
      "ovn.ssl.clientKey=KEY PEM",
    ],
  ],
} as const;

before(async () => {
  for (const mode of [undefined, ...MODES])
    rendered.set(mode ?? "default", await helmTemplate(mode ? `values-${mode}.yaml` : undefined));
  for (const [name, [file, sets]] of Object.entries(TLS_RENDERS))
    rendered.set(name, await helmTemplate(file, [...sets]));
  kube = await startKubeApiserver();
  schemaDir = await kubeSchemaDir(kube);
});

after(() => kube?.stop());

describe("Helm chart", () => {
  it("passes helm lint --strict with the defaults and with each mode's values", async () => {
    const v = pinnedKubeVersion();
    await runHelm(["lint", "--strict", CHART_DIR, "--kube-version", v]);
    for (const mode of MODES)
      await runHelm([
        "lint",
        "--strict",
        CHART_DIR,
        "--kube-version",
        v,
        "-f",
        join(CHART_DIR, `values-${mode}.yaml`),
      ]);
  });

  for (const mode of ["default", ...MODES, ...Object.keys(TLS_RENDERS)]) {
    it(`renders ${mode}: every object valid against the apiserver's schemas (kubeconform, strict)`, async () => {
      const r = await kubeconform(rendered.get(mode) as string, schemaDir);
      assert.deepEqual(r.problems, []);
      assert.equal(r.invalid + r.errors + r.skipped, 0);
      assert.equal(r.valid, objectsOf(rendered.get(mode) as string).length);
    });

    it(`renders ${mode}: the apiserver accepts every object (server-side dry run)`, async () => {
      const out = await kube.kubectl(
        ["apply", "--server-side", "--dry-run=server", "--field-manager=chart-test", "-f", "-"],
        {
          input: rendered.get(mode) as string,
          timeoutMs: 60_000,
        },
      );
      const lines = out.trim().split("\n");
      assert.equal(lines.length, objectsOf(rendered.get(mode) as string).length, out);
      for (const l of lines) assert.match(l, /serverside-applied \(server dry run\)$/);
    });
  }

  it("installs into another namespace: every namespaced object, the Lease Role and the admission policy follow it", async () => {
    const ns = "zstack-system";
    await kube.kubectl(["create", "namespace", ns]);
    const yaml = await helmTemplate(
      undefined,
      ["controller.priorityClassName=", "ovn.standalone.priorityClassName="],
      ns,
    );
    const objs = objectsOf(yaml);
    for (const o of objs) {
      const m = o.metadata as { namespace?: string };
      if (m.namespace !== undefined) assert.equal(m.namespace, ns, `${o.kind}`);
    }
    const policy = find(objs, "ValidatingAdmissionPolicy", "zstack-ovn-pod-networks-annotation");
    assert.match(
      policy?.spec.variables[0].expression,
      /system:serviceaccount:zstack-system:zstack-ovnkube-controller/,
    );
    const env = find(objs, "Deployment", "zstack-ovnkube-controller")?.spec.template.spec.containers[0].env;
    assert.equal(env.find((e: { name: string }) => e.name === "ZSTACK_LEASE_NAMESPACE").value, ns);
    const out = await kube.kubectl(
      ["apply", "--server-side", "--dry-run=server", "--field-manager=chart-test", "-f", "-"],
      {
        input: yaml,
        timeoutMs: 60_000,
      },
    );
    assert.equal(out.trim().split("\n").length, objs.length, out);
  });

  it("validates a Subnet against the CRD's own schema (and refuses a misspelt field)", async () => {
    const subnet = (spec: string) =>
      `apiVersion: network.zstack.io/v1\nkind: Subnet\nmetadata:\n  name: s1\nspec:\n${spec}`;
    const good = await kubeconform(subnet("  cidr: 10.10.0.0/24\n  gateway: 10.10.0.1\n"), schemaDir);
    assert.deepEqual([good.valid, good.problems], [1, []]);
    const bad = await kubeconform(subnet("  cidr: 10.10.0.0/24\n  gatewy: 10.10.0.1\n"), schemaDir);
    assert.equal(bad.invalid, 1);
    assert.match(bad.problems.join("\n"), /gatewy/);
  });

  it("kubeconform's schemas are strict: a misspelt Deployment field is refused", async () => {
    const r = await kubeconform(
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicaz: 1\n  selector: {}\n  template: {}\n",
      schemaDir,
    );
    assert.equal(r.invalid, 1);
    assert.match(r.problems.join("\n"), /additional properties 'replicaz' not allowed/);
  });

  it("standalone-ha: 3-member NB and SB StatefulSets with stable names and volumes, 2 northd, 2 controllers electing", () => {
    const objs = objectsOf(rendered.get("standalone-ha") as string);
    for (const db of ["ovn-nb-db", "ovn-sb-db"]) {
      const sts = find(objs, "StatefulSet", db);
      assert.ok(sts, db);
      assert.equal(sts.spec.replicas, 3);
      assert.equal(sts.spec.serviceName, `${db}-peers`);
      assert.equal(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage, "1Gi");
      assert.equal(find(objs, "Service", `${db}-peers`)?.spec.clusterIP, "None");
    }
    assert.equal(find(objs, "Deployment", "ovn-northd")?.spec.replicas, 2);
    const ctl = find(objs, "Deployment", "zstack-ovnkube-controller");
    assert.equal(ctl?.spec.replicas, 2);
    const env = ctl?.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>;
    assert.equal(env.find((e) => e.name === "ZSTACK_LEADER_ELECT")?.value, "true");
    assert.ok(find(objs, "PodDisruptionBudget", "zstack-ovnkube-controller"));
  });

  for (const name of Object.keys(TLS_RENDERS)) {
    it(`${name}: every OVN client and server gets the Secret and ssl:`, () => {
      const objs = objectsOf(rendered.get(name) as string);
      const secret = name === "standalone-ha-tls" ? "ovn-certs" : "zstack-ovn-ssl";
      const pem = find(objs, "Secret", "zstack-ovn-ssl");
      if (secret === "zstack-ovn-ssl")
        assert.deepEqual(Object.keys(pem?.data ?? {}).sort(), ["ca.crt", "tls.crt", "tls.key"]);
      else assert.equal(pem, undefined, "a named Secret is used, not created");
      type Container = {
        name: string;
        command?: string[];
        env?: Array<{ name: string; value?: string }>;
        volumeMounts?: Array<{ name: string; mountPath: string }>;
      };
      const podOf = (kind: string, n: string): { containers: Container[]; volumes: Tree[] } =>
        find(objs, kind, n)?.spec.template.spec;
      const envOf = (c: Container) => new Map((c.env ?? []).map((e) => [e.name, e.value]));
      const mounted = (pod: { volumes: Tree[] }, c: Container) => {
        assert.equal(
          pod.volumes.find((v: Tree) => v.name === "ovn-ssl")?.secret.secretName,
          secret,
          `${c.name}: the Secret`,
        );
        assert.ok(
          c.volumeMounts?.some((m) => m.name === "ovn-ssl" && m.mountPath === "/etc/zstack-ovn/ssl"),
          `${c.name} mounts it`,
        );
      };
      for (const sts of ["ovn-nb-db", "ovn-sb-db"]) {
        const pod = podOf("StatefulSet", sts);
        const c = pod.containers[0] as Container;
        mounted(pod, c);
        const env = envOf(c);
        assert.deepEqual(
          ["ZOVN_SSL_KEY", "ZOVN_SSL_CERT", "ZOVN_SSL_CA"].map((k) => env.get(k)),
          ["/etc/zstack-ovn/ssl/tls.key", "/etc/zstack-ovn/ssl/tls.crt", "/etc/zstack-ovn/ssl/ca.crt"],
        );
      }
      const northd = podOf("Deployment", "ovn-northd");
      const nc = northd.containers[0] as Container;
      mounted(northd, nc);
      assert.ok(nc.command?.includes("--ovnnb-db=ssl:$(OVN_NB_DB_SERVICE_HOST):$(OVN_NB_DB_SERVICE_PORT)"));
      assert.ok(nc.command?.includes("--ovnsb-db=ssl:$(OVN_SB_DB_SERVICE_HOST):$(OVN_SB_DB_SERVICE_PORT)"));
      assert.ok(nc.command?.includes("--certificate=/etc/zstack-ovn/ssl/tls.crt"));
      const ctl = podOf("Deployment", "zstack-ovnkube-controller");
      const cc = ctl.containers[0] as Container;
      mounted(ctl, cc);
      assert.equal(envOf(cc).get("ZSTACK_OVN_SSL_ENABLED"), "true");
      assert.match(envOf(cc).get("ZSTACK_OVN_NBDB_ADDRESS") ?? "", /^ssl:/);
      const ds = podOf("DaemonSet", "zstack-ovnkube-node");
      const ovnController = ds.containers.find((c) => c.name === "ovn-controller") as Container;
      mounted(ds, ovnController);
      for (const flag of ["--private-key=", "--certificate=", "--ca-cert="])
        assert.ok(
          ovnController.command?.some((a) => a.startsWith(flag)),
          `ovn-controller ${flag}`,
        );
      const agent = ds.containers.find((c) => c.name === "node") as Container;
      assert.match(
        envOf(agent).get("ZSTACK_OVN_SBDB_ADDRESS") ?? "",
        /^ssl:/,
        "ovn-remote for ovn-controller",
      );
    });
  }

  it("external: no OVN central, ZStack's addresses and TLS from the named Secret", () => {
    const objs = objectsOf(rendered.get("external") as string);
    assert.equal(objs.filter((o) => o.kind === "StatefulSet").length, 0);
    assert.equal(find(objs, "Deployment", "ovn-northd"), undefined);
    const ctl = find(objs, "Deployment", "zstack-ovnkube-controller")?.spec.template.spec;
    const env = ctl.containers[0].env as Array<{ name: string; value?: string }>;
    assert.match(
      env.find((e) => e.name === "ZSTACK_OVN_NBDB_ADDRESS")?.value ?? "",
      /^ssl:172\.20\.0\.11:6641,/,
    );
    assert.equal(env.find((e) => e.name === "ZSTACK_OVN_SSL_ENABLED")?.value, "true");
    assert.equal(
      ctl.volumes.find((v: { name: string }) => v.name === "ovn-ssl").secret.secretName,
      "zstack-ovn-ssl",
    );
    const ds = find(objs, "DaemonSet", "zstack-ovnkube-node")?.spec.template.spec;
    const names = ds.containers.map((c: { name: string }) => c.name);
    assert.deepEqual(names, ["ovn-controller", "node"], "host OVS: no OVS containers");
  });

  it("node DaemonSet: OVS in the pod by default, tolerates every taint, priority class, CNI dirs on the host", () => {
    const objs = objectsOf(rendered.get("default") as string);
    const ds = find(objs, "DaemonSet", "zstack-ovnkube-node")?.spec.template.spec;
    assert.deepEqual(
      ds.containers.map((c: { name: string }) => c.name),
      ["ovsdb-server", "ovs-vswitchd", "ovn-controller", "node"],
    );
    assert.deepEqual(ds.tolerations, [{ operator: "Exists" }]);
    assert.equal(ds.priorityClassName, "system-node-critical");
    const hostPaths = ds.volumes.filter((v: Tree) => v.hostPath).map((v: Tree) => v.hostPath.path);
    assert.ok(
      hostPaths.includes("/opt/cni/bin") && hostPaths.includes("/etc/cni/net.d"),
      hostPaths.join(" "),
    );
    const node = ds.containers.find((c: { name: string }) => c.name === "node");
    assert.equal(node.livenessProbe.httpGet.path, "/healthz");
    assert.equal(node.readinessProbe.httpGet.path, "/readyz");
  });

  it("controller: probes on the health port's /healthz and /readyz, anti-affinity between replicas", () => {
    const objs = objectsOf(rendered.get("default") as string);
    const spec = find(objs, "Deployment", "zstack-ovnkube-controller")?.spec.template.spec;
    const c = spec.containers[0];
    assert.equal(c.ports[0].containerPort, 10660);
    assert.deepEqual([c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path], ["/healthz", "/readyz"]);
    assert.equal(c.livenessProbe.httpGet.port, "health");
    assert.equal(
      spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey,
      "kubernetes.io/hostname",
    );
  });

  const refusals: Array<[string, string[], string | undefined, RegExp]> = [
    [
      "an unknown mode",
      ["ovn.mode=embedded"],
      undefined,
      /at '\/ovn\/mode': value must be one of 'standalone', 'external'/,
    ],
    ["a malformed CIDR", ["network.clusterCIDR=10.244.0/16"], undefined, /at '\/network\/clusterCIDR'/],
    [
      "a replica count of 2 for Raft",
      ["ovn.standalone.nbdb.replicas=2"],
      "values-standalone-ha.yaml",
      /at '\/ovn\/standalone\/nbdb\/replicas'/,
    ],
    [
      "3 members without haMode=ha",
      ["ovn.standalone.sbdb.replicas=3"],
      undefined,
      /at '\/ovn\/standalone\/sbdb\/replicas': value must be 1/,
    ],
    ["external mode without addresses", ["ovn.mode=external"], undefined, /at '\/ovn\/nbdbAddress'/],
    ["a malformed NB address", ["ovn.nbdbAddress=10.0.0.1:6641"], undefined, /at '\/ovn\/nbdbAddress'/],
    [
      "2 controllers without leader election",
      ["controller.replicas=2", "controller.leaderElect=false"],
      undefined,
      /at '\/controller\/leaderElect': value must be true/,
    ],
    ["shared gateway mode (not built)", ["gateway.mode=shared"], undefined, /at '\/gateway\/mode'/],
    ["an MTU below 576", ["network.mtu=500"], undefined, /at '\/network\/mtu'/],
    [
      "TLS without a Secret name or certificates",
      ["ovn.ssl.enabled=true"],
      undefined,
      /at '\/ovn\/ssl\/secretName': minLength/,
    ],
    [
      "TLS with only part of the PEM texts",
      ["ovn.ssl.enabled=true", "ovn.ssl.caCert=CA", "ovn.ssl.clientCert=CERT"],
      undefined,
      /at '\/ovn\/ssl\/clientKey': minLength/,
    ],
    [
      "TLS with a tcp: remote",
      ["ovn.sbdbAddress=tcp:172.20.0.11:6642"],
      "values-external.yaml",
      /at '\/ovn\/sbdbAddress': 'tcp:172\.20\.0\.11:6642' does not match/,
    ],
    [
      "ssl: remotes without TLS",
      ["ovn.ssl.enabled=false"],
      "values-external.yaml",
      /at '\/ovn\/nbdbAddress': 'ssl:172\.20\.0\.11:6641,/,
    ],
    ["DPDK without the host's OVS", ["dpdk.enabled=true"], undefined, /at '\/node\/hostOVS'/],
    // Values that once rendered into the YAML unchecked: a newline added fields to the pod, a space broke the
    // image name, "/" mounted the host's root into the node agent.
    [
      "a priorityClassName that would add a field to the pod",
      ["controller.priorityClassName=x\n      hostPID: true"],
      undefined,
      /at '\/controller\/priorityClassName'/,
    ],
    [
      "an image repository with a newline",
      ["node.image.repository=a\nb"],
      undefined,
      /at '\/node\/image\/repository'/,
    ],
    ["an image tag with a space", ["controller.image.tag=1 2"], undefined, /at '\/controller\/image\/tag'/],
    ["the host's root as the CNI directory", ["node.cniBinDir=/"], undefined, /at '\/node\/cniBinDir'/],
    [
      "a CNI directory with ..",
      ["node.cniConfDir=/etc/cni/../../root"],
      undefined,
      /at '\/node\/cniConfDir'/,
    ],
    [
      "a storage class that is no object name",
      ["ovn.standalone.nbdb.storage.storageClassName=a: b"],
      undefined,
      /at '\/ovn\/standalone\/nbdb\/storage\/storageClassName'/,
    ],
    [
      "a misspelt key",
      ["network.clusterCidr=10.0.0.0/16"],
      undefined,
      /at '\/network': additional properties 'clusterCidr' not allowed/,
    ],
  ];
  for (const [what, sets, file, message] of refusals) {
    it(`refuses ${what}, naming the key`, async () => {
      await assert.rejects(helmTemplate(file, sets), (err: Error) => {
        assert.match(err.message, /values don't meet the specifications of the schema/);
        assert.match(err.message, message);
        return true;
      });
    });
  }

  it("deploy/manifests/ is what the chart renders (make manifests)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "zovn-manifests-"));
    try {
      await runTool(join(repoRoot, "hack", "render-manifests.sh"), [dir], { timeoutMs: 120_000 });
      for (const mode of MODES) {
        const want = readFileSync(join(dir, `${mode}.yaml`), "utf8");
        const have = readFileSync(join(repoRoot, "deploy", "manifests", `${mode}.yaml`), "utf8");
        assert.ok(have === want, `deploy/manifests/${mode}.yaml is stale: run make manifests`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the chart's Subnet CRD is deploy/crds/ byte for byte", () => {
    const name = "subnet.network.zstack.io.yaml";
    assert.equal(
      readFileSync(join(CHART_DIR, "crds", name), "utf8"),
      readFileSync(join(repoRoot, "deploy", "crds", name), "utf8"),
      "copy deploy/crds/ into the chart's crds/",
    );
  });
});
