import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  formatBatch,
  IpBatchError,
  isAlreadyExists,
  isNoSuchDevice,
  parseBatchErrors,
  requireSuccess,
  UnsafeIpTokenError,
} from "./ip-batch.ts";

const LINES = [
  "link add a type veth peer name b",
  "link set a up",
  "link del nonexistent0",
  "link set a mtu 1400",
].map((l) => l.split(" "));

describe("ip -force -batch error reports", () => {
  test("attribute each message to the line named by the marker that follows it", () => {
    const stderr =
      "RTNETLINK answers: File exists\nCommand failed -:1\n" +
      'Cannot find device "nonexistent0"\nCommand failed -:3\n';
    const failures = parseBatchErrors(stderr, LINES);
    assert.deepEqual(failures, [
      { line: 0, command: "link add a type veth peer name b", message: "RTNETLINK answers: File exists" },
      { line: 2, command: "link del nonexistent0", message: 'Cannot find device "nonexistent0"' },
    ]);
    assert.ok(isAlreadyExists(failures[0]!));
    assert.ok(isNoSuchDevice(failures[1]!));
  });

  test("a batch without failures has none, and requireSuccess names only the failures not tolerated", () => {
    assert.deepEqual(parseBatchErrors("", LINES), []);
    const result = {
      stdout: "",
      failures: parseBatchErrors("x: File exists\nCommand failed -:1\nboom\nCommand failed -:4\n", LINES),
    };
    assert.throws(
      () => requireSuccess("setting up", result, isAlreadyExists),
      (e: unknown) =>
        e instanceof IpBatchError && e.failures.length === 1 && /link set a mtu 1400.*boom/.test(e.message),
    );
    requireSuccess("setting up", { stdout: "", failures: [result.failures[0]!] }, isAlreadyExists);
  });
});

describe("ip batch text", () => {
  test("is one line per command, its tokens joined by single spaces", () => {
    assert.equal(formatBatch(LINES.slice(0, 2)), "link add a type veth peer name b\nlink set a up\n");
  });

  test("refuses a token that would start a second command, split, regroup or comment out arguments", () => {
    for (const bad of [
      "10.0.0.0/8\nnetns add zovnpwn",
      "a b",
      "a\tb",
      "a\rb",
      "",
      '"x',
      "'x",
      "x#y",
      "x\\",
      "x\u0000y",
      "x\u0001y",
      "x\u2028y",
    ])
      assert.throws(
        () => formatBatch([["route", "replace", bad, "dev", "eth0"]]),
        (e: unknown) => e instanceof UnsafeIpTokenError && e.line === 0 && e.token === bad,
        JSON.stringify(bad),
      );
    assert.throws(() => formatBatch([[]]), UnsafeIpTokenError);
  });

  test("whatever the tokens, the text it accepts has exactly one line per command and one word per token", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.string({ minLength: 0, maxLength: 12 }), { maxLength: 6 }), { maxLength: 4 }),
        (lines) => {
          let text: string;
          try {
            text = formatBatch(lines);
          } catch (e) {
            assert.ok(e instanceof UnsafeIpTokenError);
            return;
          }
          const read = text
            .split("\n")
            .slice(0, -1)
            .map((l) => l.split(/\s+/));
          assert.deepEqual(read, lines);
        },
      ),
      { numRuns: 500 },
    );
  });
});
