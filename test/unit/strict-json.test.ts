import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JsonSyntaxError, parseStrictJson } from '../../src/http/strict-json.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function rejects(text: string, why: string): void {
  assert.throws(
    () => parseStrictJson(text),
    (error: unknown) => error instanceof JsonSyntaxError && error.message.length > 0,
    `${why}: ${JSON.stringify(text)}`,
  );
}

describe('parseStrictJson: integers', () => {
  test('returns integers as exact bigints, including those beyond 2^53', () => {
    assert.equal(parseStrictJson('0'), 0n);
    assert.equal(parseStrictJson('42'), 42n);
    assert.equal(parseStrictJson('-7'), -7n);
    assert.equal(parseStrictJson('9007199254740992'), 9007199254740992n);
    assert.equal(parseStrictJson('9007199254740993'), 9007199254740993n);
    assert.notEqual(parseStrictJson('9007199254740993'), parseStrictJson('9007199254740992'));
  });

  test('returns the int64 edges exactly', () => {
    assert.equal(parseStrictJson('-9223372036854775808'), INT64_MIN);
    assert.equal(parseStrictJson('9223372036854775807'), INT64_MAX);
    assert.equal(parseStrictJson('-9223372036854775807'), INT64_MIN + 1n);
    assert.equal(parseStrictJson('9223372036854775806'), INT64_MAX - 1n);
  });

  test('leaves the int64 range check to the schema: one past each edge is still exact', () => {
    assert.equal(parseStrictJson('9223372036854775808'), INT64_MAX + 1n);
    assert.equal(parseStrictJson('-9223372036854775809'), INT64_MIN - 1n);
  });

  test('reads integers written with a fraction or an exponent as the same bigint', () => {
    assert.equal(parseStrictJson('1.0'), 1n);
    assert.equal(parseStrictJson('1.000'), 1n);
    assert.equal(parseStrictJson('1e3'), 1000n);
    assert.equal(parseStrictJson('1E3'), 1000n);
    assert.equal(parseStrictJson('1e+3'), 1000n);
    assert.equal(parseStrictJson('100e-2'), 1n);
    assert.equal(parseStrictJson('1.5e1'), 15n);
    assert.equal(parseStrictJson('-2.50e2'), -250n);
    assert.equal(parseStrictJson('9.007199254740993e15'), 9007199254740993n);
    assert.equal(parseStrictJson('9223372036854775807.0'), INT64_MAX);
  });

  test('reads every zero, negative or written with an exponent, as 0n', () => {
    assert.equal(parseStrictJson('-0'), 0n);
    assert.equal(parseStrictJson('-0.0'), 0n);
    assert.equal(parseStrictJson('0.000'), 0n);
    assert.equal(parseStrictJson('0e5'), 0n);
    assert.equal(parseStrictJson('0E-5'), 0n);
  });

  test('returns numbers with a fractional part as JS numbers', () => {
    assert.equal(parseStrictJson('0.5'), 0.5);
    assert.equal(parseStrictJson('-1.25'), -1.25);
    assert.equal(parseStrictJson('1e-1'), 0.1);
    assert.equal(parseStrictJson('12.5e-1'), 1.25);
    assert.equal(parseStrictJson('10.50'), 10.5);
    assert.equal(typeof parseStrictJson('3.14'), 'number');
  });

  test('answers huge and tiny exponents at once, never as an int64-sized bigint', { timeout: 5000 }, () => {
    for (const text of ['1e999999999', '-1e999999999', '1E+999999999', '9.5e999999999']) {
      const value = parseStrictJson(text);
      assert.equal(typeof value, 'number', text);
      assert.ok(!Number.isFinite(value), text);
    }
    assert.equal(parseStrictJson('1e-999999999'), 0);
    assert.equal(typeof parseStrictJson('1e-999999999'), 'number');
    const object = parseStrictJson('{"id":1e999999999}') as Record<string, unknown>;
    assert.equal(object.id, Infinity);
  });
});

