import assert from "node:assert/strict";
import { test } from "node:test";
import { containerdConfig } from "./containerd.ts";
import { kubeletArgs, kubeletConfig } from "./kubelet.ts";
import { KUBELET_SYSCTLS, layoutFor, nodeBinds } from "./layout.ts";

test("the kubelet configuration carries every setting these machines need", () => {
  const cfg = kubeletConfig({
    cgroupRoot: "/zovn-x/node1",
    clientCaFile: "/pki/ca.crt",
    oomScoreAdj: 0,
    clusterDns: "10.96.0.10",
    clusterDomain: "cluster.local",
  });
  assert.equal(cfg.failCgroupV1, false);
  assert.equal(cfg.cgroupDriver, "cgroupfs");
  assert.equal(cfg.cgroupRoot, "/zovn-x/node1");
  assert.equal(cfg.failSwapOn, false);
  assert.equal(cfg.resolvConf, "");
  assert.deepEqual(cfg.clusterDNS, ["10.96.0.10"], "pods resolve through the sandbox's cluster DNS");
  assert.equal(cfg.clusterDomain, "cluster.local");
  assert.equal(cfg.containerRuntimeEndpoint, "unix:///run/containerd/containerd.sock");
  assert.equal(cfg.oomScoreAdj, 0);
  // The kubelet checks the kernel settings (the node's fakes) and never writes the machine's own.
  assert.equal(cfg.protectKernelDefaults, true);
  assert.deepEqual(cfg.authorization, { mode: "Webhook" });
  assert.equal(cfg.imageGCHighThresholdPercent, 100, "imported images must never be collected");
  const args = kubeletArgs({
    config: "/c.json",
    kubeconfig: "/k",
    nodeName: "node1",
    nodeIp: "192.168.200.11",
  });
  assert.ok(args.includes("--node-ip=192.168.200.11"), "exec and logs reach the kubelet at this address");
  assert.ok(args.includes("--hostname-override=node1"));
});

test("containerd's configuration restricts oom_score_adj, uses runc with cgroupfs and the node's CNI paths", () => {
  const text = containerdConfig({
    root: "/s/nodes/node1/containerd",
    optDir: "/s/nodes/node1/containerd-opt",
    sandboxImage: "registry.k8s.io/pause:3.10.2",
  });
  assert.match(text, /^version = 2$/m);
  assert.match(text, /^root = "\/s\/nodes\/node1\/containerd"$/m);
  assert.match(text, /^state = "\/run\/containerd"$/m);
  assert.match(text, /^ {2}restrict_oom_score_adj = true$/m);
  assert.match(text, /^ {2}sandbox_image = "registry\.k8s\.io\/pause:3\.10\.2"$/m);
  assert.match(text, /^ {2}default_runtime_name = "runc"$/m);
  assert.match(text, /^ {2}runtime_type = "io\.containerd\.runc\.v2"$/m);
  assert.match(text, /^ {2}SystemdCgroup = false$/m);
  assert.match(text, /^ {2}conf_dir = "\/etc\/cni\/net\.d"$/m);
  assert.match(
    text,
    /^\[plugins\."io\.containerd\.internal\.v1\.opt"\]\n {2}path = "\/s\/nodes\/node1\/containerd-opt"$/m,
  );
});

test("a real node binds the kubelet's and containerd's standard paths and covers the kernel settings the kubelet would write", () => {
  const dirs = layoutFor("zsbk", "/base").node("node1");
  const sim = nodeBinds(dirs).map((b) => b.target);
  const real = nodeBinds(dirs, true);
  assert.ok(!sim.includes("/var/lib/kubelet"));
  for (const t of ["/var/lib/kubelet", "/var/lib/containerd", "/var/log/pods", "/var/log/containers", "/run"])
    assert.ok(
      real.some((b) => b.target === t && !b.file),
      t,
    );
  const files = real.filter((b) => b.file);
  assert.deepEqual(
    files.map((b) => b.target),
    KUBELET_SYSCTLS.map(([k]) => `/proc/sys/${k}`),
  );
  assert.ok(files.every((b) => b.source.startsWith(`${dirs.root}/`)));
  assert.ok(real.every((b) => !b.source.startsWith("/var/lib/kubelet") && !b.source.startsWith("/proc")));
});
