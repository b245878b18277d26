import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dispatch } from "./dispatch.ts";
import { CniError } from "./error.ts";
import type { AddRequest, CniHandler, CniRequest } from "./handler.ts";
import type { AgentRequest } from "./protocol.ts";
import { SUPPORTED_VERSIONS } from "./spec.ts";

class Recorder implements CniHandler {
  calls: CniRequest[] = [];
  fail: Error | undefined;
  private seen(req: CniRequest): void {
    this.calls.push(req);
    if (this.fail) throw this.fail;
  }
  async add(req: AddRequest) {
    this.seen(req);
    return {
      interfaces: [{ name: "eth0", mac: "0a:58:0a:00:00:05", mtu: 1400, sandbox: req.netns }],
      ips: [{ address: "10.0.0.5/24", gateway: "10.0.0.1", interface: 0 }],
    };
  }
  async del(req: CniRequest) {
    this.seen(req);
  }
  async check(req: CniRequest) {
    this.seen(req);
  }
  async gc(req: CniRequest) {
    this.seen(req);
  }
  async status(req: CniRequest) {
    this.seen(req);
  }
}

const signal = new AbortController().signal;
const attachEnv = {
  CNI_CONTAINERID: "c0ffee",
  CNI_NETNS: "/run/netns/p1",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1;K8S_POD_UID=u1",
  CNI_PATH: "/opt/cni/bin",
};
function inv(
  command: string,
  config: Record<string, unknown> | string,
  env: Record<string, string> = attachEnv,
): AgentRequest {
  return {
    env: { ...env, CNI_COMMAND: command },
    stdin: typeof config === "string" ? config : JSON.stringify(config),
  };
}
const conf = (v: string, extra: Record<string, unknown> = {}) => ({
  cniVersion: v,
  name: "zstack-ovn",
  type: "zstack-ovn-cni",
  ...extra,
});

