// The root cause of the stale NetworkPolicy decisions on the userspace datapath (docs/network-policy.md, "Stale
// datapath flows on OVS < 3.1.3"), reproduced on a bare netdev bridge with no OVN: OVS allows two megaflows to
// overlap while their actions are equal; when the rules change, the revalidator of OVS < 3.1.3 (upstream
// 21410ff800cc, "dpif-netdev: Fix dpif_netdev_flow_put", in 3.1.3 and 3.2.0) modifies a userspace megaflow by
// looking up its key in the datapath classifier instead of by its UFID, so the narrower megaflow's new actions
// land on the wider one and the narrower one keeps the old decision while its packets keep it alive. This test
// states what the installed OVS does, so it flips to the fixed behaviour by itself when OVS is upgraded.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { useOvsNode } from "../../rig/ovs-node.ts";

const BR = "br-mf";
const A_MAC = "02:00:00:00:00:01";
const B_MAC = "02:00:00:00:00:02";
const NARROW_IP = "10.1.2.2"; // the first rule's /24
const WIDE_IP = "10.1.0.2"; // only in the later /16
const OTHER_NET = "10.3.0.0/16";
const OTHER_IP = "10.3.0.2";

function ovsVersion(): Promise<[number, number, number]> {
  return new Promise((resolve, reject) =>
    execFile("ovs-vswitchd", ["--version"], (err, stdout) => {
      const m = /(\d+)\.(\d+)\.(\d+)/.exec(stdout);
      if (err || !m) reject(err ?? new Error(`no version in ${stdout}`));
      else resolve([Number(m[1]), Number(m[2]), Number(m[3])]);
    }),
  );
}

/** True when this OVS carries upstream 21410ff800cc (3.1.3 and later on branch-3.1, 3.2.0 and later). */
function hasModifyByUfidFix([major, minor, patch]: [number, number, number]): boolean {
  if (major !== 3) return major > 3;
  if (minor !== 1) return minor > 1;
  return patch >= 3;
}

