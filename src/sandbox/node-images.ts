// The images a real sandbox node imports into its containerd (pause, busybox and CoreDNS), built by
// hack/build-node-images.sh into the shared cache, which prints IMAGE_<NAME>=archive, IMAGE_<NAME>_NAME=repository
// and IMAGE_<NAME>_TAG=tag lines.

import { run } from "./command.ts";
import { repoRoot } from "./repo.ts";

export interface NodeImage {
  /** The OCI archive (an OCI layout as a tar file) holding one image tagged with `tag`. */
  archive: string;
  repository: string;
  tag: string;
}

export interface NodeImages {
  pause: NodeImage;
  busybox: NodeImage;
  /** The cluster DNS server (cluster-dns.ts). */
  coredns: NodeImage;
}

const REPOSITORY_RE = /^[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)+$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

function image(lines: Map<string, string>, key: string): NodeImage {
  const archive = lines.get(`IMAGE_${key}`);
  const repository = lines.get(`IMAGE_${key}_NAME`);
  const tag = lines.get(`IMAGE_${key}_TAG`);
  if (!archive?.startsWith("/") || !archive.endsWith(".tar"))
    throw new Error(`build-node-images: no archive path for ${key}`);
  if (!repository || !REPOSITORY_RE.test(repository))
    throw new Error(`build-node-images: bad repository for ${key}: ${repository}`);
  if (!tag || !TAG_RE.test(tag)) throw new Error(`build-node-images: bad tag for ${key}: ${tag}`);
  return { archive, repository, tag };
}

/** Parses the script's stdout; anything but the expected lines is refused, since it becomes ctr arguments. */
export function parseNodeImageLines(text: string): NodeImages {
  const lines = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^(IMAGE_[A-Z_]+)=(.*)$/.exec(line.trim());
    if (m) lines.set(m[1] as string, m[2] as string);
  }
  return { pause: image(lines, "PAUSE"), busybox: image(lines, "BUSYBOX"), coredns: image(lines, "COREDNS") };
}

export function imageRef(i: NodeImage): string {
  return `${i.repository}:${i.tag}`;
}

/** Builds what is missing (seconds; cached afterwards) and returns the archives and names. */
export async function resolveNodeImages(): Promise<NodeImages> {
  const script = `${repoRoot}/hack/build-node-images.sh`;
  const out = await run(script, ["--print"]).catch(() => run(script, [], { timeoutMs: 600_000 }));
  return parseNodeImageLines(out);
}