describe("dispatch", () => {
  for (const v of SUPPORTED_VERSIONS) {
    it(`ADD under ${v} hands the handler a typed request and prints the result in ${v}`, async () => {
      const h = new Recorder();
      const reply = await dispatch(inv("ADD", conf(v, { mtu: 1400 })), h, signal);
      assert.equal(reply.exitCode, 0, reply.stdout);
      const out = JSON.parse(reply.stdout);
      assert.equal(out.cniVersion, v);
      assert.equal(out.ips[0].version, v === "0.4.0" ? "4" : undefined);
      assert.equal(out.interfaces[0].mtu, v === "1.1.0" ? 1400 : undefined);
      const req = h.calls[0] as AddRequest;
      assert.equal(req.command, "ADD");
      assert.equal(req.cniVersion, v);
      assert.equal(req.containerId, "c0ffee");
      assert.equal(req.netns, "/run/netns/p1");
      assert.deepEqual(req.k8s, { podNamespace: "ns1", podName: "p1", podUid: "u1" });
      assert.equal(req.config.mtu, 1400);
      assert.deepEqual(req.cniPath, ["/opt/cni/bin"]);
      assert.deepEqual(reply.outcome, { command: "ADD", code: 0, containerId: "c0ffee", pod: "ns1/p1" });
    });

    it(`DEL and CHECK under ${v} succeed with empty stdout`, async () => {
      const h = new Recorder();
      const prevResult = {
        cniVersion: v,
        ips: [{ address: "10.0.0.5/24", ...(v === "0.4.0" ? { version: "4" } : {}) }],
      };
      for (const cmd of ["DEL", "CHECK"]) {
        const reply = await dispatch(inv(cmd, conf(v, { prevResult })), h, signal);
        assert.deepEqual([reply.exitCode, reply.stdout], [0, ""]);
      }
      assert.deepEqual(
        h.calls.map((c) => [c.command, "prevResult" in c ? c.prevResult : undefined]),
        [
          ["DEL", { ips: [{ address: "10.0.0.5/24" }] }],
          ["CHECK", { ips: [{ address: "10.0.0.5/24" }] }],
        ],
      );
    });
  }

  it("GC and STATUS run under 1.1.0 and are refused with code 1 before it", async () => {
    const h = new Recorder();
    const gcEnv = { CNI_PATH: "/opt/cni/bin" };
    const gc = await dispatch(
      inv(
        "GC",
        conf("1.1.0", { "cni.dev/valid-attachments": [{ containerID: "c1", ifname: "eth0" }] }),
        gcEnv,
      ),
      h,
      signal,
    );
    assert.equal(gc.exitCode, 0);
    assert.deepEqual(h.calls[0]?.command === "GC" && h.calls[0].validAttachments, [
      { containerId: "c1", ifname: "eth0" },
    ]);
    assert.equal((await dispatch(inv("STATUS", conf("1.1.0"), {}), h, signal)).exitCode, 0);
    for (const v of ["0.4.0", "1.0.0"]) {
      for (const cmd of ["GC", "STATUS"]) {
        const reply = await dispatch(inv(cmd, conf(v), gcEnv), h, signal);
        const err = JSON.parse(reply.stdout);
        assert.equal(reply.exitCode, 1);
        assert.equal(err.code, 1);
        assert.equal(err.cniVersion, v);
        assert.match(err.msg, new RegExp(`${cmd} needs cniVersion 1.1.0 or newer`));
      }
    }
    assert.equal(h.calls.length, 2);
  });

  it("answers VERSION without the handler, echoing the requested version", async () => {
    const h = new Recorder();
    const reply = await dispatch(inv("VERSION", '{"cniVersion":"0.4.0"}', {}), h, signal);
    assert.deepEqual(JSON.parse(reply.stdout), {
      cniVersion: "0.4.0",
      supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
    });
    assert.equal(h.calls.length, 0);
  });

  it("refuses an unknown cniVersion with code 1 and never calls the handler", async () => {
    const h = new Recorder();
    const reply = await dispatch(inv("ADD", conf("2.0.0")), h, signal);
    assert.equal(reply.exitCode, 1);
    const err = JSON.parse(reply.stdout);
    assert.deepEqual([err.code, err.cniVersion], [1, "1.1.0"]);
    assert.match(err.msg, /cniVersion "2.0.0" is not supported/);
    assert.equal(h.calls.length, 0);
    assert.equal(reply.outcome.command, "ADD");
  });

  it("reports undecodable stdin as 6 before looking at the environment", async () => {
    const reply = await dispatch({ env: { CNI_COMMAND: "ADD" }, stdin: "{" }, new Recorder(), signal);
    assert.equal(JSON.parse(reply.stdout).code, 6);
  });

  it("refuses ADD without the pod's namespace and name in CNI_ARGS, but lets DEL through", async () => {
    const env = { ...attachEnv, CNI_ARGS: "IgnoreUnknown=1" };
    const add = await dispatch(inv("ADD", conf("1.0.0"), env), new Recorder(), signal);
    assert.equal(JSON.parse(add.stdout).code, 4);
    assert.match(JSON.parse(add.stdout).msg, /K8S_POD_NAMESPACE and K8S_POD_NAME/);
    assert.equal((await dispatch(inv("DEL", conf("1.0.0"), env), new Recorder(), signal)).exitCode, 0);
  });

  it("prints a handler's CniError with its code and the request's version", async () => {
    const h = new Recorder();
    h.fail = new CniError(50, "OVN southbound unreachable", "ovn-controller is not connected");
    const reply = await dispatch(inv("STATUS", conf("1.1.0"), {}), h, signal);
    assert.deepEqual(JSON.parse(reply.stdout), {
      cniVersion: "1.1.0",
      code: 50,
      msg: "OVN southbound unreachable",
      details: "ovn-controller is not connected",
    });
    h.fail = new CniError(100, "timed out waiting for the pod annotation");
    const add = await dispatch(inv("ADD", conf("0.4.0")), h, signal);
    assert.deepEqual(JSON.parse(add.stdout), {
      cniVersion: "0.4.0",
      code: 100,
      msg: "timed out waiting for the pod annotation",
    });
    assert.equal(add.outcome.pod, "ns1/p1");
  });

  it("turns any other handler throw into code 199 with the cause in details", async () => {
    const h = new Recorder();
    h.fail = new TypeError("x is undefined");
    const reply = await dispatch(inv("DEL", conf("1.1.0")), h, signal);
    const err = JSON.parse(reply.stdout);
    assert.deepEqual([reply.exitCode, err.code, err.details], [1, 199, "x is undefined"]);
  });

  it("refuses an unknown CNI_COMMAND with code 4", async () => {
    const reply = await dispatch(inv("FROB", conf("1.1.0")), new Recorder(), signal);
    assert.equal(JSON.parse(reply.stdout).code, 4);
    assert.equal(reply.outcome.command, "invalid");
  });
});
