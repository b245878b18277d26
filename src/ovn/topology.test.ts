import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KIND_KEY, NODE_KEY } from "./ownership.ts";
import {
  EGRESS_POLICY_PRIORITY,
  EXTERNAL_PODS_POLICY_PRIORITY,
  NODE_REPLY_POLICY_PRIORITY,
  NODE_REPLY_PORT_MIN,
  nodeReplyMatch,
  nodeRows,
  nodeScope,
  topologyScope,
} from "./topology.ts";

const N = {
  name: "node1",
  mgmtIP: "100.64.0.2/16",
  mgmtMAC: "0a:58:64:40:00:02",
  serviceSnatIP: "100.64.0.3",
};
const policies = (rows: ReturnType<typeof nodeRows>) =>
  rows.filter((r) => r.table === "Logical_Router_Policy");

describe("node reply policy", () => {
  test("a node with reply addresses gets one policy to its management port, above the egress reroutes and below an admin's", () => {
    const rows = nodeRows({ ...N, replyIPs: ["192.168.200.21", "192.168.200.11", "192.168.200.21"] });
    const reply = policies(rows).find((r) => r.id === "node/node1/node-reply-v4");
    assert.ok(reply);
    assert.deepEqual(reply.row, {
      priority: NODE_REPLY_POLICY_PRIORITY,
      match:
        "ip4.dst == {192.168.200.11, 192.168.200.21} && ((tcp && tcp.dst >= 61440) || (udp && udp.dst >= 61440) || (sctp && sctp.dst >= 61440))",
      action: "reroute",
      nexthops: ["100.64.0.2"],
      external_ids: reply.row.external_ids,
    });
    const ids = reply.row.external_ids as Record<string, string>;
    assert.equal(ids[KIND_KEY], "node-reply-policy");
    assert.equal(ids[NODE_KEY], "node1");
    assert.deepEqual(reply.parent, { table: "Logical_Router", id: "cluster-router", column: "policies" });
    assert.ok(NODE_REPLY_POLICY_PRIORITY > EGRESS_POLICY_PRIORITY);
    assert.ok(NODE_REPLY_POLICY_PRIORITY > EXTERNAL_PODS_POLICY_PRIORITY);
    assert.ok(NODE_REPLY_POLICY_PRIORITY < 2000);
    // One mask in OVN's flows, above Linux's default ephemeral ports (32768-60999).
    assert.equal(NODE_REPLY_PORT_MIN, 0xf000);
    assert.ok(NODE_REPLY_PORT_MIN > 60_999);
  });

  test("no reply addresses: no policy, and every other row is the same as with them", () => {
    const without = nodeRows(N);
    assert.deepEqual(
      policies(without).map((r) => r.id),
      ["node/node1/egress-v4"],
    );
    assert.deepEqual(nodeRows({ ...N, replyIPs: [] }), without);
    const withReply = nodeRows({ ...N, replyIPs: ["192.168.200.11"] });
    assert.deepEqual(
      withReply.filter((r) => r.id !== "node/node1/node-reply-v4"),
      without,
    );
  });

  test("the node's scope and the full topology's scope own the policy (it goes with the node)", () => {
    const reply = policies(nodeRows({ ...N, replyIPs: ["192.168.200.11"] })).find((r) =>
      r.id.endsWith("/node-reply-v4"),
    );
    assert.ok(reply);
    const row = { _uuid: "u", ...reply.row };
    assert.equal(nodeScope("node1").owns(reply.id, row), true);
    assert.equal(nodeScope("node2").owns(reply.id, row), false);
    assert.equal(topologyScope.owns(reply.id, row), true);
  });

  test("the match names only the given addresses", () => {
    assert.equal(nodeReplyMatch(["192.168.200.11"]).startsWith("ip4.dst == {192.168.200.11} && ("), true);
  });
});
