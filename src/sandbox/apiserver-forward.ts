// Reaching the apiserver from the machine without putting the machine on the underlay. The listening socket
// is opened on 127.0.0.1 in the machine's netns and handed as fd 3 to a relay that runs in the control-plane
// host's netns: a socket keeps the netns it was created in, so the relay accepts on the machine's loopback
// while its outgoing connections start inside the sandbox. No route or address is added anywhere.

import net from "node:net";
import { spawnDetached } from "./daemon.ts";
import type { ProcessIdentity } from "./process-table.ts";
import { tsNodeCommand, zovnEntry } from "./repo.ts";

function listen(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => resolve(server));
  });
}

/** The OS descriptor behind a listening server; Node exposes it only on the internal handle. */
function serverFd(server: net.Server): number {
  const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) throw new Error("cannot get the listening socket's descriptor");
  return fd;
}

export interface ForwardSpec {
  /** Port to try first (the one in an existing kubeconfig); another free port if it is taken. */
  preferredPort?: number;
  netns: string;
  target: string;
  log: string;
  /** Extra argv so a sweep can tell which sandbox the relay belongs to. */
  tag: string;
}

export async function startApiserverForward(
  spec: ForwardSpec,
): Promise<{ port: number; id: ProcessIdentity }> {
  let server: net.Server;
  try {
    server = await listen(spec.preferredPort ?? 0);
  } catch {
    server = await listen(0);
  }
  try {
    const port = (server.address() as net.AddressInfo).port;
    const ts = tsNodeCommand();
    const id = spawnDetached({
      place: { netns: spec.netns },
      command: ts.command,
      args: [
        ...ts.args,
        zovnEntry,
        "sandbox",
        "internal-forward",
        "--target",
        spec.target,
        "--tag",
        spec.tag,
      ],
      log: spec.log,
      passFds: [serverFd(server)],
    });
    return { port, id };
  } finally {
    // The relay holds its own copy of the socket now.
    server.close();
  }
}

/** The relay's main loop: accept on fd 3, connect to the target for each connection, pipe both ways. */
export function runApiserverForward(target: string): void {
  const colon = target.lastIndexOf(":");
  const host = target.slice(0, colon);
  const port = Number(target.slice(colon + 1));
  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port });
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", closeBoth);
    upstream.on("error", closeBoth);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen({ fd: 3 }, () => {
    process.stderr.write(`apiserver-forward: relaying to ${target}\n`);
  });
}
