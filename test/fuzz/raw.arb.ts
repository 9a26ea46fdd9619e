import fc from 'fast-check';
import { badChunkArb, framingArb, goodChunkedArb, truncatedArb } from './framing.arb.js';
import { CLOSE, HOST, type RawCase, make, request } from './raw.js';

// Requests for the HTTP parser itself, written byte for byte: oversized headers, malformed request
// lines and header fields, garbage; and (framing.arb.ts) bodies and their framing.

/** Node counts the request target, header names and values against its 16 KiB limit. */
const oversizedArb = fc.oneof(
  fc
    .oneof(
      fc.integer({ min: 17_000, max: 64_000 }).map((n) => [HOST, `X-Filler: ${'a'.repeat(n)}`, CLOSE]),
      fc
        .tuple(fc.integer({ min: 10, max: 400 }), fc.integer({ min: 17_500, max: 40_000 }))
        .map(([count, total]) => [
          HOST,
          ...Array.from({ length: count }, (_, i) => `X-F${i}: ${'b'.repeat(Math.ceil(total / count))}`),
          CLOSE,
        ]),
      fc.integer({ min: 17_000, max: 30_000 }).map((n) => [HOST, `${'X'.repeat(n)}: 1`, CLOSE]),
    )
    .map((headers) => make('oversized headers', request('GET /healthz HTTP/1.1', headers), [431])),
  fc
    .integer({ min: 17_000, max: 30_000 })
    .map((n) =>
      make('oversized request target', request(`GET /plants/${'1'.repeat(n)} HTTP/1.1`, [HOST, CLOSE]), [431]),
    ),
);

const underLimitArb = fc
  .integer({ min: 1, max: 15_000 })
  .map((n) =>
    make('large headers', request('GET /healthz HTTP/1.1', [HOST, `X-Filler: ${'a'.repeat(n)}`, CLOSE]), [200]),
  );

const BAD_METHODS = ['get', 'Get', 'G@T', 'GETT', 'FOO', 'G\x00T', '\x01GET', 'DELETE!', 'PO ST', '\u00c9T'];
const BAD_VERSIONS = ['HTTP/1.2', 'HTTP/1.9', 'HTTP/3.0', 'HTTP/9.9', 'HTTP/11', 'HTTP/1', 'HTTP/1.', 'HTTP/', 'HTTP'];
const MORE_BAD_VERSIONS = ['http/1.1', 'HTTPS/1.1', 'HTTP/1.1x', 'HTTP/-1.1', 'HTTP/1.1\x00', 'HTTP/1.1\t'];
const BAD_TARGET_BYTES = ['\x00', '\x01', '\x7f', '\t', '\x80', '\xff', '\xd9\xa1', '\xc3\xa9', ' x'];

const badLineArb = fc
  .oneof(
    fc.constantFrom(...BAD_METHODS).map((m) => `${m} /healthz HTTP/1.1`),
    fc.constantFrom(...BAD_VERSIONS, ...MORE_BAD_VERSIONS).map((v) => `GET /healthz ${v}`),
    fc
      .tuple(fc.constantFrom('/healthz', '/plants/', '/'), fc.constantFrom(...BAD_TARGET_BYTES))
      .map(([path, bad]) => `GET ${path}${bad} HTTP/1.1`),
  )
  .map((line) => make('malformed request line', request(line, [HOST, CLOSE]), [400]));

const lfOnlyArb = fc
  .constantFrom('GET /healthz HTTP/1.1\nHost: x\n\n', 'GET /healthz HTTP/1.1\r\nHost: x\nConnection: close\n\n')
  .map((bytes) => make('bare LF line endings', bytes, [400]));

const BAD_FIELDS = [
  'Foo bar',
  'Foo : bar',
  ': bar',
  'F@o: bar',
  'F\x00o: bar',
  'Foo: b\x00r',
  'Foo: b\x7fr',
  'Fo\x7fo: x',
];
const badFieldArb = fc
  .tuple(fc.constantFrom(...BAD_FIELDS, 'Foo: bar\r\n  folded'), fc.boolean())
  .map(([field, first]) =>
    make(
      'malformed header field',
      request('GET /healthz HTTP/1.1', first ? [field, HOST, CLOSE] : [HOST, field, CLOSE]),
      [400],
    ),
  );

const missingHostArb = fc
  .constantFrom('GET /healthz', 'GET /plants', 'POST /plants', 'DELETE /plants/1')
  .map((line) => make('HTTP/1.1 without Host', request(`${line} HTTP/1.1`, [CLOSE]), [400]));

const garbageArb = fc
  .oneof(
    fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => Buffer.from(b).toString('latin1')),
    fc.string({ minLength: 1, maxLength: 300 }).map((s) => `${s}\r\n\r\n`),
    fc.constantFrom('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', '\r\n\r\n\r\n'),
  )
  .map((bytes) => make('garbage', bytes, 'any', { halfClose: true, silenceOk: true }));

export const rawCaseArb = (token: string): fc.Arbitrary<RawCase> =>
  fc.oneof(
    { weight: 2, arbitrary: oversizedArb },
    underLimitArb,
    { weight: 2, arbitrary: badLineArb },
    lfOnlyArb,
    badFieldArb,
    missingHostArb,
    { weight: 2, arbitrary: framingArb(token) },
    { weight: 2, arbitrary: badChunkArb(token) },
    goodChunkedArb(token),
    truncatedArb(token),
    { weight: 2, arbitrary: garbageArb },
  );
