// The OVN central image built by `make images` with TLS on, as the chart starts it with ovn.ssl.enabled: the
// entrypoint gets the Secret's three files (ZOVN_SSL_*), NB and SB serve pssl: only, Raft members talk ssl:,
// and ovn-northd connects over ssl: with the same certificate. Certificates come from test/rig/pki.ts (two
// unrelated CAs). Everything runs from the image (chroot) in network namespaces this test creates; clients
// are the host's OVN tools and the controller's own OVSDB client (ovsdb-tls-probe.ts), run in those
// namespaces.

import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createPki, type Pki } from "../rig/pki.ts";
import { imageArchive, type UnpackedImage, unpackImage } from "./image-archive.ts";

const TAG = randomBytes(3).toString("hex");
const NETNS = `zovn-tls-${TAG}`;
const HUB = `zovn-tls-${TAG}-hub`;
const MEMBER_NETNS = [0, 1, 2].map((i) => `zovn-tls-${TAG}-m${i}`);
const MEMBER_IP = [0, 1, 2].map((i) => `10.252.0.${i + 1}`);
const createdNetns: string[] = [];
const IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const PROBE = resolve(import.meta.dirname, "ovsdb-tls-probe.ts");
/** Where the chart mounts the Secret, inside the image. */
const SSL_DIR = "/etc/zstack-ovn/ssl";
const SSL_ENV = {
  ZOVN_SSL_KEY: `${SSL_DIR}/tls.key`,
  ZOVN_SSL_CERT: `${SSL_DIR}/tls.crt`,
  ZOVN_SSL_CA: `${SSL_DIR}/ca.crt`,
};
let image: UnpackedImage;
let pki: Pki;
let pkiDir: string;
const daemons: { role: string; child: ChildProcess; output: string[] }[] = [];

/** The image's entrypoint with ROLE in netns NS, chrooted; `privateRun`: its own /run (one per Raft member). */
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

