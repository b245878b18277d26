// The product installed by its own chart on the real-node sandbox (`up --kubelet`, its default; `--chart`): the product and
// OVN central images from `make images` (hack/build-images.sh) are imported into the nodes' containerd under
// local names, and `helm upgrade --install` applies deploy/helm/zstack-ovn-kubernetes with values-standalone.yaml
// plus the sandbox's overrides below. The overrides hold everything sandbox-specific; the templates stay as
// a production install renders them.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { run } from "./command.ts";
import { ctr } from "./containerd.ts";
import type { Place } from "./netns.ts";
import type { NodeImage } from "./node-images.ts";
import { repoRoot } from "./repo.ts";
import type { Topology } from "./topology.ts";
import { APISERVER_PORT, controlPlaneSources, SERVICE_CIDR } from "./topology.ts";

export const CHART_DIR = join(repoRoot, "deploy", "helm", "zstack-ovn-kubernetes");
export const CHART_RELEASE = "zstack-ovn-kubernetes";
export const CHART_NAMESPACE = "kube-system";
/** Local names no registry serves, so nothing can ever be pulled for them. */
export const PRODUCT_REPOSITORY = "localhost/zstack-ovn-kubernetes";
export const CENTRAL_REPOSITORY = "localhost/zstack-ovn-central";
export const CLUSTER_CIDR = "10.244.0.0/16";

export interface ProductImages {
  product: NodeImage;
  central: NodeImage;
}

const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** The images' tag: build-images.sh tags both with package.json's version, the chart's appVersion. */
export function productTag(): string {
  const v = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version?: unknown })
    .version;
  if (typeof v !== "string" || !TAG_RE.test(v)) throw new Error(`package.json: bad version ${String(v)}`);
  return v;
}

/** Parses build-images.sh's `IMAGE_PRODUCT=` and `IMAGE_CENTRAL=` lines; anything else is refused. */
export function parseProductImageLines(text: string, tag: string): ProductImages {
  const lines = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^IMAGE_(PRODUCT|CENTRAL)=(.*)$/.exec(line.trim());
    if (m) lines.set(m[1] as string, m[2] as string);
  }
  const archive = (key: string): string => {
    const a = lines.get(key);
    if (!a?.startsWith("/") || !a.endsWith(".oci.tar") || a.includes("\n"))
      throw new Error(`build-images: no archive path for ${key}`);
    return a;
  };
  if (!TAG_RE.test(tag)) throw new Error(`bad image tag ${tag}`);
  return {
    product: { archive: archive("PRODUCT"), repository: PRODUCT_REPOSITORY, tag },
    central: { archive: archive("CENTRAL"), repository: CENTRAL_REPOSITORY, tag },
  };
}

/** Builds what `make images` would (minutes when a source changed; cached otherwise) and returns the archives. */
export async function resolveProductImages(): Promise<ProductImages> {
  const script = join(repoRoot, "hack", "build-images.sh");
  const out = await run(script, ["--print"]).catch(() => run(script, [], { timeoutMs: 1_800_000 }));
  return parseProductImageLines(out, productTag());
}

/** The node OVN central runs on (hostNetwork): it alone imports the central image. */
export function centralNode(topo: Topology): string {
  return (topo.nodes[0] as { name: string }).name;
}

/**
 * The sandbox's values over values-standalone.yaml. Each entry is what this machine needs, not a chart default:
 * - images by local name, `pullPolicy: Never` (no registry);
 * - the node's own OVS (`node.hostOVS`) on the userspace datapath (`dpdk.enabled`; no OVS kernel module here,
 *   and the chart runs the netdev datapath only with the host's OVS); ovn-controller still runs in the pods;
 * - the apiserver's underlay address: there is no kube-proxy, and the chart's pods start before any Service
 *   routing exists;
 * - OVN central pinned to one node, the only one that imports its image;
 * - the control-plane host admitted to the pod network (`node.podAccessFrom`), as in the process mode: it routes
 *   the pod network via node1 for the apiserver's proxy to pods and Services.
 */
export function sandboxChartValues(topo: Topology, images: ProductImages): Record<string, unknown> {
  const product = {
    repository: images.product.repository,
    tag: images.product.tag,
    pullPolicy: "Never",
  };
  return {
    ovn: {
      standalone: {
        image: { repository: images.central.repository, tag: images.central.tag, pullPolicy: "Never" },
        nodeSelector: { "kubernetes.io/hostname": centralNode(topo) },
      },
    },
    network: { clusterCIDR: CLUSTER_CIDR, serviceCIDR: SERVICE_CIDR },
    tunnel: { type: topo.spec.encap },
    dpdk: { enabled: true, socketDir: "/var/run/openvswitch" },
    kubernetes: { serviceHost: topo.controlPlane.ip, servicePort: APISERVER_PORT },
    controller: { image: product },
    node: {
      image: product,
      hostOVS: true,
      ovnController: true,
      podAccessFrom: controlPlaneSources(topo).join(","),
    },
  };
}

