import assert from "node:assert/strict";
import { test } from "node:test";
import { isUuid } from "./datum.ts";
import { stableUuid } from "./stable-uuid.ts";

test("a stable UUID is the same for the same namespace and name, and a well-formed version 8 UUID", () => {
  const u = stableUuid("zstack.io/service-lb", "default/web/tcp");
  assert.equal(u, stableUuid("zstack.io/service-lb", "default/web/tcp"));
  assert.ok(isUuid(u), u);
  assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

test("stable UUIDs differ by name and by namespace, and a separator keeps the two apart", () => {
  const a = stableUuid("zstack.io/service-lb", "default/web/tcp");
  assert.notEqual(a, stableUuid("zstack.io/service-lb", "default/web/udp"));
  assert.notEqual(a, stableUuid("zstack.io/pod-port", "default/web/tcp"));
  assert.notEqual(stableUuid("ab", "c"), stableUuid("a", "bc"));
});

test("a stable UUID is the first 16 bytes of SHA-256(namespace NUL name) with version and variant bits set", () => {
  // sha256("ns\0name") = 40620770 7c9e abf7 060e 95f7a24e8d61...: byte 6 0xab -> 0x8b, byte 8 0x06 -> 0x86.
  assert.equal(stableUuid("ns", "name"), "40620770-7c9e-8bf7-860e-95f7a24e8d61");
});
