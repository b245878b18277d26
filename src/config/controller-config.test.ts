import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  CONTROLLER_SETTINGS,
  ConfigError,
  controllerConfigHelp,
  loadControllerConfig,
} from "./controller-config.ts";

function problems(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
  assert.fail("configuration was accepted");
}

const files = (content: Record<string, string>) => (path: string) => {
  const text = content[path];
  if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
  return text;
};

describe("controller configuration", () => {
  it("uses the documented defaults when nothing is given", () => {
    const { config, sources } = loadControllerConfig({ argv: [], env: {}, hostname: "cp-1" });
    assert.deepEqual(config, {
      ovn: {
        mode: "standalone",
        nbdbAddress: "",
        sbdbAddress: "",
        ssl: { enabled: false, verifyHostname: false, caCert: "", clientCert: "", clientKey: "" },
      },
      network: {
        clusterCIDR: "10.244.0.0/16",
        serviceCIDR: "10.96.0.0/16",
        joinCIDR: "100.64.0.0/16",
        nodeSubnetSize: 24,
        mtu: 0,
      },
      gateway: { mode: "local", interface: "" },
      tunnel: { type: "vxlan", port: 4789 },
      logging: { level: "info", format: "json" },
      kubernetes: { kubeconfig: "" },
      controller: {
        workers: 4,
        metricsPort: 10660,
        leaderElect: true,
        leaseNamespace: "kube-system",
        leaseName: "zstack-ovnkube-controller",
        identity: "cp-1",
        watchTraceFile: "",
      },
    });
    assert.ok(Object.values(sources).every((s) => s === "default"));
  });

  it("takes flags over environment variables over the config file over defaults", () => {
    const { config, sources } = loadControllerConfig({
      argv: ["--config", "/etc/zovn.yaml", "--log-level=debug"],
      env: { ZSTACK_LOG_LEVEL: "warn", ZSTACK_TUNNEL_TYPE: "geneve" },
      readFile: files({
        "/etc/zovn.yaml": [
          "logging:",
          "  level: error",
          "  format: text",
          "tunnel:",
          "  type: vxlan",
          "network:",
          "  mtu: 1400",
        ].join("\n"),
      }),
    });
    assert.equal(config.logging.level, "debug");
    assert.equal(sources["logging.level"], "flag");
    assert.equal(config.tunnel.type, "geneve");
    assert.equal(sources["tunnel.type"], "env");
    assert.equal(config.logging.format, "text");
    assert.equal(sources["logging.format"], "file");
    assert.equal(config.network.mtu, 1400);
    assert.equal(config.tunnel.port, 6081, "the tunnel port follows the tunnel type unless set");
    assert.equal(sources["network.serviceCIDR"], "default");
  });

  it("reads a JSON config file, and a Helm values file with keys it does not use as warnings", () => {
    const json = loadControllerConfig({
      argv: [],
      env: { ZSTACK_CONFIG: "/c.json" },
      readFile: files({
        "/c.json": JSON.stringify({ ovn: { ssl: { enabled: false } }, controller: { workers: 8 } }),
      }),
    });
    assert.equal(json.config.controller.workers, 8);
    assert.equal(json.configFile, "/c.json");
    const helm = loadControllerConfig({
      argv: ["--config=/values.yaml"],
      env: {},
      readFile: files({
        "/values.yaml": [
          "ovn:",
          "  mode: standalone",
          "  nbdbAddress: tcp:10.0.0.1:6641,tcp:10.0.0.2:6641",
          "  sbdbAddress: tcp:10.0.0.1:6642",
          "  standalone:",
          "    haMode: single",
          "controller:",
          "  replicas: 1",
          "  image:",
          "    tag: '0.1.0'",
          "gateway:",
          "  mode: local",
          "  interface: eth1",
          "tunnel: { type: geneve, port: 6082 }",
        ].join("\n"),
      }),
    });
    assert.equal(helm.config.ovn.mode, "standalone");
    assert.equal(helm.config.ovn.nbdbAddress, "tcp:10.0.0.1:6641,tcp:10.0.0.2:6641");
    assert.equal(helm.config.gateway.interface, "eth1");
    assert.equal(helm.config.tunnel.port, 6082);
    assert.deepEqual(helm.warnings, [
      "/values.yaml: ignoring ovn.standalone, which zstack-ovnkube-controller does not read",
      "/values.yaml: ignoring controller.replicas, which zstack-ovnkube-controller does not read",
      "/values.yaml: ignoring controller.image, which zstack-ovnkube-controller does not read",
    ]);
  });

  it("names the variable, the bad value and what is allowed", () => {
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: [], env: { ZSTACK_TUNNEL_TYPE: "gre" } })),
      ['ZSTACK_TUNNEL_TYPE="gre": must be vxlan or geneve'],
    );
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: ["--gateway-mode", "remote"], env: {} })),
      ['--gateway-mode="remote": must be local or shared'],
    );
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({
          argv: ["--config", "/f.yaml"],
          env: {},
          readFile: files({ "/f.yaml": "ovn:\n  mode: embedded\n" }),
        }),
      ),
      ['ovn.mode="embedded" (in /f.yaml): must be standalone or external'],
    );
  });

  it("reports every problem at once", () => {
    const found = problems(() =>
      loadControllerConfig({
        argv: ["--workers=0", "--bogus"],
        env: {
          ZSTACK_LOG_LEVEL: "verbose",
          ZSTACK_CLUSTER_CIDR: "10.244.0.5/16",
          ZSTACK_METRICS_PORT: "http",
          ZSTACK_LEADER_ELECT: "maybe",
          ZSTACK_MTU: "100",
          ZSTACK_OVN_NBDB_ADDRESS: "10.0.0.1:6641",
        },
      }),
    );
    assert.deepEqual(found, [
      "unknown flag --bogus (see --help)",
      'ZSTACK_OVN_NBDB_ADDRESS="10.0.0.1:6641": must be comma-separated OVSDB remotes: tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH (IPv6 hosts in brackets) ("10.0.0.1:6641" is not one)',
      'ZSTACK_CLUSTER_CIDR="10.244.0.5/16": must be a CIDR such as 10.244.0.0/16, or an IPv4 and an IPv6 CIDR separated by a comma ("10.244.0.5/16" has host bits set; write the network address, 10.244.0.0/16 (the gateway goes in its own field))',
      'ZSTACK_MTU="100": must be 0 (detect) or an integer from 576 to 9000',
      'ZSTACK_LOG_LEVEL="verbose": must be one of debug, info, warn, error',
      '--workers="0": must be an integer from 1 to 64',
      'ZSTACK_METRICS_PORT="http": must be an integer from 1 to 65535',
      'ZSTACK_LEADER_ELECT="maybe": must be true or false',
    ]);
  });

  it("requires certificates with TLS, and checks host names only when asked", () => {
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({
          argv: ["--ovn-ssl", "--ovn-ssl-ca=/ca.pem"],
          env: { ZSTACK_OVN_NBDB_ADDRESS: "ssl:[fd00::1]:6641" },
        }),
      ),
      [
        "ovn.ssl.enabled=true needs ovn.ssl.clientCert (ZSTACK_OVN_SSL_CERT, --ovn-ssl-cert)",
        "ovn.ssl.enabled=true needs ovn.ssl.clientKey (ZSTACK_OVN_SSL_KEY, --ovn-ssl-key)",
      ],
    );
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({ argv: [], env: { ZSTACK_OVN_SBDB_ADDRESS: "ssl:10.0.0.1:6642" } }),
      ),
      [
        "ssl: remotes need ovn.ssl.enabled (ZSTACK_OVN_SSL_ENABLED, --ovn-ssl)=true and its certificate files",
      ],
    );
    const ok = loadControllerConfig({
      argv: [
        "--ovn-ssl",
        "--ovn-ssl-verify-hostname",
        "--nbdb-address=ssl:10.0.0.1:6641",
        "--sbdb-address=ssl:10.0.0.1:6642",
      ],
      env: { ZSTACK_OVN_SSL_CA: "/ca.pem", ZSTACK_OVN_SSL_CERT: "/c.pem", ZSTACK_OVN_SSL_KEY: "/k.pem" },
    });
    assert.equal(ok.config.ovn.ssl.enabled, true);
    assert.equal(ok.config.ovn.ssl.verifyHostname, true);
    assert.equal(
      loadControllerConfig({ argv: [], env: {} }).config.ovn.ssl.verifyHostname,
      false,
      "off unless asked, as OVS does",
    );
  });

  it("refuses settings whose behaviour is not built yet instead of ignoring them", () => {
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({
          argv: ["--nbdb-address=tcp:10.0.0.1:6641", "--sbdb-address=tcp:10.0.0.1:6642"],
          env: { ZSTACK_OVN_MODE: "external", ZSTACK_GATEWAY_MODE: "shared" },
        }),
      ),
      [
        "gateway.mode (ZSTACK_GATEWAY_MODE, --gateway-mode)=shared is not supported yet: pod egress goes through the node's kernel; set it to local",
      ],
    );
  });

  it("accepts External mode with ZStack's NB and SB remotes (several, tcp: or ssl: with certificates)", () => {
    const plain = loadControllerConfig({
      argv: [
        "--ovn-mode=external",
        "--nbdb-address=tcp:10.0.0.1:6641,tcp:10.0.0.2:6641,tcp:10.0.0.3:6641",
        "--sbdb-address=tcp:10.0.0.1:6642",
      ],
      env: {},
    });
    assert.equal(plain.config.ovn.mode, "external");
    assert.equal(plain.config.ovn.nbdbAddress, "tcp:10.0.0.1:6641,tcp:10.0.0.2:6641,tcp:10.0.0.3:6641");
    const tls = loadControllerConfig({
      argv: [],
      env: {
        ZSTACK_OVN_MODE: "external",
        ZSTACK_OVN_NBDB_ADDRESS: "ssl:[fd00::1]:6641",
        ZSTACK_OVN_SBDB_ADDRESS: "ssl:[fd00::1]:6642",
        ZSTACK_OVN_SSL_ENABLED: "true",
        ZSTACK_OVN_SSL_CA: "/ca.pem",
        ZSTACK_OVN_SSL_CERT: "/cert.pem",
        ZSTACK_OVN_SSL_KEY: "/key.pem",
      },
    });
    assert.equal(tls.config.ovn.ssl.enabled, true);
    // ssl: remotes without the certificates are refused as in Standalone mode.
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({
          argv: [
            "--ovn-mode=external",
            "--nbdb-address=ssl:10.0.0.1:6641",
            "--sbdb-address=ssl:10.0.0.1:6642",
          ],
          env: {},
        }),
      ),
      [
        "ssl: remotes need ovn.ssl.enabled (ZSTACK_OVN_SSL_ENABLED, --ovn-ssl)=true and its certificate files",
      ],
    );
  });

  it("refuses External mode without ZStack's NB and SB, naming each setting and its form", () => {
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: ["--ovn-mode=external"], env: {} })),
      [
        "ovn.mode (ZSTACK_OVN_MODE, --ovn-mode)=external needs ovn.nbdbAddress (ZSTACK_OVN_NBDB_ADDRESS, --nbdb-address): the northbound database ZStack manages, e.g. tcp:ZSTACK_OVN_HOST:6641 (every Raft member, comma-separated)",
        "ovn.mode (ZSTACK_OVN_MODE, --ovn-mode)=external needs ovn.sbdbAddress (ZSTACK_OVN_SBDB_ADDRESS, --sbdb-address): the southbound database ZStack manages, e.g. tcp:ZSTACK_OVN_HOST:6642 (every Raft member, comma-separated)",
      ],
    );
    assert.match(
      problems(() =>
        loadControllerConfig({
          argv: [
            "--ovn-mode=external",
            "--nbdb-address=http://zstack:6641",
            "--sbdb-address=tcp:10.0.0.1:6642",
          ],
          env: {},
        }),
      )[0] ?? "",
      /--nbdb-address="http:\/\/zstack:6641": must be comma-separated OVSDB remotes: tcp:HOST:PORT/,
    );
  });

  it("refuses overlapping networks and accepts dual-stack ones", () => {
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: ["--service-cidr=10.244.128.0/20"], env: {} })),
      [
        "network.clusterCIDR=10.244.0.0/16 overlaps network.serviceCIDR=10.244.128.0/20: the networks must be disjoint",
      ],
    );
    const dual = loadControllerConfig({
      argv: [
        "--cluster-cidr=10.244.0.0/16, fd00:10:244::/48",
        "--service-cidr=10.96.0.0/16,fd00:10:96::/112",
      ],
      env: {},
    });
    assert.equal(dual.config.network.clusterCIDR, "10.244.0.0/16,fd00:10:244::/48");
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: ["--cluster-cidr=10.244.0.0/16,10.245.0.0/16"], env: {} })),
      ['--cluster-cidr="10.244.0.0/16,10.245.0.0/16": two CIDRs must be one IPv4 and one IPv6 (dual stack)'],
    );
    assert.deepEqual(
      problems(() => loadControllerConfig({ argv: ["--node-subnet-size=16"], env: {} })),
      [
        "network.nodeSubnetSize=16 must be longer than the clusterCIDR prefix /16, so the cluster network holds several node subnets",
      ],
    );
  });

  it("reads booleans as --flag, --flag=false, --no-flag and true/false/1/0 values", () => {
    const at = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
      loadControllerConfig({ argv, env }).config.controller.leaderElect;
    assert.equal(at(["--leader-elect"]), true);
    assert.equal(at(["--leader-elect=false"]), false);
    assert.equal(at(["--no-leader-elect"]), false);
    assert.equal(at(["--leader-elect", "--workers=2"]), true);
    assert.equal(at([], { ZSTACK_LEADER_ELECT: "0" }), false);
    assert.equal(at(["--leader-elect=true"], { ZSTACK_LEADER_ELECT: "false" }), true);
  });

  it("reports an unreadable or malformed config file", () => {
    assert.match(
      problems(() =>
        loadControllerConfig({ argv: ["--config=/missing.yaml"], env: {}, readFile: files({}) }),
      )[0] ?? "",
      /^config file \/missing.yaml: ENOENT/,
    );
    assert.match(
      problems(() =>
        loadControllerConfig({
          argv: ["--config=/bad.yaml"],
          env: {},
          readFile: files({ "/bad.yaml": "ovn: [unclosed" }),
        }),
      )[0] ?? "",
      /^config file \/bad.yaml is not valid YAML or JSON: /,
    );
    assert.deepEqual(
      problems(() =>
        loadControllerConfig({
          argv: ["--config=/n.yaml"],
          env: {},
          readFile: files({ "/n.yaml": "tunnel:\n  port: [1]\n" }),
        }),
      ),
      ["tunnel.port in /n.yaml: must be an integer from 1 to 65535"],
    );
  });

  it("--help is reported instead of failing, and the help lists every flag with its variable", () => {
    const res = loadControllerConfig({ argv: ["--help", "--bogus"], env: {} });
    assert.equal(res.help, true);
    const help = controllerConfigHelp();
    assert.match(help, /--tunnel-type {2}\(ZSTACK_TUNNEL_TYPE; tunnel.type; default "vxlan"\)/);
    assert.match(help, /--metrics-port {2}\(ZSTACK_METRICS_PORT; controller.metricsPort; default 10660\)/);
  });
});

describe("docs/configuration.md", () => {
  it("lists every setting with its key, variable and flag", async () => {
    const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "configuration.md"), "utf8");
    for (const s of CONTROLLER_SETTINGS) {
      assert.ok(
        doc.includes(`| \`${s.key}\` | \`${s.env}\` | \`--${s.flag}\` |`),
        `${s.key} missing from the table`,
      );
    }
  });
});
