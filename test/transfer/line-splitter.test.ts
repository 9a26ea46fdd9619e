import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { LineSplitter, OverlongLine, type SplitLine } from '../../src/transfer/line-splitter.js';
import { REPLAY, runs } from '../fuzz/settings.js';

/** Lines as comparable values: the text of a line, or the length of one over the cap. */
const show = (lines: SplitLine[]): Array<string | { tooLong: number }> =>
  lines.map((line) => (line instanceof OverlongLine ? { tooLong: line.length } : line.toString('latin1')));

function split(chunks: Buffer[], cap: number): Array<string | { tooLong: number }> {
  const splitter = new LineSplitter(cap);
  const lines = chunks.flatMap((chunk) => splitter.push(chunk));
  return show([...lines, ...splitter.end()]);
}

/** The rule, written the slow and obvious way over the whole input at once. */
function model(input: Buffer, cap: number): Array<string | { tooLong: number }> {
  const parts = input.toString('latin1').split('\n');
  const last = parts.pop()!; // after the last line break: a final line without one, or nothing
  const lines = parts.map((part) => (part.endsWith('\r') ? part.slice(0, -1) : part));
  if (last !== '') lines.push(last);
  return lines.map((line) => (line.length > cap ? { tooLong: line.length } : line));
}

// A 64 MiB line without a line break took 62 s, as the unfinished line was copied again
// on every chunk. The splitter must hold at most the cap (and one CR), and copy each byte at most twice.
test('a 64 MiB line without a line break is one over-long line: never more than the cap is held or copied', () => {
  const cap = 64 * 1024;
  const splitter = new LineSplitter(cap);
  const chunk = Buffer.alloc(65_000, 'x'); // not a divisor of the cap, so that it is crossed inside a chunk
  let fed = 0;
  while (fed < 64 * 1024 * 1024) {
    assert.deepEqual(splitter.push(chunk), []);
    fed += chunk.length;
    assert.ok(splitter.buffered <= cap + 1, `${splitter.buffered} bytes held after ${fed}`);
  }
  assert.equal(splitter.buffered, 0); // past the cap nothing of the line is kept
  assert.ok(splitter.copied <= cap + 1, `${splitter.copied} bytes copied`);
  assert.deepEqual(show(splitter.push(Buffer.from('\n{"id":1}\nnext'))), [{ tooLong: fed }, '{"id":1}']);
  assert.deepEqual(show(splitter.end()), ['next']);
});

test('a long line within the cap, fed in small chunks, is copied a bounded number of times', () => {
  const splitter = new LineSplitter(1024 * 1024);
  const input = Buffer.from(`${'a'.repeat(500_000)}\n${'b'.repeat(300_000)}\r\nc\n`);
  const lines: SplitLine[] = [];
  for (let at = 0; at < input.length; at += 1000) lines.push(...splitter.push(input.subarray(at, at + 1000)));
  lines.push(...splitter.end());
  assert.deepEqual(show(lines), ['a'.repeat(500_000), 'b'.repeat(300_000), 'c']);
  assert.ok(splitter.copied <= 2 * input.length, `${splitter.copied} bytes copied for ${input.length}`);
});

test('the cap counts the bytes of a line without its line break, wherever the chunks end', () => {
  const cases: Array<[string[], Array<string | { tooLong: number }>]> = [
    [['12345678\n'], ['12345678']],
    [['12345678\r\n'], ['12345678']],
    [['1234', '5678\r', '\n'], ['12345678']],
    [['123456789\n'], [{ tooLong: 9 }]],
    [['1234', '56789', '\n'], [{ tooLong: 9 }]],
    [['12345678\r', 'x\n'], [{ tooLong: 10 }]],
    [['12345678', '9'], [{ tooLong: 9 }]], // a final line without a line break
    [['12345678'], ['12345678']],
    [
      ['\n\r\n', '', 'a\r'],
      ['', '', 'a\r'],
    ], // a final CR without LF is not a line break
  ];
  for (const [chunks, expected] of cases) {
    assert.deepEqual(
      split(
        chunks.map((c) => Buffer.from(c)),
        8,
      ),
      expected,
      JSON.stringify(chunks),
    );
  }
});

test('splitting input in any chunks gives the same lines as splitting it at once', (t) => {
  t.diagnostic(REPLAY);
  const byte = fc.oneof(fc.constantFrom(10, 13, 0x78), fc.integer({ min: 0, max: 255 }));
  const arb = fc.record({
    bytes: fc.array(byte, { maxLength: 200 }),
    cap: fc.integer({ min: 1, max: 24 }),
    cuts: fc.array(fc.nat(200)),
  });
  fc.assert(
    fc.property(arb, ({ bytes, cap, cuts }) => {
      const input = Buffer.from(bytes);
      const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
      const chunks = [0, ...points].map((from, i) => input.subarray(from, points[i] ?? input.length));
      const expected = model(input, cap);
      assert.deepEqual(split([input], cap), expected);
      assert.deepEqual(split(chunks, cap), expected);
    }),
    runs(1000),
  );
});
