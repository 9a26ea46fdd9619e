import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import {
  INT64_MIN,
  TWO_POW_53,
  TWO_POW_53_PLUS_1,
  type Response,
  assertError,
  assertIndistinguishable,
  assertNoContent,
  assertOk,
  followPages,
  nextLink,
  list,
  nameOf,
  remove,
  seed,
} from './plant.helpers.js';

// The narrative cases of access control; access-matrix.test.ts holds the table of every
// operation × scopes × own, other user's and missing plant.

const RATE_LIMITED = { rateLimit: { max: 1000, windowMs: 60_000 } };

describe('no user sees or deletes another user’s plants', () => {
  for (const id of ['5', TWO_POW_53_PLUS_1, INT64_MIN]) {
    test(`DELETE /plants/${id} answers for another user’s plant a 404 byte-identical to the one for a missing id`, async (t) => {
      // With the rate limit on, as deployed: its counters are the only headers allowed to differ.
      const h = await makeApp(RATE_LIMITED);
      t.after(() => h.close());
      const alice = await h.token('alice', READ_WRITE);
      const bob = await h.token('bob', READ_WRITE);
      await seed(h, alice, [id]);
      const others = await remove(h, bob, id);
      assertError(others, 404);
      assert.ok(others.headers['ratelimit-remaining'] !== undefined, 'rate-limit headers are sent');
      assertOk(await list(h, alice), [{ name: nameOf(id) }]);
      assertNoContent(await remove(h, alice, id));
      const gone = await remove(h, bob, id);
      // An id that never existed, in a store of its own.
      const fresh = await makeApp(RATE_LIMITED);
      t.after(() => fresh.close());
      const never = await remove(fresh, await fresh.token('bob', READ_WRITE), id);
      assertError(gone, 404);
      assertError(never, 404);
      assertIndistinguishable(others, gone);
      assertIndistinguishable(others, never);
    });
  }

  test('DELETE /plants/{id} answers another user’s plant with the same 404 whatever the caller’s scopes, as an admin gets for a missing one', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const alice = await h.token('alice', READ_WRITE);
    await seed(h, alice, [TWO_POW_53]);
    const bob = await remove(h, await h.token('bob', READ_WRITE), TWO_POW_53);
    const writer = await remove(h, await h.token('carol', ['plants:write']), TWO_POW_53);
    assertError(bob, 404);
    assertIndistinguishable(bob, writer, 'plants:read+write and plants:write');
    assertNoContent(await remove(h, alice, TWO_POW_53));
    const admin = await remove(h, await h.token('root', ['plants:admin']), TWO_POW_53);
    assertIndistinguishable(bob, admin, 'a user on another’s plant and an admin on none');
  });

  test('GET /plants answers a user byte for byte the same, page by page, whether or not others hold plants', async (t) => {
    const alone = await makeApp();
    t.after(() => alone.close());
    const crowded = await makeApp();
    t.after(() => crowded.close());
    // Alice's ids, and others' before, between and after them, some with her tag.
    const aliceIds = ['-3', '1', '4', TWO_POW_53_PLUS_1];
    const otherIds = [INT64_MIN, '-4', '2', '3', '5', TWO_POW_53, '9223372036854775807'];
    const tagOf = (id: string): string => (Number(BigInt(id) % 2n) === 0 ? 'even' : 'odd');
    await seed(alone, await alone.token('alice', READ_WRITE), aliceIds, tagOf);
    await seed(crowded, await crowded.token('alice', READ_WRITE), aliceIds, tagOf);
    await seed(crowded, await crowded.token('bob', READ_WRITE), otherIds, tagOf);
    const aliceAlone = await alone.token('alice', ['plants:read']);
    const aliceCrowded = await crowded.token('alice', ['plants:read']);
    for (const start of [
      '/plants',
      '/plants?limit=1',
      '/plants?limit=2',
      '/plants?tag=odd&limit=1',
      '/plants?tag=even',
    ]) {
      let pages = 0;
      for (let url: string | undefined = start; url !== undefined; pages += 1) {
        assert.ok(pages <= aliceIds.length, 'pagination ends');
        const a: Response = await alone.call(aliceAlone, { method: 'GET', url });
        const b: Response = await crowded.call(aliceCrowded, { method: 'GET', url });
        assertIndistinguishable(a, b, `GET ${url}`);
        url = nextLink(a);
      }
    }
  });

  test('DELETE /plants/{id} answers 404 for a plant an admin created, to a user', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const admin = await h.token('root', ['plants:admin']);
    const alice = await h.token('alice', READ_WRITE);
    await seed(h, admin, ['1']);
    assertOk(await list(h, alice), []);
    assertError(await remove(h, alice, '1'), 404);
    assertOk(await list(h, admin), [{ name: nameOf('1') }]);
  });

  test('GET /plants shows each user only their own plants, page by page and with the tag filter', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const alice = await h.token('alice', READ_WRITE);
    const bob = await h.token('bob', READ_WRITE);
    const admin = await h.token('root', ['plants:admin']);
    const ids = Array.from({ length: 40 }, (_, i) => String(i - 20));
    const aliceIds = ids.filter((id) => Number(id) % 2 === 0);
    const bobIds = ids.filter((id) => Number(id) % 2 !== 0);
    await seed(h, alice, aliceIds, () => 'shared');
    await seed(h, bob, bobIds, () => 'shared');
    const plants = (of: string[]): unknown[] => of.map((id) => ({ name: nameOf(id), tag: 'shared' }));
    for (const [token, own] of [
      [alice, aliceIds],
      [bob, bobIds],
      [admin, ids],
    ] as const) {
      assert.deepEqual((await followPages(h, token, '/plants?limit=3')).flat(), plants(own));
      assert.deepEqual((await followPages(h, token, '/plants?limit=3&tag=shared')).flat(), plants(own));
    }
  });

  test('an admin lists every user’s plants and deletes any of them', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const alice = await h.token('alice', READ_WRITE);
    const bob = await h.token('bob', READ_WRITE);
    const admin = await h.token('root', ['plants:admin']);
    await seed(h, alice, ['1', TWO_POW_53_PLUS_1], () => 'a');
    await seed(h, bob, ['2', TWO_POW_53], () => 'b');
    assertOk(await list(h, admin), [
      { name: nameOf('1'), tag: 'a' },
      { name: nameOf('2'), tag: 'b' },
      { name: nameOf(TWO_POW_53), tag: 'b' },
      { name: nameOf(TWO_POW_53_PLUS_1), tag: 'a' },
    ]);
    assertOk(await list(h, admin, '?tag=b'), [
      { name: nameOf('2'), tag: 'b' },
      { name: nameOf(TWO_POW_53), tag: 'b' },
    ]);
    for (const id of ['1', '2', TWO_POW_53, TWO_POW_53_PLUS_1]) assertNoContent(await remove(h, admin, id));
    assertOk(await list(h, alice), []);
    assertOk(await list(h, bob), []);
    assertOk(await list(h, admin), []);
    assertError(await remove(h, admin, '1'), 404);
  });

  test('a plant belongs to its subject: another token of the same subject lists and deletes it', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const first = await h.token('alice', READ_WRITE);
    const second = await h.token('alice', READ_WRITE);
    await seed(h, first, ['1']);
    assertOk(await list(h, second), [{ name: nameOf('1') }]);
    assertNoContent(await remove(h, second, '1'));
    assertOk(await list(h, first), []);
  });
});
