import { createServer } from "node:net";

// Ports already handed out by this process: the kernel may return a just-closed port again, and two callers
// in one test file must not both get it.
const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago. Only for addresses that must be known before a
 * daemon starts (Raft addresses); listeners that can bind port 0 themselves should do that instead. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await bindAndRelease();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("freePort: the kernel kept returning ports this process already handed out");
}

function bindAndRelease(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("freePort: listener has no TCP address"));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}
