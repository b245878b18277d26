// The OVN central image built by `make images`, started as a one-replica Standalone deployment would start it:
// its entrypoint runs the NB and SB ovsdb-servers and ovn-northd from the image (chroot) in a network
// namespace this test creates; a switch written to NB over TCP reaches SB through the image's northd. Then
// three NB members form a Raft cluster from their StatefulSet names, each in its own netns on a bridge.

import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { imageArchive, type UnpackedImage, unpackImage } from "./image-archive.ts";

const TAG = randomBytes(3).toString("hex");
const NETNS = `zovn-img-${TAG}`;
/** The Raft test's namespaces: a hub holding the bridge, and one per member. */
const HUB = `zovn-img-${TAG}-hub`;
const MEMBER_NETNS = [0, 1, 2].map((i) => `zovn-img-${TAG}-m${i}`);
const MEMBER_IP = [0, 1, 2].map((i) => `10.251.0.${i + 1}`);
const createdNetns: string[] = [];
const IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
let image: UnpackedImage;
const daemons: { role: string; child: ChildProcess; output: string[] }[] = [];

/**
 * Runs the image's entrypoint with ROLE in netns NS, chrooted into the image. With `privateRun`, in its own
 * mount namespace with a fresh /run, so members sharing the unpacked image do not share pid files or sockets.
 */
function startRole(role: string, env: Record<string, string>, ns = NETNS, privateRun = false): void {
  const entry = ["/usr/sbin/chroot", image.rootfs, "/usr/local/bin/zstack-ovn-central", role];
  const args = privateRun
    ? [
        "netns",
        "exec",
        ns,
        "unshare",
        "-m",
        "sh",
        "-c",
        'mount -t tmpfs none "$1/run" && shift && exec "$@"',
        "sh",
        image.rootfs,
        ...entry,
      ]
    : ["netns", "exec", ns, ...entry];
  const child = spawn("ip", args, { env: { PATH: IMAGE_PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  daemons.push({ role, child, output });
}

/** A host OVN tool in a netns (the test's by default); the image's servers are reached over TCP only. */
function inNetns(cmd: string, args: string[], ns = NETNS): { code: number | null; out: string } {
  const r = spawnSync("ip", ["netns", "exec", ns, cmd, ...args], { encoding: "utf8", timeout: 20_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!check()) {
    if (Date.now() > deadline) {
      const logs = daemons
        .map((d) => `--- ${d.role} (exit ${d.child.exitCode})\n${d.output.join("")}`)
        .join("\n");
      throw new Error(`timed out waiting for ${what}\n${logs}`);
    }
    await sleep(200);
  }
}

function addNetns(name: string): void {
  execFileSync("ip", ["netns", "add", name]);
  createdNetns.push(name);
  execFileSync("ip", ["-n", name, "link", "set", "lo", "up"]);
}

before(() => {
  image = unpackImage(imageArchive("central"));
  addNetns(NETNS);
});

after(async () => {
  for (const d of daemons) {
    if (d.child.exitCode === null && d.child.signalCode === null) {
      const exited = new Promise((r) => d.child.once("exit", r));
      d.child.kill("SIGTERM");
      await Promise.race([exited, sleep(10_000)]);
      if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill("SIGKILL");
    }
  }
  for (const ns of createdNetns) spawnSync("ip", ["netns", "del", ns]);
  image?.remove();
});

describe("the OVN central image with one replica", () => {
  test("NB answers over TCP, and northd carries a new switch from NB to SB", async () => {
    startRole("nb", { ZOVN_REPLICAS: "1" });
    startRole("sb", { ZOVN_REPLICAS: "1" });
    startRole("northd", { ZOVN_NB_ADDRESS: "tcp:127.0.0.1:6641", ZOVN_SB_ADDRESS: "tcp:127.0.0.1:6642" });

    await until("NB on tcp:127.0.0.1:6641", () =>
      inNetns("ovsdb-client", ["list-dbs", "tcp:127.0.0.1:6641"]).out.includes("OVN_Northbound"),
    );
    const add = inNetns("ovn-nbctl", ["--db=tcp:127.0.0.1:6641", "ls-add", "image-test"]);
    assert.equal(add.code, 0, add.out);
    await until("the switch's datapath in SB", () =>
      inNetns("ovn-sbctl", [
        "--db=tcp:127.0.0.1:6642",
        "--bare",
        "--columns=external_ids",
        "list",
        "Datapath_Binding",
      ]).out.includes("name=image-test"),
    );
    for (const d of daemons)
      assert.equal(d.child.exitCode, null, `${d.role} still runs: ${d.output.join("")}`);
  });
});

describe("the OVN central image with three NB replicas", () => {
  test("ordinal 0 creates the Raft cluster, 1 and 2 join it by name, and a write reaches every member", async () => {
    addNetns(HUB);
    execFileSync("ip", ["-n", HUB, "link", "add", "br0", "type", "bridge"]);
    execFileSync("ip", ["-n", HUB, "link", "set", "br0", "up"]);
    for (const [i, ns] of MEMBER_NETNS.entries()) {
      addNetns(ns);
      execFileSync("ip", [
        "-n",
        HUB,
        "link",
        "add",
        `h${i}`,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        ns,
      ]);
      execFileSync("ip", ["-n", HUB, "link", "set", `h${i}`, "master", "br0", "up"]);
      execFileSync("ip", ["-n", ns, "addr", "add", `${MEMBER_IP[i]}/24`, "dev", "eth0"]);
      execFileSync("ip", ["-n", ns, "link", "set", "eth0", "up"]);
      // What the cluster DNS answers for the headless Service's per-pod names.
      appendFileSync(join(image.rootfs, "etc/hosts"), `${MEMBER_IP[i]} ovn-nb-${i}.ovn-nb\n`);
    }
    for (const [i, ns] of MEMBER_NETNS.entries()) {
      const env = {
        ZOVN_REPLICAS: "3",
        POD_NAME: `ovn-nb-${i}`,
        ZOVN_SERVICE: "ovn-nb",
        ZOVN_DB_DIR: `/var/lib/ovn/m${i}`,
      };
      startRole("nb", env, ns, true);
    }
    const all = MEMBER_IP.map((ip) => `tcp:${ip}:6641`).join(",");
    await until(
      "a cluster leader that takes a write",
      () =>
        inNetns("ovn-nbctl", [`--db=${all}`, "--timeout=5", "ls-add", "raft-test"], MEMBER_NETNS[0]).code ===
        0,
    );
    for (const [i, ip] of MEMBER_IP.entries()) {
      await until(`member ${i} to hold the switch`, () =>
        inNetns(
          "ovsdb-client",
          ["--no-leader-only", "dump", `tcp:${ip}:6641`, "OVN_Northbound", "Logical_Switch", "name"],
          MEMBER_NETNS[0],
        ).out.includes("raft-test"),
      );
      const server = inNetns(
        "ovsdb-client",
        ["--no-leader-only", "dump", `tcp:${ip}:6641`, "_Server", "Database", "name", "model", "connected"],
        MEMBER_NETNS[0],
      );
      assert.match(
        server.out,
        /true\s+clustered\s+OVN_Northbound/, // columns in name order: connected, model, name
        server.out,
      );
    }
  });
});
