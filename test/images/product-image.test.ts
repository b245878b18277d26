// The product image built by `make images`: unpacked as a runtime would, its programs run from it in a chroot,
// so nothing of the host (node, node_modules, libraries) can stand in for what the image lacks.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { lstatSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { imageArchive, readManifest, type UnpackedImage, unpackImage } from "./image-archive.ts";

let image: UnpackedImage;
before(() => {
  image = unpackImage(imageArchive("product"));
});
after(() => image?.remove());

function inImage(cmd: string, args: string[], env: Record<string, string>, input = "") {
  return spawnSync("/usr/sbin/chroot", [image.rootfs, cmd, ...args], {
    env,
    input,
    encoding: "utf8",
    timeout: 60_000,
  });
}

describe("the product image", () => {
  test("holds every file and link of its manifest, with the manifest's mode", () => {
    for (const e of readManifest("product")) {
      if (e.kind === "file") {
        const [, path, mode] = e.fields as [string, string, string];
        const st = lstatSync(join(image.rootfs, path));
        assert.ok(st.isFile(), `${path} is a file`);
        assert.equal((st.mode & 0o7777).toString(8).padStart(4, "0"), mode, path);
      } else if (e.kind === "link") {
        const [target, path] = e.fields as [string, string];
        assert.equal(readlinkSync(join(image.rootfs, path)), target, path);
      }
    }
  });

  test("the CNI executable answers VERSION, and its shim a garbage ADD, in the image without any node installed", () => {
    assert.equal(
      inImage("/bin/sh", ["-c", "command -v node || echo none"], { PATH: "/usr/bin:/bin" }).stdout,
      "none\n",
    );
    const r = inImage(
      "/opt/cni/bin/zstack-ovn-cni",
      [],
      { CNI_COMMAND: "VERSION" },
      '{"cniVersion":"1.0.0"}',
    );
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      cniVersion: "1.0.0",
      supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
    });
    assert.equal(r.stderr, "", "no warning on stderr");
    // Stdin with no socket in it goes to the TypeScript shim beside the forwarder, which names the problem.
    const garbage = inImage(
      "/opt/cni/bin/zstack-ovn-cni",
      [],
      {
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "c1",
        CNI_NETNS: "/run/netns/x",
        CNI_IFNAME: "eth0",
        CNI_ARGS: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=p",
      },
      "{ not json",
    );
    assert.equal(garbage.status, 1, garbage.stderr);
    assert.equal(JSON.parse(garbage.stdout).code, 6, garbage.stdout);
    assert.equal(garbage.stderr, "", "no warning on stderr");
  });

  test("the node agent and the controller print their help from the image", () => {
    const node = inImage("/usr/local/bin/zstack-ovnkube-node", ["--help"], {});
    assert.equal(node.status, 0, node.stderr);
    assert.match(node.stdout, /^Usage: zstack-ovnkube-node /);
    const controller = inImage("zstack-ovnkube-controller", ["--help"], {
      PATH: "/usr/local/bin:/usr/bin:/bin",
    });
    assert.equal(controller.status, 0, controller.stderr);
    assert.match(controller.stdout, /^Usage: zstack-ovnkube-controller /);
  });

  test("the OVS and OVN host tools the node DaemonSet runs are in the image", () => {
    const tools = [
      "ovs-vswitchd",
      "ovsdb-server",
      "ovs-vsctl",
      "ovn-controller",
      "ip",
      "nft",
      "ethtool",
      "conntrack",
    ];
    const r = inImage("/bin/sh", ["-c", `for t in ${tools.join(" ")}; do command -v $t; done`], {
      PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
    });
    assert.equal(r.stdout.trim().split("\n").length, tools.length, r.stdout);
  });

  test("a program name it does not know exits 2 and names the ones it knows", () => {
    const r = inImage("/usr/local/bin/zstack-ovn", [], {});
    assert.equal(r.status, 2);
    assert.match(r.stderr, /zstack-ovnkube-controller, zstack-ovnkube-node, zstack-ovn-cni/);
  });
});
