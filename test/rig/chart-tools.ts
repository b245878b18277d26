// helm and kubeconform for the chart's tests: built by hack/ensure-binaries.sh into the binary cache (an
// environment variable HELM or KUBECONFORM of the same name wins), and the kubeconform schemas generated from
// a real apiserver's /openapi/v2 into the same cache, keyed by the apiserver's version and reused.

import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { load as loadYaml } from "js-yaml";
import { repoRoot } from "../../src/sandbox/repo.ts";
import type { KubeApiserver } from "./kube-apiserver.ts";
import { SCHEMA_FILE_TEMPLATE, schemasFromCrd, schemasFromOpenApiV2 } from "./kube-json-schemas.ts";
import { runTool } from "./process.ts";

export const CHART_DIR = join(repoRoot, "deploy", "helm", "zstack-ovn-kubernetes");
export const SUBNET_CRD = join(repoRoot, "deploy", "crds", "subnet.network.zstack.io.yaml");

export interface ChartTools {
  helm: string;
  kubeconform: string;
  /** The binary cache's root (the directory holding helm-VERSION/). */
  cacheRoot: string;
}

let toolsOnce: Promise<ChartTools> | undefined;

/** Only looks the tools up; a test never starts a build (`make binaries` does). */
export function chartTools(): Promise<ChartTools> {
  toolsOnce ??= (async () => {
    let helm = process.env.HELM;
    let kubeconform = process.env.KUBECONFORM;
    if (!helm || !kubeconform) {
      const listed = await new Promise<string>((resolve, reject) => {
        execFile(
          join(repoRoot, "hack", "ensure-binaries.sh"),
          ["--print"],
          { encoding: "utf8" },
          (err, out) =>
            err
              ? reject(
                  new Error(
                    "helm and kubeconform are not built yet: run `make binaries` (hack/ensure-binaries.sh)",
                  ),
                )
              : resolve(out),
        );
      });
      const line = (key: string) =>
        /^([A-Z_]+)=(\/.+)$/m.exec(listed.split("\n").find((l) => l.startsWith(`${key}=`)) ?? "")?.[2];
      helm ||= line("HELM");
      kubeconform ||= line("KUBECONFORM");
    }
    if (!helm || !kubeconform) throw new Error("ensure-binaries.sh --print named no HELM or KUBECONFORM");
    return { helm, kubeconform, cacheRoot: dirname(dirname(helm)) };
  })();
  return toolsOnce;
}

/** The Kubernetes release the repository pins (fixtures/k8s/go.mod), e.g. v1.37.1. */
export function pinnedKubeVersion(): string {
  const gomod = readFileSync(join(repoRoot, "fixtures", "k8s", "go.mod"), "utf8");
  const m = /^\s*k8s\.io\/kubernetes (v\d+\.\d+\.\d+)/m.exec(gomod);
  if (!m?.[1]) throw new Error("no k8s.io/kubernetes version in fixtures/k8s/go.mod");
  return m[1];
}

/** `helm template` of the chart with a values file (relative to the chart) and --set pairs; rejects with helm's message. */
export async function helmTemplate(
  valuesFile: string | undefined,
  sets: string[] = [],
  namespace = "kube-system",
): Promise<string> {
  const { helm } = await chartTools();
  const args = ["template", "zstack-ovn-kubernetes", CHART_DIR, "--namespace", namespace, "--include-crds"];
  args.push("--kube-version", pinnedKubeVersion());
  if (valuesFile) args.push("-f", join(CHART_DIR, valuesFile));
  for (const s of sets) args.push("--set", s);
  return runTool(helm, args, { timeoutMs: 60_000 });
}

/** Parses a multi-document YAML stream into its objects (empty documents dropped). */
export function objectsOf(yaml: string): Array<Record<string, unknown> & { kind: string }> {
  const out: Array<Record<string, unknown> & { kind: string }> = [];
  for (const doc of yaml.split(/^---\s*$/m)) {
    const obj = loadYaml(doc);
    if (obj && typeof obj === "object") out.push(obj as Record<string, unknown> & { kind: string });
  }
  return out;
}

/**
 * The directory of kubeconform schemas for `kube`'s version: its /openapi/v2 per kind, plus the Subnet CRD's
 * own schema. Generated once per version into the cache (written to a temp dir, then renamed into place).
 */
export async function kubeSchemaDir(kube: KubeApiserver): Promise<string> {
  const { cacheRoot } = await chartTools();
  const version = JSON.parse(await kube.kubectl(["version", "-o", "json"])).serverVersion
    .gitVersion as string;
  if (!/^v\d+\.\d+\.\d+/.test(version)) throw new Error(`unexpected apiserver version ${version}`);
  const dir = join(cacheRoot, `kube-schemas-${version}`);
  if (existsSync(join(dir, ".complete"))) return dir;
  const doc = JSON.parse(await kube.kubectl(["get", "--raw", "/openapi/v2"], { timeoutMs: 120_000 }));
  const schemas = schemasFromOpenApiV2(doc);
  for (const [name, schema] of schemasFromCrd(loadYaml(readFileSync(SUBNET_CRD, "utf8"))))
    schemas.set(name, schema);
  mkdirSync(cacheRoot, { recursive: true });
  const tmp = mkdtempSync(join(cacheRoot, ".kube-schemas-"));
  for (const [name, schema] of schemas) writeFileSync(join(tmp, name), JSON.stringify(schema));
  writeFileSync(join(tmp, ".complete"), `${schemas.size} schemas from ${version}\n`);
  try {
    renameSync(tmp, dir);
  } catch (err) {
    // Another test process won the race; its directory is as good as ours.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, ".complete"))) throw err;
  }
  return dir;
}

export interface KubeconformResult {
  valid: number;
  invalid: number;
  errors: number;
  skipped: number;
  /** One line per object that is not valid: kind/name and the reason. */
  problems: string[];
}

/** Validates a YAML stream against the schemas in `schemaDir`, strictly, missing schemas counted as errors. */
export async function kubeconform(yaml: string, schemaDir: string): Promise<KubeconformResult> {
  const { kubeconform: bin } = await chartTools();
  const tmp = mkdtempSync(join(process.env.TMPDIR ?? "/tmp", "zovn-kubeconform-"));
  try {
    const file = join(tmp, "objects.yaml");
    writeFileSync(file, yaml);
    const args = [
      "-strict",
      "-summary",
      "-output",
      "json",
      "-schema-location",
      join(schemaDir, SCHEMA_FILE_TEMPLATE),
    ];
    const out = await new Promise<string>((resolve, reject) => {
      // Exit status 1 means "some object is invalid": the JSON report says which, so it is not an error here.
      execFile(
        bin,
        [...args, file],
        { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 },
        (err, stdout, stderr) => {
          if (err && !stdout) reject(new Error(`kubeconform failed: ${stderr}`));
          else resolve(stdout);
        },
      );
    });
    const report = JSON.parse(out) as {
      resources: Array<{ kind: string; name: string; status: string; msg: string }>;
      summary: { valid: number; invalid: number; errors: number; skipped: number };
    };
    return {
      ...report.summary,
      problems: report.resources
        .filter((r) => r.status !== "statusValid")
        .map((r) => `${r.kind}/${r.name}: ${r.status} ${r.msg}`),
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Runs a tool from the cache (helm), returning stdout; exported for the lint step. */
export async function runHelm(args: string[]): Promise<string> {
  const { helm } = await chartTools();
  return runTool(helm, args, { timeoutMs: 60_000 });
}
