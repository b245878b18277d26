// OVSDB sends JSON-RPC objects back to back with no delimiter. This splitter finds each object's end by
// tracking nesting and string state over raw bytes (UTF-8 continuation bytes are never ASCII, so scanning bytes is safe).

import { ProtocolError } from "./errors.ts";

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

export interface JsonStreamOptions {
  /** Largest message accepted, in bytes; a peer sending more is treated as broken. */
  maxMessageBytes?: number;
}

export class JsonStreamSplitter {
  private chunks: Buffer[] = [];
  private buffered = 0;
  // Scan state carried across chunks.
  private depth = 0;
  private inString = false;
  private escaped = false;
  private readonly maxBytes: number;

  constructor(opts: JsonStreamOptions = {}) {
    this.maxBytes = opts.maxMessageBytes ?? 1 << 30;
  }

  /** Feeds bytes; returns every complete message they finish, parsed. Throws ProtocolError on garbage. */
  push(data: Buffer): unknown[] {
    const out: unknown[] = [];
    let start = 0;
    let i = 0;
    const n = data.length;
    // Inside a string only a quote or a backslash matters: the next of each in this chunk is found by indexOf
    // (native, far faster than a loop over every byte of every UUID and name), and kept until passed.
    let nextQuote = -1;
    let nextBackslash = -1;
    while (i < n) {
      if (this.depth === 0) {
        // Between messages only white space may appear, then a message opens with '{'.
        const b = data[i] as number;
        if (isSpace(b)) {
          i++;
          start = i;
          continue;
        }
        if (b !== OPEN_BRACE) {
          throw new ProtocolError(
            `garbage between JSON-RPC messages: byte 0x${b.toString(16)} (expected '{')`,
          );
        }
        start = i;
        this.depth = 1;
        i++;
      }
      // Inside a message: find its end.
      while (i < n) {
        if (this.inString) {
          if (this.escaped) {
            this.escaped = false;
            i++;
            continue;
          }
          if (nextQuote < i) {
            nextQuote = data.indexOf(QUOTE, i);
            if (nextQuote < 0) nextQuote = n;
          }
          if (nextBackslash < i) {
            nextBackslash = data.indexOf(BACKSLASH, i);
            if (nextBackslash < 0) nextBackslash = n;
          }
          if (nextBackslash < nextQuote) {
            // The byte after the backslash is escaped, whatever it is; it may be in the next chunk.
            i = nextBackslash + 1;
            this.escaped = true;
          } else if (nextQuote < n) {
            i = nextQuote + 1;
            this.inString = false;
          } else {
            i = n;
          }
          continue;
        }
        const b = data[i] as number;
        i++;
        if (b === QUOTE) this.inString = true;
        else if (b === OPEN_BRACE || b === OPEN_BRACKET) this.depth++;
        else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
          if (--this.depth === 0) break;
        }
      }
      if (this.depth === 0) {
        out.push(this.parse(data.subarray(start, i)));
        start = i;
      } else {
        this.keep(data.subarray(start, n));
        return out;
      }
    }
    return out;
  }

  /** Bytes of an unfinished message held back, e.g. to detect a peer that closed mid-message. */
  get pendingBytes(): number {
    return this.buffered;
  }

  private keep(part: Buffer): void {
    this.chunks.push(part);
    this.buffered += part.length;
    if (this.buffered > this.maxBytes) {
      throw new ProtocolError(`JSON-RPC message larger than ${this.maxBytes} bytes`);
    }
  }

  private parse(tail: Buffer): unknown {
    let bytes = tail;
    if (this.chunks.length > 0) {
      this.chunks.push(tail);
      bytes = Buffer.concat(this.chunks, this.buffered + tail.length);
      this.chunks = [];
      this.buffered = 0;
    }
    try {
      return JSON.parse(bytes.toString("utf8"));
    } catch (e) {
      throw new ProtocolError(`malformed JSON-RPC message: ${(e as Error).message}`);
    }
  }
}