describe('parseStrictJson: values', () => {
  test('reads literals, strings, arrays and nested objects', () => {
    assert.equal(parseStrictJson('true'), true);
    assert.equal(parseStrictJson('false'), false);
    assert.equal(parseStrictJson('null'), null);
    assert.equal(parseStrictJson('"fern"'), 'fern');
    assert.deepEqual(parseStrictJson('[]'), []);
    assert.deepEqual(parseStrictJson('[1, 0.5, "a", null, [true]]'), [1n, 0.5, 'a', null, [true]]);
    const object = parseStrictJson(' \t\r\n{ "id" : 1 , "name" : "fern", "tags": {"a": []} } \n');
    assert.deepEqual(
      { ...(object as object) },
      { id: 1n, name: 'fern', tags: Object.assign(Object.create(null) as object, { a: [] }) },
    );
  });

  test('decodes every escape, surrogate pairs included', () => {
    assert.equal(parseStrictJson(String.raw`"\" \\ \/ \b \f \n \r \t"`), '" \\ / \b \f \n \r \t');
    assert.equal(parseStrictJson(String.raw`"\u00e9\u00E9"`), 'éé');
    assert.equal(parseStrictJson(String.raw`"\ud83c\udf31"`), '🌱');
    assert.equal(parseStrictJson('"🌱 é \u2028"'), '🌱 é \u2028');
    assert.equal(parseStrictJson(String.raw`"\u0000"`), '\u0000');
  });

  test('builds objects without a prototype, at every depth', () => {
    const object = parseStrictJson('{"a":{"b":[{"c":1}]}}') as Record<string, Record<string, Array<object>>>;
    assert.equal(Object.getPrototypeOf(object), null);
    assert.equal(Object.getPrototypeOf(object.a), null);
    assert.equal(Object.getPrototypeOf(object.a!.b![0]), null);
    assert.ok(Array.isArray(object.a!.b));
  });

  test('keeps "__proto__" as an ordinary own key and pollutes nothing', () => {
    const object = parseStrictJson(
      '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}',
    ) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(object), null);
    assert.ok(Object.hasOwn(object, '__proto__'));
    assert.ok(Object.hasOwn(object, 'constructor'));
    assert.deepEqual(Object.keys(object), ['__proto__', 'constructor']);
    assert.equal((object.__proto__ as Record<string, unknown>).polluted, true);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
  });

  test('accepts nesting 64 deep', () => {
    assert.deepEqual(parseStrictJson('['.repeat(64) + ']'.repeat(64)), JSON.parse('['.repeat(64) + ']'.repeat(64)));
    const objects = '{"a":'.repeat(63) + '{}' + '}'.repeat(63);
    assert.equal(typeof parseStrictJson(objects), 'object');
  });

  test('rejects nesting deeper than 64, and very deep input without a stack overflow', () => {
    rejects('['.repeat(65) + ']'.repeat(65), '65 arrays');
    rejects('{"a":'.repeat(64) + '{}' + '}'.repeat(64), '65 objects');
    rejects('[{"a":'.repeat(33) + '1' + '}]'.repeat(33), '66 mixed');
    rejects('['.repeat(100_000) + ']'.repeat(100_000), '100000 arrays');
  });
});

describe('parseStrictJson: duplicate keys', () => {
  test('rejects a duplicate key, even when both values are equal', () => {
    rejects('{"a":1,"a":2}', 'different values');
    rejects('{"a":1,"a":1}', 'equal values');
    rejects('{"id":1,"name":"x","id":1}', 'non-adjacent');
    rejects('{"x":{"a":null,"a":null}}', 'nested');
    rejects('[{"a":1},{"b":1,"b":1}]', 'inside an array');
    rejects('{"__proto__":1,"__proto__":1}', '__proto__ twice');
  });

  test('compares keys after decoding escapes', () => {
    rejects(String.raw`{"a":1,"\u0061":1}`, 'an escaped duplicate');
  });

  test('accepts equal keys in different objects', () => {
    assert.deepEqual({ ...(parseStrictJson('[{"a":1},{"a":1}]') as object[])[1] }, { a: 1n });
  });
});

describe('parseStrictJson: malformed input', () => {
  const cases: Array<[string, string]> = [
    ['', 'empty input'],
    ['   ', 'only whitespace'],
    ['\uFEFF{}', 'a byte order mark'],
    ['{"a":1,}', 'a trailing comma in an object'],
    ['[1,]', 'a trailing comma in an array'],
    ['[,1]', 'a leading comma'],
    ["{'a':1}", 'single-quoted keys'],
    ["'a'", 'a single-quoted string'],
    ['{a:1}', 'an unquoted key'],
    ['{"a" 1}', 'a missing colon'],
    ['{"a":1 "b":2}', 'a missing comma'],
    ['[1 2]', 'a missing comma in an array'],
    ['NaN', 'NaN'],
    ['Infinity', 'Infinity'],
    ['-Infinity', '-Infinity'],
    ['undefined', 'undefined'],
    ['01', 'a leading zero'],
    ['-01', 'a negative leading zero'],
    ['00', 'a double zero'],
    ['+1', 'a plus sign'],
    ['.5', 'no integer part'],
    ['1.', 'no fraction digits'],
    ['1e', 'no exponent digits'],
    ['1e+', 'a bare exponent sign'],
    ['-', 'a bare minus'],
    ['- 1', 'a minus apart from its digits'],
    ['0x10', 'hexadecimal'],
    ['"a\u0001b"', 'a bare control character in a string'],
    ['"a\tb"', 'a bare tab in a string'],
    ['"a\nb"', 'a bare newline in a string'],
    ['"\u001f"', 'a bare U+001F in a string'],
    [String.raw`"\x41"`, 'a \\x escape'],
    [String.raw`"\'"`, 'an escaped single quote'],
    [String.raw`"\u12"`, 'a short \\u escape'],
    [String.raw`"\u12G4"`, 'a \\u escape with a non-hex digit'],
    [String.raw`"\U0041"`, 'an upper-case \\U escape'],
    ['"abc', 'an unterminated string'],
    ['"', 'a lone quote'],
    [String.raw`"abc\"`, 'a string ended by an escaped quote'],
    ['{"a":1} x', 'trailing garbage'],
    ['{}{}', 'two values'],
    ['1 2', 'two numbers'],
    ['truex', 'a literal followed by letters'],
    ['tru', 'a truncated literal'],
    ['True', 'a capitalised literal'],
    ['nul', 'a truncated null'],
    ['[', 'an unterminated array'],
    ['{', 'an unterminated object'],
    ['{"a":', 'a missing value'],
    ['{"a"}', 'a key without a value'],
    ['// c\n1', 'a line comment'],
    ['/* c */ 1', 'a block comment'],
    ['\u00a01', 'a non-breaking space as whitespace'],
    ['\v1', 'a vertical tab as whitespace'],
    ['\f1', 'a form feed as whitespace'],
  ];
  for (const [text, why] of cases) {
    test(`rejects ${why} with JsonSyntaxError`, () => rejects(text, why));
  }
});
