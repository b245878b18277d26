import assert from "node:assert/strict";
import { test } from "node:test";
import { describeTally, parseDialOutput, tally } from "./service-dial.ts";

test("each dial line becomes an attempt: server, client address and payload, or the error", () => {
  const attempts = parseDialOutput(
    "web-1 10.244.0.5:41234 svc\nerror: dial tcp 10.96.0.10:80: connect: connection refused\nweb-2 100.64.0.2:5000 a b\n",
  );
  assert.deepEqual(attempts, [
    { ok: true, server: "web-1", client: "10.244.0.5:41234", payload: "svc" },
    { ok: false, error: "dial tcp 10.96.0.10:80: connect: connection refused" },
    { ok: true, server: "web-2", client: "100.64.0.2:5000", payload: "a b" },
  ]);
});

test("a reply without a client address is reported as unparsable, not as an answer", () => {
  const [a] = parseDialOutput("lonely\n");
  assert.equal(a?.ok, false);
});

test("the tally counts answers per server and failures per reason", () => {
  const attempts = parseDialOutput("a 1.1.1.1:1\nb 1.1.1.1:2\na 1.1.1.1:3\nerror: i/o timeout\n");
  assert.deepEqual(
    [...tally(attempts)],
    [
      ["a", 2],
      ["b", 1],
      ["error: i/o timeout", 1],
    ],
  );
  assert.equal(describeTally(attempts), "a x2, b x1, error: i/o timeout x1");
});

test("failures differing only in the client's ephemeral port count as one reason", () => {
  const attempts = parseDialOutput(
    "error: read udp 10.244.0.5:43791->10.96.0.10:53: i/o timeout\nerror: read udp 10.244.0.5:37028->10.96.0.10:53: i/o timeout\n",
  );
  assert.equal(describeTally(attempts), "error: read udp 10.96.0.10:53: i/o timeout x2");
});
