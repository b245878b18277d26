// zstack-ovn-cni: the CNI executable the container runtime runs. A thin shim: it reads stdin and the CNI_*
// environment, forwards them to the node agent over its unix socket, prints the reply and exits with its
// code. Built into a single executable by tools/build-sea.ts (docs/cni.md).

import { readFileSync } from "node:fs";
import { startupSnapshot } from "node:v8";
import { runShim } from "../cni/shim.ts";
import { SUPPORTED_VERSIONS } from "../cni/spec.ts";

const ABOUT = `zstack-ovn-cni: the CNI plugin of zstack-ovn-kubernetes; forwards to the node agent's socket.
CNI protocol versions supported: ${SUPPORTED_VERSIONS.join(", ")}
A container runtime runs this program with CNI_COMMAND set; see docs/cni.md.`;

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return "";
  try {
    return readFileSync(0, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // No stdin at all (closed descriptor): the commands that need a config report it as empty.
    if (code === "EBADF") return "";
    if (code !== "EAGAIN") throw err;
  }
  // A non-blocking pipe cannot be read synchronously; the stream waits for its end instead.
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function main(): Promise<number> {
  if (!process.env.CNI_COMMAND && process.stdin.isTTY) {
    process.stderr.write(`${ABOUT}\n`);
    return 1;
  }
  const reply = await runShim(process.env, await readStdin());
  process.stdout.write(reply.stdout);
  return reply.exitCode;
}

function start(): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      // Only a failure to read stdin gets here; the spec's code for it is 5 (I/O failure).
      const msg = err instanceof Error ? err.message : String(err);
      process.stdout.write(
        `${JSON.stringify({ cniVersion: "1.1.0", code: 5, msg: `zstack-ovn-cni: ${msg}` })}\n`,
      );
      process.exitCode = 1;
    },
  );
}

// Built into a V8 startup snapshot (tools/build-sea.ts --snapshot, measured in docs/cni.md), the module is
// evaluated at build time and start() runs when the snapshot is deserialized.
if (startupSnapshot.isBuildingSnapshot()) startupSnapshot.setDeserializeMainFunction(start);
else start();
