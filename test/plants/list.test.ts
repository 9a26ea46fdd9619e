import assert from 'node:assert/strict';
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
  assertPlantList,
  create,
  followPages,
  list,
  nameOf,
  nextLink,
  plantBody,
  remove,
  seed,
} from './plant.helpers.js';

async function appWithUser(t: TestContext): Promise<{ h: TestApp; token: string }> {
  const h = await makeApp();
  t.after(() => h.close());
  return { h, token: await h.token('alice', READ_WRITE) };
}

const range = (from: number, count: number): string[] => Array.from({ length: count }, (_, i) => String(from + i));
const names = (ids: readonly string[]): Array<{ name: string }> => ids.map((id) => ({ name: nameOf(id) }));
const queryOf = (target: string): URLSearchParams => new URLSearchParams(target.split('?')[1]);

describe('GET /plants lists plants', () => {
  test('GET /plants answers 200 with [] and no Link header when the caller has no plants', async (t) => {
    const { h, token } = await appWithUser(t);
    const res = await list(h, token);
    assertOk(res, []);
    assert.equal(res.headers.link, undefined);
  });

  test('GET /plants answers a page read again with the same bytes, and a page a write changed anew', async (t) => {
    // A page the store answers from its cache is serialized once (plant.routes.ts); a create or a
    // delete makes a new page, never the old bytes.
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 3));
    const first = await list(h, token, '?limit=2');
    const again = await list(h, token, '?limit=2');
    assertOk(again, names(range(1, 2)));
    assert.equal(again.body, first.body);
    assert.equal(again.headers.link, first.headers.link);
    assert.equal(again.headers['content-type'], 'application/json; charset=utf-8');
    assertNoContent(await remove(h, token, '1'));
    const afterDelete = await list(h, token, '?limit=2');
    assertOk(afterDelete, names(['2', '3']));
    assert.equal(afterDelete.headers.link, undefined);
    assertOk(await create(h, token, plantBody('0', 'first')), { name: 'first' });
    assertOk(await list(h, token, '?limit=2'), [{ name: 'first' }, { name: nameOf('2') }]);
    assertOk(await list(h, token, '?limit=3'), [{ name: 'first' }, { name: nameOf('2') }, { name: nameOf('3') }]);
  });

  test('GET /plants answers plants with name, and tag only when they have one', async (t) => {
    const { h, token } = await appWithUser(t);
    assertOk(await create(h, token, plantBody('1', 'fern', 'shade')), { name: 'fern', tag: 'shade' });
    assertOk(await create(h, token, plantBody('2', 'moss')), { name: 'moss' });
    assertOk(await create(h, token, plantBody('3', 'ivy', null)), { name: 'ivy' });
    const res = await list(h, token);
    assertOk(res, [{ name: 'fern', tag: 'shade' }, { name: 'moss' }, { name: 'ivy' }]);
    assertPlantList(res);
  });

  test('GET /plants orders by numeric id: negatives first, ids beyond 2^53 exactly', async (t) => {
    const { h, token } = await appWithUser(t);
    const ordered = [INT64_MIN, '-10', '-5', '0', '2', '3', '10', TWO_POW_53, TWO_POW_53_PLUS_1, INT64_MAX];
    await seed(h, token, ['10', TWO_POW_53_PLUS_1, '3', INT64_MAX, '-5', '0', TWO_POW_53, '2', INT64_MIN, '-10']);
    assertOk(await list(h, token), names(ordered));
    const pages = await followPages(h, token, '/plants?limit=3');
    assert.deepEqual(pages, [
      names(ordered.slice(0, 3)),
      names(ordered.slice(3, 6)),
      names(ordered.slice(6, 9)),
      names(ordered.slice(9)),
    ]);
  });
});

