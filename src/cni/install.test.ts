import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  CONFLIST_NAME,
  installCniBinary,
  installCniPlugin,
  isGoExecutable,
  writeConflist,
} from "./install.ts";
import { DEFAULT_SERVER_SOCKET } from "./protocol.ts";
import { parseConfList } from "./spec.ts";

describe("installing the CNI plugin", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "zcni-install-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("installs the binary executable under its plugin name and leaves no temporary file", async () => {
    const src = join(dir, "build-1");
    await writeFile(src, "#!/bin/sh\necho one\n");
    const binDir = join(dir, "opt", "cni", "bin");
    const res = await installCniBinary(src, binDir);
    assert.deepEqual(res, { path: join(binDir, "zstack-ovn-cni"), changed: true });
    assert.equal((await stat(res.path)).mode & 0o777, 0o755);
    assert.deepEqual(await readdir(binDir), ["zstack-ovn-cni"]);
  });

  it("does not rewrite identical bytes, and replaces the file by rename when they differ", async () => {
    const binDir = join(dir, "opt", "cni", "bin");
    const src1 = join(dir, "build-1");
    assert.equal((await installCniBinary(src1, binDir)).changed, false);
    const before = (await stat(join(binDir, "zstack-ovn-cni"))).ino;
    const src2 = join(dir, "build-2");
    await writeFile(src2, "#!/bin/sh\necho two\n");
    assert.equal((await installCniBinary(src2, binDir)).changed, true);
    const installed = join(binDir, "zstack-ovn-cni");
    assert.notEqual((await stat(installed)).ino, before, "a new inode, so running copies keep the old one");
    assert.equal(await readFile(installed, "utf8"), "#!/bin/sh\necho two\n");
    assert.deepEqual(await readdir(binDir), ["zstack-ovn-cni"]);
  });

  it("installs the forwarder together with the shim beside it, and the forwarder alone when it has none", async () => {
    const build = join(dir, "build-fwd");
    await mkdir(build);
    await writeFile(join(build, "zstack-ovn-cni"), "#!/bin/sh\necho forwarder\n");
    await writeFile(join(build, "zstack-ovn-cni-shim"), "#!/bin/sh\necho shim\n");
    const binDir = join(dir, "plugin-bin");
    const res = await installCniPlugin(join(build, "zstack-ovn-cni"), binDir);
    assert.deepEqual(
      res.map((r) => r.path),
      [join(binDir, "zstack-ovn-cni-shim"), join(binDir, "zstack-ovn-cni")],
    );
    assert.deepEqual((await readdir(binDir)).sort(), ["zstack-ovn-cni", "zstack-ovn-cni-shim"]);
    assert.equal(await readFile(join(binDir, "zstack-ovn-cni-shim"), "utf8"), "#!/bin/sh\necho shim\n");
    const alone = join(dir, "plugin-bin-alone");
    await installCniPlugin(join(dir, "build-1"), alone);
    assert.deepEqual(await readdir(alone), ["zstack-ovn-cni"]);
  });

  it("refuses the Go forwarder without its shim beside it, naming the variable and the fix, and installs nothing", async () => {
    const build = join(dir, "build-go");
    await mkdir(build);
    // An ELF file with a Go build ID note where the Go linker puts it, as the forwarder is.
    const go = Buffer.alloc(8192);
    Buffer.from([0x7f, 0x45, 0x4c, 0x46]).copy(go, 0);
    Buffer.from([4, 0, 0, 0, 0x53, 0, 0, 0, 4, 0, 0, 0, 0x47, 0x6f, 0, 0]).copy(go, 0xf78);
    await writeFile(join(build, "zstack-ovn-cni"), go);
    assert.equal(await isGoExecutable(join(build, "zstack-ovn-cni")), true);
    assert.equal(await isGoExecutable(process.execPath), false, "node (an SEA's base) is not Go");
    const binDir = join(dir, "plugin-bin-go");
    await assert.rejects(
      installCniPlugin(join(build, "zstack-ovn-cni"), binDir),
      /ZSTACK_CNI_BINARY .* is the Go forwarder but its shim .*zstack-ovn-cni-shim is missing/,
    );
    assert.deepEqual(await readdir(binDir).catch(() => []), []);
    await writeFile(join(build, "zstack-ovn-cni-shim"), "#!/bin/sh\necho shim\n");
    await installCniPlugin(join(build, "zstack-ovn-cni"), binDir);
    assert.deepEqual((await readdir(binDir)).sort(), ["zstack-ovn-cni", "zstack-ovn-cni-shim"]);
  });

  it("writes 10-zstack-ovn.conflist offering 1.1.0 in cniVersions and 1.0.0 to older libcni, with one zstack-ovn-cni plugin", async () => {
    const netDir = join(dir, "etc", "cni", "net.d");
    const path = await writeConflist(netDir, { socketPath: "/run/zovn/n1/cni.sock", mtu: 1400 });
    assert.equal(path, join(netDir, CONFLIST_NAME));
    assert.equal((await stat(path)).mode & 0o777, 0o644);
    const list = parseConfList(await readFile(path, "utf8"));
    // containerd 1.6's libcni reads cniVersion alone and cannot parse a 1.1.0 result.
    assert.equal(list.cniVersion, "1.0.0");
    assert.deepEqual(list.cniVersions, ["0.4.0", "1.0.0", "1.1.0"]);
    assert.equal(list.name, "zstack-ovn");
    assert.deepEqual(list.plugins, [
      { type: "zstack-ovn-cni", serverSocket: "/run/zovn/n1/cni.sock", mtu: 1400 },
    ]);
    assert.deepEqual(await readdir(netDir), [CONFLIST_NAME]);
  });

  it("writes an older cniVersion on request, listing only the versions up to it", async () => {
    const netDir = join(dir, "net.d-old");
    const list = parseConfList(await readFile(await writeConflist(netDir, { cniVersion: "1.0.0" }), "utf8"));
    assert.equal(list.cniVersion, "1.0.0");
    assert.deepEqual(list.cniVersions, ["0.4.0", "1.0.0"]);
    const oldest = parseConfList(
      await readFile(await writeConflist(join(dir, "net.d-0.4"), { cniVersion: "0.4.0" }), "utf8"),
    );
    assert.equal(oldest.cniVersion, "0.4.0");
    assert.deepEqual(oldest.cniVersions, ["0.4.0"]);
  });

  it("leaves the default socket path and an absent MTU out of the conflist", async () => {
    const netDir = join(dir, "net.d-default");
    const list = parseConfList(
      await readFile(await writeConflist(netDir, { socketPath: DEFAULT_SERVER_SOCKET }), "utf8"),
    );
    assert.deepEqual(list.plugins, [{ type: "zstack-ovn-cni" }]);
  });
});
