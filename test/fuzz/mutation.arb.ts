import fc from 'fast-check';
import { badIdLiteralArb } from './int64.arb.js';
import { invalidTextArb } from './text.arb.js';

// The one way a POST /plants body is broken (or padded, or not at all): each earns a 400 from the
// contract, or a 413 by its size.

const BAD_UTF8 = [
  [0xff],
  [0xfe],
  [0x80],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80], // a lone surrogate in CESU-8
  [0xed, 0xbf, 0xbf],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x8c],
  [0xf4, 0x90, 0x80, 0x80], // beyond U+10FFFF
  [0xf5, 0x80, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
];

const wrongTypeArb = fc.constantFrom('1', '-0', '1e400', 'true', 'false', '[]', '{}', '["fern"]', '{"a":1}');
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];
const OTHER_KEYS = ['owner', 'ID', 'Id', 'id ', ' id', 'Name', 'tags', '', 'id\u0000', '\ud800', 'имя'];
const POLLUTION = '{"polluted":true,"admin":true}';

export type Mutation =
  | { readonly kind: 'none' }
  | { readonly kind: 'bad-id'; readonly literal: string }
  | { readonly kind: 'missing'; readonly key: 'id' | 'name' }
  | { readonly kind: 'bad-name' | 'bad-tag'; readonly literal: string }
  | { readonly kind: 'extra-key'; readonly key: string; readonly literal: string; readonly at: number }
  | { readonly kind: 'duplicate'; readonly key: 'id' | 'name' | 'tag'; readonly same: boolean }
  | { readonly kind: 'not-object'; readonly shape: string }
  | { readonly kind: 'trailing'; readonly garbage: string }
  | { readonly kind: 'truncate'; readonly at: number }
  | {
      readonly kind: 'deep';
      readonly depth: number;
      readonly arrays: boolean;
      readonly where: 'body' | 'tag' | 'extra';
    }
  | { readonly kind: 'bad-space'; readonly ws: string }
  | { readonly kind: 'in-name'; readonly bytes: readonly number[]; readonly at: number }
  | { readonly kind: 'pad'; readonly size: number; readonly atStart: boolean }
  | { readonly kind: 'huge-name'; readonly length: number };

export const mutationArb = (limit: number): fc.Arbitrary<Mutation> =>
  fc.oneof(
    { weight: 14, arbitrary: fc.constant({ kind: 'none' as const }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('bad-id' as const), literal: badIdLiteralArb }) },
    fc.record({ kind: fc.constant('missing' as const), key: fc.constantFrom('id' as const, 'name' as const) }),
    fc.record({
      kind: fc.constantFrom('bad-name' as const, 'bad-tag' as const),
      literal: fc.oneof(
        invalidTextArb(200).map((text) => JSON.stringify(text)),
        wrongTypeArb,
      ),
    }),
    fc.record({ kind: fc.constant('bad-tag' as const), literal: invalidTextArb(100).map((t) => JSON.stringify(t)) }),
    fc.record({
      kind: fc.constant('extra-key' as const),
      key: fc.oneof(fc.constantFrom(...PROTO_KEYS), fc.constantFrom(...OTHER_KEYS), fc.string({ minLength: 1 })),
      literal: fc.oneof(fc.constant(POLLUTION), wrongTypeArb, fc.constant('null')),
      at: fc.nat(3),
    }),
    fc.record({
      kind: fc.constant('duplicate' as const),
      key: fc.constantFrom('id' as const, 'name' as const, 'tag' as const),
      same: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant('not-object' as const),
      shape: fc.constantFrom('array', 'string', 'id', 'null', 'true', '[]', '""', '0', '[{}]'),
    }),
    fc.record({
      kind: fc.constant('trailing' as const),
      garbage: fc.constantFrom('x', '}', ']', ',', '{}', '0', '"', 'null', '\u0000', '//', '/**/', '\u00a0', '\ufeff'),
    }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
    fc.record({
      kind: fc.constant('deep' as const),
      depth: fc.oneof(fc.constantFrom(64, 65, 66), fc.integer({ min: 65, max: 9000 })),
      arrays: fc.boolean(),
      where: fc.constantFrom('body' as const, 'tag' as const, 'extra' as const),
    }),
    fc.record({
      kind: fc.constant('bad-space' as const),
      ws: fc.constantFrom('\u00a0', '\f', '\v', '\u2028', '\u3000', '\u0085', '\ufeff'),
    }),
    fc.record({
      kind: fc.constant('in-name' as const),
      bytes: fc.oneof(
        fc.constantFrom(...BAD_UTF8), // invalid UTF-8
        fc.integer({ min: 0, max: 0x1f }).map((c) => [c]), // a raw control character: not JSON
        // Escapes JSON does not have, whatever follows them.
        fc.constantFrom(...['\\x41', '\\uZZZZ', '\\u12G4', '\\U0041', '\\u{41}', '\\a', '\\0', "\\'"].map(asBytes)),
      ),
      at: fc.nat(),
    }),
    fc.record({
      kind: fc.constant('pad' as const),
      size: fc.oneof(
        fc.constantFrom(limit - 1, limit, limit + 1),
        fc.integer({ min: limit - 64, max: limit + 64 }),
        fc.integer({ min: limit + 1, max: limit * 3 }),
      ),
      atStart: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant('huge-name' as const),
      length: fc.oneof(fc.integer({ min: 201, max: limit }), fc.integer({ min: limit, max: limit * 3 })),
    }),
  );

function asBytes(text: string): number[] {
  return [...Buffer.from(text, 'latin1')];
}
