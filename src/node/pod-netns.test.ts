import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseNetnsPath } from "./interface-name.ts";
import { HOST_NETNS_PATHS, hostNetnsProblem } from "./pod-netns.ts";

test("the node's own netns under any of its names is recognised as the host's", () => {
  for (const p of ["/proc/self/ns/net", `/proc/${process.pid}/ns/net`, "/proc/thread-self/ns/net"])
    assert.match(
      hostNetnsProblem(parseNetnsPath(p), HOST_NETNS_PATHS) ?? "",
      /same as \/proc\/self\/ns\/net/,
      p,
    );
});

test("another namespace file is not the host's netns; one that cannot be inspected is refused", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "zovn-netns-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "pod");
  writeFileSync(file, "");
  assert.equal(hostNetnsProblem(parseNetnsPath(file), HOST_NETNS_PATHS), undefined);
  assert.match(
    hostNetnsProblem(parseNetnsPath(join(dir, "gone")), HOST_NETNS_PATHS) ?? "",
    /cannot be inspected/,
  );
  assert.equal(hostNetnsProblem(parseNetnsPath("/proc/self/ns/uts"), HOST_NETNS_PATHS), undefined);
});
