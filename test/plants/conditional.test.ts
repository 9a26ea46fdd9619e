import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { READ_WRITE, TEST_ENGINE, type TestApp, makeApp } from '../helpers.js';
import { scratchSchema } from '../support/postgres.js';
import {
  type Response,
  assertError,
  assertNoContent,
  assertOk,
  create,
  nameOf,
  plantBody,
  remove,
  seed,
} from './plant.helpers.js';

// Conditional requests: list pages carry a strong ETag made from the bytes sent, and
// If-None-Match answers 304 while the page is unchanged (RFC 9110 §8.8.3, §13.1.2, §15.4.5).

const STRONG_TAG = /^"[A-Za-z0-9_-]{22}"$/;

async function appWithUser(t: TestContext): Promise<{ h: TestApp; token: string }> {
  const h = await makeApp();
  t.after(() => h.close());
  return { h, token: await h.token('alice', READ_WRITE) };
}

const range = (from: number, count: number): string[] => Array.from({ length: count }, (_, i) => String(from + i));

function get(
  h: TestApp,
  token: string | undefined,
  url: string,
  headers: Record<string, string> = {},
  method: 'GET' | 'HEAD' = 'GET',
): Promise<Response> {
  return h.call(token, { method, url, headers });
}

/** A 304: no body, no content headers, and the headers the 200 would carry (RFC 9110 §15.4.5). */
function assertNotModified(res: Response, etag: string, fresh?: Response): void {
  assert.equal(res.statusCode, 304, `status (body: ${res.body.slice(0, 200)})`);
  assert.equal(res.rawPayload.length, 0, 'no body');
  assert.equal(res.headers.etag, etag);
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.ok(res.headers['x-request-id'], 'X-Request-Id');
  assert.equal(res.headers['content-type'], undefined);
  assert.equal(res.headers['content-length'], undefined);
  assert.equal(res.headers['content-encoding'], undefined);
  if (fresh) {
    assert.equal(res.headers.link, fresh.headers.link, 'Link, as the 200 has it');
    assert.equal(res.headers.vary, fresh.headers.vary, 'Vary, as the 200 has it');
  }
}

