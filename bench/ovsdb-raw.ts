// The server-bound limit for bench/ovsdb.ts: a minimal JSON-RPC peer on a unix socket that writes request text
// built before the clock starts and finds where each reply ends by counting brackets, with no encoding,
// validation, cache or per-operation objects. It shares no code with src/ovsdb, so it measures ovsdb-server
// and the socket, not our client.

import net from "node:net";

/** One connection; `request` sends pre-built text and resolves when the next whole message has arrived. */
export class RawPeer {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private awaited = 0;
  private waiter: (() => void) | undefined;
  private keep: Buffer[] | undefined;
  private kept: Buffer | undefined;
  /** Bytes received so far. */
  received = 0;

  private constructor(private readonly sock: net.Socket) {
    sock.on("data", (d: Buffer) => this.onData(d));
  }

  static connect(path: string): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ path }, () => {
        sock.off("error", reject);
        resolve(new RawPeer(sock));
      });
      sock.once("error", reject);
    });
  }

  /**
   * Writes `text` and waits for `messages` whole messages: 1 is the reply; 2 on a connection that monitors
   * the table written (ovsdb-server sends the update notification, then the reply).
   */
  request(text: string, messages = 1): Promise<void> {
    return new Promise((resolve) => {
      this.awaited = messages;
      this.waiter = resolve;
      this.sock.write(text);
    });
  }

  /** Like request, and returns the reply's text (used outside the clock, or to parse a monitor dump). */
  async requestText(text: string): Promise<string> {
    this.keep = [];
    await this.request(text);
    return (this.kept as Buffer).toString("utf8");
  }

  close(): void {
    this.sock.destroy();
  }

  private onData(d: Buffer): void {
    this.received += d.length;
    let start = 0;
    for (let i = 0; i < d.length; i++) {
      const b = d[i] as number;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (b === 0x5c) this.escaped = true;
        else if (b === 0x22) this.inString = false;
      } else if (b === 0x22) this.inString = true;
      else if (b === 0x7b || b === 0x5b) this.depth++;
      else if ((b === 0x7d || b === 0x5d) && --this.depth === 0) {
        if (this.keep) {
          this.keep.push(d.subarray(start, i + 1));
          this.kept = Buffer.concat(this.keep);
          this.keep = undefined;
        }
        start = i + 1;
        if (--this.awaited === 0) {
          const w = this.waiter;
          this.waiter = undefined;
          w?.();
        }
      }
    }
    if (this.keep && start < d.length) this.keep.push(d.subarray(start));
  }
}

/** The wire text of one transact request, as the client would send it. */
export function transactText(id: number, db: string, ops: readonly unknown[]): string {
  return JSON.stringify({ id, method: "transact", params: [db, ...ops] });
}

/** Wire operations adding `ports` to the switch `lsUuid` in one transaction: one insert each and one mutate. */
export function addPortsOps(
  lsUuid: string,
  ports: readonly { name: string; addresses: readonly string[]; external_ids: Record<string, string> }[],
  prefix: string,
): unknown[] {
  const ops: unknown[] = ports.map((p, k) => ({
    op: "insert",
    table: "Logical_Switch_Port",
    row: {
      name: p.name,
      addresses: p.addresses[0],
      external_ids: ["map", Object.entries(p.external_ids)],
    },
    "uuid-name": `${prefix}${k}`,
  }));
  const refs = ports.map((_, k) => ["named-uuid", `${prefix}${k}`]);
  ops.push({
    op: "mutate",
    table: "Logical_Switch",
    where: [["_uuid", "==", ["uuid", lsUuid]]],
    mutations: [["ports", "insert", refs.length === 1 ? refs[0] : ["set", refs]]],
  });
  return ops;
}