describe('GET /plants limit', () => {
  test('GET /plants answers 100 plants by default and a next link to the 101st', async (t) => {
    const { h, token } = await appWithUser(t);
    const ids = range(1, 101);
    await seed(h, token, ids);
    const res = await list(h, token);
    assertOk(res, names(ids.slice(0, 100)));
    const next = nextLink(res);
    assert.ok(next !== undefined, 'a Link header');
    assertOk(await h.call(token, { method: 'GET', url: next }), names(ids.slice(100)));
  });

  test('GET /plants answers exactly 100 plants without a Link header when there are 100', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 100));
    const res = await list(h, token);
    assertOk(res, names(range(1, 100)));
    assert.equal(res.headers.link, undefined);
  });

  test('GET /plants accepts limit=1 and limit=1000', async (t) => {
    const { h, token } = await appWithUser(t);
    const ids = range(-500, 1001);
    await seed(h, token, ids);
    const one = await list(h, token, '?limit=1');
    assertOk(one, names(ids.slice(0, 1)));
    assert.equal(queryOf(nextLink(one)!).get('limit'), '1');
    const thousand = await list(h, token, '?limit=1000');
    assertOk(thousand, names(ids.slice(0, 1000)));
    const next = nextLink(thousand);
    assert.ok(next !== undefined);
    assert.equal(queryOf(next).get('limit'), '1000');
    const last = await h.call(token, { method: 'GET', url: next });
    assertOk(last, names(ids.slice(1000)));
    assert.equal(last.headers.link, undefined);
  });

  describe('GET /plants answers 400 for a limit outside 1…1000 or not a plain integer', () => {
    let h: TestApp;
    let token: string;
    before(async () => {
      h = await makeApp();
      token = await h.token('alice', READ_WRITE);
      await seed(h, token, ['1', '2']);
    });
    after(() => h.close());

    for (const [label, query] of [
      ['0', 'limit=0'],
      ['-1', 'limit=-1'],
      ['1001', 'limit=1001'],
      ['a huge number', 'limit=99999999999999999999'],
      ['1.5', 'limit=1.5'],
      ['"abc"', 'limit=abc'],
      ['empty (limit=)', 'limit='],
      ['given twice (limit=1&limit=2)', 'limit=1&limit=2'],
      ['" 5" (leading space)', 'limit=%205'],
      ['"5 " (trailing space)', 'limit=5%20'],
      ['"+5"', 'limit=%2B5'],
      ['"0x10"', 'limit=0x10'],
      ['"1e2"', 'limit=1e2'],
      ['"5.0" (README: plain decimal digits only)', 'limit=5.0'],
      ['"true"', 'limit=true'],
    ] as const) {
      test(`GET /plants answers 400 for limit ${label}`, async () => {
        const res = await list(h, token, `?${query}`);
        assertError(res, 400);
        assert.equal(res.headers.link, undefined);
      });
    }
  });
});

describe('GET /plants pagination', () => {
  test('GET /plants sends Link: </plants?…>; rel="next" with the limit and an opaque cursor', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 10));
    const res = await list(h, token, '?limit=7');
    assertOk(res, names(range(1, 7)));
    assert.match(String(res.headers.link), /^<\/plants\?[^<>]*>; rel="next"$/);
    const query = queryOf(nextLink(res)!);
    assert.equal(query.get('limit'), '7');
    assert.equal(query.getAll('cursor').length, 1);
    assert.equal(query.get('tag'), null);
    const last = await h.call(token, { method: 'GET', url: nextLink(res)! });
    assertOk(last, names(range(8, 3)));
    assert.equal(last.headers.link, undefined);
  });

  for (const count of [7, 14, 21]) {
    test(`GET /plants sends no Link on the last page when ${count} plants fill pages of 7 exactly`, async (t) => {
      const { h, token } = await appWithUser(t);
      await seed(h, token, range(1, count));
      const pages = await followPages(h, token, '/plants?limit=7');
      assert.equal(pages.length, count / 7, 'no empty trailing page');
      for (const page of pages) assert.equal(page.length, 7);
      assert.deepEqual(pages.flat(), names(range(1, count)));
    });
  }

  test('GET /plants pages through 250 plants with limit 7, each plant exactly once and in order', async (t) => {
    const { h, token } = await appWithUser(t);
    // Negative, small and beyond-2^53 ids, created out of order.
    const ids = [...range(-100, 100), ...range(0, 100), ...range(1, 50).map((i) => String(2n ** 53n + BigInt(i)))];
    await seed(h, token, [...ids].reverse());
    const pages = await followPages(h, token, '/plants?limit=7');
    assert.equal(pages.length, Math.ceil(250 / 7));
    assert.deepEqual(pages.at(-1), names(ids.slice(245)));
    assert.deepEqual(pages.flat(), names(ids));
  });

  test('GET /plants pages through a tag filter, each matching plant exactly once, the tag kept in every link', async (t) => {
    const { h, token } = await appWithUser(t);
    const ids = range(-125, 250);
    const tagOf = (id: string): string | undefined => (['odd', 'even', undefined] as const)[Math.abs(Number(id)) % 3];
    await seed(h, token, ids, tagOf);
    for (const tag of ['odd', 'even']) {
      const expected = ids.filter((id) => tagOf(id) === tag).map((id) => ({ name: nameOf(id), tag }));
      const urls: string[] = [];
      let url: string | undefined = `/plants?limit=7&tag=${tag}`;
      const seen: unknown[] = [];
      while (url !== undefined) {
        urls.push(url);
        const res = await h.call(token, { method: 'GET', url });
        seen.push(...assertPlantList(res));
        url = nextLink(res);
        if (url !== undefined) assert.equal(queryOf(url).get('tag'), tag);
      }
      assert.deepEqual(seen, expected);
      assert.equal(urls.length, Math.ceil(expected.length / 7));
    }
  });

  test('GET /plants next links carry a tag with spaces and reserved characters intact', async (t) => {
    const { h, token } = await appWithUser(t);
    const tag = 'a b&c=d/é+%?#';
    await seed(h, token, range(1, 5), (id) => (Number(id) % 2 === 1 ? tag : 'other'));
    const pages = await followPages(h, token, `/plants?limit=1&tag=${encodeURIComponent(tag)}`);
    assert.deepEqual(pages, [[{ name: nameOf('1'), tag }], [{ name: nameOf('3'), tag }], [{ name: nameOf('5'), tag }]]);
  });

  test('GET /plants pages up to the largest and from the smallest int64 id', async (t) => {
    const { h, token } = await appWithUser(t);
    const ids = [INT64_MIN, '-9223372036854775807', '9223372036854775806', INT64_MAX];
    await seed(h, token, ids);
    const pages = await followPages(h, token, '/plants?limit=1');
    assert.deepEqual(
      pages,
      ids.map((id) => [{ name: nameOf(id) }]),
    );
  });

  // docs/decisions.md (Pagination): keyset pagination, so a plant present throughout is returned exactly once.
  test('GET /plants next links return every plant present throughout exactly once while others come and go', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(10, 10));
    const first = await list(h, token, '?limit=4');
    assertOk(first, names(range(10, 4)));
    // The plant the cursor names, one before it and one after it on the next page go; others arrive.
    for (const id of ['13', '11', '15']) assertNoContent(await remove(h, token, id));
    await seed(h, token, ['5', '9', '30', '100']);
    const rest = (await followPages(h, token, nextLink(first)!)).flat();
    const seen = [...assertPlantList(first), ...rest].map((p) => p.name);
    const throughout = names(['10', '12', '14', '16', '17', '18', '19']).map((p) => p.name);
    assert.deepEqual(
      seen.filter((name) => throughout.includes(name)),
      throughout,
    );
    for (const id of ['11', '13', '15']) assert.ok(!rest.some((p) => p.name === nameOf(id)), `deleted ${id} listed`);
  });

  describe('GET /plants answers 400 for a cursor this service did not issue', () => {
    let h: TestApp;
    let token: string;
    let cursor: string;
    before(async () => {
      h = await makeApp();
      token = await h.token('alice', READ_WRITE);
      await seed(h, token, range(1, 3));
      cursor = queryOf(nextLink(await list(h, token, '?limit=1'))!).get('cursor')!;
    });
    after(() => h.close());

    const b64 = (text: string): string => Buffer.from(text).toString('base64url');
    const cases: ReadonlyArray<readonly [string, () => string]> = [
      ['garbage', () => 'garbage!!'],
      ['a plain number', () => '2'],
      ['empty', () => ''],
      ['longer than any cursor', () => 'A'.repeat(200)],
      ['a real cursor with a character appended', () => `${cursor}A`],
      ['a real cursor with base64 padding', () => `${cursor}==`],
      ['a real cursor with its first character changed', () => (cursor[0] === 'x' ? 'y' : 'x') + cursor.slice(1)],
      ['a real cursor cut short', () => cursor.slice(0, -2)],
      ['base64url of a non-number position', () => b64('p1:abc')],
      ['base64url of a position beyond int64', () => b64('p1:9223372036854775808')],
      ['given twice', () => `${cursor}&cursor=${cursor}`],
    ];
    for (const [label, make] of cases) {
      test(`GET /plants answers 400 for a cursor that is ${label}`, async () => {
        const res = await list(h, token, `?limit=1&cursor=${make()}`);
        assertError(res, 400);
        assert.equal(res.headers.link, undefined);
      });
    }

    test('GET /plants accepts the cursor it issued', async () => {
      assertOk(await list(h, token, `?limit=1&cursor=${cursor}`), names(['2']));
    });
  });
});

