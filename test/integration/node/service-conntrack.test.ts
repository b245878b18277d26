// The grouped `conntrack -D` filters against the real kernel: in a network namespace of its own, nft DNATs UDP
// datagrams to two Service addresses, a NodePort and a direct flow to an endpoint; each grouped deletion removes
// the entries of the stale flows it covers and leaves every other entry (other Service addresses, other endpoints,
// the NodePort when still served, the un-NATed flow). And the deletion of the entries made towards a Service
// address before it had an endpoint: only the un-NATed ones go, never a DNATed one of the same address.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { parseIp } from "../../../src/ipam/address.ts";
import {
  conntrackDeletionArgs,
  deleteUdpFlows,
  groupUdpFlows,
  type UdpServiceFlow,
  udpFlowKey,
} from "../../../src/node/service-conntrack.ts";
import { spawnedTools } from "../../../src/node/tool.ts";
import { deleteUnnated, kernelUnnatedArgs } from "../../../src/node/udp-first-endpoint.ts";

const run = promisify(execFile);
const NETNS = `zovnct${process.pid}`;
const where = { netns: `/run/netns/${NETNS}` };
const inNs = (cmd: string, args: string[], input?: string) => {
  const p = run("ip", ["netns", "exec", NETNS, cmd, ...args]);
  // nc -w0 may exit before it reads its stdin: the datagram was sent, the pipe's error is not a failure.
  p.child.stdin?.on("error", () => undefined);
  if (input !== undefined) p.child.stdin?.end(input);
  return p;
};

const ip = parseIp;
const EP5 = "10.244.0.5";
const EP6 = "10.244.0.6";
const VIP_A = "10.96.0.10";
const VIP_B = "10.96.0.11";
const flow = (vip: string | undefined, port: number, ep: string, epPort: number): UdpServiceFlow => ({
  vip: vip === undefined ? undefined : ip(vip),
  port,
  endpoint: { ip: ip(ep), port: epPort },
});

/** Source port → the flow that datagram takes; 1005 is sent straight to the endpoint, no NAT. */
const SENT: [number, string, number][] = [
  [1000, VIP_A, 53],
  [1001, VIP_A, 54],
  [1002, "192.168.9.2", 30053],
  [1003, VIP_B, 53],
  [1004, VIP_A, 55],
  [1005, EP5, 5353],
];

