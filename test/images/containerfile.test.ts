// A Containerfile (for users with Docker or Podman) must make the image `make images` makes: the same Debian
// packages with the same dpkg options, the same files with the same modes, links and entrypoint. Both are
// read from deploy/images/<image>/; the make path reads only the manifest, so comparing the Containerfile
// to the manifest compares the two builds (product-image.test.ts checks the built image against the manifest).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { type ImageId, REPO, readManifest } from "./image-archive.ts";

interface ImageContents {
  packages: string[];
  dpkg: string[];
  /** "<source> <path> <mode>", the source as the manifest names it (sea:NAME, go:NAME or repo:PATH). */
  files: string[];
  /** "<target> <path>" */
  links: string[];
  entrypoint: string[];
}

function fromManifest(image: ImageId): ImageContents {
  const c: ImageContents = { packages: [], dpkg: [], files: [], links: [], entrypoint: [] };
  for (const e of readManifest(image)) {
    if (e.kind === "package") c.packages.push(...e.fields);
    else if (e.kind === "dpkg") c.dpkg.push(...e.fields);
    else if (e.kind === "file") c.files.push(e.fields.join(" "));
    else if (e.kind === "link") c.links.push(e.fields.join(" "));
    else if (e.kind === "entrypoint") c.entrypoint.push(...e.fields);
  }
  return normalise(c);
}

/**
 * The final stage's instructions, continuation lines joined; what the build stage writes to /out is sea:NAME,
 * what the gobuild stage writes there is go:NAME.
 */
export function fromContainerfile(text: string): ImageContents {
  const c: ImageContents = { packages: [], dpkg: [], files: [], links: [], entrypoint: [] };
  const instructions = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const lastFrom = instructions.findLastIndex((l) => /^FROM\s/i.test(l));
  for (const ins of instructions.slice(lastFrom + 1)) {
    const [op, ...rest] = ins.split(/\s+/);
    const args = rest.join(" ");
    if (op === "RUN") {
      const install = args.match(/apt-get install -y --no-install-recommends ([^&]+)/);
      if (install?.[1]) c.packages.push(...install[1].trim().split(/\s+/));
      for (const m of args.matchAll(/'(path-(?:exclude|include)=[^']+)'/g)) c.dpkg.push(m[1] as string);
      for (const m of args.matchAll(/ln -s (\S+) (\S+)/g)) c.links.push(`${m[1]} ${m[2]}`);
    } else if (op === "COPY") {
      const m = args.match(/^(?:--from=(build|gobuild)\s+)?--chmod=(\d+)\s+(\S+)\s+(\S+)$/);
      assert.ok(m, `COPY must be 'COPY [--from=build|gobuild] --chmod=MODE SOURCE DEST': ${ins}`);
      const [, fromBuild, mode, src, dest] = m as unknown as [
        string,
        string | undefined,
        string,
        string,
        string,
      ];
      const source = fromBuild
        ? `${fromBuild === "build" ? "sea" : "go"}:${src.replace(/^\/out\//, "")}`
        : `repo:${src}`;
      c.files.push(`${source} ${dest} ${mode.padStart(4, "0")}`);
    } else if (op === "ENTRYPOINT") {
      c.entrypoint.push(...(JSON.parse(args) as string[]));
    }
  }
  return normalise(c);
}

function normalise(c: ImageContents): ImageContents {
  return { ...c, packages: [...c.packages].sort(), files: [...c.files].sort(), links: [...c.links].sort() };
}

for (const image of ["product", "central"] as const) {
  describe(`deploy/images/${image}/Containerfile`, () => {
    const containerfile = readFileSync(join(REPO, "deploy/images", image, "Containerfile"), "utf8");
    test("installs the manifest's packages with its dpkg options, and copies and links its files", () => {
      const manifest = fromManifest(image);
      assert.ok(
        manifest.packages.length > 0 && manifest.files.length > 0,
        "the manifest lists packages and files",
      );
      assert.deepEqual(fromContainerfile(containerfile), manifest);
    });
  });
}

describe("the Containerfile reader", () => {
  test("sees a package, a file or a link that only the Containerfile adds", () => {
    const base = readFileSync(join(REPO, "deploy/images/product/Containerfile"), "utf8");
    const manifest = fromManifest("product");
    const variants = [
      base.replace("nftables ethtool conntrack", "nftables ethtool conntrack curl"),
      base.replace("--chmod=0755 /out/zstack-ovn", "--chmod=0775 /out/zstack-ovn"),
      `${base}RUN ln -s zstack-ovn /usr/local/bin/extra\n`,
      `${base}ENTRYPOINT ["/usr/local/bin/zstack-ovn"]\n`,
    ];
    for (const v of variants) assert.notDeepEqual(fromContainerfile(v), manifest);
  });
});