export interface HelmContext {
  helm: string;
  kubeconfig: string;
  /** Where the sandbox's values file is written (JSON is YAML). */
  valuesFile: string;
}

function helmArgs(ctx: HelmContext, args: readonly string[]): string[] {
  return ["--kubeconfig", ctx.kubeconfig, "--namespace", CHART_NAMESPACE, ...args];
}

/** The release's status (`deployed`, `failed`, ...) or undefined when it is not installed. */
export async function releaseStatus(ctx: HelmContext): Promise<string | undefined> {
  const out = await run(ctx.helm, helmArgs(ctx, ["list", "--all", "--output", "json"]));
  const list = JSON.parse(out) as Array<{ name?: string; status?: string }>;
  return list.find((r) => r.name === CHART_RELEASE)?.status;
}

/**
 * `helm upgrade --install` unless the release is deployed with the same values (so `up` over a running sandbox
 * changes nothing). Helm applies the CRD from the chart's crds/ and creates Services before the workloads.
 */
export async function installChart(ctx: HelmContext, values: Record<string, unknown>): Promise<boolean> {
  const text = `${JSON.stringify(values, null, 2)}\n`;
  let same = false;
  try {
    same = readFileSync(ctx.valuesFile, "utf8") === text;
  } catch {
    // first install
  }
  if (same && (await releaseStatus(ctx)) === "deployed") return false;
  mkdirSync(dirname(ctx.valuesFile), { recursive: true });
  writeFileSync(ctx.valuesFile, text);
  await run(
    ctx.helm,
    helmArgs(ctx, [
      ...["upgrade", "--install", CHART_RELEASE, CHART_DIR],
      ...["--values", join(CHART_DIR, "values-standalone.yaml"), "--values", ctx.valuesFile],
      ...["--timeout", "10m"],
    ]),
    { timeoutMs: 700_000 },
  );
  return true;
}

export async function uninstallChart(ctx: HelmContext): Promise<void> {
  await run(ctx.helm, helmArgs(ctx, ["uninstall", CHART_RELEASE, "--wait", "--timeout", "10m"]), {
    timeoutMs: 700_000,
  });
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** The manifest digest an OCI archive's index.json names: what containerd records as the imported image's target. */
export async function archiveDigest(archive: string): Promise<string> {
  const entries = (await run("tar", ["-tf", archive], { timeoutMs: 120_000 })).split("\n");
  const index = entries.find((e) => e === "index.json" || e === "./index.json");
  if (!index) throw new Error(`${archive}: no index.json`);
  const parsed = JSON.parse(await run("tar", ["-xOf", archive, index], { timeoutMs: 120_000 })) as {
    manifests?: Array<{ digest?: unknown }>;
  };
  const digest = parsed.manifests?.[0]?.digest;
  if (typeof digest !== "string" || !DIGEST_RE.test(digest))
    throw new Error(`${archive}: no manifest digest`);
  return digest;
}

/** `ctr images list` rows as name → target digest. */
export function parseImageDigests(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n").slice(1)) {
    const [ref, , digest] = line.trim().split(/\s+/);
    if (ref && digest && DIGEST_RE.test(digest)) out.set(ref, digest);
  }
  return out;
}

/**
 * A product image rebuilt under the same tag (any non-test source changed) is imported again over the node's copy, which
 * only a `down` would otherwise drop; containerd's CRI plugin follows the image update. Returns the images
 * whose node copy was replaced, so the chart's pods that run them can be restarted.
 */
export async function refreshNodeImages(
  place: Place,
  images: readonly NodeImage[],
  digests: ReadonlyMap<string, string>,
): Promise<NodeImage[]> {
  const have = parseImageDigests(await ctr(place, ["images", "list"]));
  const stale = images.filter((i) => {
    const current = have.get(`${i.repository}:${i.tag}`);
    return current !== undefined && current !== digests.get(i.archive);
  });
  for (const image of stale)
    await ctr(place, ["images", "import", "--base-name", image.repository, image.archive], 300_000);
  return stale;
}

/** The chart's workloads that run each image, restarted after their image was replaced. */
export function workloadsOf(image: "product" | "central"): string[] {
  return image === "product"
    ? ["daemonset/zstack-ovnkube-node", "deployment/zstack-ovnkube-controller"]
    : ["statefulset/ovn-nb-db", "statefulset/ovn-sb-db", "deployment/ovn-northd"];
}
