// A relay between an OVSDB client under test and a real ovsdb-server that loses one transaction's reply for real:
// the request reaches the server and commits, then the client's connection is reset before the reply (and the
// monitor update that goes with it) gets through. That is what a connection reset or a Raft leader change does
// to a client, and the only way to see which of our writes resolve their outcome from the database.

import net from "node:net";
import { JsonStreamSplitter } from "../../src/ovsdb/json-stream.ts";

export interface OvsdbFaultProxy {
  /** "tcp:127.0.0.1:PORT", to give the client as its remote. */
  readonly remote: string;
  /**
   * The next transact request that `match` accepts is forwarded; from then on nothing the server sends reaches
   * the client, and once the server's reply to that request has arrived the client's connection is reset.
   * Resolves with the reply the client never saw; rejects when no such transaction came within `timeoutMs`.
   */
  loseNextReply(
    match?: (ops: readonly Record<string, unknown>[]) => boolean,
    opts?: { timeoutMs?: number },
  ): Promise<unknown>;
  /**
   * Holds back everything the server sends to the clients (their view of NB lags) until the returned function is
   * called, which delivers it in order.
   */
  holdFromServer(): () => void;
  /**
   * From now on, acts as an ovsdb-server older than 2.17 towards inserts with a client-chosen "uuid" member: a
   * transaction carrying one is not forwarded and is answered with the parse error such a server gives (the
   * "uuid" member unknown to its insert). Everything else passes through to the real server.
   */
  refuseInsertUuid(): void;
  /**
   * Holds back the transact requests that `match` accepts (they do not reach the server; their senders wait for
   * the reply) until the returned function is called, which forwards them in order. Others pass meanwhile: a
   * reconciler whose writes are slow, while the rest of the controller goes on.
   */
  holdTransactions(match: (ops: readonly Record<string, unknown>[]) => boolean): () => void;
  /** Resets every open connection. */
  cut(): void;
  /** New connections are closed at once until accept() is called. */
  refuse(): void;
  accept(): void;
  close(): Promise<void>;
}

interface Rule {
  match: (ops: readonly Record<string, unknown>[]) => boolean;
  resolve: (reply: unknown) => void;
}

/** `upstream` is the server's "unix:PATH" remote. */
export async function startOvsdbFaultProxy(upstream: string): Promise<OvsdbFaultProxy> {
  if (!upstream.startsWith("unix:")) throw new Error(`fault proxy: unix remote expected, got ${upstream}`);
  const path = upstream.slice("unix:".length);
  const pairs = new Set<{ client: net.Socket; server: net.Socket }>();
  const rules: Rule[] = [];
  let refusing = false;
  let noInsertUuid = false;
  let held: { client: net.Socket; text: string }[] | undefined;
  const holds: { match: (ops: readonly Record<string, unknown>[]) => boolean; queue: (() => void)[] }[] = [];

  const listener = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const server = net.connect(path);
    const pair = { client, server };
    pairs.add(pair);
    const drop = () => {
      client.destroy();
      server.destroy();
      pairs.delete(pair);
    };
    client.on("error", drop).on("close", drop);
    server.on("error", drop).on("close", drop);
    // Pending id of the transact whose reply is to be lost, and the rule waiting for it.
    let doomed: { id: unknown; rule: Rule } | undefined;
    const toServer = new JsonStreamSplitter();
    const toClient = new JsonStreamSplitter();
    client.on("data", (chunk: Buffer) => {
      for (const msg of toServer.push(chunk) as Record<string, unknown>[]) {
        if (noInsertUuid && msg.method === "transact" && Array.isArray(msg.params)) {
          const ops = (msg.params as unknown[]).slice(1) as Record<string, unknown>[];
          const i = ops.findIndex((o) => o.op === "insert" && "uuid" in o);
          if (i >= 0) {
            const error = {
              error: "unknown member",
              details: `Parsing ovsdb operation ${i + 1} of ${ops.length} failed: Member 'uuid' is present but not allowed here.`,
            };
            client.write(
              JSON.stringify({
                id: msg.id,
                result: [...ops.slice(0, i).map(() => ({})), error],
                error: null,
              }),
            );
            continue;
          }
        }
        if (doomed === undefined && msg.method === "transact" && Array.isArray(msg.params)) {
          const ops = (msg.params as unknown[]).slice(1) as Record<string, unknown>[];
          const i = rules.findIndex((r) => r.match(ops));
          if (i >= 0) doomed = { id: msg.id, rule: rules.splice(i, 1)[0] as Rule };
        }
        if (msg.method === "transact" && Array.isArray(msg.params)) {
          const ops = (msg.params as unknown[]).slice(1) as Record<string, unknown>[];
          const hold = holds.find((h) => h.match(ops));
          if (hold) {
            const text = JSON.stringify(msg);
            hold.queue.push(() => {
              if (!server.destroyed) server.write(text);
            });
            continue;
          }
        }
        server.write(JSON.stringify(msg));
      }
    });
    server.on("data", (chunk: Buffer) => {
      for (const msg of toClient.push(chunk) as Record<string, unknown>[]) {
        if (doomed === undefined) {
          if (held) held.push({ client, text: JSON.stringify(msg) });
          else client.write(JSON.stringify(msg));
          continue;
        }
        // Everything after the doomed request is held back, the update of its own commit included.
        if (msg.method === undefined && JSON.stringify(msg.id) === JSON.stringify(doomed.id)) {
          const { rule } = doomed;
          drop();
          rule.resolve(msg.result ?? msg.error);
          return;
        }
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (listener.address() as net.AddressInfo).port;
  const cut = () => {
    for (const { client, server } of pairs) {
      client.destroy();
      server.destroy();
    }
    pairs.clear();
  };
  return {
    remote: `tcp:127.0.0.1:${port}`,
    loseNextReply: (match = () => true, opts = {}) =>
      new Promise<unknown>((resolve, reject) => {
        const rule: Rule = {
          match,
          resolve: (reply) => {
            clearTimeout(timer);
            resolve(reply);
          },
        };
        const timeoutMs = opts.timeoutMs ?? 60_000;
        const timer = setTimeout(() => {
          const i = rules.indexOf(rule);
          if (i >= 0) rules.splice(i, 1);
          reject(new Error(`fault proxy: no matching transaction within ${timeoutMs} ms`));
        }, timeoutMs);
        timer.unref();
        rules.push(rule);
      }),
    holdFromServer: () => {
      held ??= [];
      return () => {
        const out = held ?? [];
        held = undefined;
        for (const m of out) if (!m.client.destroyed) m.client.write(m.text);
      };
    },
    holdTransactions: (match) => {
      const hold = { match, queue: [] as (() => void)[] };
      holds.push(hold);
      return () => {
        const i = holds.indexOf(hold);
        if (i >= 0) holds.splice(i, 1);
        for (const send of hold.queue.splice(0)) send();
      };
    },
    cut,
    refuseInsertUuid: () => {
      noInsertUuid = true;
    },
    refuse: () => {
      refusing = true;
    },
    accept: () => {
      refusing = false;
    },
    close: () => {
      cut();
      return new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}
