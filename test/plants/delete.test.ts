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
  list,
  nameOf,
  remove,
  seed,
} from './plant.helpers.js';

async function appWithUser(t: TestContext): Promise<{ h: TestApp; token: string }> {
  const h = await makeApp();
  t.after(() => h.close());
  return { h, token: await h.token('alice', READ_WRITE) };
}

describe('DELETE /plants/{id} deletes a plant', () => {
  test('DELETE /plants/{id} answers 204 with an empty body and removes only that plant', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, ['1', '2', '3']);
    assertNoContent(await remove(h, token, '2'));
    assertOk(await list(h, token), [{ name: nameOf('1') }, { name: nameOf('3') }]);
  });

  test('DELETE /plants/{id} answers 404 with an Error body to a second delete of the same id', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, ['1']);
    assertNoContent(await remove(h, token, '1'));
    assertError(await remove(h, token, '1'), 404);
    assertOk(await list(h, token), []);
  });

  test('DELETE /plants/{id} answers 404 for an id no plant ever had', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, ['1']);
    assertError(await remove(h, token, '2'), 404);
    assertOk(await list(h, token), [{ name: nameOf('1') }]);
  });

  for (const id of [INT64_MAX, INT64_MIN, TWO_POW_53_PLUS_1, '-1', '0']) {
    test(`DELETE /plants/${id} answers 204 for that exact id, then 404`, async (t) => {
      const { h, token } = await appWithUser(t);
      await seed(h, token, [id]);
      assertNoContent(await remove(h, token, id));
      assertError(await remove(h, token, id), 404);
      assertOk(await list(h, token), []);
    });
  }

  for (const id of [INT64_MAX, INT64_MIN]) {
    test(`DELETE /plants/${id} answers 404, not 400, when no plant has that valid id`, async (t) => {
      const { h, token } = await appWithUser(t);
      assertError(await remove(h, token, id), 404);
    });
  }

  test('DELETE /plants/9007199254740993 leaves plant 9007199254740992 in place', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, [TWO_POW_53, TWO_POW_53_PLUS_1]);
    assertNoContent(await remove(h, token, TWO_POW_53_PLUS_1));
    assertOk(await list(h, token), [{ name: nameOf(TWO_POW_53) }]);
    assertError(await remove(h, token, TWO_POW_53_PLUS_1), 404);
    assertNoContent(await remove(h, token, TWO_POW_53));
  });
});

describe('DELETE /plants/{id} answers 400 for an id that is not a decimal int64', () => {
  let h: TestApp;
  let token: string;
  before(async () => {
    h = await makeApp();
    token = await h.token('alice', READ_WRITE);
    // Plants each bad id could be mistaken for: none of them may be deleted.
    await seed(h, token, ['0', '1', '5', '16', '100', '1000', INT64_MAX, INT64_MIN]);
  });
  after(() => h.close());

  // An empty id (`DELETE /plants/`) is an unknown path, 404: test/http/routing.test.ts.
  for (const [label, path] of [
    ['"abc"', 'abc'],
    ['"1.5"', '1.5'],
    ['2^63 (9223372036854775808)', '9223372036854775808'],
    ['-2^63-1 (-9223372036854775809)', '-9223372036854775809'],
    ['2^64', '18446744073709551616'],
    ['"+5"', '+5'],
    ['"+5" URL-encoded', '%2B5'],
    ['" 5" URL-encoded', '%205'],
    ['"5 " URL-encoded', '5%20'],
    ['"0x10"', '0x10'],
    // docs/decisions.md (Input) decides that a path id is decimal digits with an optional minus sign.
    ['"5.0" (README: digits only)', '5.0'],
    ['"1e3" (README: digits only)', '1e3'],
    ['"-"', '-'],
    ['"--5"', '--5'],
    ['"5abc"', '5abc'],
  ] as const) {
    test(`DELETE /plants/{id} answers 400 with error 400 for the id ${label}`, async () => {
      assertError(await remove(h, token, path), 400);
    });
  }

  test('DELETE /plants/{id} deleted nothing for any rejected id', async () => {
    assertOk(
      await list(h, token),
      [INT64_MIN, '0', '1', '5', '16', '100', '1000', INT64_MAX].map((id) => ({ name: nameOf(id) })),
    );
  });
});