async function entries(): Promise<number[]> {
  const r = await inNs("conntrack", ["-L", "-p", "udp"]).catch((e: { stdout: string }) => e);
  // The original direction's source port, the first on each line.
  return r.stdout
    .split("\n")
    .map((l) => /sport=(\d+)/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

async function send(sent: [number, string, number][] = SENT): Promise<void> {
  await inNs("conntrack", ["-F"]).catch(() => undefined);
  // On a loaded machine `timeout` can end an nc before its datagram left: send again what has no entry yet.
  let missing = sent;
  for (let round = 0; round < 5 && missing.length > 0; round++) {
    for (const [sport, host, port] of missing)
      await inNs("timeout", ["2", "nc", "-n", "-u", "-w0", "-p", String(sport), host, String(port)], "x\n");
    const have = new Set(await entries());
    missing = sent.filter(([sport]) => !have.has(sport));
  }
  assert.deepEqual(
    await entries(),
    sent.map(([sport]) => sport).sort((a, b) => a - b),
  );
}

before(async () => {
  await run("ip", ["netns", "add", NETNS]);
  for (const args of [
    ["link", "set", "lo", "up"],
    ["link", "add", "ct0", "type", "veth", "peer", "name", "ct1"],
    ["addr", "add", `${EP5}/24`, "dev", "ct0"],
    ["addr", "add", `${EP6}/24`, "dev", "ct0"],
    ["link", "set", "ct0", "up"],
    ["link", "set", "ct1", "up"],
    ["route", "add", "10.96.0.0/16", "dev", "ct0"],
    ["route", "add", "192.168.9.0/24", "dev", "ct0"],
  ])
    await inNs("ip", args);
  await inNs(
    "nft",
    ["-f", "-"],
    `table ip ctfix {
  chain out {
    type nat hook output priority -100;
    ip daddr ${VIP_A} udp dport 53 dnat to ${EP5}:5353
    ip daddr ${VIP_A} udp dport 54 dnat to ${EP5}:5354
    ip daddr ${VIP_B} udp dport 53 dnat to ${EP5}:5353
    ip daddr ${VIP_A} udp dport 55 dnat to ${EP6}:5353
    udp dport 30053 dnat to ${EP5}:5353
  }
}
`,
  );
});

after(async () => {
  await run("ip", ["netns", "del", NETNS]).catch(() => undefined);
});

describe("grouped conntrack deletions on the real kernel", () => {
  test("a Service address → endpoint address pair gone on every port: one call deletes both ports' entries and nothing else", async () => {
    await send();
    const stale = [flow(VIP_A, 53, EP5, 5353), flow(VIP_A, 54, EP5, 5354)];
    const live = new Map(
      [flow(VIP_B, 53, EP5, 5353), flow(VIP_A, 55, EP6, 5353), flow(undefined, 30053, EP5, 5353)].map(
        (f) => [udpFlowKey(f), f] as const,
      ),
    );
    const groups = groupUdpFlows(
      stale.map((f) => [udpFlowKey(f), f] as const),
      live,
    );
    assert.deepEqual(
      groups.map((g) => conntrackDeletionArgs(g.deletion).join(" ")),
      [`-D -f ipv4 -p udp --orig-dst ${VIP_A} --dst-nat ${EP5}`],
    );
    const spawned = spawnedTools();
    assert.equal(await deleteUdpFlows(stale, live, where), 2);
    assert.equal(spawnedTools() - spawned, 1);
    assert.deepEqual(await entries(), [1002, 1003, 1004, 1005]);
  });

  test("an endpoint address no rule DNATs to any more: one call deletes its entries of every Service address and the NodePort, not the un-NATed flow nor another endpoint's", async () => {
    await send();
    const stale = [
      flow(VIP_A, 53, EP5, 5353),
      flow(VIP_A, 54, EP5, 5354),
      flow(VIP_B, 53, EP5, 5353),
      flow(undefined, 30053, EP5, 5353),
    ];
    const live = new Map([flow(VIP_A, 55, EP6, 5353)].map((f) => [udpFlowKey(f), f] as const));
    const spawned = spawnedTools();
    assert.equal(await deleteUdpFlows(stale, live, where), 4);
    assert.equal(spawnedTools() - spawned, 1);
    assert.deepEqual(await entries(), [1004, 1005]);
    assert.equal(await deleteUdpFlows(stale, live, where), 0, "a repeat deletes nothing");
  });

  test("a pair still DNATed on another port: only the stale port's entry goes", async () => {
    await send();
    const stale = [flow(VIP_A, 54, EP5, 5354)];
    const live = new Map([flow(VIP_A, 53, EP5, 5353)].map((f) => [udpFlowKey(f), f] as const));
    assert.equal(await deleteUdpFlows(stale, live, where), 1);
    assert.deepEqual(await entries(), [1000, 1002, 1003, 1004, 1005]);
  });
});

/** Besides SENT: datagrams to Service addresses and a NodePort no rule DNATs (made before an endpoint existed). */
const UNNATED: [number, string, number][] = [
  ...SENT,
  [1006, VIP_A, 56],
  [1007, VIP_A, 57],
  [1008, "192.168.9.2", 30054],
  [1009, VIP_B, 56],
];

describe("deleting the un-NATed entries of a UDP destination that got its first endpoint, on the real kernel", () => {
  test("a cluster IP: every un-NATed entry to it goes, on every port; its DNATed entries, other addresses' and the direct flow stay", async () => {
    await send(UNNATED);
    const target = { tracker: "kernel", ip: ip(VIP_A), port: undefined } as const;
    assert.deepEqual(kernelUnnatedArgs(target), [
      ..."-D -f ipv4 -p udp --orig-dst 10.96.0.10 --reply-src 10.96.0.10".split(" "),
    ]);
    const spawned = spawnedTools();
    assert.equal(await deleteUnnated(target, where), 2);
    assert.equal(spawnedTools() - spawned, 1);
    assert.deepEqual(await entries(), [1000, 1001, 1002, 1003, 1004, 1005, 1008, 1009]);
    assert.equal(await deleteUnnated(target, where), 0, "a repeat deletes nothing");
  });

  test("a node address and NodePort: only that port's un-NATed entry goes, the DNATed NodePort flow stays", async () => {
    await send(UNNATED);
    assert.equal(await deleteUnnated({ tracker: "kernel", ip: ip("192.168.9.2"), port: 30054 }, where), 1);
    assert.deepEqual(await entries(), [1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1009]);
    assert.equal(
      await deleteUnnated({ tracker: "kernel", ip: ip("192.168.9.2"), port: 30053 }, where),
      0,
      "the served NodePort's entry was DNATed: not touched",
    );
  });
});
