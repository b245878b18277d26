import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cellKey, diffTable, type Matrix, matrixNode, parseProbeOutput, SERVICES } from "./policy-matrix.ts";

describe("policy matrix harness (pure parts)", () => {
  it("spreads each namespace's pods over every node", () => {
    const nodes = ["node1", "node2", "node3"];
    for (let ns = 0; ns < 3; ns++)
      assert.deepEqual(new Set([0, 1, 2].map((p) => matrixNode(ns, p, nodes))), new Set(nodes));
  });

  it("reads one verdict per target, in order, and refuses output that does not line up", () => {
    const targets = ["tcp:10.0.0.1:80", "udp:10.0.0.1:81"];
    assert.deepEqual(
      parseProbeOutput(
        "tcp:10.0.0.1:80 ok a 10.0.0.2:4000 probe\nudp:10.0.0.1:81 error i/o timeout\n",
        targets,
      ),
      [true, false],
    );
    assert.throws(() => parseProbeOutput("tcp:10.0.0.1:80 ok a\n", targets), /1 lines for 2/);
    assert.throws(() => parseProbeOutput("udp:10.0.0.1:81 ok\ntcp:10.0.0.1:80 ok\n", targets), /want tcp/);
  });

  it("the diff table names only the ports with disagreeing cells and marks each way of being wrong", () => {
    const observed: Matrix = new Map();
    const sources = ["x/a", "node1"];
    const dests = ["x/a", "x/b"];
    for (const from of sources)
      for (const to of dests)
        for (const service of SERVICES) observed.set(cellKey({ from, to, service }), true);
    observed.set(cellKey({ from: "node1", to: "x/b", service: { protocol: "UDP", port: 81 } }), false);
    const expected = (c: { from: string; to: string; service: { protocol: string; port: number } }) =>
      !(c.from === "x/a" && c.to === "x/b" && c.service.port === 80 && c.service.protocol === "TCP");
    const table = diffTable(sources, dests, expected, observed);
    assert.match(table, /^tcp\/80: 1 cell\(s\) differ/m);
    assert.match(table, /^udp\/81: 1 cell\(s\) differ/m);
    assert.doesNotMatch(table, /tcp\/81|udp\/80/);
    assert.match(table, /^x\/a\s+\.\s+A!$/m);
    assert.match(table, /^node1\s+\.\s+D!$/m);
    assert.equal(
      diffTable(sources, dests, () => true, new Map([...observed].map(([k]) => [k, true]))),
      "",
    );
  });
});
