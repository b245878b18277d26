// What the image tests share: where `make images` put an image, the manifest it was built from, and its
// root filesystem unpacked by umoci the way a container runtime would see it.

import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const REPO = resolve(import.meta.dirname, "../..");
export type ImageId = "product" | "central";

/** The OCI archive hack/build-images.sh built for the current sources; throws (run `make images`) if none. */
export function imageArchive(image: ImageId): string {
  let out: string;
  try {
    out = execFileSync(join(REPO, "hack/build-images.sh"), ["--print", image], { encoding: "utf8" });
  } catch (e) {
    throw new Error(`no ${image} image built for these sources: run 'make images' (${(e as Error).message})`);
  }
  const line = out.split("\n").find((l) => l.startsWith(`IMAGE_${image.toUpperCase()}=`));
  if (!line) throw new Error(`build-images.sh --print gave no line for ${image}: ${out}`);
  return line.slice(line.indexOf("=") + 1);
}

export interface ManifestEntry {
  kind: "package" | "dpkg" | "file" | "link" | "entrypoint";
  fields: string[];
}

/** deploy/images/<image>/manifest, comments and blank lines dropped. */
export function readManifest(image: ImageId): ManifestEntry[] {
  const text = readFileSync(join(REPO, "deploy/images", image, "manifest"), "utf8");
  const entries: ManifestEntry[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const [kind, ...fields] = line.split(/\s+/);
    if (kind !== "package" && kind !== "dpkg" && kind !== "file" && kind !== "link" && kind !== "entrypoint")
      throw new Error(`manifest of ${image}: unknown line ${JSON.stringify(line)}`);
    entries.push({ kind, fields });
  }
  return entries;
}

export interface UnpackedImage {
  /** The root filesystem, as a container sees it. */
  rootfs: string;
  /** The OCI runtime config umoci derived from the image config. */
  config: { process?: { args?: string[]; env?: string[] } };
  remove(): void;
}

/** Unpacks the image's only tag into a temporary directory (umoci; needs root to keep owners and devices). */
export function unpackImage(archive: string): UnpackedImage {
  const dir = mkdtempSync(join(tmpdir(), "zovn-image-"));
  try {
    const layout = join(dir, "layout");
    mkdirSync(layout);
    execFileSync("tar", ["-C", layout, "-xf", archive]);
    const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    const tag = index.manifests[0]?.annotations?.["org.opencontainers.image.ref.name"];
    if (!tag || index.manifests.length !== 1) throw new Error(`${archive}: want exactly one tagged image`);
    const bundle = join(dir, "bundle");
    execFileSync("umoci", ["unpack", "--image", `${layout}:${tag}`, bundle], { stdio: "ignore" });
    rmSync(layout, { recursive: true, force: true });
    const config = JSON.parse(readFileSync(join(bundle, "config.json"), "utf8"));
    return {
      rootfs: join(bundle, "rootfs"),
      config,
      remove: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
