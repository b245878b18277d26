import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ProtocolError } from "./errors.ts";
import { JsonStreamSplitter } from "./json-stream.ts";

const jsonObject = fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 6 });

/** Pushes `bytes` in chunks of the lengths in `cuts`, then the rest; returns every message split out. */
function pushInCuts(s: JsonStreamSplitter, bytes: Buffer, cuts: readonly number[]): unknown[] {
  const got: unknown[] = [];
  let pos = 0;
  for (const c of cuts) {
    const end = Math.min(bytes.length, pos + c);
    got.push(...s.push(bytes.subarray(pos, end)));
    pos = end;
  }
  got.push(...s.push(bytes.subarray(pos)));
  return got;
}

test("splits back-to-back JSON objects however the bytes are chunked", () => {
  fc.assert(
    fc.property(
      fc.array(jsonObject, { minLength: 1, maxLength: 8 }),
      fc.array(fc.nat(64), { maxLength: 40 }),
      (msgs, cuts) => {
        const bytes = Buffer.from(msgs.map((m, i) => (i % 2 ? " \n" : "") + JSON.stringify(m)).join(""));
        const s = new JsonStreamSplitter();
        const got = pushInCuts(s, bytes, cuts);
        assert.deepEqual(got, JSON.parse(JSON.stringify(msgs)));
        assert.equal(s.pendingBytes, 0);
      },
    ),
    { numRuns: 300 },
  );
});

test("braces and quotes inside strings, escapes and multibyte UTF-8 do not confuse the splitter", () => {
  const msgs = [{ a: 'x{"}]\\"' }, { b: "\\" }, { c: "日本語 \u00e9 {[" }, { d: [[], {}, [{}]] }];
  const bytes = Buffer.from(msgs.map((m) => JSON.stringify(m)).join(""));
  const s = new JsonStreamSplitter();
  const got: unknown[] = [];
  for (let i = 0; i < bytes.length; i++) got.push(...s.push(bytes.subarray(i, i + 1)));
  assert.deepEqual(got, msgs);
});

test("garbage between messages is a ProtocolError naming the byte", () => {
  const s = new JsonStreamSplitter();
  assert.throws(
    () => s.push(Buffer.from('{"a":1}HTTP/1.1 400')),
    (e: Error) => e instanceof ProtocolError && /0x48/.test(e.message),
  );
});

test("a malformed message body is a ProtocolError", () => {
  const s = new JsonStreamSplitter();
  assert.throws(() => s.push(Buffer.from('{"a":tru}')), ProtocolError);
});

test("a message larger than the limit is refused instead of buffered without bound", () => {
  const s = new JsonStreamSplitter({ maxMessageBytes: 100 });
  assert.throws(() => {
    for (let i = 0; i < 20; i++) s.push(Buffer.from(i === 0 ? '{"a":"' : "xxxxxxxxxx"));
  }, /larger than 100 bytes/);
});

test("strings full of quotes and backslashes split right however the bytes are chunked", () => {
  const tricky = fc.string({
    unit: fc.constantFrom('"', "\\", "a", "{", "}", "[", "]", "日"),
    maxLength: 12,
  });
  fc.assert(
    fc.property(
      fc.array(fc.dictionary(tricky, fc.oneof(tricky, fc.array(tricky, { maxLength: 3 })), { maxKeys: 4 }), {
        minLength: 1,
        maxLength: 6,
      }),
      fc.array(fc.nat(16), { maxLength: 40 }),
      (msgs, cuts) => {
        const bytes = Buffer.from(msgs.map((m) => JSON.stringify(m)).join(""));
        const s = new JsonStreamSplitter();
        const got = pushInCuts(s, bytes, cuts);
        assert.deepEqual(got, JSON.parse(`[${msgs.map((m) => JSON.stringify(m)).join(",")}]`));
        assert.equal(s.pendingBytes, 0);
      },
    ),
    { numRuns: 500 },
  );
});
