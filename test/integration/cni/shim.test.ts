// The zstack-ovn-cni executable (the SEA build) against the agent's CNI server with a fake handler: run
// directly with CNI_* variables the way a runtime does, and through cnitool (libcni) for every spec version.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { CniError, CniErrorCode } from "../../../src/cni/error.ts";
import type { AddRequest, GcRequest } from "../../../src/cni/handler.ts";
import { CNI_BINARY_NAME, CNI_SHIM_NAME, writeConflist } from "../../../src/cni/install.ts";
import { CniServer } from "../../../src/cni/server.ts";
import { SUPPORTED_VERSIONS } from "../../../src/cni/spec.ts";
import { resolveBinaries } from "../../../src/sandbox/binaries.ts";
import { claimDir, removeOwnedDir } from "../../rig/process.ts";
import { FAKE_POD_CIDR, FakeHandler } from "./fake-handler.ts";
import { buildShim, firstAddress, type LogRecord, recordingLogger, runWith } from "./harness.ts";

const execFileP = promisify(execFile);

const CNI_ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=uid-1";

describe("zstack-ovn-cni shim", () => {
  let dir: string;
  let shim: string;
  let socketPath: string;
  let handler: FakeHandler;
  let server: CniServer;
  let logs: LogRecord[];

  const conf = (v: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      cniVersion: v,
      name: "zstack-ovn",
      type: "zstack-ovn-cni",
      serverSocket: socketPath,
      ...extra,
    });
  const attach = (command: string, containerId = "c0ffee01") => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerId,
    CNI_NETNS: "/run/netns/zcni-fake",
    CNI_IFNAME: "eth0",
    CNI_ARGS,
    CNI_PATH: "/opt/cni/bin",
  });
  const shimRun = (env: Record<string, string>, stdin: string) => runWith(shim, [], env, stdin);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "zcni-shim-"));
    claimDir(dir);
    shim = await buildShim();
    socketPath = join(dir, "cni-server.sock");
    handler = new FakeHandler();
    logs = [];
    server = new CniServer({ socketPath, handler, logger: recordingLogger(logs) });
    await server.listen();
  });
  after(async () => {
    await server.close();
    await removeOwnedDir(dir);
  });

  for (const v of SUPPORTED_VERSIONS) {
    it(`ADD, CHECK, DEL and VERSION work under ${v}`, async () => {
      const before = handler.calls.length;
      const add = await shimRun(attach("ADD"), conf(v));
      assert.equal(add.code, 0, add.stdout + add.stderr);
      assert.equal(add.json?.cniVersion, v);
      assert.equal(firstAddress(add.json), FAKE_POD_CIDR);
      const ips = (add.json?.ips ?? []) as Array<Record<string, unknown>>;
      assert.equal(ips[0]?.version, v === "0.4.0" ? "4" : undefined);
      const req = handler.calls[before] as AddRequest;
      assert.deepEqual(
        [req.command, req.cniVersion, req.containerId, req.k8s.podName],
        ["ADD", v, "c0ffee01", "web-0"],
      );

      const prevResult = add.json;
      const check = await shimRun(attach("CHECK"), conf(v, { prevResult }));
      assert.deepEqual([check.code, check.stdout], [0, ""]);
      const del = await shimRun(attach("DEL"), conf(v, { prevResult }));
      assert.deepEqual([del.code, del.stdout], [0, ""]);

      const version = await shimRun({ CNI_COMMAND: "VERSION" }, JSON.stringify({ cniVersion: v }));
      assert.equal(version.code, 0);
      assert.deepEqual(version.json, { cniVersion: v, supportedVersions: ["0.4.0", "1.0.0", "1.1.0"] });
    });
  }

  it("GC and STATUS work under 1.1.0 and are refused with code 1 under older versions", async () => {
    const gc = await shimRun(
      { CNI_COMMAND: "GC", CNI_PATH: "/opt/cni/bin" },
      conf("1.1.0", { "cni.dev/valid-attachments": [{ containerID: "keep-me", ifname: "eth0" }] }),
    );
    assert.deepEqual([gc.code, gc.stdout], [0, ""]);
    const gcReq = handler.calls.at(-1) as GcRequest;
    assert.deepEqual(gcReq.validAttachments, [{ containerId: "keep-me", ifname: "eth0" }]);
    const status = await shimRun({ CNI_COMMAND: "STATUS" }, conf("1.1.0"));
    assert.deepEqual([status.code, status.stdout], [0, ""]);
    for (const v of ["0.4.0", "1.0.0"]) {
      const old = await shimRun({ CNI_COMMAND: "STATUS" }, conf(v));
      assert.equal(old.code, 1);
      assert.equal(old.json?.code, 1);
    }
  });

  it("answers VERSION by itself, with no agent and no config", async () => {
    const r = await shimRun({ CNI_COMMAND: "VERSION" }, "");
    assert.deepEqual(r.json, { cniVersion: "1.1.0", supportedVersions: ["0.4.0", "1.0.0", "1.1.0"] });
  });

  it("reports undecodable stdin as 6 itself, since it cannot find the socket path in it", async () => {
    const served = handler.calls.length;
    const r = await shimRun(attach("ADD"), "{ this is not json");
    assert.equal(r.code, 1);
    assert.equal(r.json?.code, 6);
    assert.match(String(r.json?.msg), /stdin is not valid JSON/);
    const notObject = await shimRun(attach("ADD"), '["a"]');
    assert.equal(notObject.json?.code, 7);
    assert.match(String(notObject.json?.msg), /stdin holds JSON array, not the network configuration object/);
    const badSocket = await shimRun(
      attach("ADD"),
      JSON.stringify({ cniVersion: "1.1.0", serverSocket: "relative" }),
    );
    assert.equal(badSocket.json?.code, 7);
    assert.match(String(badSocket.json?.msg), /"serverSocket" must be an absolute path/);
    assert.equal(handler.calls.length, served);
  });

  it("leaves other malformed configs to the agent, which answers 7 naming the field and keeps serving", async () => {
    const r = await shimRun(
      attach("ADD"),
      JSON.stringify({ cniVersion: "1.0.0", name: "zstack-ovn", serverSocket: socketPath }),
    );
    assert.equal(r.code, 1);
    assert.deepEqual(r.json, {
      cniVersion: "1.0.0",
      code: 7,
      msg: 'network config field "type" must name the plugin binary, e.g. "type": "zstack-ovn-cni", got undefined',
    });
    assert.ok(
      logs.some((l) => l.msg === "CNI request failed" && l.fields.code === 7),
      "the agent answered it",
    );
    const mtu = await shimRun(attach("ADD"), conf("1.1.0", { mtu: "big" }));
    assert.match(String(mtu.json?.msg), /"mtu" must be an integer from 68 to 65535/);
    const ok = await shimRun(attach("ADD"), conf("1.1.0"));
    assert.equal(ok.code, 0);
  });

  it("refuses an unknown cniVersion with code 1", async () => {
    const r = await shimRun(attach("ADD"), conf("0.3.1"));
    assert.equal(r.code, 1);
    assert.equal(r.json?.code, 1);
    assert.match(String(r.json?.msg), /cniVersion "0.3.1" is not supported; use one of 0.4.0, 1.0.0, 1.1.0/);
  });

  it("passes a handler's error code through: 100 for an annotation timeout, 51 from STATUS, 199 for a bug", async () => {
    handler.failNext.ADD = new CniError(
      CniErrorCode.PodAnnotationTimeout,
      "timed out after 30s waiting for the pod annotation",
    );
    const add = await shimRun(attach("ADD"), conf("1.0.0"));
    assert.deepEqual(add.json, {
      cniVersion: "1.0.0",
      code: 100,
      msg: "timed out after 30s waiting for the pod annotation",
    });
    handler.failNext.STATUS = new CniError(51, "OVS is down", "ovs-vswitchd not connected");
    const status = await shimRun({ CNI_COMMAND: "STATUS" }, conf("1.1.0"));
    assert.deepEqual(
      [status.code, status.json?.code, status.json?.details],
      [1, 51, "ovs-vswitchd not connected"],
    );
    handler.failNext.DEL = new RangeError("index out of range");
    const del = await shimRun(attach("DEL"), conf("0.4.0"));
    assert.deepEqual([del.json?.code, del.json?.details], [199, "index out of range"]);
  });

  it("answers 11 naming the socket when the agent is stopped, and works again once it is back", async () => {
    await server.close();
    try {
      const r = await shimRun(attach("ADD"), conf("1.1.0"));
      assert.equal(r.code, 1);
      assert.equal(r.json?.code, 11);
      assert.ok(String(r.json?.msg).includes(socketPath), String(r.json?.msg));
      // Input no retry could fix is still reported as such.
      const bad = await shimRun(attach("ADD"), conf("9.0.0"));
      assert.equal(bad.json?.code, 1);
    } finally {
      server = new CniServer({ socketPath, handler, logger: recordingLogger(logs) });
      await server.listen();
    }
    assert.equal((await shimRun(attach("ADD"), conf("1.1.0"))).code, 0);
  });

  describe("under cnitool", () => {
    const netName = `zcni-test-${randomBytes(3).toString("hex")}`;
    const netnsName = `zcni-test-${randomBytes(3).toString("hex")}`;
    const netnsPath = `/run/netns/${netnsName}`;
    let cnitool: string;
    let binDir: string;
    let confDir: string;

    before(async () => {
      cnitool = (await resolveBinaries()).CNITOOL;
      binDir = join(dir, "bin");
      await mkdir(binDir, { recursive: true });
      await copyFile(shim, join(binDir, CNI_BINARY_NAME));
      await copyFile(join(dirname(shim), CNI_SHIM_NAME), join(binDir, CNI_SHIM_NAME));
      await execFileP("ip", ["netns", "add", netnsName]);
    });
    after(async () => {
      await execFileP("ip", ["netns", "delete", netnsName]).catch(() => {});
      // libcni caches results under /var/lib/cni/results/<network>-<container>-<ifname>; ours are named netName-*.
      const results = "/var/lib/cni/results";
      for (const f of await readdir(results).catch(() => [] as string[]))
        if (f.startsWith(`${netName}-`)) await rm(join(results, f), { force: true });
    });

    const tool = (args: string[]) =>
      runWith(
        cnitool,
        args,
        { NETCONFPATH: confDir, CNI_PATH: binDir, CNI_ARGS, PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
        "",
      );

    for (const v of SUPPORTED_VERSIONS) {
      it(`runs ADD, CHECK and DEL under ${v}${v === "1.1.0" ? ", then STATUS and GC" : ""}`, async () => {
        confDir = join(dir, `net.d-${v}`);
        await writeConflist(confDir, { socketPath, networkName: netName, cniVersion: v });
        const first = handler.calls.length;
        const add = await tool(["add", netName, netnsPath]);
        assert.equal(add.code, 0, add.stdout + add.stderr);
        assert.equal(add.json?.cniVersion, v);
        assert.equal(firstAddress(add.json), FAKE_POD_CIDR);
        const check = await tool(["check", netName, netnsPath]);
        assert.equal(check.code, 0, check.stdout + check.stderr);
        const del = await tool(["del", netName, netnsPath]);
        assert.equal(del.code, 0, del.stdout + del.stderr);
        const seen = handler.calls.slice(first);
        assert.deepEqual(
          seen.map((c) => [c.command, c.cniVersion]),
          [
            ["ADD", v],
            ["CHECK", v],
            ["DEL", v],
          ],
        );
        const addReq = seen[0] as AddRequest;
        assert.equal(addReq.netns, netnsPath);
        assert.equal(addReq.ifname, "eth0");
        assert.deepEqual(addReq.cniPath, [binDir]);
        if (v === "1.1.0") {
          const status = await tool(["status", netName, netnsPath]);
          assert.equal(status.code, 0, status.stdout + status.stderr);
          const gc = await tool(["gc", netName, netnsPath]);
          assert.equal(gc.code, 0, gc.stdout + gc.stderr);
          assert.deepEqual(
            handler.calls.slice(first + 3).map((c) => c.command),
            ["STATUS", "GC"],
          );
          assert.deepEqual((handler.calls.at(-1) as GcRequest).validAttachments, []);
        }
      });
    }

    it("reports the handler's error code through libcni", async () => {
      handler.failNext.ADD = new CniError(
        CniErrorCode.NetnsMissing,
        "network namespace /run/netns/gone does not exist",
      );
      const add = await tool(["add", netName, netnsPath]);
      assert.notEqual(add.code, 0);
      assert.match(add.stdout + add.stderr, /network namespace \/run\/netns\/gone does not exist/);
      await tool(["del", netName, netnsPath]);
    });
  });
});
