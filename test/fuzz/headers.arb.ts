import fc from 'fast-check';

// Request headers other than Authorization: Content-Type, Content-Encoding, X-Request-Id, and
// headers the service must not care about.

export interface Header {
  readonly name: string;
  readonly value: string;
}

const VALID_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'Application/JSON',
  'APPLICATION/JSON; CHARSET=UTF8',
  'application/json ; charset="utf-8"',
  'application/json; foo=bar',
  'application/json; charset=utf-8; foo=bar',
  'application/json;\tcharset=utf-8',
  'application/json;',
  'application/json; charset = "UTF-8";',
];

const INVALID_TYPES = [
  '',
  'text/plain',
  'text/json',
  'application/jsonx',
  'application/json-patch+json',
  'application/vnd.api+json',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json; charset=""',
  'application/json, text/plain',
  'application/*',
  '*/*',
  'json',
  'application/json\u00ff',
];

/** A Content-Type (undefined: none) and whether the contract lets the body be read as JSON. */
export const contentTypeArb: fc.Arbitrary<{ readonly value: string | undefined; readonly json: boolean }> = fc.oneof(
  { weight: 20, arbitrary: fc.constantFrom(...VALID_TYPES).map((value) => ({ value, json: true })) },
  { weight: 1, arbitrary: fc.constant({ value: undefined, json: false }) },
  { weight: 2, arbitrary: fc.constantFrom(...INVALID_TYPES).map((value) => ({ value, json: false })) },
);

/** A Content-Encoding (undefined: none) and whether it is the identity (RFC 9110 §8.4). */
export const contentEncodingArb: fc.Arbitrary<{ readonly value: string | undefined; readonly identity: boolean }> =
  fc.oneof(
    { weight: 36, arbitrary: fc.constant({ value: undefined, identity: true }) },
    fc.constantFrom('identity', 'IDENTITY').map((value) => ({ value, identity: true })),
    fc
      .constantFrom('gzip', 'br', 'deflate', 'gzip, identity', 'x-unknown')
      .map((value) => ({ value, identity: false })),
  );

const visibleArb = fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c));
const valueUnitArb = fc.oneof(
  { weight: 8, arbitrary: visibleArb },
  { weight: 1, arbitrary: fc.constantFrom(' ', '\t') },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) }, // obs-text
);

/** X-Request-Id values: none, sane ones to echo, and ones to replace (too long, spaces, bytes, repeated). */
export const requestIdArb: fc.Arbitrary<readonly string[]> = fc.oneof(
  { weight: 6, arbitrary: fc.constant([]) },
  fc.string({ unit: visibleArb, minLength: 1, maxLength: 128 }).map((id) => [id]),
  fc.constantFrom('a'.repeat(128), 'a'.repeat(129), 'x'.repeat(4000), '', 'a b', 'ä', 'id\t1').map((id) => [id]),
  fc.string({ unit: valueUnitArb, maxLength: 200 }).map((id) => [id]),
  fc.array(fc.string({ unit: visibleArb, minLength: 1, maxLength: 10 }), { minLength: 2, maxLength: 3 }),
);

/** Names whose meaning the other arbitraries own, or that change the framing. */
const RESERVED =
  /^(host|content-length|transfer-encoding|authorization|content-type|content-encoding|x-request-id|expect|upgrade|connection)$/i;

const COMMON: readonly Header[] = [
  { name: 'Accept', value: 'text/html' },
  { name: 'Accept', value: '*/*;q=0' },
  { name: 'Accept-Encoding', value: 'gzip, br' },
  { name: 'Accept-Language', value: 'zz' },
  { name: 'If-None-Match', value: '*' },
  { name: 'If-Modified-Since', value: 'garbage' },
  { name: 'Range', value: 'bytes=0-1' },
  { name: 'Origin', value: 'https://evil.example' },
  { name: 'Cookie', value: '__proto__=1; constructor=2' },
  { name: 'X-Forwarded-For', value: '::1, garbage' },
  { name: 'X-HTTP-Method-Override', value: 'DELETE' },
  { name: 'TE', value: 'trailers' },
  { name: '__proto__', value: '{"polluted":true}' },
  { name: 'constructor', value: 'x' },
];

export const otherHeadersArb: fc.Arbitrary<readonly Header[]> = fc.array(
  fc.oneof(
    fc.constantFrom(...COMMON),
    fc.record({
      name: fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/).filter((name) => !RESERVED.test(name)),
      value: fc.string({ unit: valueUnitArb, maxLength: 300 }),
    }),
  ),
  { maxLength: 4 },
);
