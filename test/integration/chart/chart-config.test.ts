// The environment the chart gives the controller and the node agent is one they accept: every ZSTACK_*
// variable it sets is a setting of that program (the loader ignores unknown variables, so a typo would
// silently fall back to a default), and the programs' own loaders parse the values without a problem.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadNodeConfig, NODE_SETTINGS } from "../../../src/agent/config.ts";
import { CONTROLLER_SETTINGS, loadControllerConfig } from "../../../src/config/controller-config.ts";
import { NODE_FLAGS } from "../../../src/runtime-flags.ts";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { helmTemplate, objectsOf } from "../../rig/chart-tools.ts";

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}

// What kubelet would put in: the service variables of the chart's Services and the downward API fields.
const SERVICE_VARS: Record<string, string> = {
  OVN_NB_DB_SERVICE_HOST: "10.96.0.20",
  OVN_NB_DB_SERVICE_PORT: "6641",
  OVN_SB_DB_SERVICE_HOST: "10.96.0.21",
  OVN_SB_DB_SERVICE_PORT: "6642",
};
const FIELDS: Record<string, string> = {
  "metadata.name": "zstack-ovnkube-controller-abc",
  "metadata.namespace": "kube-system",
  "spec.nodeName": "node-1",
};

async function containerEnv(
  valuesFile: string | undefined,
  kind: string,
  container: string,
  sets: string[] = [],
  name?: string,
): Promise<NodeJS.ProcessEnv> {
  const objs = objectsOf(await helmTemplate(valuesFile, sets));
  const obj = objs.find(
    (o) => o.kind === kind && (name === undefined || (o.metadata as { name: string }).name === name),
  ) as unknown as {
    spec: { template: { spec: { containers: Array<{ name: string; env: EnvVar[] }> } } };
  };
  const c = obj.spec.template.spec.containers.find((x) => x.name === container);
  assert.ok(c, `${kind} has a container ${container}`);
  const env: NodeJS.ProcessEnv = {};
  for (const e of c.env) {
    const raw = e.value ?? FIELDS[e.valueFrom?.fieldRef?.fieldPath ?? ""];
    assert.ok(raw !== undefined, `${e.name} has a value`);
    env[e.name] = raw.replace(/\$\(([A-Z_]+)\)/g, (_m, v: string) => {
      assert.ok(v in SERVICE_VARS, `$(${v}) is a service variable kubelet sets`);
      return SERVICE_VARS[v] as string;
    });
  }
  return env;
}

function zstackVars(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env).filter((k) => k.startsWith("ZSTACK_"));
}

describe("the chart's environment for the programs", () => {
  for (const mode of [undefined, "values-standalone.yaml", "values-standalone-ha.yaml"]) {
    it(`the controller accepts it (${mode ?? "defaults"})`, async () => {
      const env = await containerEnv(mode, "Deployment", "controller");
      const known = new Set(CONTROLLER_SETTINGS.map((s) => s.env));
      assert.deepEqual(
        zstackVars(env).filter((v) => !known.has(v)),
        [],
      );
      const { config } = loadControllerConfig({ env, argv: [] });
      assert.equal(config.ovn.nbdbAddress, "tcp:10.96.0.20:6641");
      assert.equal(config.controller.identity, "zstack-ovnkube-controller-abc");
      assert.equal(config.controller.leaderElect, true);
      // The image's executable runs with the V8 flags the sandbox and the benchmarks give the controller.
      assert.equal(env.NODE_OPTIONS, NODE_FLAGS.join(" "));
    });

    it(`the node agent accepts it (${mode ?? "defaults"})`, async () => {
      const env = await containerEnv(mode, "DaemonSet", "node");
      const known = new Set(NODE_SETTINGS.map((s) => s.env));
      assert.deepEqual(
        zstackVars(env).filter((v) => !known.has(v)),
        [],
      );
      const cfg = loadNodeConfig(env, []);
      assert.equal(cfg.nodeName, "node-1");
      assert.equal(cfg.sbdbAddress, "tcp:10.96.0.21:6642");
      assert.equal(cfg.cniBinDir, "/host/opt/cni/bin");
      assert.equal(cfg.healthPort, 10665);
      assert.equal(env.NODE_OPTIONS, NODE_FLAGS.join(" "));
    });
  }

  it("node.bridgeMappings reaches the node agent as typed provider bridges, and a malformed one is refused by the schema", async () => {
    const env = await containerEnv(undefined, "DaemonSet", "node", [
      "node.bridgeMappings=physnet1:br-provider:eth1",
    ]);
    assert.equal(env.ZSTACK_BRIDGE_MAPPINGS, "physnet1:br-provider:eth1");
    assert.deepEqual(loadNodeConfig(env, []).providers, [
      { provider: "physnet1", bridge: "br-provider", uplink: "eth1" },
    ]);
    const defaults = await containerEnv(undefined, "DaemonSet", "node");
    assert.equal(
      defaults.ZSTACK_BRIDGE_MAPPINGS,
      undefined,
      "unset by default: ovn-bridge-mappings left alone",
    );
    await assert.rejects(
      helmTemplate(undefined, ["node.bridgeMappings=physnet1:br-int x"]),
      /bridgeMappings/,
    );
  });

  it("standalone with ovn.ssl: the controller gets ssl: remotes and the Secret's files, the node agent ssl: for ovn-controller", async () => {
    const tls = ["ovn.ssl.enabled=true", "ovn.ssl.secretName=ovn-certs"];
    const env = await containerEnv("values-standalone-ha.yaml", "Deployment", "controller", tls);
    const known = new Set(CONTROLLER_SETTINGS.map((s) => s.env));
    assert.deepEqual(
      zstackVars(env).filter((v) => !known.has(v)),
      [],
    );
    const { config } = loadControllerConfig({ env, argv: [] });
    assert.equal(config.ovn.nbdbAddress, "ssl:10.96.0.20:6641");
    assert.deepEqual(config.ovn.ssl, {
      enabled: true,
      verifyHostname: false,
      caCert: "/etc/zstack-ovn/ssl/ca.crt",
      clientCert: "/etc/zstack-ovn/ssl/tls.crt",
      clientKey: "/etc/zstack-ovn/ssl/tls.key",
    });
    const nodeEnv = await containerEnv("values-standalone-ha.yaml", "DaemonSet", "node", tls);
    assert.equal(loadNodeConfig(nodeEnv, []).sbdbAddress, "ssl:10.96.0.21:6642");
  });

  it("external: the node agent and the controller accept it, with ZStack's NB and SB remotes over ssl:", async () => {
    const nodeEnv = await containerEnv("values-external.yaml", "DaemonSet", "node");
    assert.match(loadNodeConfig(nodeEnv, []).sbdbAddress, /^ssl:172\.20\.0\.11:6642,/);
    const env = await containerEnv("values-external.yaml", "Deployment", "controller");
    const { config } = loadControllerConfig({ env, argv: [] });
    assert.equal(config.ovn.mode, "external");
    assert.match(config.ovn.nbdbAddress, /^ssl:172\.20\.0\.11:6641,ssl:172\.20\.0\.12:6641,/);
    assert.equal(config.ovn.ssl.enabled, true);
  });
});

