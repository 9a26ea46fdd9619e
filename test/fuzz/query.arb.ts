import fc from 'fast-check';
import { encodeCursor } from '../../src/plants/cursor.js';
import { INT64_MAX, INT64_MIN, idArb, outOfRangeArb } from './int64.arb.js';
import { invalidTextArb, tagArb } from './text.arb.js';

// GET /plants query strings: limit, cursor and tag, each valid or not, repeated, percent-encoded,
// among parameters the service must ignore.

export interface QueryCase {
  /** The query string as sent, without the `?`. */
  readonly query: string;
  /** What a valid query asks for; undefined when the query earns a 400. */
  readonly ask:
    { readonly limit: number; readonly after: bigint | undefined; readonly tag: string | undefined } | undefined;
}

type Param = { readonly text: string; readonly valid: boolean; readonly value?: unknown };

/** Percent-encodes every byte of a text (what a careful client may do even for digits). */
const encodeAll = (text: string): string =>
  [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('');

const limitArb: fc.Arbitrary<Param> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .oneof(fc.integer({ min: 1, max: 12 }), fc.constantFrom(1, 999, 1000))
      .map((n) => ({ text: String(n), valid: true, value: n })),
  },
  fc.integer({ min: 1, max: 1000 }).map((n) => ({ text: `0${n}`, valid: true, value: n })),
  fc.integer({ min: 1, max: 1000 }).map((n) => ({ text: encodeAll(String(n)), valid: true, value: n })),
  fc
    .oneof(
      fc.constantFrom('0', '-1', '-0', '1001', '1.5', '1.0', '1e2', '', ' 5', '5 ', '+5', '0x10', 'abc', '%00', 'NaN'),
      fc.constantFrom('2147483648', '9007199254740993', '9223372036854775807', '99999999999999999999', '١'),
      fc.integer({ min: 1001, max: 2 ** 31 }).map(String),
      fc.integer({ min: -(2 ** 31), max: 0 }).map(String),
    )
    .map((text) => ({ text: encodeURIComponent(text), valid: false })),
);

const CURSOR_GARBAGE = ['', 'abc', 'cDE6', 'p1:5', '=', 'x'.repeat(65), '%zz', '%00', '🌱'];

const cursorArb: fc.Arbitrary<Param> = fc.oneof(
  { weight: 3, arbitrary: idArb.map((id) => ({ text: encodeCursor(id), valid: true, value: id })) },
  fc.constantFrom(INT64_MIN, INT64_MAX).map((id) => ({ text: encodeCursor(id), valid: true, value: id })),
  fc
    .oneof(
      fc.constantFrom(...CURSOR_GARBAGE).map(encodeURIComponent),
      outOfRangeArb.map((n) => Buffer.from(`p1:${n}`).toString('base64url')),
      idArb.map((n) => Buffer.from(`p1:0${n}`).toString('base64url')),
      idArb // the standard alphabet, padded: not the cursor the service issues
        .map((n) => [Buffer.from(`p1:${n}`).toString('base64'), encodeCursor(n)])
        .filter(([base64, cursor]) => base64 !== cursor)
        .map(([base64]) => encodeURIComponent(base64!)),
      idArb.map((n) => Buffer.from(`p2:${n}`).toString('base64url')),
      idArb.map((n) => `${encodeCursor(n)}A`),
      fc.string({ minLength: 1, maxLength: 80 }).map((s) => encodeURIComponent(s.toWellFormed())),
    )
    .map((text) => ({ text, valid: false })),
);

const tagParamArb: fc.Arbitrary<Param> = fc.oneof(
  { weight: 3, arbitrary: tagArb.map((tag) => ({ text: encodeURIComponent(tag), valid: true, value: tag })) },
  tagArb.map((tag) => ({ text: encodeAll(tag), valid: true, value: tag })),
  invalidTextArb(100)
    .filter((tag) => tag.isWellFormed()) // a lone surrogate has no UTF-8 form; see the malformed-encoding test
    .map((tag) => ({ text: encodeURIComponent(tag), valid: false })),
);

/** Parameters the service ignores, among them names that would be dangerous as plain object keys. */
const ignoredArb: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(
      '__proto__',
      'constructor',
      'prototype',
      'hasOwnProperty',
      'toString',
      'LIMIT',
      'Tag',
      'limit[]',
      'x',
    ),
    fc.oneof(
      fc.constant(undefined),
      fc.string({ maxLength: 20 }).map((s) => encodeURIComponent(s.toWellFormed())),
    ),
  )
  .map(([name, value]) => (value === undefined ? name : `${name}=${value}`));

const maybe = <T>(arb: fc.Arbitrary<T>, absent: number, present = 1): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: absent, arbitrary: fc.constant(null) }, { weight: present, arbitrary: arb });

export const queryArb: fc.Arbitrary<QueryCase> = fc
  .record({
    limit: maybe(limitArb, 1),
    cursor: maybe(cursorArb, 2),
    tag: maybe(tagParamArb, 2),
    repeat: maybe(fc.constantFrom('limit' as const, 'cursor' as const, 'tag' as const), 12),
    ignored: fc.array(ignoredArb, { maxLength: 3 }),
    order: fc.nat(),
    empties: fc.constantFrom('', '&', '&&'),
  })
  .map(({ limit, cursor, tag, repeat, ignored, order, empties }): QueryCase => {
    const given = { limit, cursor, tag };
    const parts = [...ignored];
    for (const key of ['limit', 'cursor', 'tag'] as const) {
      const text = given[key]?.text;
      const times = (text === undefined ? 0 : 1) + (repeat === key ? (text === undefined ? 2 : 1) : 0);
      for (let i = 0; i < times; i++) parts.push(`${key}=${text ?? 'x'}`);
    }
    const rotated = parts.map((_, i) => parts[(i + order) % parts.length]!);
    const query = empties + rotated.join(empties === '' ? '&' : empties);
    const valid = repeat === null && [limit, cursor, tag].every((p) => p === null || p.valid);
    if (!valid) return { query, ask: undefined };
    return {
      query,
      ask: {
        limit: (limit?.value as number | undefined) ?? 100,
        after: cursor?.value as bigint | undefined,
        tag: tag?.value as string | undefined,
      },
    };
  });
