import { type TestContext, after, before, describe, test } from 'node:test';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import {
  INT64_MAX,
  INT64_MIN,
  TWO_POW_53,
  TWO_POW_53_PLUS_1,
  assertError,
  assertNoContent,
  assertOk,
  create,
  list,
  plantBody,
  remove,
} from './plant.helpers.js';

async function appWithUser(t: TestContext, subject = 'alice'): Promise<{ h: TestApp; token: string }> {
  const h = await makeApp();
  t.after(() => h.close());
  return { h, token: await h.token(subject, READ_WRITE) };
}

describe('POST /plants creates a plant', () => {
  test('POST /plants answers 200 with {name} only when the body has no tag', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, '{"id":1,"name":"fern"}'), { name: 'fern' });
    assertOk(await list(h, token), [{ name: 'fern' }]);
  });

  test('POST /plants answers 200 with name and tag and never the id', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, '{"id":7,"name":"fern","tag":"shade"}'), { name: 'fern', tag: 'shade' });
    assertOk(await list(h, token), [{ name: 'fern', tag: 'shade' }]);
  });

  test('POST /plants treats "tag": null as no tag: no tag key in the response or the list', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, '{"id":1,"name":"fern","tag":null}'), { name: 'fern' });
    assertOk(await list(h, token), [{ name: 'fern' }]);
  });

  test('POST /plants accepts JSON with whitespace and keys in any order', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, ' \n{ "tag" : "x" ,\t"name":"fern", "id" : 3 }\r\n'), { name: 'fern', tag: 'x' });
  });
});

describe('POST /plants takes the whole int64 range exactly', () => {
  for (const [label, id, neighbour] of [
    ['the smallest int64', INT64_MIN, '-9223372036854775807'],
    ['the largest int64', INT64_MAX, '9223372036854775806'],
  ] as const) {
    test(`POST /plants accepts ${label} ${id} and stores exactly that id`, async (t) => {
      const { h, token } = await appWithUser(t);
      assertOk(await create(h, token, plantBody(id, 'edge')), { name: 'edge' });
      assertError(await remove(h, token, neighbour), 404);
      assertNoContent(await remove(h, token, id));
      assertOk(await list(h, token), []);
    });
  }

  test('POST /plants keeps 9007199254740992 and 9007199254740993 as two different plants', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, plantBody(TWO_POW_53, 'two53')), { name: 'two53' });
    assertOk(await create(h, token, plantBody(TWO_POW_53_PLUS_1, 'two53+1')), { name: 'two53+1' });
    assertOk(await list(h, token), [{ name: 'two53' }, { name: 'two53+1' }]);
    assertNoContent(await remove(h, token, TWO_POW_53_PLUS_1));
    assertOk(await list(h, token), [{ name: 'two53' }]);
  });

  test('POST /plants accepts integer-valued literals: 1e3 creates id 1000 and 1.0 creates id 1', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, '{"id":1e3,"name":"thousand"}'), { name: 'thousand' });
    assertOk(await create(h, token, '{"id":1.0,"name":"one"}'), { name: 'one' });
    assertNoContent(await remove(h, token, '1000'));
    assertNoContent(await remove(h, token, '1'));
    assertOk(await list(h, token), []);
  });

  describe('POST /plants answers 400 for an id that is not an int64 integer', () => {
    let h: TestApp;
    let token: string;
    before(async () => {
      h = await makeApp();
      token = await h.token('alice', READ_WRITE);
    });
    after(() => h.close());

    for (const [label, id] of [
      ['2^63 (one above the largest int64)', '9223372036854775808'],
      ['-2^63-1 (one below the smallest int64)', '-9223372036854775809'],
      ['2^64', '18446744073709551616'],
      ['1e19', '1e19'],
      ['1e400', '1e400'],
      ['-1e400', '-1e400'],
      ['the fraction 1.5', '1.5'],
      ['the fraction -0.5', '-0.5'],
      ['the fraction 1e-1', '1e-1'],
      ['the fraction 9007199254740993.5', '9007199254740993.5'],
      ['the JSON string "1"', '"1"'],
      ['the JSON string "9007199254740993"', '"9007199254740993"'],
      ['true', 'true'],
      ['null', 'null'],
      ['an array', '[1]'],
      ['an object', '{"value":1}'],
    ] as const) {
      test(`POST /plants answers 400 for the id ${label}`, async () => {
        assertError(await create(h, token, plantBody(id, 'fern')), 400);
      });
    }

    test('POST /plants answers 400 and stores nothing after rejected ids', async () => {
      assertOk(await list(h, token), []);
    });
  });
});

