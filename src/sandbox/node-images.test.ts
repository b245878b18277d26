import assert from "node:assert/strict";
import { test } from "node:test";
import { imageRef, parseNodeImageLines } from "./node-images.ts";

const GOOD = [
  "IMAGE_PAUSE=/var/cache/zstack-ovn/images/pause-0a33/pause.oci.tar",
  "IMAGE_PAUSE_NAME=registry.k8s.io/pause",
  "IMAGE_PAUSE_TAG=3.10.2",
  "IMAGE_BUSYBOX=/var/cache/zstack-ovn/images/busybox-90fd/busybox.oci.tar",
  "IMAGE_BUSYBOX_NAME=docker.io/library/busybox",
  "IMAGE_BUSYBOX_TAG=1.35.0",
  "IMAGE_COREDNS=/var/cache/zstack-ovn/images/coredns-f403/coredns.oci.tar",
  "IMAGE_COREDNS_NAME=registry.k8s.io/coredns/coredns",
  "IMAGE_COREDNS_TAG=v1.14.7",
  "",
].join("\n");

test("the build script's lines give each image's archive and exact name", () => {
  const images = parseNodeImageLines(GOOD);
  assert.equal(imageRef(images.pause), "registry.k8s.io/pause:3.10.2");
  assert.equal(imageRef(images.busybox), "docker.io/library/busybox:1.35.0");
  assert.equal(imageRef(images.coredns), "registry.k8s.io/coredns/coredns:v1.14.7");
  assert.equal(images.pause.archive, "/var/cache/zstack-ovn/images/pause-0a33/pause.oci.tar");
});

test("a name or tag that is not a plain image reference is refused, since it becomes ctr arguments", () => {
  for (const [from, to] of [
    ["IMAGE_PAUSE_TAG=3.10.2", "IMAGE_PAUSE_TAG=--all"],
    ["IMAGE_PAUSE_NAME=registry.k8s.io/pause", "IMAGE_PAUSE_NAME=pause"],
    ["IMAGE_BUSYBOX_NAME=docker.io/library/busybox", "IMAGE_BUSYBOX_NAME=docker.io/library/busybox;rm"],
    ["IMAGE_BUSYBOX=/var/cache/zstack-ovn/images/busybox-90fd/busybox.oci.tar", "IMAGE_BUSYBOX=relative.tar"],
  ] as const) {
    assert.throws(() => parseNodeImageLines(GOOD.replace(from, to)), /build-node-images/);
  }
  assert.throws(() => parseNodeImageLines("IMAGE_PAUSE=/x.tar\n"), /build-node-images/);
});
