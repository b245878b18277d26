// The CNI plugin (the Go forwarder, and the SEA shim it hands no-agent cases to) is self-contained: it runs
// in a private mount namespace where the node binary's directory is covered by an empty one, with an empty
// environment. The bind mount exists only
// inside that namespace (unshare --propagation private), so the host never loses its node.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CniServer } from "../../../src/cni/server.ts";
import { claimDir, removeOwnedDir } from "../../rig/process.ts";
import { FAKE_POD_CIDR, FakeHandler } from "./fake-handler.ts";
import { buildShim, firstAddress, runWith } from "./harness.ts";

// Runs "$ENV_COPY -i PATH= VARS... $SEA" after covering the node directory. Once /usr/bin is covered neither
// mount nor env can be found, so the script mounts first and uses a copy of env kept outside /usr/bin.
const SCRIPT = `
set -eu
empty=$1 nodedir=$2 nodebin=$3 envcopy=$4 sea=$5
shift 5
mount --bind "$empty" "$nodedir"
if [ -e "$nodebin" ]; then echo "node is still visible at $nodebin" >&2; exit 97; fi
if command -v node >/dev/null 2>&1; then echo "node is still on PATH" >&2; exit 98; fi
exec "$envcopy" -i PATH= "$@" "$sea"
`;

describe("zstack-ovn-cni with no node on the host", () => {
  let dir: string;
  let sea: string;
  let envCopy: string;
  let empty: string;
  let nodeBin: string;
  let socketPath: string;
  let server: CniServer;
  const handler = new FakeHandler();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "zcni-sea-test-"));
    claimDir(dir);
    sea = await buildShim();
    nodeBin = await realpath(process.execPath);
    envCopy = join(dir, "env");
    await copyFile("/usr/bin/env", envCopy);
    empty = join(dir, "empty");
    await mkdir(empty);
    socketPath = join(dir, "cni.sock");
    server = new CniServer({ socketPath, handler });
    await server.listen();
  });
  after(async () => {
    await server.close();
    await removeOwnedDir(dir);
  });

  const hidden = (vars: string[], stdin: string) =>
    runWith(
      "unshare",
      [
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/bash",
        "-c",
        SCRIPT,
        "sea-test",
        empty,
        dirname(nodeBin),
        nodeBin,
        envCopy,
        sea,
        ...vars,
      ],
      { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
      stdin,
    );

  it("answers VERSION with node hidden and PATH empty", async () => {
    const r = await hidden(["CNI_COMMAND=VERSION"], '{"cniVersion":"1.0.0"}');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.json, { cniVersion: "1.0.0", supportedVersions: ["0.4.0", "1.0.0", "1.1.0"] });
    assert.ok(existsSync(nodeBin), "the host still has its node: the mount stayed inside the namespace");
  });

  it("forwards an ADD to the agent with node hidden and PATH empty", async () => {
    const config = JSON.stringify({
      cniVersion: "1.1.0",
      name: "zstack-ovn",
      type: "zstack-ovn-cni",
      serverSocket: socketPath,
    });
    const r = await hidden(
      [
        "CNI_COMMAND=ADD",
        "CNI_CONTAINERID=5ea5ea5ea",
        "CNI_NETNS=/run/netns/none",
        "CNI_IFNAME=eth0",
        "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=sea-0",
      ],
      config,
    );
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(firstAddress(r.json), FAKE_POD_CIDR);
    assert.equal(handler.calls.at(-1)?.command, "ADD");
  });

  it("hands stdin it cannot read a socket from to the SEA shim, which answers 6, with node hidden", async () => {
    const r = await hidden(
      [
        "CNI_COMMAND=ADD",
        "CNI_CONTAINERID=5ea5ea5ea",
        "CNI_NETNS=/run/netns/none",
        "CNI_IFNAME=eth0",
        "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=sea-0",
      ],
      "{ not json",
    );
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.json?.code, 6);
    assert.match(String(r.json?.msg), /stdin is not valid JSON/);
  });

  it("fails the same script when node is not hidden, so the checks above mean something", async () => {
    // Covering an unrelated empty directory leaves node in place: the script must notice and refuse.
    const r = await runWith(
      "unshare",
      [
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/bash",
        "-c",
        SCRIPT,
        "sea-test",
        empty,
        join(dir, "empty"),
        nodeBin,
        envCopy,
        sea,
      ],
      { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
      "",
    );
    assert.equal(r.code, 97, r.stderr);
  });
});
