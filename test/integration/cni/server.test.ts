// The agent's CNI socket server on a real unix socket, with a fake handler in place of the node agent.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { lstat, mkdtemp, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import { Registry } from "prom-client";
import { CniError } from "../../../src/cni/error.ts";
import {
  AgentUnreachableError,
  CNI_REQUEST_PATH,
  forwardToAgent,
  MAX_REQUEST_BYTES,
} from "../../../src/cni/protocol.ts";
import { CniServer } from "../../../src/cni/server.ts";
import { claimDir, removeOwnedDir } from "../../rig/process.ts";
import { FakeHandler } from "./fake-handler.ts";
import { type LogRecord, recordingLogger } from "./harness.ts";

const addEnv = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "0123456789abcdef",
  CNI_NETNS: "/run/netns/fake",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0",
};
const config = JSON.stringify({ cniVersion: "1.1.0", name: "zstack-ovn", type: "zstack-ovn-cni" });

/** One raw HTTP exchange on the socket; returns the status and body. */
function rawHttp(
  socketPath: string,
  method: string,
  path: string,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Bytes that are not HTTP at all; resolves with whatever the server sends back before closing. */
function rawBytes(socketPath: string, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(socketPath);
    let text = "";
    sock.setEncoding("utf8").on("data", (d: string) => (text += d));
    sock.on("close", () => resolve(text));
    sock.on("error", () => {});
    sock.end(bytes);
  });
}