describe("userspace datapath: revalidating overlapping megaflows (OVS < 3.1.3 defect)", () => {
  test("after two rule changes the narrower megaflow keeps the old action on OVS < 3.1.3; del-flows clears it", async (t) => {
    const node = await useOvsNode(t);
    const a = await node.addNetns("a");
    const b = await node.addNetns("b");
    // Megaflows live 60 s unused (default 10 s), so a slow, loaded machine does not expire them between steps.
    await node.vsctl("set", "Open_vSwitch", ".", "other_config:max-idle=60000");
    await node.vsctl("add-br", BR, "--", "set", "Bridge", BR, "datapath_type=netdev", "fail_mode=secure");
    for (const [ns, port, mac] of [
      [a, "mfa", A_MAC],
      [b, "mfb", B_MAC],
    ] as const) {
      await node.exec("ip", ["link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns.path]);
      // No IPv6 chatter of the port's own: its transmit counter then counts only what the datapath forwards.
      await node.exec("sysctl", ["-qw", `net.ipv6.conf.${port}.disable_ipv6=1`]);
      await node.exec("ip", ["link", "set", port, "up"]);
      await node.execIn(ns.path, "ip", ["link", "set", "eth0", "address", mac]);
      await node.execIn(ns.path, "ip", ["link", "set", "eth0", "up"]);
      await node.vsctl("add-port", BR, port);
    }
    await node.execIn(a.path, "ip", ["addr", "add", "10.0.0.1/8", "dev", "eth0"]);
    for (const ip of [NARROW_IP, WIDE_IP, OTHER_IP])
      await node.execIn(a.path, "ip", [
        "neigh",
        "replace",
        ip,
        "lladdr",
        B_MAC,
        "dev",
        "eth0",
        "nud",
        "permanent",
      ]);

    const mgmt = `unix:${node.ovs.dir}/${BR}.mgmt`;
    const rules = async (text: string) => {
      await node.exec("ovs-ofctl", ["--bundle", "replace-flows", mgmt, "-"], { input: `${text}\n` });
      await node.appctl("revalidator/wait");
    };
    const send = (ip: string, n: number) =>
      node.execIn(a.path, process.execPath, [
        "-e",
        `const s=require("dgram").createSocket("udp4");let i=0;const f=()=>i++<${n}?s.send("x",9,${JSON.stringify(ip)},f):s.close();f();`,
      ]);
    // What the datapath sent out of b's port.
    const received = async () => {
      const [link] = JSON.parse(await node.exec("ip", ["-s", "-j", "link", "show", "mfb"])) as {
        stats64: { tx: { packets: number } };
      }[];
      return link?.stats64.tx.packets ?? Number.NaN;
    };
    /** How many of n datagrams to ip the datapath forwards to b. */
    const through = async (ip: string, n: number) => {
      const before = await received();
      await send(ip, n);
      await sleep(300);
      return (await received()) - before;
    };
    const megaflow = async (ip: string, bits: number) =>
      (await node.appctl("dpctl/dump-flows"))
        .split("\n")
        .find((l) => l.includes(`dst=${ip}/255.255.${bits === 16 ? "0.0" : "255.0"}`));

    const allow = "output:mfb";
    // The datapath classifier of the main thread (no PMD ports, as in the sandbox) tries its subtables, one per
    // mask, in the order they were made. v0 makes the /16 subtable first, with a rule the test never changes and a
    // flow kept alive in it.
    const other = `table=0,in_port=mfa,ip,nw_dst=${OTHER_NET},actions=drop`;
    const keep = () => send(OTHER_IP, 2);
    await rules(other);
    await keep();
    assert.ok(await megaflow(OTHER_IP, 16), "the /16 subtable exists first");
    // v1: only the /24 is allowed; its megaflow is installed with a /24 destination mask (a second subtable).
    await rules(`${other}\ntable=0,in_port=mfa,ip,nw_dst=10.1.2.0/24,actions=${allow}`);
    assert.equal(await through(NARROW_IP, 5), 5);
    await keep();
    // v2: the whole /16 is allowed. The revalidator keeps the /24 megaflow (same action, its mask is narrower than
    // needed); a packet to the rest of the /16 adds a second, overlapping megaflow in the first subtable.
    await rules(`${other}\ntable=0,in_port=mfa,ip,nw_dst=10.1.0.0/16,actions=${allow}`);
    assert.equal(await through(NARROW_IP, 5), 5);
    assert.equal(await through(WIDE_IP, 5), 5);
    await keep();
    assert.ok(await megaflow(NARROW_IP, 24), "the /24 megaflow is there");
    assert.ok(await megaflow(WIDE_IP, 16), "the /16 megaflow overlaps it");
    // v3: the /16 is denied (the policy changed). Both megaflows must now drop. OVS < 3.1.3 looks the /24 key up in
    // the classifier to modify its megaflow, finds the /16 one in the first subtable, and modifies that instead.
    const v3 = `${other}\ntable=0,in_port=mfa,ip,nw_dst=10.1.0.0/16,actions=drop`;
    await rules(v3);
    await node.appctl("revalidator/wait");
    // v4: two more deny rules (/24s inside both /16s; nothing is allowed anywhere). The /16 megaflows are now too
    // wide and are deleted, their subtable with them; the /24 megaflow's key still translates to the drop its ukey
    // records, so it is kept as it is.
    await rules(
      `${v3}\npriority=40000,table=0,in_port=mfa,ip,nw_dst=10.1.0.0/24,actions=drop\npriority=40000,table=0,in_port=mfa,ip,nw_dst=10.3.0.0/24,actions=drop`,
    );
    await node.appctl("revalidator/wait");
    const narrow = await megaflow(NARROW_IP, 24);
    const leaked = await through(NARROW_IP, 20);
    const trace = await node.appctl(
      "ofproto/trace",
      BR,
      `in_port=mfa,udp,nw_dst=${NARROW_IP},dl_dst=${B_MAC}`,
    );
    t.diagnostic(`v4 /24 megaflow: ${narrow}; ${leaked}/20 datagrams to ${NARROW_IP} passed`);
    assert.match(trace, /Datapath actions: drop/, "the OpenFlow tables say drop");
    assert.equal(await through(WIDE_IP, 20), 0, "the wide megaflow was modified");

    const version = await ovsVersion();
    if (hasModifyByUfidFix(version)) {
      assert.equal(leaked, 0, `OVS ${version.join(".")} carries the fix: nothing passes`);
    } else {
      assert.ok(
        narrow && !/actions:drop/.test(narrow),
        `OVS ${version.join(".")}: the /24 megaflow kept ${narrow}`,
      );
      assert.equal(leaked, 20, `OVS ${version.join(".")}: the stale megaflow lets every datagram through`);
      // A further revalidation pass does not repair it: the revalidator believes the flow already drops.
      await node.appctl("revalidator/wait");
      await node.appctl("revalidator/wait");
      assert.equal(await through(NARROW_IP, 20), 20, "still passing after two more revalidation passes");
    }
    // Dropping the cached flows (what the e2e does before each probe round) makes the datapath follow the rules.
    await node.appctl("dpctl/del-flows");
    assert.equal(await through(NARROW_IP, 20), 0);
  });
});
