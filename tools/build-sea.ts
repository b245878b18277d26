// Builds the zstack-ovn-cni single executable (Node SEA). On Node 20 the SEA entry must be one CommonJS
// file, so esbuild bundles the shim first; the blob carries V8's code cache so the shim starts fast; the
// blob goes into a copy of this node binary with postject. The result needs no node and no PATH.
// `--entry src/cli/zstack-ovn.ts` builds the product image's multi-call executable instead (docs/images.md).
//
//   node --import tsx tools/build-sea.ts [--out dist/zstack-ovn-cni] [--entry FILE] [--no-strip] [--snapshot]

import { spawn } from "node:child_process";
import { chmod, copyFile, mkdir, mkdtemp, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ENTRY = join(repo, "src", "cli", "zstack-ovn-cni.ts");
/**
 * Optional packages that ws, node-fetch and debug try to load inside try/catch. Left as require() calls, the
 * SEA's require prints a warning on every start; as modules that throw "not found" they behave as absent.
 */
const ABSENT_OPTIONAL = /^(bufferutil|utf-8-validate|encoding|supports-color)$/;
const absentOptional: Plugin = {
  name: "absent-optional",
  setup(b) {
    b.onResolve({ filter: ABSENT_OPTIONAL }, (args) => ({ path: args.path, namespace: "absent" }));
    b.onLoad({ filter: /.*/, namespace: "absent" }, (args) => ({
      contents: `throw Object.assign(new Error(${JSON.stringify(`Cannot find module '${args.path}'`)}), { code: "MODULE_NOT_FOUND" });`,
      loader: "js",
    }));
  },
};
/**
 * Node 20's snapshot builder cannot load node:http (it throws while evaluating it), so a snapshot build
 * gets node:http through a proxy that loads it on first use, after the snapshot is deserialized.
 */
const lazyHttp: Plugin = {
  name: "lazy-http",
  setup(b) {
    b.onResolve({ filter: /^(node:)?http$/ }, () => ({ path: "http", namespace: "lazy-http" }));
    b.onLoad({ filter: /.*/, namespace: "lazy-http" }, () => ({
      contents: `module.exports = { request: (...a) => process.getBuiltinModule("node:http").request(...a) };`,
      loader: "js",
    }));
  },
};
/** The fuse Node's SEA loader looks for; postject flips it when it injects the blob. */
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

export interface BuildSeaOptions {
  /** Where the executable goes; written under a temporary name first, then renamed. */
  outFile: string;
  /** The TypeScript entry point; default src/cli/zstack-ovn-cni.ts. */
  entry?: string;
  /** Strip debug symbols from the node binary copy (about 12 MB less). Default true when `strip` exists. */
  strip?: boolean;
  /**
   * Start from a V8 startup snapshot of the evaluated bundle (`useSnapshot`) instead of the code cache; the
   * entry must hand its main function to v8.startupSnapshot.setDeserializeMainFunction. Measured, not shipped.
   */
  snapshot?: boolean;
  /** Progress lines; silent by default. */
  log?: (line: string) => void;
}

export interface BuildSeaResult {
  path: string;
  bytes: number;
  bundleBytes: number;
  blobBytes: number;
  stripped: boolean;
  ms: number;
}

function run(cmd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (output += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (output += d));
    child.on("error", reject);
    child.on("close", (code) => resolvePromise({ code, output }));
  });
}

async function must(cmd: string, args: string[], what: string): Promise<void> {
  const { code, output } = await run(cmd, args);
  if (code !== 0)
    throw new Error(`${what} failed (exit ${code}): ${cmd} ${args.join(" ")}\n${output.trim()}`);
}

async function hasStrip(): Promise<boolean> {
  try {
    return (await run("strip", ["--version"])).code === 0;
  } catch {
    return false;
  }
}

/** Bundles `entry` into one minified CommonJS file, as the SEA (or `node --snapshot-blob`) runs it. */
export async function bundleEntry(entry: string, outfile: string, snapshot: boolean): Promise<void> {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    minify: true,
    legalComments: "none",
    logLevel: "error",
    plugins: snapshot ? [absentOptional, lazyHttp] : [absentOptional],
  });
}

export async function buildSea(opts: BuildSeaOptions): Promise<BuildSeaResult> {
  const started = Date.now();
  const log = opts.log ?? (() => {});
  const outFile = resolve(opts.outFile);
  const work = await mkdtemp(join(tmpdir(), "zovn-sea-"));
  try {
    const entry = resolve(opts.entry ?? ENTRY);
    const bundle = join(work, "main.cjs");
    const blob = join(work, "main.blob");
    const exe = join(work, "main");

    await bundleEntry(entry, bundle, opts.snapshot ?? false);
    const bundleBytes = (await stat(bundle)).size;
    log(`bundled ${entry} into ${bundleBytes} bytes of CommonJS`);

    const seaConfig = join(work, "sea-config.json");
    await writeFile(
      seaConfig,
      JSON.stringify({
        main: bundle,
        output: blob,
        disableExperimentalSEAWarning: true,
        ...(opts.snapshot ? { useSnapshot: true } : { useCodeCache: true }),
      }),
    );
    // The code cache is only valid for the V8 that made it, so the blob is made by the node we copy.
    await must(process.execPath, ["--experimental-sea-config", seaConfig], "making the SEA blob");
    const blobBytes = (await stat(blob)).size;

    await copyFile(process.execPath, exe);
    await chmod(exe, 0o755);
    const stripped = (opts.strip ?? true) && (await hasStrip());
    if (stripped) await must("strip", [exe], "stripping the node binary copy");

    const postject = createRequire(import.meta.url).resolve("postject/dist/cli.js");
    await must(
      process.execPath,
      [postject, exe, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE],
      "injecting the blob with postject",
    );

    await mkdir(dirname(outFile), { recursive: true });
    const tmpOut = `${outFile}.tmp-${process.pid}`;
    await copyFile(exe, tmpOut);
    await chmod(tmpOut, 0o755);
    await rename(tmpOut, outFile);
    const bytes = (await stat(outFile)).size;
    const ms = Date.now() - started;
    log(
      `wrote ${outFile}: ${(bytes / 1e6).toFixed(1)} MB (blob ${blobBytes} bytes, stripped ${stripped}) in ${ms} ms`,
    );
    return { path: outFile, bytes, bundleBytes, blobBytes, stripped, ms };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function main(argv: string[]): Promise<void> {
  let outFile = join(repo, "dist", "zstack-ovn-cni");
  let strip: boolean | undefined;
  let entry: string | undefined;
  let snapshot = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--out" && argv[i + 1]) outFile = argv[++i] as string;
    else if (arg === "--entry" && argv[i + 1]) entry = argv[++i] as string;
    else if (arg === "--no-strip") strip = false;
    else if (arg === "--snapshot") snapshot = true;
    else
      throw new Error(
        `unknown argument ${arg}; usage: build-sea.ts [--out FILE] [--entry FILE] [--no-strip] [--snapshot]`,
      );
  }
  await buildSea({
    outFile,
    ...(strip === undefined ? {} : { strip }),
    ...(entry === undefined ? {} : { entry }),
    snapshot,
    log: (l) => process.stderr.write(`build-sea: ${l}\n`),
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`build-sea: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