// The central StatefulSets run the image's entrypoint; it reads only the variables it documents and refuses a
// bad one, so running it (--dry-run) with the rendered environment shows the chart and the entrypoint agree.
describe("the chart's environment for the zstack-ovn-central entrypoint", () => {
  const ENTRYPOINT = join(repoRoot, "deploy", "images", "central", "zstack-ovn-central.sh");
  // Stand-ins for the Secret the chart mounts at /etc/zstack-ovn/ssl.
  const sslDir = mkdtempSync(join(tmpdir(), "zovn-chart-ssl-"));
  for (const f of ["tls.key", "tls.crt", "ca.crt"]) writeFileSync(join(sslDir, f), "PEM\n");
  after(() => rmSync(sslDir, { recursive: true, force: true }));
  const TLS = ["ovn.ssl.enabled=true", "ovn.ssl.secretName=ovn-certs"];
  // The entrypoint's header comment lists the environment it reads.
  const header = readFileSync(ENTRYPOINT, "utf8").split("\nset -euo pipefail")[0] as string;

  const dryRun = (role: string, env: NodeJS.ProcessEnv) => {
    const dbDir = mkdtempSync(join(tmpdir(), "zovn-chart-db-"));
    try {
      const withFiles: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ZOVN_DB_DIR: dbDir,
      };
      for (const [k, v] of Object.entries(env))
        if (v !== undefined) withFiles[k] = v.replace(/^\/etc\/zstack-ovn\/ssl\//, `${sslDir}/`);
      const r = spawnSync("bash", [ENTRYPOINT, role, "--dry-run"], { env: withFiles, encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    } finally {
      rmSync(dbDir, { recursive: true, force: true });
    }
  };

  for (const [mode, replicas] of [
    ["values-standalone.yaml", 1],
    ["values-standalone-ha.yaml", 3],
  ] as const) {
    for (const tls of [false, true]) {
      it(`${mode}${tls ? " with ovn.ssl" : ""}: NB and SB start as ${replicas === 1 ? "standalone servers" : "Raft members"} over ${tls ? "ssl" : "tcp"}`, async () => {
        for (const [sts, port, raft] of [
          ["ovn-nb-db", 6641, 6643],
          ["ovn-sb-db", 6642, 6644],
        ] as const) {
          const env = await containerEnv(mode, "StatefulSet", "ovsdb", tls ? TLS : [], sts);
          const zovn = Object.keys(env).filter((k) => k.startsWith("ZOVN_"));
          const documented = zovn.filter((k) => new RegExp(`^#\\s+${k}\\s`, "m").test(header));
          assert.deepEqual(zovn, documented, "every ZOVN_* the chart sets is one the entrypoint documents");
          // The pod's own name; the namespace came from the downward API (FIELDS).
          env.POD_NAME = `${sts}-1`;
          const out = dryRun(sts === "ovn-nb-db" ? "nb" : "sb", env);
          const scheme = tls ? "ssl" : "tcp";
          assert.match(out, new RegExp(`--remote=p${scheme}:${port} `));
          if (tls)
            assert.match(
              out,
              /--private-key=\S+\/tls\.key --certificate=\S+\/tls\.crt --ca-cert=\S+\/ca\.crt/,
            );
          if (replicas === 3)
            assert.match(
              out,
              new RegExp(
                `join-cluster \\S+ \\S+ ${scheme}:${sts}-1\\.${sts}-peers\\.kube-system\\.svc:${raft} ${scheme}:${sts}-0\\.`,
              ),
            );
          else assert.doesNotMatch(out, /cluster/);
        }
      });
    }
  }
});
