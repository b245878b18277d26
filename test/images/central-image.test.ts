// The OVN central image built by `make images`, started as a one-replica Standalone deployment would start it:
// its entrypoint runs the NB and SB ovsdb-servers and ovn-northd from the image (chroot) in a network
// namespace this test creates; a switch written to NB over TCP reaches SB through the image's northd.

import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { imageArchive, type UnpackedImage, unpackImage } from "./image-archive.ts";

const NETNS = `zovn-img-${randomBytes(3).toString("hex")}`;
const IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
let image: UnpackedImage;
const daemons: { role: string; child: ChildProcess; output: string[] }[] = [];

/** Runs the image's entrypoint with ROLE in the test's netns, chrooted into the image. */
function startRole(role: string, env: Record<string, string>): void {
  const child = spawn(
    "ip",
    ["netns", "exec", NETNS, "/usr/sbin/chroot", image.rootfs, "/usr/local/bin/zstack-ovn-central", role],
    { env: { PATH: IMAGE_PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  daemons.push({ role, child, output });
}

/** A host OVN tool in the test's netns; the image's servers are reached over TCP only. */
function inNetns(cmd: string, args: string[]): { code: number | null; out: string } {
  const r = spawnSync("ip", ["netns", "exec", NETNS, cmd, ...args], { encoding: "utf8", timeout: 20_000 });
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

before(() => {
  image = unpackImage(imageArchive("central"));
  execFileSync("ip", ["netns", "add", NETNS]);
  execFileSync("ip", ["-n", NETNS, "link", "set", "lo", "up"]);
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
  spawnSync("ip", ["netns", "del", NETNS]);
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