describe('POST /plants checks name and tag', () => {
  const emoji = '\u{1F331}'; // 🌱: one code point, two UTF-16 units
  for (const [label, name] of [
    ['a 1-character name', 'x'],
    ['a 200-character name', 'x'.repeat(200)],
    ['a name of 200 emoji (200 code points)', emoji.repeat(200)],
    ['a name of 199 letters and 1 emoji (200 code points, 201 UTF-16 units)', 'a'.repeat(199) + emoji],
    ['a name with non-ASCII letters', 'Strelitzia nicolai — Paradiesvogelblume, 鶴望蘭'],
  ] as const) {
    test(`POST /plants accepts ${label} and returns it unchanged`, async (t) => {
      const { h, token } = await appWithUser(t);
      assertOk(await create(h, token, plantBody('1', name)), { name });
      assertOk(await list(h, token), [{ name }]);
    });
  }

  for (const [label, tag] of [
    ['a 1-character tag', 't'],
    ['a 100-character tag', 't'.repeat(100)],
    ['a tag of 100 emoji', emoji.repeat(100)],
    ['a tag of 99 letters and 1 emoji', 'a'.repeat(99) + emoji],
  ] as const) {
    test(`POST /plants accepts ${label} and returns it unchanged`, async (t) => {
      const { h, token } = await appWithUser(t);
      assertOk(await create(h, token, plantBody('1', 'fern', tag)), { name: 'fern', tag });
      assertOk(await list(h, token), [{ name: 'fern', tag }]);
    });
  }

  test('POST /plants decodes a surrogate pair escape as one emoji', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, '{"id":1,"name":"\\ud83c\\udf31","tag":"\\ud83c\\udf31"}'), {
      name: emoji,
      tag: emoji,
    });
  });

  describe('POST /plants answers 400 for a bad name or tag', () => {
    let h: TestApp;
    let token: string;
    before(async () => {
      h = await makeApp();
      token = await h.token('alice', READ_WRITE);
    });
    after(() => h.close());

    // JSON text of the string value, exactly as sent.
    const badText: ReadonlyArray<readonly [string, string]> = [
      ['an empty string', '""'],
      ['U+0000', '"a\\u0000b"'],
      ['U+0001', '"\\u0001"'],
      ['U+001F', '"a\\u001f"'],
      ['an escaped newline', '"a\\nb"'],
      ['an escaped tab', '"a\\tb"'],
      ['an escaped carriage return', '"a\\rb"'],
      ['U+007F escaped', '"a\\u007fb"'],
      ['U+007F unescaped', '"a\u007fb"'],
      ['an unescaped newline (invalid JSON)', '"a\nb"'],
      ['a lone high surrogate', '"\\ud800"'],
      ['a lone low surrogate', '"\\udfff"'],
      ['a lone surrogate between letters', '"a\\ud800b"'],
      ['a reversed surrogate pair', '"\\udc00\\ud800"'],
      ['a number', '42'],
      ['an object', '{"text":"fern"}'],
      ['an array', '["fern"]'],
      ['true', 'true'],
    ];
    for (const [label, text] of badText) {
      test(`POST /plants answers 400 for a name that is ${label}`, async () => {
        assertError(await create(h, token, `{"id":1,"name":${text}}`), 400);
      });
      test(`POST /plants answers 400 for a tag that is ${label}`, async () => {
        assertError(await create(h, token, `{"id":1,"name":"fern","tag":${text}}`), 400);
      });
    }

    for (const [label, body] of [
      ['a null name', '{"id":1,"name":null}'],
      ['a 201-character name', plantBody('1', 'x'.repeat(201))],
      ['a name of 201 emoji', plantBody('1', emoji.repeat(201))],
      ['a name of 200 letters and 1 emoji', plantBody('1', 'a'.repeat(200) + emoji)],
      ['a 101-character tag', plantBody('1', 'fern', 't'.repeat(101))],
      ['a tag of 101 emoji', plantBody('1', 'fern', emoji.repeat(101))],
    ] as const) {
      test(`POST /plants answers 400 for ${label}`, async () => {
        assertError(await create(h, token, body), 400);
      });
    }

    test('POST /plants stores nothing when name or tag is rejected', async () => {
      assertOk(await list(h, token), []);
    });
  });
});

