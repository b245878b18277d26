import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  IpBatchError,
  isAlreadyExists,
  isNoSuchDevice,
  parseBatchErrors,
  requireSuccess,
} from "./ip-batch.ts";

const LINES = [
  "link add a type veth peer name b",
  "link set a up",
  "link del nonexistent0",
  "link set a mtu 1400",
];

describe("ip -force -batch error reports", () => {
  test("attribute each message to the line named by the marker that follows it", () => {
    const stderr =
      "RTNETLINK answers: File exists\nCommand failed -:1\n" +
      'Cannot find device "nonexistent0"\nCommand failed -:3\n';
    const failures = parseBatchErrors(stderr, LINES);
    assert.deepEqual(failures, [
      { line: 0, command: LINES[0], message: "RTNETLINK answers: File exists" },
      { line: 2, command: LINES[2], message: 'Cannot find device "nonexistent0"' },
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
