import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { type CgroupHierarchy, ensureCgroup, nodeCgroup, parseCgroupMounts } from "./cgroups.ts";

// This machine's layout: v1 controllers each on its own hierarchy, the named systemd one, and a v2 mount.
const MOUNTINFO = [
  "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
  "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
  "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset",
  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
  "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd",
  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
  // The same memory hierarchy bound again elsewhere, and a sub-cgroup bound into a container: neither counts.
  "50 22 0:32 / /mnt/memory-again rw - cgroup cgroup rw,memory",
  "51 22 0:29 /docker/abc /mnt/sub rw - cgroup cgroup rw,cpu",
  "",
].join("\n");

test("every cgroup hierarchy is found once, the named systemd one and cgroup2 included", () => {
  assert.deepEqual(parseCgroupMounts(MOUNTINFO), [
    { mountPoint: "/sys/fs/cgroup/cpu", version: 1, controllers: ["cpu"] },
    { mountPoint: "/sys/fs/cgroup/cpuset", version: 1, controllers: ["cpuset"] },
    { mountPoint: "/sys/fs/cgroup/memory", version: 1, controllers: ["memory"] },
    { mountPoint: "/sys/fs/cgroup/systemd", version: 1, controllers: ["name=systemd"] },
    { mountPoint: "/sys/fs/cgroup/unified", version: 2, controllers: [] },
  ]);
});

test("a node's cgroupRoot is below its instance's subtree", () => {
  assert.equal(nodeCgroup("zsbk", "node2"), "/zovn-zsbk/node2");
});

test("ensureCgroup makes the path in every hierarchy and copies cpuset's CPUs and memory nodes down", () => {
  const root = mkdtempSync(join(tmpdir(), "zovn-cg-"));
  try {
    const h = (name: string, controllers: string[]): CgroupHierarchy => {
      mkdirSync(join(root, name));
      return { mountPoint: join(root, name), version: 1, controllers };
    };
    const hierarchies = [h("cpuset", ["cpuset"]), h("systemd", ["name=systemd"])];
    writeFileSync(join(root, "cpuset", "cpuset.cpus"), "0-1\n");
    writeFileSync(join(root, "cpuset", "cpuset.mems"), "0\n");
    ensureCgroup("/zovn-t/node1", hierarchies);
    for (const dir of ["zovn-t", "zovn-t/node1"]) {
      assert.equal(readFileSync(join(root, "cpuset", dir, "cpuset.cpus"), "utf8"), "0-1");
      assert.equal(readFileSync(join(root, "cpuset", dir, "cpuset.mems"), "utf8"), "0");
      assert.ok(existsSync(join(root, "systemd", dir)));
      assert.ok(!existsSync(join(root, "systemd", dir, "cpuset.cpus")));
    }
    // Idempotent: a second call on existing directories changes nothing.
    ensureCgroup("/zovn-t/node1", hierarchies);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
