import fc from 'fast-check';

// Names and tags: 1 to max Unicode code points, no U+0000–U+001F, no U+007F, no lone surrogates
// (docs/api.md#shapes). Valid text leans on the edges the rule is about; invalid text breaks
// exactly one.

const codePointArb: fc.Arbitrary<string> = fc
  .oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
    { weight: 2, arbitrary: fc.integer({ min: 0x80, max: 0xd7ff }) }, // C1 controls are allowed
    { weight: 1, arbitrary: fc.integer({ min: 0xe000, max: 0xffff }) },
    { weight: 2, arbitrary: fc.integer({ min: 0x10000, max: 0x10ffff }) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        0x80,
        0x85,
        0x9f,
        0xa0,
        0x301,
        0x200b,
        0x200d,
        0x202e,
        0x2028,
        0x2029,
        0xfeff,
        0xfffd,
        0xfffe,
        0xffff,
        0x10000,
        0x1f331,
        0x10ffff,
      ),
    },
  )
  .map((cp) => String.fromCodePoint(cp));

const textOf = (min: number, max: number): fc.Arbitrary<string> =>
  fc.array(codePointArb, { minLength: min, maxLength: max }).map((cps) => cps.join(''));

export const validTextArb = (max: number): fc.Arbitrary<string> =>
  fc.oneof({ weight: 4, arbitrary: textOf(1, 12) }, { weight: 1, arbitrary: textOf(1, max) }, textOf(max - 1, max));

/**
 * Tags that several plants share, so that the tag filter finds something: among them tags that an
 * inexact match would confuse (LIKE wildcards, case, trailing space, Unicode normalization).
 */
export const TAG_POOL: readonly string[] = [
  'fern',
  'Fern',
  'fern ',
  '\u00e9',
  'e\u0301',
  '%',
  '_',
  'a_b',
  '\u00df',
  'SS',
  '🌱',
  'a b',
  'a+b',
  '%zz',
  '&=?#/',
  '\u202e',
  '\ufeff',
];

export const tagArb: fc.Arbitrary<string> = fc.oneof(fc.constantFrom(...TAG_POOL), validTextArb(100));

const forbiddenArb: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)),
  fc.constant('\u007f'),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)), // a lone surrogate
  fc.constant('\udc00\ud800'), // a reversed pair
);

/** Text the contract refuses: empty, one code point too many (or more), or one forbidden unit. */
export const invalidTextArb = (max: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constant(''),
    textOf(max + 1, max + 1),
    textOf(max + 2, max + 40),
    fc.tuple(textOf(0, Math.min(max - 1, 30)), forbiddenArb, fc.nat()).map(([text, bad, at]) => {
      const cps = [...text];
      cps.splice(at % (cps.length + 1), 0, bad);
      return cps.join('');
    }),
  );

/** Ways of writing a string in JSON that all mean the same string (lone surrogates as escapes). */
export const STRING_STYLES = ['json', 'escape-all', 'escape-non-ascii'] as const;
export type StringStyle = (typeof STRING_STYLES)[number];

const u = (unit: number, upper: boolean): string => {
  const hex = unit.toString(16).padStart(4, '0');
  return `\\u${upper ? hex.toUpperCase() : hex}`;
};

export function writeString(text: string, style: StringStyle): string {
  if (style === 'json') return JSON.stringify(text);
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (style === 'escape-all') out += u(unit, i % 2 === 0);
    else if (unit > 0x7e || unit < 0x20) out += u(unit, false);
    else out += text[i] === '/' ? '\\/' : JSON.stringify(text[i]).slice(1, -1);
  }
  return `${out}"`;
}
