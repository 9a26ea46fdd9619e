import fc from 'fast-check';
import { BODY, CLOSE, HOST, JSON_TYPE, type RawCase, make, request } from './raw.js';

// Request bodies and their framing: conflicting or malformed lengths, Content-Length with
// Transfer-Encoding, chunked bodies good and bad, requests cut short.

/** Where a request goes, and the answer it gets before its body is read, if any. */
export interface Route {
  readonly line: string;
  readonly headers: readonly string[];
  /** Statuses the request may get besides the parser's 400: an answer given before the body was read. */
  readonly early: readonly number[];
}

export const routeArb = (token: string): fc.Arbitrary<Route> =>
  fc.constantFrom<Route>(
    { line: 'POST /plants HTTP/1.1', headers: [HOST, `Authorization: Bearer ${token}`, JSON_TYPE], early: [] },
    { line: 'POST /plants HTTP/1.1', headers: [HOST, JSON_TYPE], early: [401] },
    { line: 'POST /nowhere HTTP/1.1', headers: [HOST], early: [404] },
    { line: 'PUT /plants HTTP/1.1', headers: [HOST], early: [405] },
    {
      line: 'POST /plants HTTP/1.1',
      headers: [HOST, `Authorization: Bearer ${token}`, 'Content-Type: text/plain'],
      early: [415],
    },
  );

const BAD_LENGTHS = ['-1', 'abc', '1.5', '0x10', '+5', '99999999999999999999999', '', '5 5', '5,6', '1e3'];

/** Framing the parser must refuse: conflicting or malformed lengths, CL with TE, bad chunks. */
export const framingArb = (token: string): fc.Arbitrary<RawCase> =>
  fc
    .tuple(
      routeArb(token),
      fc.oneof(
        fc.tuple(fc.nat(100), fc.integer({ min: 1, max: 100 })).map(([a, d]) => ({
          kind: 'two Content-Lengths',
          fields: [`Content-Length: ${a}`, `Content-Length: ${a + d}`],
          head: true,
        })),
        fc
          .constantFrom(...BAD_LENGTHS)
          .map((v) => ({ kind: 'bad Content-Length', fields: [`Content-Length: ${v}`], head: true })),
        fc.boolean().map((clFirst) => {
          const fields = ['Content-Length: 5', 'Transfer-Encoding: chunked'];
          return {
            kind: 'Content-Length and Transfer-Encoding',
            fields: clFirst ? fields : fields.reverse(),
            head: true,
          };
        }),
        fc
          .constantFrom('gzip', 'chunked, gzip', 'xchunked', 'chunked, chunked', 'identity')
          .map((te) => ({ kind: 'bad Transfer-Encoding', fields: [`Transfer-Encoding: ${te}`], head: false })),
      ),
      fc.constantFrom('{"id":1}', '0\r\n\r\n', 'zz\r\n{}\r\n0\r\n\r\n'),
    )
    .map(([route, framing, body]) =>
      // A header-level error comes before any answer; a body-level one may follow an early answer.
      make(framing.kind, request(route.line, [...route.headers, ...framing.fields, CLOSE], body), [
        400,
        ...(framing.head ? [] : route.early),
      ]),
    );

const BAD_CHUNKS = [
  'zz\r\n',
  '-1\r\n',
  'ffffffffffffffffffff\r\n',
  '5\r\n{"id"XX',
  '5\r\n{"id"\r\n\r\n',
  '5 5\r\n',
  '\r\n',
];

export const badChunkArb = (token: string): fc.Arbitrary<RawCase> =>
  fc
    .tuple(routeArb(token), fc.constantFrom(...BAD_CHUNKS))
    .map(([route, chunk]) =>
      make('bad chunk', request(route.line, [...route.headers, 'Transfer-Encoding: chunked', CLOSE], chunk), [
        400,
        ...route.early,
      ]),
    );

const BODY_LIMIT = 16 * 1024; // the default BODY_LIMIT, which the suites run with

/**
 * A valid chunked create: random chunk boundaries, size notations, extensions and trailers; padded
 * with trailing spaces to near the body limit (200) or beyond it (413), where no Content-Length warns.
 */
export const goodChunkedArb = (token: string): fc.Arbitrary<RawCase> =>
  fc
    .record({
      cuts: fc.uniqueArray(fc.nat(), { maxLength: 6 }),
      upper: fc.boolean(),
      zeros: fc.nat(3),
      extension: fc.constantFrom('', ';ext', ';a=b', ';a="quoted"'),
      trailer: fc.constantFrom('', 'X-Trailer: 1\r\n'),
      te: fc.constantFrom('chunked', 'Chunked', 'CHUNKED'),
      size: fc.oneof(
        { weight: 3, arbitrary: fc.constant(BODY.length) },
        fc.integer({ min: BODY_LIMIT - 8, max: BODY_LIMIT + 8 }),
        fc.integer({ min: BODY_LIMIT + 1, max: 4 * BODY_LIMIT }),
      ),
    })
    .map(({ cuts, upper, zeros, extension, trailer, te, size: total }) => {
      const padded = BODY.padEnd(total, ' ');
      const points = [...new Set([0, ...cuts.map((c) => 1 + (c % (padded.length - 1))), padded.length])].sort(
        (a, b) => a - b,
      );
      const chunks = points.slice(1).map((end, i) => padded.slice(points[i], end));
      const size = (n: number): string => '0'.repeat(zeros) + (upper ? n.toString(16).toUpperCase() : n.toString(16));
      const body = chunks.map((c) => `${size(c.length)}${extension}\r\n${c}\r\n`).join('') + `0\r\n${trailer}\r\n`;
      const headers = [HOST, `Authorization: Bearer ${token}`, JSON_TYPE, `Transfer-Encoding: ${te}`, CLOSE];
      const expect = padded.length > BODY_LIMIT ? 413 : 200;
      return make('chunked body', request('POST /plants HTTP/1.1', headers, body), [expect]);
    });

/** A valid request cut anywhere, then the end of the stream: a 400, or silence when nothing was sent. */
export const truncatedArb = (token: string): fc.Arbitrary<RawCase> =>
  fc.nat().map((at) => {
    const headers = [HOST, `Authorization: Bearer ${token}`, JSON_TYPE, `Content-Length: ${BODY.length}`, CLOSE];
    const whole = request('POST /plants HTTP/1.1', headers, BODY);
    const cut = at % whole.length;
    return make('request cut short', whole.slice(0, cut), [400], { halfClose: true, silenceOk: cut === 0 });
  });
