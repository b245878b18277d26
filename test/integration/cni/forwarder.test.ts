// The Go forwarder (zstack-ovn-cni) on its own, beside the agent's CNI server with a fake handler: what it
// answers without the TypeScript shim beside it, what it hands to the shim, and how it relays the agent's
// protocol errors. shim.test.ts runs the full CNI behaviour through it.

import assert from "node:assert/strict";
import { copyFile, mkdir, mkdtemp } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { createServer as createNetServer, type Server as NetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CNI_BINARY_NAME } from "../../../src/cni/install.ts";
import { CniServer } from "../../../src/cni/server.ts";
import { SUPPORTED_VERSIONS } from "../../../src/cni/spec.ts";
import { resolveBinaries } from "../../../src/sandbox/binaries.ts";
import { claimDir, removeOwnedDir } from "../../rig/process.ts";
import { FAKE_POD_CIDR, FakeHandler } from "./fake-handler.ts";
import { firstAddress, runWith } from "./harness.ts";

const ADD_ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "f0f0f0",
  CNI_NETNS: "/run/netns/zcni-fake",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=fwd-0",
  CNI_PATH: "/opt/cni/bin",
};

describe("zstack-ovn-cni forwarder without its shim", () => {
  let dir: string;
  let forwarder: string;
  let socketPath: string;
  let server: CniServer;
  const handler = new FakeHandler();
  const conf = (v: string, socket = socketPath) =>
    JSON.stringify({ cniVersion: v, name: "zstack-ovn", type: "zstack-ovn-cni", serverSocket: socket });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "zcni-fwd-"));
    claimDir(dir);
    await mkdir(join(dir, "bin"));
    forwarder = join(dir, "bin", CNI_BINARY_NAME);
    await copyFile((await resolveBinaries()).CNI_FORWARDER, forwarder);
    socketPath = join(dir, "cni.sock");
    server = new CniServer({ socketPath, handler });
    await server.listen();
  });
  after(async () => {
    await server.close();
    await removeOwnedDir(dir);
  });

  it("answers VERSION itself from the constants generated from spec.ts, echoing a version-like request", async () => {
    for (const v of [...SUPPORTED_VERSIONS, "0.3.1", "9.9.9"]) {
      const r = await runWith(forwarder, [], { CNI_COMMAND: "VERSION" }, JSON.stringify({ cniVersion: v }));
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.json, { cniVersion: v, supportedVersions: [...SUPPORTED_VERSIONS] });
    }
    for (const stdin of ["", "garbage", '{"cniVersion":"1.x"}', '{"cniVersion":7}', "null"]) {
      const r = await runWith(forwarder, [], { CNI_COMMAND: "VERSION" }, stdin);
      assert.deepEqual(r.json, { cniVersion: "1.1.0", supportedVersions: [...SUPPORTED_VERSIONS] }, stdin);
    }
  });

  it("relays an ADD and the agent's answer, passing only the CNI_* variables", async () => {
    const r = await runWith(forwarder, [], { ...ADD_ENV, SECRET_TOKEN: "s3cret" }, conf("1.0.0"));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(firstAddress(r.json), FAKE_POD_CIDR);
    const req = handler.calls.at(-1);
    assert.equal(req?.command, "ADD");
    assert.equal(req?.cniVersion, "1.0.0");
  });

  it("relays an error from the agent with its code and exit status 1", async () => {
    const r = await runWith(forwarder, [], ADD_ENV, conf("0.3.1"));
    assert.equal(r.code, 1);
    assert.equal(r.json?.code, 1);
    assert.match(String(r.json?.msg), /cniVersion "0.3.1" is not supported/);
  });

  it("reports code 5 naming the missing shim when no agent can answer", async () => {
    const stopped = await runWith(forwarder, [], ADD_ENV, conf("1.0.0", join(dir, "nobody.sock")));
    assert.equal(stopped.code, 1);
    assert.deepEqual([stopped.json?.cniVersion, stopped.json?.code], ["1.0.0", 5]);
    assert.match(String(stopped.json?.msg), /cannot reach the zstack-ovn node agent at .*nobody\.sock/);
    assert.match(String(stopped.json?.msg), /the shim that answers without the agent is missing/);
    const garbage = await runWith(forwarder, [], ADD_ENV, "{ not json");
    assert.deepEqual([garbage.code, garbage.json?.cniVersion, garbage.json?.code], [1, "1.1.0", 5]);
  });

  describe("against an agent of another protocol", () => {
    let other: Server;
    const otherSocket = () => join(dir, "other.sock");
    let status = 404;
    let body = "no such path";
    before(async () => {
      other = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          res.writeHead(status, { "content-type": "text/plain", "content-length": Buffer.byteLength(body) });
          res.end(body);
        });
      });
      await new Promise<void>((resolve) => other.listen(otherSocket(), resolve));
    });
    after(async () => {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    });

    it("reports 107 for a status other than 200 and 503, and for a reply that is not {exitCode, stdout}", async () => {
      const r = await runWith(forwarder, [], ADD_ENV, conf("1.1.0", otherSocket()));
      assert.deepEqual([r.code, r.json?.code, r.json?.details], [1, 107, "no such path"]);
      assert.match(String(r.json?.msg), /refused the request \(HTTP 404 for POST \/v1\/cni\)/);
      status = 200;
      body = '{"exitCode":"0","stdout":""}';
      const bad = await runWith(forwarder, [], ADD_ENV, conf("1.1.0", otherSocket()));
      assert.deepEqual([bad.code, bad.json?.code], [1, 107]);
    });

    it("reports 107 for a peer that answers in no HTTP/1.x, and 11 for one that closes without answering", async () => {
      // A raw peer: whatever `reply` holds, written once the request has arrived, then the connection closed.
      let reply = "";
      const raw: NetServer = createNetServer((sock) => {
        sock.once("data", () => sock.end(reply));
        sock.on("error", () => undefined);
      });
      const rawSocket = join(dir, "raw.sock");
      await new Promise<void>((resolve) => raw.listen(rawSocket, resolve));
      try {
        const cases: [string, number, RegExp][] = [
          [
            "SSH-2.0-OpenSSH_9.2\r\n",
            107,
            /did not answer as the zstack-ovn node agent does \(not an HTTP\/1\.x status line/,
          ],
          ["garbage without a newline", 107, /not an HTTP\/1\.x status line/],
          ["HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", 107, /bad Content-Length/],
          ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 107, /unexpected Transfer-Encoding/],
          [
            'HTTP/1.1 200 OK\r\nContent-Length: 29\r\n\r\n{"exitCode":300,"stdout":""}\n',
            107,
            /reply body must be/,
          ],
          ["", 11, /closed the connection before answering/],
          ["HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", 11, /closed the connection before answering/],
        ];
        for (const [bytes, code, msg] of cases) {
          reply = bytes;
          const r = await runWith(forwarder, [], ADD_ENV, conf("1.1.0", rawSocket));
          assert.deepEqual([r.code, r.json?.code], [1, code], JSON.stringify(bytes));
          assert.match(String(r.json?.msg), msg, JSON.stringify(bytes));
        }
      } finally {
        await new Promise<void>((resolve) => raw.close(() => resolve()));
      }
    });

    it("reports 11 when the agent answers 503 (shutting down)", async () => {
      status = 503;
      body = "shutting down";
      const r = await runWith(forwarder, [], ADD_ENV, conf("0.4.0", otherSocket()));
      assert.deepEqual([r.code, r.json?.cniVersion, r.json?.code], [1, "0.4.0", 11]);
      assert.match(String(r.json?.msg), /agent is shutting down: shutting down/);
    });
  });
});