describe("CNI server", () => {
  let dir: string;
  let socketPath: string;
  let handler: FakeHandler;
  let server: CniServer;
  let registry: Registry;
  let logs: LogRecord[];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "zcni-srv-"));
    claimDir(dir);
    socketPath = join(dir, "run", "cni-server.sock");
  });
  after(async () => {
    await server?.close();
    await removeOwnedDir(dir);
  });
  beforeEach(async () => {
    await server?.close();
    handler = new FakeHandler();
    registry = new Registry();
    logs = [];
    server = new CniServer({
      socketPath,
      handler,
      registry,
      logger: recordingLogger(logs),
      closeGraceMs: 500,
    });
    await server.listen();
  });

  it("creates its socket root-only (mode 0600)", async () => {
    const st = await lstat(socketPath);
    assert.ok(st.isSocket());
    assert.equal(st.mode & 0o777, 0o600);
    assert.equal(st.uid, process.getuid?.());
  });

  it("serves an ADD and logs it with its duration and pod", async () => {
    const reply = await forwardToAgent(socketPath, { env: addEnv, stdin: config });
    assert.equal(reply.exitCode, 0, reply.stdout);
    assert.equal((JSON.parse(reply.stdout) as { cniVersion: string }).cniVersion, "1.1.0");
    const rec = logs.find((r) => r.msg === "CNI request served");
    assert.ok(rec, JSON.stringify(logs));
    assert.equal(rec.fields.command, "ADD");
    assert.equal(rec.fields.pod, "default/web-0");
    assert.equal(rec.fields.containerId, "0123456789abcdef");
    assert.equal(typeof rec.fields.durationMs, "number");
  });

  it("counts each request in a latency histogram by command and result code", async () => {
    await forwardToAgent(socketPath, { env: addEnv, stdin: config });
    await forwardToAgent(socketPath, { env: { ...addEnv, CNI_COMMAND: "DEL" }, stdin: config });
    await forwardToAgent(socketPath, { env: addEnv, stdin: "{" });
    const text = await registry.metrics();
    assert.match(text, /zstack_ovn_cni_request_duration_seconds_count\{command="ADD",code="0"\} 1/);
    assert.match(text, /zstack_ovn_cni_request_duration_seconds_count\{command="DEL",code="0"\} 1/);
    assert.match(text, /zstack_ovn_cni_request_duration_seconds_count\{command="ADD",code="6"\} 1/);
    assert.match(text, /zstack_ovn_cni_requests_in_flight\{command="ADD"\} 0/);
  });

  it("keeps serving after garbage: wrong path, non-JSON body, oversized body, bytes that are not HTTP", async () => {
    assert.equal((await rawHttp(socketPath, "GET", "/", "")).status, 404);
    const wrongVersion = await rawHttp(socketPath, "POST", "/v9/cni", "{}");
    assert.equal(wrongVersion.status, 404);
    assert.match(wrongVersion.body, /serves POST \/v1\/cni/);
    const bad = await rawHttp(socketPath, "POST", CNI_REQUEST_PATH, "not json");
    assert.equal(bad.status, 400);
    assert.match(bad.body, /request body is not JSON/);
    assert.equal(
      (await rawHttp(socketPath, "POST", CNI_REQUEST_PATH, '{"env":{"CNI_COMMAND":1},"stdin":""}')).status,
      400,
    );
    assert.equal(
      (await rawHttp(socketPath, "POST", CNI_REQUEST_PATH, "x".repeat(MAX_REQUEST_BYTES + 10))).status,
      413,
    );
    assert.match(await rawBytes(socketPath, "\x00\x01garbage\r\n\r\n"), /400 Bad Request/);
    const reply = await forwardToAgent(socketPath, { env: addEnv, stdin: config });
    assert.equal(reply.exitCode, 0);
  });

  it("refuses to start on a socket another server is serving", async () => {
    const second = new CniServer({ socketPath, handler });
    await assert.rejects(second.listen(), /another process is serving CNI requests on/);
    assert.equal((await forwardToAgent(socketPath, { env: addEnv, stdin: config })).exitCode, 0);
  });

  it("replaces a stale socket file left by a killed agent", async () => {
    await server.close();
    // A process that dies by SIGKILL leaves its socket file behind with nobody listening.
    const child = spawn(process.execPath, [
      "-e",
      "require('net').createServer().listen(process.argv[1], () => process.stdout.write('up'))",
      socketPath,
    ]);
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    assert.ok((await lstat(socketPath)).isSocket());
    server = new CniServer({ socketPath, handler, logger: recordingLogger(logs) });
    await server.listen();
    assert.ok(logs.some((r) => r.msg === "removing stale CNI socket"));
    assert.equal((await forwardToAgent(socketPath, { env: addEnv, stdin: config })).exitCode, 0);
  });

  it("refuses to replace a path that is not a socket", async () => {
    const file = join(dir, "not-a-socket");
    await writeFile(file, "keep me");
    await assert.rejects(new CniServer({ socketPath: file, handler }).listen(), /exists and is not a socket/);
  });

  it("on close aborts a running ADD, which answers 11, and removes its socket", async () => {
    handler.hangAdd = true;
    const pending = forwardToAgent(socketPath, { env: addEnv, stdin: config });
    await handler.addStarted;
    await server.close();
    const reply = await pending;
    assert.equal(reply.exitCode, 1);
    assert.deepEqual(JSON.parse(reply.stdout), {
      cniVersion: "1.1.0",
      code: 11,
      msg: "the zstack-ovn node agent is shutting down; retry",
    });
    await assert.rejects(lstat(socketPath), /ENOENT/);
    await assert.rejects(
      forwardToAgent(socketPath, { env: addEnv, stdin: config }),
      (err: unknown) =>
        err instanceof AgentUnreachableError && err.phase === "connect" && err.causeCode === "ENOENT",
    );
  });

  it("aborts the handler's signal when the shim goes away mid-request", async () => {
    handler.hangAdd = true;
    const pending = forwardToAgent(socketPath, { env: addEnv, stdin: config }, { timeoutMs: 200 });
    await assert.rejects(
      pending,
      (err: unknown) => err instanceof AgentUnreachableError && err.phase === "lost",
    );
    const add = handler.calls[0];
    assert.ok(add);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(add.signal.aborted);
    assert.ok(add.signal.reason instanceof CniError);
    // The request still counts, with the abort's code.
    assert.match(await registry.metrics(), /command="ADD",code="11"\} 1/);
  });
});
