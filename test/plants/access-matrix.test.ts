import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import {
  TWO_POW_53,
  TWO_POW_53_PLUS_1,
  type Response,
  assertError,
  assertForbidden,
  assertIndistinguishable,
  assertNoContent,
  assertOk,
  create,
  list,
  plantBody,
  remove,
  stableHeaders,
  tokenWithScopes,
} from './plant.helpers.js';

// Every operation × every set of scopes × the caller's own plant, another user's plant and a
// missing one (issue: "no user sees or deletes another's plants"). The caller (carol) and another
// user (dave) hold adjacent ids beyond 2^53: an id that went through a JS number would confuse them.
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
async function world(t: TestContext, scopes: readonly string[]): Promise<World> {
  const h = await makeApp();
  t.after(() => h.close());
  const carol = await h.token('carol', READ_WRITE);
  const dave = await h.token('dave', READ_WRITE);
  assertOk(await create(h, carol, OWN.body), OWN_PLANT);
  assertOk(await create(h, dave, OTHER.body), OTHER_PLANT);
  return { h, caller: await tokenWithScopes(h, 'carol', scopes), carol, dave };
}

/** What each owner now sees of their own plants. */
async function assertHoldings(w: World, carol: unknown[], dave: unknown[]): Promise<void> {
  assertOk(await list(w.h, w.carol), carol);
  assertOk(await list(w.h, w.dave), dave);
}

// Every subset of the three scopes, and scopes the service must not honour: none at all, names it
// does not know, look-alikes of plants:admin, and other letter case (scope tokens are
// case-sensitive, RFC 6749 §3.3).
const SCOPE_SETS: ReadonlyArray<readonly string[]> = [
  [],
  ['plants:read'],
  ['plants:write'],
  ['plants:admin'],
  ['plants:read', 'plants:write'],
  ['plants:admin', 'plants:read'],
  ['plants:admin', 'plants:write'],
  ['plants:read', 'plants:write', 'plants:admin'],
  ['plants:delete', 'openid'],
  ['Plants:Read', 'PLANTS:WRITE', 'PLANTS:ADMIN'],
  ['admin', 'plants', 'plants:*', 'plants:admin:all'],
  ['plants:read', 'plants:write', 'PLANTS:ADMIN', 'plants:*'],
  ['plants:write', 'profile'],
];

