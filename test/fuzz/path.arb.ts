import fc from 'fast-check';
import { idArb, outOfRangeArb } from './int64.arb.js';

// The {id} of DELETE /plants/{id}: decimal int64 in the path; anything else → 400
// (docs/api.md#delete-a-plant, docs/api.md#int64-ids).

export interface PathIdCase {
  /** The path segment as sent (ASCII: percent-encoded where needed). */
  readonly segment: string;
  /** The id a valid segment names; undefined when it earns a 400. */
  readonly id: bigint | undefined;
  /** Not a URL at all (broken percent-encoding): a 400 even before authentication. */
  readonly malformed: boolean;
}

const encodeAll = (text: string): string =>
  [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

const validArb: fc.Arbitrary<PathIdCase> = fc
  .tuple(idArb, fc.constantFrom('plain', 'plain', 'plain', 'zeros', 'encoded'), fc.integer({ min: 1, max: 3 }))
  .map(([id, form, zeros]) => {
    const digits = (id < 0n ? -id : id).toString();
    const sign = id < 0n ? '-' : '';
    const segment =
      form === 'plain' ? `${id}` : form === 'zeros' ? `${sign}${'0'.repeat(zeros)}${digits}` : encodeAll(`${id}`);
    return { segment, id, malformed: false };
  });

const INVALID = [
  '+5',
  '%2B5',
  '5.0',
  '1e3',
  '0x10',
  '%205',
  '5%20',
  '%09',
  'abc',
  '%D9%A1', // ARABIC-INDIC DIGIT ONE
  '%EF%BC%91', // FULLWIDTH DIGIT ONE
  '%F0%9D%9F%8F', // MATHEMATICAL BOLD DIGIT ONE
  '1%2F2',
  '1,2',
  '1;2',
  '--1',
  '-',
  '1%00',
  'null',
  '%E2%88%921', // MINUS SIGN, then 1
  '-%30x',
  '9223372036854775807.0',
];

const invalidArb: fc.Arbitrary<PathIdCase> = fc
  .oneof(
    fc.constantFrom(...INVALID),
    outOfRangeArb.map(String),
    fc.integer({ min: 41, max: 3000 }).map((n) => '1'.repeat(n)),
    fc.integer({ min: 20, max: 60 }).map((n) => `-${'0'.repeat(n)}9223372036854775809`),
  )
  .map((segment) => ({ segment, id: undefined, malformed: false }));

const malformedArb: fc.Arbitrary<PathIdCase> = fc
  .constantFrom('%', '5%', '%zz', '%1', '%ED%A0%80', '%C0%80', '%FF', '%F4%90%80%80', '1%E2%82')
  .map((segment) => ({ segment, id: undefined, malformed: true }));

export const pathIdArb: fc.Arbitrary<PathIdCase> = fc.oneof(
  { weight: 8, arbitrary: validArb },
  { weight: 3, arbitrary: invalidArb },
  { weight: 1, arbitrary: malformedArb },
);
