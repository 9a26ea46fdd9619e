import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import { TWO_POW_53_PLUS_1, type Response, assertError, assertOk, create, list, plantBody } from './plant.helpers.js';

// The subject of the user who holds the contested ids: a 409 must never reveal it.
const OWNER = 'owner-7f3a9c-secret-subject';

interface Users {
  h: TestApp;
  owner: string;
  other: string;
  admin: string;
}

async function users(t: TestContext): Promise<Users> {
  const h = await makeApp();
  t.after(() => h.close());
  return {
    h,
    owner: await h.token(OWNER, READ_WRITE),
    other: await h.token('someone-else', READ_WRITE),
    admin: await h.token('root-admin', ['plants:admin']),
  };
}

function assertDoesNotReveal(res: Response, subject: string): void {
  assert.ok(!res.payload.includes(subject), `the body names the owner: ${res.payload}`);
  for (const [name, value] of Object.entries(res.headers)) {
    assert.ok(!String(value).includes(subject), `the ${name} header names the owner`);
  }
}

describe('POST /plants with an id that is already taken', () => {
  for (const [label, first, again] of [
    ['name only', plantBody('5', 'fern'), plantBody('5', 'fern')],
    ['name and tag', plantBody('5', 'fern', 'shade'), plantBody('5', 'fern', 'shade')],
    ['no tag, retried with "tag": null', plantBody('5', 'fern'), plantBody('5', 'fern', null)],
    ['"tag": null, retried without tag', plantBody('5', 'fern', null), plantBody('5', 'fern')],
    ['an id beyond 2^53', plantBody(TWO_POW_53_PLUS_1, 'fern', 't'), plantBody(TWO_POW_53_PLUS_1, 'fern', 't')],
  ] as const) {
    test(`POST /plants answers 200 with the plant to a safe retry by its owner (${label})`, async (t) => {
      const { h, owner } = await users(t);
      const expected = JSON.parse(first) as { tag?: string | null };
      const plant = expected.tag == null ? { name: 'fern' } : { name: 'fern', tag: expected.tag };
      assertOk(await create(h, owner, first), plant);
      assertOk(await create(h, owner, again), plant);
      assertOk(await list(h, owner), [plant]);
    });
  }

  test('POST /plants answers 200 to a safe retry sent with another token of the same subject', async (t) => {
    const { h, owner } = await users(t);
    const second = await h.token(OWNER, ['plants:write']);
    assertOk(await create(h, owner, plantBody('5', 'fern', 'a')), { name: 'fern', tag: 'a' });
    assertOk(await create(h, second, plantBody('5', 'fern', 'a')), { name: 'fern', tag: 'a' });
    assertOk(await list(h, owner), [{ name: 'fern', tag: 'a' }]);
  });

  test('POST /plants answers 200 to a safe retry by an admin of a plant the admin created', async (t) => {
    const { h, admin } = await users(t);
    assertOk(await create(h, admin, plantBody('5', 'fern')), { name: 'fern' });
    assertOk(await create(h, admin, plantBody('5', 'fern')), { name: 'fern' });
    assertOk(await list(h, admin), [{ name: 'fern' }]);
  });

  const conflicts: ReadonlyArray<readonly [string, keyof Omit<Users, 'h'>, string, keyof Omit<Users, 'h'>, string]> = [
    ['the owner sends a different name', 'owner', plantBody('5', 'fern', 'a'), 'owner', plantBody('5', 'moss', 'a')],
    ['the owner sends a different tag', 'owner', plantBody('5', 'fern', 'a'), 'owner', plantBody('5', 'fern', 'b')],
    ['the tag differs only in case', 'owner', plantBody('5', 'fern', 'a'), 'owner', plantBody('5', 'fern', 'A')],
    ['the plant has a tag and the retry none', 'owner', plantBody('5', 'fern', 'a'), 'owner', plantBody('5', 'fern')],
    ['the plant has no tag and the retry one', 'owner', plantBody('5', 'fern'), 'owner', plantBody('5', 'fern', 'a')],
    [
      'another user sends the identical body',
      'owner',
      plantBody('5', 'fern', 'a'),
      'other',
      plantBody('5', 'fern', 'a'),
    ],
    ['another user sends a different body', 'owner', plantBody('5', 'fern'), 'other', plantBody('5', 'moss')],
    ['an admin sends the identical body', 'owner', plantBody('5', 'fern', 'a'), 'admin', plantBody('5', 'fern', 'a')],
    ['a user repeats an admin’s plant', 'admin', plantBody('5', 'fern', 'a'), 'owner', plantBody('5', 'fern', 'a')],
    [
      'another user repeats an id beyond 2^53',
      'owner',
      plantBody(TWO_POW_53_PLUS_1, 'fern'),
      'other',
      plantBody(TWO_POW_53_PLUS_1, 'fern'),
    ],
  ];
  for (const [label, firstBy, first, secondBy, second] of conflicts) {
    test(`POST /plants answers 409 and keeps the plant unchanged when ${label}`, async (t) => {
      const u = await users(t);
      const created = await create(u.h, u[firstBy], first);
      assert.equal(created.statusCode, 200);
      const res = await create(u.h, u[secondBy], second);
      assertError(res, 409);
      assertDoesNotReveal(res, OWNER);
      assertOk(await list(u.h, u[firstBy]), [JSON.parse(created.payload)]);
    });
  }

  test('POST /plants answers a 409 that does not name the owner’s subject', async (t) => {
    const { h, owner, other, admin } = await users(t);
    assertOk(await create(h, owner, plantBody('5', 'fern')), { name: 'fern' });
    for (const token of [owner, other, admin]) {
      const res = await create(h, token, plantBody('5', 'moss'));
      assertError(res, 409);
      assertDoesNotReveal(res, OWNER);
    }
  });
});

