import fc from 'fast-check';

// Ids: the int64 edges, a small pool that makes creates, retries, conflicts and deletes meet, and
// the whole range; and every way of writing one that must, or must not, be taken as that id.

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

export const EDGE_IDS: readonly bigint[] = [
  INT64_MIN,
  INT64_MIN + 1n,
  -(2n ** 53n) - 1n,
  -(2n ** 53n),
  -1n,
  0n,
  1n,
  2n ** 31n - 1n,
  2n ** 31n,
  2n ** 32n,
  2n ** 53n - 1n,
  2n ** 53n, // 9007199254740992 and 9007199254740993 are two different plants
  2n ** 53n + 1n,
  INT64_MAX - 1n,
  INT64_MAX,
];

export const idArb: fc.Arbitrary<bigint> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...EDGE_IDS) },
  { weight: 3, arbitrary: fc.bigInt({ min: -25n, max: 25n }) },
  { weight: 4, arbitrary: fc.bigInt({ min: INT64_MIN, max: INT64_MAX }) },
);

export const outOfRangeArb: fc.Arbitrary<bigint> = fc.oneof(
  fc.constantFrom(INT64_MAX + 1n, INT64_MAX + 2n, INT64_MIN - 1n, INT64_MIN - 2n, 2n ** 64n, -(2n ** 64n), 10n ** 40n),
  fc.bigInt({ min: INT64_MAX + 1n, max: 2n ** 200n }),
  fc.bigInt({ min: -(2n ** 200n), max: INT64_MIN - 1n }),
);

/** Notations of one integer that JSON Schema, and so the contract, takes as that integer. */
export const NOTATIONS = ['plain', 'dot-zero', 'exponent-zero', 'scientific', 'shifted'] as const;
export type Notation = (typeof NOTATIONS)[number];

export function writeId(id: bigint, notation: Notation): string {
  if (id === 0n)
    return { plain: '0', 'dot-zero': '-0.0', 'exponent-zero': '-0', scientific: '0e400', shifted: '0.00e-2' }[notation];
  const sign = id < 0n ? '-' : '';
  const digits = (id < 0n ? -id : id).toString();
  switch (notation) {
    case 'plain':
      return `${id}`;
    case 'dot-zero':
      return `${id}.000`;
    case 'exponent-zero':
      return `${id}E+0`;
    case 'scientific':
      return digits.length === 1 ? `${id}e0` : `${sign}${digits[0]}.${digits.slice(1)}e${digits.length - 1}`;
    case 'shifted':
      return `${id}00e-2`;
  }
}

/** An id a body must refuse: out of range, fractional, a string, not a number, not JSON at all. */
export const badIdLiteralArb: fc.Arbitrary<string> = fc.oneof(
  outOfRangeArb.map(String),
  outOfRangeArb.map((n) => writeId(n, 'scientific')),
  idArb.filter((n) => n % 10n !== 0n).map((n) => `${n}e-1`),
  idArb.map((n) => `${n}.5`),
  idArb.map((n) => JSON.stringify(String(n))),
  fc.integer({ min: 20, max: 6000 }).map((n) => '9'.repeat(n)),
  fc.constantFrom(
    '1e400',
    '-1e400',
    '1e-400',
    '1.5',
    '-0.5',
    '9223372036854775807.5',
    '9.223372036854775808e18',
    '-9.223372036854775809e18',
    '"123"',
    'true',
    'null',
    '[]',
    '{}',
    '[1]',
    '{"id":1}',
    'NaN',
    'Infinity',
    '-Infinity',
    '0x1F',
    '+1',
    '01',
    '-01',
    '.5',
    '1.',
    '--1',
    '1e',
    '1e+',
    '- 1',
    '\u0661',
  ),
);
