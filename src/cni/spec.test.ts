import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CniError } from "./error.ts";
import { buildConflist } from "./install.ts";
import {
  configVersion,
  decodeConfig,
  interfaceNameProblem,
  parseCniArgs,
  parseCniCommand,
  parseCniEnv,
  parseConfList,
  parsePluginConfig,
  replyVersion,
  SUPPORTED_VERSIONS,
  versionAtLeast,
  versionReply,
} from "./spec.ts";

function codeOf(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected a CniError, got ${String(err)}`);
    return { code: err.code, message: err.message };
  }
  assert.fail("expected a CniError");
}

const ADD_ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "abc123",
  CNI_NETNS: "/run/netns/x",
  CNI_IFNAME: "eth0",
  CNI_ARGS:
    "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=u-1",
  CNI_PATH: "/opt/cni/bin::/usr/lib/cni",
};

describe("CNI environment", () => {
  it("parses every CNI_* variable of an ADD, splitting CNI_PATH and the Kubernetes args", () => {
    const env = parseCniEnv(ADD_ENV);
    assert.equal(env.command, "ADD");
    assert.equal(env.containerId, "abc123");
    assert.equal(env.netns, "/run/netns/x");
    assert.equal(env.ifname, "eth0");
    assert.deepEqual(env.path, ["/opt/cni/bin", "/usr/lib/cni"]);
    assert.deepEqual(env.args.k8s, {
      podNamespace: "default",
      podName: "web-0",
      podInfraContainerId: "abc123",
      podUid: "u-1",
    });
    assert.equal(env.args.all.IgnoreUnknown, "1");
  });

  it("names every missing variable a command requires, with code 4", () => {
    const { code, message } = codeOf(() => parseCniEnv({ CNI_COMMAND: "ADD", CNI_IFNAME: "eth0" }));
    assert.equal(code, 4);
    assert.match(message, /CNI_CONTAINERID, CNI_NETNS/);
  });

  it("lets DEL come without a netns, and GC and STATUS without attachment variables", () => {
    assert.equal(parseCniEnv({ CNI_COMMAND: "DEL", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" }).netns, "");
    assert.equal(parseCniEnv({ CNI_COMMAND: "GC", CNI_PATH: "/opt/cni/bin" }).containerId, "");
    assert.equal(parseCniEnv({ CNI_COMMAND: "STATUS" }).command, "STATUS");
    assert.equal(codeOf(() => parseCniEnv({ CNI_COMMAND: "GC" })).code, 4);
  });

  it("refuses a missing or unknown CNI_COMMAND and lists the valid ones", () => {
    assert.match(codeOf(() => parseCniCommand({})).message, /CNI_COMMAND is not set.*ADD, DEL, CHECK/);
    const bad = codeOf(() => parseCniCommand({ CNI_COMMAND: "add" }));
    assert.equal(bad.code, 4);
    assert.match(bad.message, /"add" is not one of/);
  });

  it("refuses container ids and interface names the spec forbids", () => {
    assert.match(codeOf(() => parseCniEnv({ ...ADD_ENV, CNI_CONTAINERID: "-x" })).message, /CNI_CONTAINERID/);
    assert.match(
      codeOf(() => parseCniEnv({ ...ADD_ENV, CNI_IFNAME: "a-very-long-ifname" })).message,
      /at most 15/,
    );
    assert.equal(interfaceNameProblem("eth0"), undefined);
    assert.ok(interfaceNameProblem("a/b"));
    assert.ok(interfaceNameProblem(".."));
    assert.ok(interfaceNameProblem("a b"));
    for (const bad of ["a\u0001", "a\u007f", 'a"', "a#", "a\\", "-h"])
      assert.ok(interfaceNameProblem(bad), JSON.stringify(bad));
  });

  it("refuses a CNI_NETNS that is not a plain absolute path, and accepts what runtimes pass", () => {
    for (const bad of [
      "run/netns/x",
      "/run/netns/x y",
      "/run/netns/x\nnetns add y",
      "/run/../etc",
      "/run//x",
      "/run/$(id)",
    ]) {
      const e = codeOf(() => parseCniEnv({ ...ADD_ENV, CNI_NETNS: bad }));
      assert.equal(e.code, 4, bad);
      assert.match(e.message, /CNI_NETNS/);
    }
    for (const good of [
      "/var/run/netns/cni-1b2c3d4e-0000-1111-2222-333344445555",
      "/proc/4242/ns/net",
      "/run/netns/p1",
    ])
      assert.equal(parseCniEnv({ ...ADD_ENV, CNI_NETNS: good }).netns, good);
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_COMMAND: "DEL", CNI_NETNS: "" }).netns, "");
  });

  it("keeps '=' inside CNI_ARGS values and refuses pairs without a key", () => {
    assert.equal(parseCniArgs("A=b=c;;B=").all.A, "b=c");
    assert.equal(parseCniArgs("A=b=c;;B=").all.B, "");
    assert.deepEqual(parseCniArgs(undefined).all, {});
    const bad = codeOf(() => parseCniArgs("K8S_POD_NAME"));
    assert.equal(bad.code, 4);
    assert.match(bad.message, /not KEY=VALUE/);
  });
});

describe("plugin configuration on stdin", () => {
  const good = { cniVersion: "1.1.0", name: "zstack-ovn", type: "zstack-ovn-cni" };

  it("reports empty or undecodable stdin as code 6 and a non-object as code 7", () => {
    assert.equal(codeOf(() => decodeConfig("")).code, 6);
    assert.match(codeOf(() => decodeConfig("{not json")).message, /not valid JSON/);
    assert.equal(codeOf(() => decodeConfig("[1]")).code, 7);
    assert.equal(codeOf(() => decodeConfig("null")).code, 7);
    assert.match(codeOf(() => decodeConfig("42")).message, /holds JSON number/);
  });

  it("accepts each supported version and refuses others with code 1 listing the supported ones", () => {
    for (const v of SUPPORTED_VERSIONS) assert.equal(configVersion({ cniVersion: v }), v);
    const old = codeOf(() => configVersion({ cniVersion: "0.3.1" }));
    assert.equal(old.code, 1);
    assert.match(old.message, /"0.3.1" is not supported; use one of 0.4.0, 1.0.0, 1.1.0/);
    assert.match(codeOf(() => configVersion({})).message, /no "cniVersion"/);
  });

  it("reads the fields the agent uses and keeps the rest in raw", () => {
    const prevResult = { cniVersion: "1.1.0", ips: [{ address: "10.0.0.5/24" }] };
    const c = parsePluginConfig({
      ...good,
      serverSocket: "/tmp/a.sock",
      mtu: 1400,
      runtimeConfig: { portMappings: [] },
      prevResult,
      custom: { a: 1 },
    });
    assert.equal(c.serverSocket, "/tmp/a.sock");
    assert.equal(c.mtu, 1400);
    assert.deepEqual(c.runtimeConfig, { portMappings: [] });
    assert.deepEqual(c.prevResult, { ips: [{ address: "10.0.0.5/24" }] });
    assert.deepEqual(c.raw.custom, { a: 1 });
  });

  it("names the invalid field and how to fix it, with code 7", () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...good, name: undefined }, /"name" is missing; set the network name/],
      [{ ...good, name: "bad name" }, /"name" "bad name" must start/],
      [{ ...good, type: "a/b" }, /"type" must name the plugin binary/],
      [
        { ...good, serverSocket: "relative.sock" },
        /"serverSocket" must be an absolute path.*remove it to use the default/,
      ],
      [{ ...good, serverSocket: `/${"x".repeat(120)}` }, /"serverSocket" is 121 bytes long/],
      [{ ...good, mtu: 70000 }, /"mtu" must be an integer from 68 to 65535/],
      [{ ...good, runtimeConfig: [] }, /"runtimeConfig" must be an object/],
      [{ ...good, plugins: [] }, /"plugins" is present: stdin holds a whole configuration list/],
      [{ ...good, prevResult: { ips: [{ address: "10.0.0.5" }] } }, /prevResult\.ips\[0\]\.address/],
    ];
    for (const [config, re] of cases) {
      const { code, message } = codeOf(() => parsePluginConfig(config));
      assert.equal(code, 7, message);
      assert.match(message, re);
    }
  });

  it("reads GC's valid attachments, under either key libcni writes, and treats none as an empty list", () => {
    const valid = [{ containerID: "c1", ifname: "eth0" }];
    assert.deepEqual(
      parsePluginConfig({ ...good, "cni.dev/valid-attachments": valid }, "GC").validAttachments,
      [{ containerId: "c1", ifname: "eth0" }],
    );
    assert.deepEqual(parsePluginConfig({ ...good, "cni.dev/attachments": valid }, "GC").validAttachments, [
      { containerId: "c1", ifname: "eth0" },
    ]);
    assert.deepEqual(parsePluginConfig(good, "GC").validAttachments, []);
    assert.equal(parsePluginConfig(good, "ADD").validAttachments, undefined);
    const bad = codeOf(() =>
      parsePluginConfig({ ...good, "cni.dev/valid-attachments": [{ containerID: "c1" }] }, "GC"),
    );
    assert.match(bad.message, /valid-attachments\[0\]/);
  });
});

describe("versions", () => {
  it("orders the supported versions", () => {
    assert.ok(versionAtLeast("1.1.0", "1.0.0"));
    assert.ok(versionAtLeast("1.0.0", "1.0.0"));
    assert.ok(!versionAtLeast("0.4.0", "1.1.0"));
  });

  it("VERSION echoes the input's cniVersion and lists every supported version", () => {
    assert.deepEqual(versionReply('{"cniVersion":"1.0.0"}'), {
      cniVersion: "1.0.0",
      supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
    });
    assert.equal(versionReply('{"cniVersion":"1.2.0"}').cniVersion, "1.2.0");
    assert.equal(versionReply("").cniVersion, "1.1.0");
    assert.equal(versionReply("garbage").cniVersion, "1.1.0");
  });

  it("answers errors in the requested version when supported, else in the newest", () => {
    assert.equal(replyVersion('{"cniVersion":"0.4.0"}'), "0.4.0");
    assert.equal(replyVersion('{"cniVersion":"9.9.9"}'), "1.1.0");
    assert.equal(replyVersion("{"), "1.1.0");
  });
});

describe("configuration list", () => {
  it("parses the conflist the agent writes", () => {
    const list = parseConfList(JSON.stringify(buildConflist({ socketPath: "/run/x.sock", mtu: 1400 })));
    assert.equal(list.cniVersion, "1.0.0");
    assert.deepEqual(list.cniVersions, ["0.4.0", "1.0.0", "1.1.0"]);
    assert.equal(list.name, "zstack-ovn");
    assert.deepEqual(list.plugins, [{ type: "zstack-ovn-cni", serverSocket: "/run/x.sock", mtu: 1400 }]);
  });

  it("refuses a conflist without plugins or with a typeless plugin", () => {
    assert.match(codeOf(() => parseConfList('{"cniVersion":"1.1.0","name":"n"}')).message, /"plugins"/);
    assert.match(
      codeOf(() => parseConfList('{"cniVersion":"1.1.0","name":"n","plugins":[{}]}')).message,
      /"plugins\[0\]\.type"/,
    );
  });
});