describe('POST /plants under concurrent creates of one id', () => {
  const N = 25;

  test('POST /plants lets exactly one of many concurrent different bodies win; the rest get 409', async (t) => {
    const { h, owner } = await users(t);
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => create(h, owner, plantBody(TWO_POW_53_PLUS_1, `fern ${i}`))),
    );
    const winners = results.filter((r) => r.statusCode === 200);
    assert.equal(winners.length, 1, `status codes: ${results.map((r) => r.statusCode).join()}`);
    for (const res of results) if (res !== winners[0]) assertError(res, 409);
    const winner = JSON.parse(winners[0]!.payload) as unknown;
    assertOk(winners[0]!, winner);
    assertOk(await list(h, owner), [winner]);
  });

  test('POST /plants answers 200 to every one of many concurrent identical creates and stores one plant', async (t) => {
    const { h, owner } = await users(t);
    const results = await Promise.all(
      Array.from({ length: N }, () => create(h, owner, plantBody(TWO_POW_53_PLUS_1, 'fern', 'shade'))),
    );
    for (const res of results) assertOk(res, { name: 'fern', tag: 'shade' });
    assertOk(await list(h, owner), [{ name: 'fern', tag: 'shade' }]);
  });

  test('POST /plants lets exactly one of many users sending the identical body concurrently win', async (t) => {
    const { h } = await users(t);
    const tokens = await Promise.all(Array.from({ length: N }, (_, i) => h.token(`user-${i}`, READ_WRITE)));
    const results = await Promise.all(tokens.map((token) => create(h, token, plantBody('5', 'fern'))));
    const winners = results.flatMap((r, i) => (r.statusCode === 200 ? [i] : []));
    assert.equal(winners.length, 1, `status codes: ${results.map((r) => r.statusCode).join()}`);
    for (const [i, res] of results.entries()) {
      if (i === winners[0]) assertOk(res, { name: 'fern' });
      else assertError(res, 409);
    }
    for (const [i, token] of tokens.entries())
      assertOk(await list(h, token), i === winners[0] ? [{ name: 'fern' }] : []);
  });
});
