/**
 * A strict RFC 8259 reader for request bodies. JSON.parse cannot serve: it rounds integers above
 * 2^53 and silently keeps the last of duplicate keys; lossless-json accepts duplicates whose
 * values are equal. This reader:
 *  - returns every number that is an exact integer as a bigint (1, 1.0 and 1e0 are the same
 *    integer, as in JSON Schema), and any other number as a JS number;
 *  - rejects duplicate keys, nesting deeper than MAX_DEPTH, and anything outside the grammar;
 *  - builds objects without a prototype, so "__proto__" is only ever an ordinary key.
 */

export class JsonSyntaxError extends Error {
  override name = 'JsonSyntaxError';

  constructor(message: string) {
    // An answer about the input, not a bug: no stack trace to capture (most of the cost of
    // refusing a line of junk in an import, or a malformed body).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };

const MAX_DEPTH = 64;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?(?:[eE]([+-]?[0-9]+))?/y;
const PLAIN_STRING = /[^"\\\u0000-\u001f]*/y;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** An integer literal (in any JSON notation) as a bigint; a fraction or an absurd magnitude as a number. */
function toNumber(literal: string, fraction: string | undefined, exponent: string | undefined): number | bigint {
  if (fraction === undefined && exponent === undefined) return BigInt(literal);
  const mantissa = literal.replace(/[eE].*$/, '');
  const negative = mantissa.startsWith('-');
  const [whole = '', frac = ''] = mantissa.replace('-', '').split('.');
  let digits = (whole + frac).replace(/^0+(?=.)/, '');
  let scale = Number(exponent ?? 0) - frac.length;
  while (scale < 0 && digits.endsWith('0') && digits.length > 1) {
    digits = digits.slice(0, -1);
    scale += 1;
  }
  if (digits === '0') return 0n;
  // Beyond 40 digits no int64 is possible; the number keeps the magnitude for the error message.
  if (scale < 0 || digits.length + scale > 40) return Number(literal);
  const value = BigInt(digits + '0'.repeat(scale));
  return negative ? -value : value;
}

export function parseStrictJson(text: string): JsonValue {
  let pos = 0;

  function fail(what: string): never {
    throw new JsonSyntaxError(`${what} at position ${pos}`);
  }
  const skipSpace = (): void => {
    for (let c = text.charCodeAt(pos); c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(++pos));
  };

  function readString(): string {
    pos += 1; // opening quote
    let out = '';
    for (;;) {
      PLAIN_STRING.lastIndex = pos;
      PLAIN_STRING.test(text);
      out += text.slice(pos, PLAIN_STRING.lastIndex);
      pos = PLAIN_STRING.lastIndex;
      const c = text[pos];
      if (c === '"') {
        pos += 1;
        return out;
      }
      if (c !== '\\') fail(c === undefined ? 'unterminated string' : 'control character in string');
      const e = text[pos + 1] ?? '';
      if (e === 'u') {
        const hex = text.slice(pos + 2, pos + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('invalid \\u escape');
        out += String.fromCharCode(parseInt(hex, 16));
        pos += 6;
      } else {
        const decoded = ESCAPES[e];
        if (decoded === undefined) fail('invalid escape');
        out += decoded;
        pos += 2;
      }
    }
  }

  function readValue(depth: number): JsonValue {
    skipSpace();
    const c = text[pos];
    if (c === '{' || c === '[') {
      if (depth >= MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
      return c === '{' ? readObject(depth + 1) : readArray(depth + 1);
    }
    if (c === '"') return readString();
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(word, pos)) {
        pos += word.length;
        return value;
      }
    }
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m) return fail(c === undefined ? 'unexpected end of input' : 'unexpected character');
    pos = NUMBER.lastIndex;
    return toNumber(m[0], m[1], m[2]);
  }

  function readObject(depth: number): JsonValue {
    const object = Object.create(null) as Record<string, JsonValue>;
    pos += 1;
    skipSpace();
    if (text[pos] === '}') {
      pos += 1;
      return object;
    }
    for (;;) {
      skipSpace();
      if (text[pos] !== '"') fail('expected a property name');
      const key = readString();
      if (Object.hasOwn(object, key)) fail(`duplicate key "${key}"`);
      skipSpace();
      if (text[pos] !== ':') fail('expected ":"');
      pos += 1;
      object[key] = readValue(depth);
      skipSpace();
      const next = text[pos++];
      if (next === '}') return object;
      if (next !== ',') fail('expected "," or "}"');
    }
  }

  function readArray(depth: number): JsonValue {
    const array: JsonValue[] = [];
    pos += 1;
    skipSpace();
    if (text[pos] === ']') {
      pos += 1;
      return array;
    }
    for (;;) {
      array.push(readValue(depth));
      skipSpace();
      const next = text[pos++];
      if (next === ']') return array;
      if (next !== ',') fail('expected "," or "]"');
    }
  }

  const value = readValue(0);
  skipSpace();
  if (pos < text.length) fail('unexpected text after the JSON value');
  return value;
}