describe('GET /plants tag filter', () => {
  // docs/decisions.md (Input) decides that a tag filter must itself be a valid tag.
  for (const [label, query] of [
    ['empty (tag=)', 'tag='],
    ['101 characters long', `tag=${'t'.repeat(101)}`],
    ['a control character', 'tag=a%00b'],
  ] as const) {
    test(`GET /plants answers 400 for a tag filter that is ${label}`, async (t) => {
      const { h, token } = await appWithUser(t);
      await seed(h, token, ['1'], () => 't');
      assertError(await list(h, token, `?${query}`), 400);
    });
  }

  test('GET /plants?tag= matches the tag exactly and case-sensitively', async (t) => {
    const { h, token } = await appWithUser(t);
    const tags: Record<string, string | undefined> = {
      '1': 'fern',
      '2': 'Fern',
      '3': 'ferns',
      '4': 'fern ',
      '5': undefined,
      '6': 'FERN',
      '7': 'fern',
    };
    await seed(h, token, Object.keys(tags), (id) => tags[id]);
    assertOk(await list(h, token, '?tag=fern'), [
      { name: nameOf('1'), tag: 'fern' },
      { name: nameOf('7'), tag: 'fern' },
    ]);
    assertOk(await list(h, token, '?tag=Fern'), [{ name: nameOf('2'), tag: 'Fern' }]);
    assertOk(await list(h, token, '?tag=fern%20'), [{ name: nameOf('4'), tag: 'fern ' }]);
    assertOk(await list(h, token, '?tag=fer'), []);
    assertOk(await list(h, token, '?tag=nothing'), []);
  });

  test('GET /plants?tag= matches non-ASCII tags exactly', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, ['1', '2'], (id) => (id === '1' ? '🌱 sprout' : 'sprout'));
    assertOk(await list(h, token, `?tag=${encodeURIComponent('🌱 sprout')}`), [
      { name: nameOf('1'), tag: '🌱 sprout' },
    ]);
  });
});
