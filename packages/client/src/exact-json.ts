/**
 * JSON.parse, except that every integer becomes a `bigint`, exactly: event ids and plant ids are
 * int64, and JSON.parse rounds those beyond 2^53 (Node 20 has no reviver that sees the source
 * text). Strings are handed to JSON.parse one by one, so escapes mean what they mean there.
 * Numbers with a fraction or an exponent stay `number`. Throws a SyntaxError on anything that is
 * not JSON.
 */
export function parseExactJson(text: string): unknown {
  let i = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at position ${i} of the JSON text`);
  };
  const space = (): void => {
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = text.charCodeAt(++i));
  };
  const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
  const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

  function value(): unknown {
    space();
    const c = text[i];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    for (const [word, meaning] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return meaning;
      }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (m === null) return fail('unexpected character');
    i += m[0].length;
    return m[1] === undefined && m[2] === undefined ? BigInt(m[0]) : Number(m[0]);
  }

  function string(): string {
    STRING.lastIndex = i;
    const m = STRING.exec(text);
    if (m === null) return fail('bad string');
    i += m[0].length;
    return JSON.parse(m[0]) as string;
  }

  function object(): Record<string, unknown> {
    // A null prototype: a "__proto__" key is a key like any other, never the object's prototype.
    const out = Object.create(null) as Record<string, unknown>;
    i++;
    space();
    if (text[i] === '}') {
      i++;
      return out;
    }
    for (;;) {
      space();
      if (text[i] !== '"') fail('expected a key');
      const key = string();
      space();
      if (text[i++] !== ':') fail('expected ":"');
      out[key] = value();
      space();
      const next = text[i++];
      if (next === '}') return out;
      if (next !== ',') fail('expected "," or "}"');
    }
  }

  function array(): unknown[] {
    const out: unknown[] = [];
    i++;
    space();
    if (text[i] === ']') {
      i++;
      return out;
    }
    for (;;) {
      out.push(value());
      space();
      const next = text[i++];
      if (next === ']') return out;
      if (next !== ',') fail('expected "," or "]"');
    }
  }

  const result = value();
  space();
  if (i !== text.length) fail('unexpected text after the value');
  return result;
}
