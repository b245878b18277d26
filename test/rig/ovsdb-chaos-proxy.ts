// An OVSDB relay that understands JSON-RPC framing, to inject the faults whose outcome a client cannot know:
// a transaction that committed but whose reply never arrived, a reply that vanished on a connection that kept
// carrying other traffic, a request cut in the middle, and connections reset between any two messages.
// Decisions come from a caller-supplied PRNG so a failing run names its seed.

import net from "node:net";
import { JsonStreamSplitter } from "../../src/ovsdb/json-stream.ts";

export interface FaultPlan {
  /**
   * Per transact: close the client's connection when its reply arrives instead of forwarding it (committed,
   * reply lost). Half of these also withhold everything the server sends after the request, so the client
   * does not see the commit's monitor update either; the other half let the update through.
   */
  lostReply: number;
  /** Per transact reply: swallow it, keep relaying other messages, reset the connection a little later. */
  droppedReply: number;
  /** Per transact request: forward only part of its bytes, then reset (the server never sees a whole request). */
  cutRequest: number;
  /** Per message in either direction: reset before relaying it. */
  reset: number;
}

export interface FaultCounts {
  connections: number;
  /** Transact requests relayed in full. */
  transacts: number;
  lostReplies: number;
  droppedReplies: number;
  cutRequests: number;
  resets: number;
}

export interface OvsdbChaosProxy {
  /** "tcp:127.0.0.1:PORT", for a client's remotes. */
  readonly remote: string;
  readonly port: number;
  /** What was injected so far; a test asserts these are not zero. */
  readonly counts: Readonly<FaultCounts>;
  /** Turns injection on or off; relaying goes on either way. */
  setFaults(on: boolean): void;
  close(): Promise<void>;
}

export interface ChaosProxyOptions {
  /** Unix socket path or TCP port of the ovsdb-server behind the proxy. */
  upstream: { path: string } | { port: number; host?: string };
  plan: FaultPlan;
  /** Uniform in [0, 1); seeded by the test. */
  rand: () => number;
  /** Most a dropped reply's connection lives on before the reset, in ms (default 500). */
  droppedReplyResetMs?: number;
}

interface Rpc {
  id?: unknown;
  method?: unknown;
}

function idKey(id: unknown): string {
  return JSON.stringify(id);
}

export async function startOvsdbChaosProxy(opts: ChaosProxyOptions): Promise<OvsdbChaosProxy> {
  const counts: FaultCounts = {
    connections: 0,
    transacts: 0,
    lostReplies: 0,
    droppedReplies: 0,
    cutRequests: 0,
    resets: 0,
  };
  let faults = true;
  const { plan, rand } = opts;
  const sockets = new Set<net.Socket>();
  const chance = (p: number) => faults && p > 0 && rand() < p;

  const server = net.createServer((client) => {
    counts.connections++;
    const upstream =
      "path" in opts.upstream
        ? net.connect({ path: opts.upstream.path })
        : net.connect({ port: opts.upstream.port, host: opts.upstream.host ?? "127.0.0.1" });
    sockets.add(client);
    sockets.add(upstream);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      // resetAndDestroy: the client sees ECONNRESET, as after a network fault, not an orderly FIN.
      client.resetAndDestroy();
      // A unix socket has no RST; its peer sees an ordinary close.
      if ("path" in opts.upstream) upstream.destroy();
      else upstream.resetAndDestroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    const inject = (counter: keyof FaultCounts) => {
      counts[counter]++;
      close();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);

    // Faults start once the client writes: before that it is still syncing, and a connection that never
    // gets through its monitor setup tests nothing but the backoff.
    let armed = false;
    // Transact ids in flight: true when the reply is to be lost.
    const pendingTransacts = new Map<string, boolean>();
    let blackout = false;
    const toServer = new JsonStreamSplitter();
    const toClient = new JsonStreamSplitter();

    client.on("data", (chunk: Buffer) => {
      let msgs: unknown[];
      try {
        msgs = toServer.push(chunk);
      } catch {
        close();
        return;
      }
      for (const m of msgs as Rpc[]) {
        if (closed) return;
        const bytes = Buffer.from(JSON.stringify(m));
        if (m.method === "transact") {
          armed = true;
          if (chance(plan.cutRequest)) {
            upstream.write(bytes.subarray(0, 1 + Math.floor(rand() * (bytes.length - 1))));
            inject("cutRequests");
            return;
          }
          counts.transacts++;
          const lose = chance(plan.lostReply);
          pendingTransacts.set(idKey(m.id), lose);
          if (lose && rand() < 0.5) blackout = true;
        } else if (armed && chance(plan.reset)) {
          inject("resets");
          return;
        }
        upstream.write(bytes);
      }
    });

    upstream.on("data", (chunk: Buffer) => {
      let msgs: unknown[];
      try {
        msgs = toClient.push(chunk);
      } catch {
        close();
        return;
      }
      for (const m of msgs as Rpc[]) {
        if (closed) return;
        const isReply = m.method === undefined && m.id !== undefined && m.id !== null;
        const pending = isReply ? pendingTransacts.get(idKey(m.id)) : undefined;
        if (pending !== undefined) {
          pendingTransacts.delete(idKey(m.id));
          if (pending) {
            inject("lostReplies");
            return;
          }
          if (blackout) continue;
          if (chance(plan.droppedReply)) {
            counts.droppedReplies++;
            const after = Math.floor(rand() * (opts.droppedReplyResetMs ?? 500));
            setTimeout(close, after).unref();
            continue;
          }
        } else if (blackout) {
          continue;
        } else if (armed && chance(plan.reset)) {
          inject("resets");
          return;
        }
        client.write(JSON.stringify(m));
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    remote: `tcp:127.0.0.1:${port}`,
    port,
    counts,
    setFaults: (on) => {
      faults = on;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
