import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import {
  INT64_MIN,
  TWO_POW_53,
  TWO_POW_53_PLUS_1,
  type Response,
  assertError,
  assertForbidden,
  assertNoContent,
  assertOk,
  create,
  followPages,
  list,
  nameOf,
  plantBody,
  remove,
  seed,
  stableHeaders,
} from './plant.helpers.js';

// The caller (carol) and another user (dave) hold adjacent ids beyond 2^53: an id that went
// through a JS number would confuse them.
const OWN = { id: TWO_POW_53_PLUS_1, body: plantBody(TWO_POW_53_PLUS_1, 'carol fern', 'shade') };
const OTHER = { id: TWO_POW_53, body: plantBody(TWO_POW_53, 'dave moss', 'shade') };
const MISSING = '9007199254740994';
const OWN_PLANT = { name: 'carol fern', tag: 'shade' };
const OTHER_PLANT = { name: 'dave moss', tag: 'shade' };
const NEW_PLANT = { name: 'new', tag: 'shade' };

interface World {
  h: TestApp;
  /** The caller under test: subject carol with the scopes of the case. */
  caller: string;
  carol: string;
  dave: string;
}

/** A fresh store where carol and dave each own one plant, and a carol token with `scopes`. */
async function world(t: TestContext, scopes: string[]): Promise<World> {
  const h = await makeApp();
  t.after(() => h.close());
  const carol = await h.token('carol', READ_WRITE);
  const dave = await h.token('dave', READ_WRITE);
  assertOk(await create(h, carol, OWN.body), OWN_PLANT);
  assertOk(await create(h, dave, OTHER.body), OTHER_PLANT);
  return { h, caller: await h.token('carol', scopes), carol, dave };
}

/** What each owner now sees of their own plants. */
async function assertHoldings(w: World, carol: unknown[], dave: unknown[]): Promise<void> {
  assertOk(await list(w.h, w.carol), carol);
  assertOk(await list(w.h, w.dave), dave);
}

const SCOPE_SETS: ReadonlyArray<readonly string[]> = [
  ['plants:read'],
  ['plants:write'],
  ['plants:read', 'plants:write'],
  ['plants:admin'],
  ['plants:admin', 'plants:read'],
  ['plants:admin', 'plants:write'],
  ['plants:read', 'plants:write', 'plants:admin'],
];

describe('access matrix: operation × scopes × own, other user’s and missing plant', () => {
  for (const scopes of SCOPE_SETS) {
    const admin = scopes.includes('plants:admin');
    const canRead = admin || scopes.includes('plants:read');
    const canWrite = admin || scopes.includes('plants:write');
    const label = scopes.join('+');

    test(`GET /plants with ${label} ${canRead ? (admin ? 'lists every user’s plants' : 'lists only the caller’s own plants') : 'answers 403'}`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await list(w.h, w.caller);
      if (!canRead) assertForbidden(res, 'plants:read');
      else assertOk(res, admin ? [OTHER_PLANT, OWN_PLANT] : [OWN_PLANT]);
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`POST /plants with ${label} ${canWrite ? 'answers 200 to a retry of the caller’s own plant' : 'answers 403'} (own id)`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await create(w.h, w.caller, OWN.body);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertOk(res, OWN_PLANT);
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`POST /plants with ${label} ${canWrite ? 'answers 409' : 'answers 403'} for another user’s id`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await create(w.h, w.caller, OTHER.body);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertError(res, 409);
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`POST /plants with ${label} ${canWrite ? 'creates a plant owned by the caller' : 'answers 403'} for a missing id`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await create(w.h, w.caller, plantBody(MISSING, 'new', 'shade'));
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertOk(res, NEW_PLANT);
      await assertHoldings(w, canWrite ? [OWN_PLANT, NEW_PLANT] : [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`DELETE /plants/{id} with ${label} ${canWrite ? 'answers 204' : 'answers 403'} for the caller’s own plant`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await remove(w.h, w.caller, OWN.id);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertNoContent(res);
      await assertHoldings(w, canWrite ? [] : [OWN_PLANT], [OTHER_PLANT]);
    });

    const otherOutcome = !canWrite ? 'answers 403' : admin ? 'answers 204' : 'answers 404';
    test(`DELETE /plants/{id} with ${label} ${otherOutcome} for another user’s plant`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await remove(w.h, w.caller, OTHER.id);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else if (admin) assertNoContent(res);
      else assertError(res, 404);
      await assertHoldings(w, [OWN_PLANT], admin ? [] : [OTHER_PLANT]);
    });

    test(`DELETE /plants/{id} with ${label} ${canWrite ? 'answers 404' : 'answers 403'} for a missing plant`, async (t) => {
      const w = await world(t, [...scopes]);
      const res = await remove(w.h, w.caller, MISSING);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertError(res, 404);
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });
  }
});