describe('POST /plants answers 400 for a body that is not exactly a NewPlant object', () => {
  let h: TestApp;
  let token: string;
  before(async () => {
    h = await makeApp();
    token = await h.token('alice', READ_WRITE);
  });
  after(() => h.close());

  for (const [label, body] of [
    ['an unknown property', '{"id":1,"name":"fern","color":"green"}'],
    ['an "__proto__" property', '{"id":1,"name":"fern","__proto__":{"admin":true}}'],
    ['a "constructor" property', '{"id":1,"name":"fern","constructor":{"prototype":{}}}'],
    ['an "id" sent twice with different values', '{"id":1,"id":2,"name":"fern"}'],
    ['an "id" sent twice with the same value', '{"id":1,"name":"fern","id":1}'],
    ['a "name" sent twice', '{"id":1,"name":"fern","name":"fern"}'],
    ['a "tag" sent twice', '{"id":1,"name":"fern","tag":"a","tag":"b"}'],
    ['a missing id', '{"name":"fern"}'],
    ['a missing name', '{"id":1}'],
    ['an empty object', '{}'],
    ['an array', '[{"id":1,"name":"fern"}]'],
    ['an empty array', '[]'],
    ['a string', '"fern"'],
    ['a number', '1'],
    ['null', 'null'],
    ['true', 'true'],
    ['an empty body', ''],
    ['only whitespace', '  \n'],
    ['an unterminated object', '{"id":1,"name":"fern"'],
    ['a trailing comma', '{"id":1,"name":"fern",}'],
    ['single quotes', "{'id':1,'name':'fern'}"],
    ['unquoted keys', '{id:1,name:"fern"}'],
    ['a leading zero in the id', '{"id":01,"name":"fern"}'],
    ['a plus sign on the id', '{"id":+1,"name":"fern"}'],
    ['NaN as the id', '{"id":NaN,"name":"fern"}'],
    ['text after the object', '{"id":1,"name":"fern"} x'],
    ['two objects', '{"id":1,"name":"fern"}{"id":2,"name":"moss"}'],
    ['an invalid escape', '{"id":1,"name":"f\\xern"}'],
    ['a comment', '{"id":1,/* c */"name":"fern"}'],
  ] as const) {
    test(`POST /plants answers 400 for ${label}`, async () => {
      assertError(await create(h, token, body), 400);
    });
  }

  test('POST /plants answers 400 for a body that is not valid UTF-8', async () => {
    const payload = Buffer.concat([Buffer.from('{"id":1,"name":"f'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const res = await h.call(token, {
      method: 'POST',
      url: '/plants',
      payload,
      headers: { 'content-type': 'application/json' },
    });
    assertError(res, 400);
  });

  test('POST /plants stores nothing for any rejected body', async () => {
    assertOk(await list(h, token), []);
  });
});

describe('POST /plants checks the media type and the size of the body', () => {
  const BODY = '{"id":1,"name":"fern"}';
  // Decided in docs/decisions.md (Input): the media type is
  // case-insensitive; a charset other than UTF-8, or no Content-Type even without a body, is 415.
  for (const [label, contentType, payload, status] of [
    ['Content-Type: application/json; charset=UTF-8', 'application/json; charset=UTF-8', BODY, 200],
    ['Content-Type: Application/JSON (media types are case-insensitive)', 'Application/JSON', BODY, 200],
    ['Content-Type: text/plain', 'text/plain', BODY, 415],
    ['Content-Type: application/x-www-form-urlencoded', 'application/x-www-form-urlencoded', 'id=1&name=fern', 415],
    ['Content-Type: application/json; charset=latin1', 'application/json; charset=latin1', BODY, 415],
    ['Content-Type: application/jsonx', 'application/jsonx', BODY, 415],
    ['a JSON body sent without Content-Type', undefined, BODY, 415],
    ['no Content-Type and no body', undefined, undefined, 415],
  ] as const) {
    test(`POST /plants answers ${status} for ${label}`, async (t) => {
      const { h, token } = await appWithUser(t);
      const res = await h.call(token, {
        method: 'POST',
        url: '/plants',
        ...(payload === undefined ? {} : { payload }),
        headers: contentType === undefined ? {} : { 'content-type': contentType },
      });
      if (status === 200) assertOk(res, { name: 'fern' });
      else assertError(res, status);
      assertOk(await list(h, token), status === 200 ? [{ name: 'fern' }] : []);
    });
  }

  test('POST /plants answers 413 for a body larger than 16 KiB', async (t) => {
    const { h, token } = await appWithUser(t);
    assertError(await create(h, token, plantBody('1', 'fern', 'x'.repeat(17 * 1024))), 413);
    assertOk(await list(h, token), []);
  });
});
