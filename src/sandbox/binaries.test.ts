import assert from "node:assert/strict";
import { test } from "node:test";
import { parseBinaryLines } from "./binaries.ts";

test("binary paths are read from KEY=/abs/path lines and anything else is ignored", () => {
  const got = parseBinaryLines("KUBECTL=/c/kubectl\nnoise\nETCD=relative\nUNKNOWN=/x\nETCD=/c/etcd\n");
  assert.deepEqual(got, { KUBECTL: "/c/kubectl", ETCD: "/c/etcd" });
});