/** Two answers a client cannot tell apart: same status, same bytes, same headers (but per-response ones). */
function assertIndistinguishable(a: Response, b: Response): void {
  assert.equal(a.statusCode, b.statusCode);
  assert.equal(a.payload, b.payload);
  assert.deepEqual(stableHeaders(a), stableHeaders(b));
}

describe('no user sees or deletes another user’s plants', () => {
  for (const id of ['5', TWO_POW_53_PLUS_1, INT64_MIN]) {
    test(`DELETE /plants/${id} answers for another user’s plant a 404 byte-identical to the one for a missing id`, async (t) => {
      const h = await makeApp();
      t.after(() => h.close());
      const alice = await h.token('alice', READ_WRITE);
      const bob = await h.token('bob', READ_WRITE);
      await seed(h, alice, [id]);
      const others = await remove(h, bob, id);
      assertError(others, 404);
      assertOk(await list(h, alice), [{ name: nameOf(id) }]);
      assertNoContent(await remove(h, alice, id));
      const gone = await remove(h, bob, id);
      // An id that never existed, in a store of its own.
      const fresh = await makeApp();
      t.after(() => fresh.close());
      const never = await remove(fresh, await fresh.token('bob', READ_WRITE), id);
      assertError(gone, 404);
      assertError(never, 404);
      assertIndistinguishable(others, gone);
      assertIndistinguishable(others, never);
    });
  }

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

describe('scope and authentication answers reveal nothing about plants', () => {
  test('DELETE /plants/{id} without plants:write answers the same 403 for own, another’s and a missing plant', async (t) => {
    const w = await world(t, ['plants:read']);
    const answers = [await remove(w.h, w.caller, OWN.id), await remove(w.h, w.caller, OTHER.id)];
    answers.push(await remove(w.h, w.caller, MISSING));
    for (const res of answers) assertForbidden(res, 'plants:write');
    const [own, other, missing] = answers as [Response, Response, Response];
    assertIndistinguishable(own, other);
    assertIndistinguishable(own, missing);
  });

  for (const [label, request] of [
    ['GET /plants', { method: 'GET', url: '/plants?limit=0' }],
    ['POST /plants', { method: 'POST', url: '/plants', ...json('{"id":"bad"') }],
    ['DELETE /plants/{id}', { method: 'DELETE', url: '/plants/abc' }],
    ['DELETE /plants/{id} of an existing plant', { method: 'DELETE', url: `/plants/${OWN.id}` }],
  ] as const) {
    test(`${label} answers 401 with a Bearer challenge, whatever the request, when no token is sent`, async (t) => {
      const w = await world(t, READ_WRITE);
      const res = await w.h.call(undefined, request);
      assertError(res, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store"');
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`${label} answers 401 invalid_token, whatever the request, for an unknown token`, async (t) => {
      const w = await world(t, READ_WRITE);
      const res = await w.h.call('pst_notARealTokenAtAll000000000000000000000000000000', request);
      assertError(res, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token"');
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });
  }
});
