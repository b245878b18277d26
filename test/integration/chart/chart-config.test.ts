// The environment the chart gives the controller and the node agent is one they accept: every ZSTACK_*
// variable it sets is a setting of that program (the loader ignores unknown variables, so a typo would
// silently fall back to a default), and the programs' own loaders parse the values without a problem.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadNodeConfig, NODE_SETTINGS } from "../../../src/agent/config.ts";
import {
  CONTROLLER_SETTINGS,
  ConfigError,
  loadControllerConfig,
} from "../../../src/config/controller-config.ts";
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
  "spec.nodeName": "node-1",
};

async function containerEnv(
  valuesFile: string | undefined,
  kind: string,
  container: string,
): Promise<NodeJS.ProcessEnv> {
  const objs = objectsOf(await helmTemplate(valuesFile));
  const obj = objs.find((o) => o.kind === kind) as unknown as {
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
    });
  }

  it("external: the node agent accepts it; the controller of this release refuses external mode, and only that", async () => {
    const nodeEnv = await containerEnv("values-external.yaml", "DaemonSet", "node");
    assert.match(loadNodeConfig(nodeEnv, []).sbdbAddress, /^ssl:172\.20\.0\.11:6642,/);
    const env = await containerEnv("values-external.yaml", "Deployment", "controller");
    assert.throws(
      () => loadControllerConfig({ env, argv: [] }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.problems.length, 1, err.message);
        assert.match(err.problems[0] as string, /ZSTACK_OVN_MODE.*external is not supported yet/);
        return true;
      },
    );
  });
});
