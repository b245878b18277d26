// The egress ruleset is checked by the kernel's nftables, in a throwaway network namespace per check
// (`unshare --net`): nothing is installed anywhere.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, test } from "node:test";
import { parseIp } from "../../../src/ipam/address.ts";
import { parseCidr } from "../../../src/ipam/cidr.ts";
import { parseInterfaceName } from "../../../src/node/interface-name.ts";
import { snatRuleset } from "../../../src/node/snat.ts";

const MGMT = parseInterfaceName("zovn-mgmt");
const cidrs = (...t: string[]) => t.map((c) => parseCidr(c));
const ips = (...t: string[]) => t.map((c) => parseIp(c));

function nftCheck(script: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile("unshare", ["--net", "nft", "-c", "-f", "-"], (err, _stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : null) : 0, stderr }),
    );
    child.stdin?.end(script);
  });
}

describe("egress SNAT ruleset against nftables", () => {
  const cases = {
    "IPv4 with a node IP": {
      insideCidrs: cidrs("10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16"),
      nodeIps: ips("192.168.200.11"),
    },
    "dual-stack, IPv6 masqueraded": {
      insideCidrs: cidrs("10.244.0.0/16", "fd00:10:244::/48"),
      nodeIps: ips("192.168.200.11"),
    },
    "dual-stack with node IPs of both families": {
      insideCidrs: cidrs("10.244.0.0/16", "fd00:10:244::/48"),
      nodeIps: ips("192.168.200.11", "fd00:200::11"),
    },
    "no node IP: masquerade": { insideCidrs: cidrs("10.244.0.0/16") },
  };
  for (const [name, spec] of Object.entries(cases)) {
    test(`nft accepts the ruleset: ${name}`, async () => {
      const r = await nftCheck(snatRuleset({ mgmtIfname: MGMT, ...spec }));
      assert.equal(r.code, 0, r.stderr);
    });
  }

  test("nft rejects a broken ruleset, so the check above means something", async () => {
    const r = await nftCheck(
      `${snatRuleset({ mgmtIfname: MGMT, insideCidrs: cidrs("10.244.0.0/16") })}bogus\n`,
    );
    assert.notEqual(r.code, 0);
  });
});
