import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAll } from "js-yaml";
import { resolveBinaries } from "./binaries.ts";
import {
  CHART_DIR,
  CHART_NAMESPACE,
  CHART_RELEASE,
  parseImageDigests,
  parseProductImageLines,
  productTag,
  sandboxChartValues,
} from "./chart-install.ts";
import { DEFAULT_SPEC, planTopology } from "./topology.ts";

const LINES = [
  "IMAGE_PRODUCT=/var/cache/zstack-ovn/images/product-022d/zstack-ovn-kubernetes.oci.tar",
  "IMAGE_CENTRAL=/var/cache/zstack-ovn/images/central-1e4a/zstack-ovn-central.oci.tar",
  "",
].join("\n");

test("build-images' lines give the two archives under local names that no registry serves", () => {
  const images = parseProductImageLines(LINES, "0.1.0");
  assert.equal(images.product.repository, "localhost/zstack-ovn-kubernetes");
  assert.equal(images.central.repository, "localhost/zstack-ovn-central");
  assert.equal(images.product.tag, "0.1.0");
  assert.equal(
    images.central.archive,
    "/var/cache/zstack-ovn/images/central-1e4a/zstack-ovn-central.oci.tar",
  );
  assert.match(productTag(), /^\d+\.\d+\.\d+/);
});

test("an archive path or tag that is not plain is refused, since both become ctr arguments", () => {
  assert.throws(() => parseProductImageLines(LINES.replace(/IMAGE_CENTRAL=\//, "IMAGE_CENTRAL="), "0.1.0"));
  assert.throws(() => parseProductImageLines("IMAGE_PRODUCT=/x.oci.tar\n", "0.1.0"), /CENTRAL/);
  assert.throws(() => parseProductImageLines(LINES, "--all"), /tag/);
});

function helmTemplate(helm: string, valuesFile: string): Promise<string> {
  const args = [
    "template",
    CHART_RELEASE,
    CHART_DIR,
    "--namespace",
    CHART_NAMESPACE,
    "--kube-version",
    "v1.37.1",
  ];
  args.push("--values", join(CHART_DIR, "values-standalone.yaml"), "--values", valuesFile);
  return new Promise((resolve, reject) =>
    execFile(helm, args, { encoding: "utf8", maxBuffer: 16 << 20 }, (err, out, stderr) =>
      err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(out),
    ),
  );
}

interface Rendered {
  kind: string;
  metadata: { name: string };
  spec?: {
    template?: {
      spec: {
        nodeSelector?: Record<string, string>;
        containers: Array<{ name: string; image: string; imagePullPolicy: string; env?: unknown[] }>;
      };
    };
  };
}

test("the sandbox's values pass the chart's schema and render local images, the host's OVS and the apiserver's address", async () => {
  const helm = (await resolveBinaries()).HELM;
  const topo = planTopology({ ...DEFAULT_SPEC, kubelet: true, chart: true });
  const images = parseProductImageLines(LINES, "0.1.0");
  const dir = mkdtempSync(join(tmpdir(), "zovn-chart-values-"));
  try {
    const file = join(dir, "values.json");
    writeFileSync(file, JSON.stringify(sandboxChartValues(topo, images)));
    const docs = (loadAll(await helmTemplate(helm, file)) as Rendered[]).filter(Boolean);
    const workloads = docs.filter((d) => ["DaemonSet", "Deployment", "StatefulSet"].includes(d.kind));
    assert.deepEqual(workloads.map((w) => w.metadata.name).sort(), [
      "ovn-nb-db",
      "ovn-northd",
      "ovn-sb-db",
      "zstack-ovnkube-controller",
      "zstack-ovnkube-node",
    ]);
    for (const w of workloads)
      for (const c of w.spec?.template?.spec.containers ?? []) {
        assert.match(
          c.image,
          /^localhost\/zstack-ovn-(kubernetes|central):0\.1\.0$/,
          `${w.metadata.name}/${c.name}`,
        );
        assert.equal(c.imagePullPolicy, "Never");
      }
    const node = workloads.find((w) => w.metadata.name === "zstack-ovnkube-node");
    assert.deepEqual(
      node?.spec?.template?.spec.containers.map((c) => c.name),
      ["ovn-controller", "node"],
      "the host's OVS, ovn-controller in the pod",
    );
    const env = JSON.stringify(node?.spec?.template?.spec.containers.find((c) => c.name === "node")?.env);
    assert.match(env, /"KUBERNETES_SERVICE_HOST","value":"192\.168\.200\.2"/);
    assert.match(env, /"ZSTACK_DATAPATH_TYPE","value":"netdev"/);
    const nb = workloads.find((w) => w.metadata.name === "ovn-nb-db");
    assert.deepEqual(nb?.spec?.template?.spec.nodeSelector, { "kubernetes.io/hostname": "node1" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("ctr's image list gives each name's target digest; a row without a digest is left out", () => {
  const d1 = `sha256:${"a".repeat(64)}`;
  const d2 = `sha256:${"b".repeat(64)}`;
  const text = [
    "REF                                       TYPE                                        DIGEST SIZE PLATFORMS LABELS",
    `localhost/zstack-ovn-kubernetes:0.1.0 application/vnd.oci.image.manifest.v1+json ${d1} 97.0 MiB linux/amd64 io.cri-containerd.image=managed`,
    `registry.k8s.io/pause:3.10.2 application/vnd.oci.image.manifest.v1+json ${d2} 300.0 KiB linux/amd64 -`,
    "broken-row",
  ].join("\n");
  assert.deepEqual(
    [...parseImageDigests(text)],
    [
      ["localhost/zstack-ovn-kubernetes:0.1.0", d1],
      ["registry.k8s.io/pause:3.10.2", d2],
    ],
  );
});
