// A TCP relay between a client under test and the apiserver, to produce the network faults a real cluster
// sees: connections cut, connections refused, and connections that stay open but carry nothing (a stalled
// watch, which neither side notices). TLS passes through untouched.

import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Destroys every open connection. */
  cut(): void;
  /** New connections are closed at once until accept() is called. */
  refuse(): void;
  accept(): void;
  /** Existing connections stop relaying in both directions but stay open; new ones work normally. */
  freeze(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    const pair = { client, upstream };
    pairs.add(pair);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address() as net.AddressInfo;
  const cut = () => {
    for (const { client, upstream } of pairs) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
  };
  return {
    port: address.port,
    cut,
    refuse: () => {
      refusing = true;
    },
    accept: () => {
      refusing = false;
    },
    freeze: () => {
      for (const { client, upstream } of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    close: () => {
      cut();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