describe('access matrix: operation × scopes × own, other user’s and missing plant', () => {
  for (const scopes of SCOPE_SETS) {
    const admin = scopes.includes('plants:admin');
    const canRead = admin || scopes.includes('plants:read');
    const canWrite = admin || scopes.includes('plants:write');
    const label = scopes.length === 0 ? 'no scope' : scopes.join('+');
    const visible = admin ? [OTHER_PLANT, OWN_PLANT] : [OWN_PLANT];

    test(`GET and HEAD /plants with ${label} ${canRead ? (admin ? 'list every user’s plants' : 'list only the caller’s own plants') : 'answer 403'}`, async (t) => {
      const w = await world(t, scopes);
      const all = await list(w.h, w.caller);
      const tagged = await list(w.h, w.caller, '?tag=shade'); // both plants carry this tag
      const head = await w.h.call(w.caller, { method: 'HEAD', url: '/plants' });
      if (!canRead) {
        assertForbidden(all, 'plants:read');
        assertIndistinguishable(all, tagged);
      } else {
        assertOk(all, visible);
        assertOk(tagged, visible);
      }
      // HEAD is GET without the body: its Content-Length would tell as much as the body.
      assert.equal(head.statusCode, all.statusCode);
      assert.equal(head.payload, '');
      assert.deepEqual(stableHeaders(head), stableHeaders(all));
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`POST /plants with ${label} ${canWrite ? 'answers 200 to an identical retry of the caller’s own plant, 409 to a changed one' : 'answers 403'}`, async (t) => {
      const w = await world(t, scopes);
      const retry = await create(w.h, w.caller, OWN.body);
      const changed = await create(w.h, w.caller, plantBody(OWN.id, 'carol fern', 'sun'));
      if (!canWrite) {
        assertForbidden(retry, 'plants:write');
        assertIndistinguishable(retry, changed);
      } else {
        assertOk(retry, OWN_PLANT);
        assertError(changed, 409);
      }
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`POST /plants with ${label} ${canWrite ? 'answers 409, as for an id the caller holds,' : 'answers 403'} for another user’s id`, async (t) => {
      const w = await world(t, scopes);
      // Dave's plant exactly: a "retry" by someone who is not its owner.
      const same = await create(w.h, w.caller, OTHER.body);
      const changed = await create(w.h, w.caller, plantBody(OTHER.id, 'carol moss'));
      assertIndistinguishable(same, changed);
      if (!canWrite) {
        assertForbidden(same, 'plants:write');
        assertIndistinguishable(same, await create(w.h, w.caller, plantBody(MISSING, 'new', 'shade')));
        await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
        return;
      }
      const { message } = assertError(same, 409);
      assert.doesNotMatch(message, /dave|carol/i, 'the 409 does not name an owner');
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
      // The same id, now held by the caller itself under another name: the answer is the same.
      assertNoContent(await remove(w.h, w.dave, OTHER.id));
      assertOk(await create(w.h, w.carol, plantBody(OTHER.id, 'carol moss', 'sun')), {
        name: 'carol moss',
        tag: 'sun',
      });
      assertIndistinguishable(same, await create(w.h, w.caller, OTHER.body), 'the 409 for dave’s id and for carol’s');
    });

    test(`POST /plants with ${label} ${canWrite ? 'creates a plant owned by the caller' : 'answers 403'} for a missing id`, async (t) => {
      const w = await world(t, scopes);
      const res = await create(w.h, w.caller, plantBody(MISSING, 'new', 'shade'));
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertOk(res, NEW_PLANT);
      await assertHoldings(w, canWrite ? [OWN_PLANT, NEW_PLANT] : [OWN_PLANT], [OTHER_PLANT]);
    });

    test(`DELETE /plants/{id} with ${label} ${canWrite ? 'answers 204' : 'answers 403'} for the caller’s own plant`, async (t) => {
      const w = await world(t, scopes);
      const res = await remove(w.h, w.caller, OWN.id);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertNoContent(res);
      await assertHoldings(w, canWrite ? [] : [OWN_PLANT], [OTHER_PLANT]);
    });

    const otherOutcome = !canWrite
      ? 'answers the 403 of any id'
      : admin
        ? 'answers 204'
        : 'answers a 404 byte-identical to a missing plant’s';
    test(`DELETE /plants/{id} with ${label} ${otherOutcome} for another user’s plant`, async (t) => {
      const w = await world(t, scopes);
      const res = await remove(w.h, w.caller, OTHER.id);
      if (!canWrite) {
        assertForbidden(res, 'plants:write');
        assertIndistinguishable(res, await remove(w.h, w.caller, OWN.id), 'the 403 for dave’s plant and carol’s');
        assertIndistinguishable(res, await remove(w.h, w.caller, MISSING), 'the 403 for dave’s plant and none');
      } else if (admin) {
        assertNoContent(res);
      } else {
        assertError(res, 404);
      }
      await assertHoldings(w, [OWN_PLANT], admin ? [] : [OTHER_PLANT]);
      if (canWrite && !admin) {
        // The same id once no plant holds it: the caller cannot tell the two apart.
        assertNoContent(await remove(w.h, w.dave, OTHER.id));
        assertIndistinguishable(res, await remove(w.h, w.caller, OTHER.id), 'the 404 for dave’s plant and none');
      }
    });

    test(`DELETE /plants/{id} with ${label} ${canWrite ? 'answers 404' : 'answers 403'} for a missing plant`, async (t) => {
      const w = await world(t, scopes);
      const res = await remove(w.h, w.caller, MISSING);
      if (!canWrite) assertForbidden(res, 'plants:write');
      else assertError(res, 404);
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });
  }
});

// The rows of the matrix without a usable token: every request answers the same 401, whatever
// its target or body (authentication runs before anything else), and nothing changes.
const REQUESTS = [
  { method: 'GET', url: '/plants' },
  { method: 'GET', url: '/plants?limit=0' },
  { method: 'HEAD', url: '/plants' },
  { method: 'POST', url: '/plants', ...json(plantBody(MISSING, 'new')) },
  { method: 'POST', url: '/plants', ...json(OTHER.body) },
  { method: 'POST', url: '/plants', ...json('{"id":"bad"') },
  { method: 'DELETE', url: `/plants/${OWN.id}` },
  { method: 'DELETE', url: `/plants/${OTHER.id}` },
  { method: 'DELETE', url: `/plants/${MISSING}` },
  { method: 'DELETE', url: '/plants/abc' },
] as const;

const INVALID = 'Bearer realm="plant-store", error="invalid_token"';

const CREDENTIALS: ReadonlyArray<[string, string, (w: World) => Promise<string | undefined>]> = [
  ['no token', 'Bearer realm="plant-store"', () => Promise.resolve(undefined)],
  ['a token never issued', INVALID, () => Promise.resolve('pst_notARealTokenAtAll000000000000000000000000000000')],
  ['carol’s admin token with one character changed', INVALID, async (w) => flip(await adminToken(w))],
  [
    'carol’s revoked admin token',
    INVALID,
    async (w) => {
      const issued = await w.h.tokens.create({ subject: 'carol', scopes: ['plants:admin'] });
      assert.equal(await w.h.tokens.revoke(issued.id), true);
      return issued.token;
    },
  ],
  [
    'carol’s expired admin token',
    INVALID,
    async (w) => {
      const token = await w.h.token('carol', ['plants:admin'], 1000);
      // Well past its expiry on any clock: on PostgreSQL the database's clock stamped it, and the
      // app's clock is compared with it through an offset measured a moment earlier.
      w.h.advance(60_000);
      return token;
    },
  ],
];

const adminToken = (w: World): Promise<string> => w.h.token('carol', ['plants:admin']);
const flip = (token: string): string => token.slice(0, 20) + (token[20] === 'a' ? 'b' : 'a') + token.slice(21);

describe('access matrix: requests without a usable token', () => {
  for (const [label, challenge, credential] of CREDENTIALS) {
    test(`every operation on own, other user’s and missing plants answers the same 401 with ${label}`, async (t) => {
      const w = await world(t, READ_WRITE);
      const token = await credential(w);
      const answers: Response[] = [];
      for (const request of REQUESTS) answers.push(await w.h.call(token, request));
      const first = answers[0]!;
      assertError(first, 401);
      assert.equal(first.headers['www-authenticate'], challenge);
      answers.forEach((res, i) => {
        const { method, url } = REQUESTS[i]!;
        if (method === 'HEAD') assert.equal(res.statusCode, 401, `${method} ${url}`);
        else assertIndistinguishable(first, res, `${method} ${url}`);
      });
      await assertHoldings(w, [OWN_PLANT], [OTHER_PLANT]);
    });
  }
});