describe('GET /plants carries a strong ETag made from the page', () => {
  test('the ETag is strong, the same for the same page, and differs between pages', async (t) => {
    const { h, token } = await appWithUser(t);
    const empty = await get(h, token, '/plants');
    assertOk(empty, []);
    assert.match(String(empty.headers.etag), STRONG_TAG);
    await seed(h, token, range(1, 3));
    const first = await get(h, token, '/plants?limit=2');
    const again = await get(h, token, '/plants?limit=2');
    assert.match(String(first.headers.etag), STRONG_TAG);
    assert.equal(again.headers.etag, first.headers.etag);
    const all = await get(h, token, '/plants');
    assert.notEqual(all.headers.etag, first.headers.etag);
    assert.notEqual(all.headers.etag, empty.headers.etag);
  });

  test('If-None-Match with the page’s ETag answers 304 with no body and the 200’s headers', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 3));
    const fresh = await get(h, token, '/plants?limit=2');
    assert.ok(fresh.headers.link, 'the page has a next link');
    const etag = String(fresh.headers.etag);
    const res = await get(h, token, '/plants?limit=2', { 'if-none-match': etag, 'x-request-id': 'poll-1' });
    assertNotModified(res, etag, fresh);
    assert.equal(res.headers['x-request-id'], 'poll-1');
  });

  test('If-None-Match compares weakly, takes a list, and `*`; another tag or a malformed value gets the page', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 2));
    const fresh = await get(h, token, '/plants');
    const etag = String(fresh.headers.etag);
    for (const value of [etag, `W/${etag}`, `"other", ${etag}`, ` "a" ,W/"b",${etag} `, '*']) {
      assertNotModified(await get(h, token, '/plants', { 'if-none-match': value }), etag);
    }
    const unquoted = etag.slice(1, -1);
    for (const value of ['"other"', 'W/"other", "x"', unquoted, `${etag}x`, `w/${etag}`, `${etag} "other"`, '"']) {
      const res = await get(h, token, '/plants', { 'if-none-match': value });
      assertOk(res, [{ name: nameOf('1') }, { name: nameOf('2') }]);
      assert.equal(res.headers.etag, etag, value);
    }
  });

  test('a create or a delete that changes the page answers 200 with the new page and a new ETag', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 3));
    const before = await get(h, token, '/plants');
    const created = await create(h, token, plantBody('0', 'fern'));
    assertOk(created, { name: 'fern' });
    const afterCreate = await get(h, token, '/plants', { 'if-none-match': String(before.headers.etag) });
    assertOk(afterCreate, [{ name: 'fern' }, ...range(1, 3).map((id) => ({ name: nameOf(id) }))]);
    assert.notEqual(afterCreate.headers.etag, before.headers.etag);
    assertNotModified(
      await get(h, token, '/plants', { 'if-none-match': String(afterCreate.headers.etag) }),
      String(afterCreate.headers.etag),
    );
    assertNoContent(await remove(h, token, '2'));
    const afterDelete = await get(h, token, '/plants', { 'if-none-match': String(afterCreate.headers.etag) });
    assertOk(afterDelete, [{ name: 'fern' }, { name: nameOf('1') }, { name: nameOf('3') }]);
    assert.notEqual(afterDelete.headers.etag, afterCreate.headers.etag);
    // Back to the same plants: the same bytes, so the same tag as before (it depends on nothing else).
    assertNoContent(await remove(h, token, '0'));
    assertOk(await create(h, token, plantBody('2', nameOf('2'))), { name: nameOf('2') });
    assertNotModified(
      await get(h, token, '/plants', { 'if-none-match': String(before.headers.etag) }),
      String(before.headers.etag),
    );
  });

  test('a change outside the page, or to another user’s plants, leaves it 304', async (t) => {
    const { h, token } = await appWithUser(t);
    const bob = await h.token('bob', READ_WRITE);
    await seed(h, token, range(1, 3));
    const page = await get(h, token, '/plants?limit=2');
    const etag = String(page.headers.etag);
    assertOk(await create(h, token, plantBody('10', 'beyond the page')), { name: 'beyond the page' });
    assertOk(await create(h, bob, plantBody('-1', 'bob’s')), { name: 'bob’s' });
    assertNotModified(await get(h, token, '/plants?limit=2', { 'if-none-match': etag }), etag, page);
  });

  test('an admin’s page changes with any user’s create', async (t) => {
    const { h, token } = await appWithUser(t);
    const admin = await h.token('root', ['plants:admin']);
    await seed(h, token, range(1, 2));
    const page = await get(h, admin, '/plants');
    const etag = String(page.headers.etag);
    assertNotModified(await get(h, admin, '/plants', { 'if-none-match': etag }), etag);
    assertOk(await create(h, token, plantBody('3', 'fern')), { name: 'fern' });
    const changed = await get(h, admin, '/plants', { 'if-none-match': etag });
    assertOk(changed, [{ name: nameOf('1') }, { name: nameOf('2') }, { name: 'fern' }]);
  });

  test('the ETag covers the Link header: the same names with another next cursor is another page', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, ['1', '3', '5']);
    const before = await get(h, token, '/plants?limit=2');
    // Plant 3 gives way to a plant 2 of the same name: the same body, but the next page starts elsewhere.
    assertNoContent(await remove(h, token, '3'));
    assertOk(await create(h, token, plantBody('2', nameOf('3'))), { name: nameOf('3') });
    const after = await get(h, token, '/plants?limit=2', { 'if-none-match': String(before.headers.etag) });
    assert.equal(after.statusCode, 200);
    assert.equal(after.body, before.body);
    assert.notEqual(after.headers.link, before.headers.link);
    assert.notEqual(after.headers.etag, before.headers.etag);
  });

  test('HEAD with a matching If-None-Match answers 304 with the Content-Length the 200 has', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 3));
    const head = await get(h, token, '/plants', {}, 'HEAD');
    assert.equal(head.statusCode, 200);
    const etag = String(head.headers.etag);
    const res = await get(h, token, '/plants', { 'if-none-match': etag }, 'HEAD');
    assert.equal(res.statusCode, 304);
    assert.equal(res.rawPayload.length, 0);
    assert.equal(res.headers.etag, etag);
    assert.equal(res.headers['content-length'], head.headers['content-length']);
    assert.equal(res.headers['cache-control'], 'no-store');
  });
});