function inNetns(cmd: string, args: string[], ns = NETNS): { code: number | null; out: string } {
  const r = spawnSync("ip", ["netns", "exec", ns, cmd, ...args], { encoding: "utf8", timeout: 30_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** The host OVN tools' TLS flags with the test client's certificate (signed by the servers' CA). */
const clientFlags = (): string[] => [
  `--private-key=${pki.clientKey}`,
  `--certificate=${pki.clientCert}`,
  `--ca-cert=${pki.caCert}`,
];

type Probe = { ok: true; dbs: string[] } | { ok: false; error: string };

/** The controller's OVSDB client connecting to REMOTE from netns NS, with CERT/KEY or without a certificate. */
function probe(remote: string, client?: { cert: string; key: string }, ns = NETNS): Probe {
  const args = [process.execPath, "--import", "tsx", PROBE, remote, pki.caCert];
  if (client) args.push(client.cert, client.key);
  const r = inNetns(args[0] as string, args.slice(1), ns);
  const line = r.out
    .split("\n")
    .reverse()
    .find((l) => l.startsWith("{"));
  assert.ok(line, `the probe printed a result: ${r.out}`);
  return JSON.parse(line) as Probe;
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 90_000;
  const start = Date.now();
  while (!check()) {
    if (Date.now() > deadline) {
      const logs = daemons
        .map((d) => `--- ${d.role} (exit ${d.child.exitCode})\n${d.output.join("")}`)
        .join("\n");
      throw new Error(`timed out waiting for ${what}\n${logs}`);
    }
    await sleep(300);
  }
  process.stdout.write(`# ${what}: ${Date.now() - start} ms\n`);
}

function addNetns(name: string): void {
  execFileSync("ip", ["netns", "add", name]);
  createdNetns.push(name);
  execFileSync("ip", ["-n", name, "link", "set", "lo", "up"]);
}

/** Every image daemon started so far still runs. */
function assertDaemonsRun(): void {
  for (const d of daemons) assert.equal(d.child.exitCode, null, `${d.role} still runs: ${d.output.join("")}`);
}

before(async () => {
  image = unpackImage(imageArchive("central"));
  pkiDir = mkdtempSync(join(tmpdir(), "zovn-tls-pki-"));
  pki = await createPki(pkiDir);
  // The Secret's three files as the chart mounts them: the servers, Raft members and northd all show tls.crt.
  const inImage = join(image.rootfs, SSL_DIR);
  mkdirSync(inImage, { recursive: true });
  copyFileSync(pki.serverKey, join(inImage, "tls.key"));
  copyFileSync(pki.serverCert, join(inImage, "tls.crt"));
  copyFileSync(pki.caCert, join(inImage, "ca.crt"));
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
  if (pkiDir) rmSync(pkiDir, { recursive: true, force: true });
});

describe("the OVN central image with TLS, one replica", () => {
  test("NB serves pssl: only; a client certificate of the CA reads and writes, none or another CA's is refused; northd carries a switch to SB over ssl:", async () => {
    startRole("nb", { ZOVN_REPLICAS: "1", ...SSL_ENV });
    startRole("sb", { ZOVN_REPLICAS: "1", ...SSL_ENV });
    startRole("northd", SSL_ENV);

    await until("NB on ssl:127.0.0.1:6641", () =>
      inNetns("ovsdb-client", [...clientFlags(), "list-dbs", "ssl:127.0.0.1:6641"]).out.includes(
        "OVN_Northbound",
      ),
    );

    // The controller's own client, as the chart configures it (ZSTACK_OVN_SSL_*).
    const good = probe("ssl:127.0.0.1:6641", { cert: pki.clientCert, key: pki.clientKey });
    assert.ok(good.ok && good.dbs.includes("OVN_Northbound"), JSON.stringify(good));
    const none = probe("ssl:127.0.0.1:6641");
    assert.equal(none.ok, false, "no client certificate");
    assert.match((none as { error: string }).error, /TLS failed/);
    const other = probe("ssl:127.0.0.1:6641", { cert: pki.otherClientCert, key: pki.otherClientKey });
    assert.equal(other.ok, false, "a client certificate from another CA");
    assert.match((other as { error: string }).error, /refused our certificate/);
    // The host's tools: another CA's certificate is refused, and so is plain TCP on the same port.
    const otherTool = inNetns("ovsdb-client", [
      "--timeout=10",
      `--private-key=${pki.otherClientKey}`,
      `--certificate=${pki.otherClientCert}`,
      `--ca-cert=${pki.caCert}`,
      "list-dbs",
      "ssl:127.0.0.1:6641",
    ]);
    assert.notEqual(otherTool.code, 0, otherTool.out);
    const plain = inNetns("ovsdb-client", ["--timeout=5", "list-dbs", "tcp:127.0.0.1:6641"]);
    assert.notEqual(plain.code, 0, `plain TCP must not be served: ${plain.out}`);

    const add = inNetns("ovn-nbctl", [...clientFlags(), "--db=ssl:127.0.0.1:6641", "ls-add", "tls-test"]);
    assert.equal(add.code, 0, add.out);
    const read = inNetns("ovn-nbctl", [...clientFlags(), "--db=ssl:127.0.0.1:6641", "ls-list"]);
    assert.match(read.out, /\(tls-test\)/);
    await until("the switch's datapath in SB (northd over ssl:)", () =>
      inNetns("ovn-sbctl", [
        ...clientFlags(),
        "--db=ssl:127.0.0.1:6642",
        "--bare",
        "--columns=external_ids",
        "list",
        "Datapath_Binding",
      ]).out.includes("name=tls-test"),
    );
    // SB refuses another CA's client too (ovn-controller on a node without the Secret gets nothing).
    const sbOther = probe("ssl:127.0.0.1:6642", { cert: pki.otherClientCert, key: pki.otherClientKey });
    assert.equal(sbOther.ok, false);
    assertDaemonsRun();
  });
});

describe("the OVN central image with TLS, three NB replicas", () => {
  test("the Raft cluster forms over ssl: from the StatefulSet names; a write over ssl: reaches every member and, through northd, SB", async () => {
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
      appendFileSync(join(image.rootfs, "etc/hosts"), `${MEMBER_IP[i]} ovn-nb-${i}.ovn-nb\n`);
    }
    for (const [i, ns] of MEMBER_NETNS.entries()) {
      startRole(
        "nb",
        {
          ZOVN_REPLICAS: "3",
          POD_NAME: `ovn-nb-${i}`,
          ZOVN_SERVICE: "ovn-nb",
          ZOVN_DB_DIR: `/var/lib/ovn/tls-m${i}`,
          ...SSL_ENV,
        },
        ns,
        true,
      );
    }
    const all = MEMBER_IP.map((ip) => `ssl:${ip}:6641`).join(",");
    await until(
      "a TLS cluster leader that takes a write",
      () =>
        inNetns(
          "ovn-nbctl",
          [...clientFlags(), `--db=${all}`, "--timeout=5", "ls-add", "raft-tls-test"],
          MEMBER_NETNS[0],
        ).code === 0,
    );
    for (const [i, ip] of MEMBER_IP.entries()) {
      await until(`member ${i} to hold the switch`, () =>
        inNetns(
          "ovsdb-client",
          [
            ...clientFlags(),
            "--no-leader-only",
            "dump",
            `ssl:${ip}:6641`,
            "OVN_Northbound",
            "Logical_Switch",
            "name",
          ],
          MEMBER_NETNS[0],
        ).out.includes("raft-tls-test"),
      );
      const server = inNetns(
        "ovsdb-client",
        [
          ...clientFlags(),
          "--no-leader-only",
          "dump",
          `ssl:${ip}:6641`,
          "_Server",
          "Database",
          "name",
          "model",
          "connected",
        ],
        MEMBER_NETNS[0],
      );
      assert.match(server.out, /true\s+clustered\s+OVN_Northbound/, server.out);
      // The member's Raft address, as ovsdb-tool create-cluster/join-cluster wrote it: ssl:.
      const local = execFileSync(
        "ovsdb-tool",
        ["db-local-address", join(image.rootfs, `var/lib/ovn/tls-m${i}/ovnnb_db.db`)],
        { encoding: "utf8" },
      ).trim();
      assert.equal(local, `ssl:ovn-nb-${i}.ovn-nb:6643`);
    }
    // Plain TCP reaches neither the client port nor the Raft port of a member.
    for (const port of [6641, 6643]) {
      const plain = inNetns(
        "ovsdb-client",
        ["--timeout=5", "--no-leader-only", "list-dbs", `tcp:${MEMBER_IP[1]}:${port}`],
        MEMBER_NETNS[0],
      );
      assert.notEqual(plain.code, 0, `tcp:${port}: ${plain.out}`);
    }
    // The controller's client finds a member over ssl: from the comma list; another CA's certificate fails.
    const good = probe(all, { cert: pki.clientCert, key: pki.clientKey }, MEMBER_NETNS[0]);
    assert.ok(good.ok, JSON.stringify(good));
    const other = probe(all, { cert: pki.otherClientCert, key: pki.otherClientKey }, MEMBER_NETNS[0]);
    assert.equal(other.ok, false);

    // northd follows the Raft NB over ssl: (the chart's HA northd gets every member) into an SB beside it.
    const ns0 = MEMBER_NETNS[0] as string;
    startRole("sb", { ZOVN_REPLICAS: "1", ZOVN_DB_DIR: "/var/lib/ovn/tls-sb", ...SSL_ENV }, ns0, true);
    startRole(
      "northd",
      { ZOVN_NB_ADDRESS: all, ZOVN_SB_ADDRESS: "ssl:127.0.0.1:6642", ...SSL_ENV },
      ns0,
      true,
    );
    await until("the Raft NB's switch as a datapath in SB (northd over ssl:)", () =>
      inNetns(
        "ovn-sbctl",
        [
          ...clientFlags(),
          "--db=ssl:127.0.0.1:6642",
          "--bare",
          "--columns=external_ids",
          "list",
          "Datapath_Binding",
        ],
        ns0,
      ).out.includes("name=raft-tls-test"),
    );
    assertDaemonsRun();
  });
});