describe('each content coding of a page has its own ETag', () => {
  test('gzip and brotli tags are the identity tag with a suffix, and If-None-Match matches what would be sent', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 100));
    const identity = await get(h, token, '/plants');
    const gzip = await get(h, token, '/plants', { 'accept-encoding': 'gzip' });
    const br = await get(h, token, '/plants', { 'accept-encoding': 'br' });
    const tag = String(identity.headers.etag);
    assert.match(tag, STRONG_TAG);
    assert.equal(gzip.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(gzip.rawPayload).toString('utf8'), identity.body);
    assert.equal(gzip.headers.etag, `${tag.slice(0, -1)}-gzip"`);
    assert.equal(br.headers.etag, `${tag.slice(0, -1)}-br"`);
    const tags = { identity: tag, gzip: String(gzip.headers.etag), br: String(br.headers.etag) };
    const accept = { identity: 'identity', gzip: 'gzip', br: 'br' };
    for (const [asked, acceptEncoding] of Object.entries(accept)) {
      for (const [held, etag] of Object.entries(tags)) {
        const res = await get(h, token, '/plants', { 'accept-encoding': acceptEncoding, 'if-none-match': etag });
        if (asked === held)
          assertNotModified(res, etag, asked === 'identity' ? identity : asked === 'gzip' ? gzip : br);
        else {
          assert.equal(res.statusCode, 200, `${asked} with the ${held} tag`);
          assert.equal(res.headers.etag, tags[asked as keyof typeof tags]);
        }
      }
    }
    assert.equal(gzip.headers.vary, 'accept-encoding');
  });
});

describe('a 304 needs what a 200 needs: no token, no 304', () => {
  test('GET /plants with a matching If-None-Match answers 401 without a valid token and 403 without the scope', async (t) => {
    const { h, token } = await appWithUser(t);
    await seed(h, token, range(1, 2));
    const etag = String((await get(h, token, '/plants')).headers.etag);
    const conditional = { 'if-none-match': etag };
    assertError(await get(h, undefined, '/plants', conditional), 401);
    assertError(await get(h, 'pst_not_a_real_token', '/plants', conditional), 401);
    const writeOnly = await h.token('alice', ['plants:write']);
    assertError(await get(h, writeOnly, '/plants', conditional), 403);
    const other = await h.token('bob', ['plants:read']);
    const bobs = await get(h, other, '/plants', conditional);
    assertOk(bobs, []);
    assert.notEqual(bobs.headers.etag, etag);
  });
});

/** Two stores of the engine under test over one database, as two servers share it; and its removal. */
async function twoStores(): Promise<{ stores: [Store, Store]; drop: () => Promise<void> }> {
  if (TEST_ENGINE === 'postgres') {
    const scratch = await scratchSchema();
    const stores: [Store, Store] = [
      openPostgres(scratch.url, { poolSize: 2 }),
      openPostgres(scratch.url, { poolSize: 2 }),
    ];
    return { stores, drop: () => scratch.drop() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-etag-'));
  const file = join(dir, 'plants.db');
  return {
    stores: [openSqlite(file), openSqlite(file)],
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

test(`two instances over one ${TEST_ENGINE} database give the same ETag, and see each other's changes`, async (t) => {
  const {
    stores: [storeA, storeB],
    drop,
  } = await twoStores();
  const a = await makeApp({}, storeA);
  const b = await makeApp({}, storeB);
  t.after(async () => {
    await a.close();
    await b.close();
    await drop();
  });
  const token = await a.token('alice', READ_WRITE);
  await seed(a, token, range(1, 60)); // above 1 KiB, so the codings are compared too
  for (const acceptEncoding of ['identity', 'gzip', 'br']) {
    const fromA = await get(a, token, '/plants?limit=50', { 'accept-encoding': acceptEncoding });
    const fromB = await get(b, token, '/plants?limit=50', { 'accept-encoding': acceptEncoding });
    assert.equal(fromA.statusCode, 200);
    assert.equal(fromB.headers.etag, fromA.headers.etag, acceptEncoding);
    assert.deepEqual(fromB.rawPayload, fromA.rawPayload, acceptEncoding);
    assertNotModified(
      await get(b, token, '/plants?limit=50', {
        'accept-encoding': acceptEncoding,
        'if-none-match': String(fromA.headers.etag),
      }),
      String(fromA.headers.etag),
    );
  }
  const before = String((await get(a, token, '/plants?limit=50')).headers.etag);
  // A change through one instance: the other answers the new page at once.
  assertOk(await create(b, token, plantBody('0', 'fern')), { name: 'fern' });
  const changed = await get(a, token, '/plants?limit=50', { 'if-none-match': before });
  assert.equal(changed.statusCode, 200);
  assert.deepEqual(changed.json<unknown[]>()[0], { name: 'fern' });
  const etag = String(changed.headers.etag);
  assert.notEqual(etag, before);
  assertNotModified(await get(b, token, '/plants?limit=50', { 'if-none-match': etag }), etag);
  assertNoContent(await remove(a, token, '0'));
  const restored = await get(b, token, '/plants?limit=50', { 'if-none-match': etag });
  assert.equal(restored.statusCode, 200);
  assert.equal(restored.headers.etag, before);
});
