import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody } from './support.js';

const LIMITED = { rateLimit: { max: 3, windowMs: 60_000 } };

/** A whole number of seconds within the one-minute window. */
function assertSeconds(value: unknown, name: string): void {
  assert.match(String(value), /^\d+$/, name);
  assert.ok(Number(value) >= 1 && Number(value) <= 60, `${name} = ${String(value)}`);
}

function assertRateLimitHeaders(response: LightMyRequestResponse, remaining: number): void {
  assert.equal(response.headers['ratelimit-limit'], '3');
  assert.equal(response.headers['ratelimit-remaining'], String(remaining));
  assertSeconds(response.headers['ratelimit-reset'], 'RateLimit-Reset');
}

test('successful responses carry RateLimit-Limit, -Remaining and -Reset', async (t) => {
  const h = await makeApp(LIMITED);
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const created = await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') });
  assert.equal(created.statusCode, 200);
  assert.deepEqual(created.json(), { name: 'fern' });
  assertRateLimitHeaders(created, 2);
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), [{ name: 'fern' }]);
  assertRateLimitHeaders(listed, 1);
  const deleted = await h.call(token, { method: 'DELETE', url: '/plants/1' });
  assert.equal(deleted.statusCode, 204);
  assertRateLimitHeaders(deleted, 0);
});

test('the request after the limit answers 429 with Retry-After, RateLimit-* and an Error body', async (t) => {
  const h = await makeApp(LIMITED);
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (let i = 0; i < 3; i++) {
    const response = await h.call(token, { method: 'GET', url: '/plants' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), []);
  }
  for (const request of [
    { method: 'GET', url: '/plants' },
    { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') },
    { method: 'DELETE', url: '/plants/1' },
  ] as const) {
    const limited = await h.call(token, request);
    assertErrorBody(limited, 429);
    assertSeconds(limited.headers['retry-after'], 'Retry-After');
    assertRateLimitHeaders(limited, 0);
    assert.equal(limited.headers['cache-control'], 'no-store');
  }
  // The refused POST created nothing.
  const other = await h.token('alice', READ_WRITE);
  const listed = await h.call(other, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('the limit counts per token: another token is unaffected', async (t) => {
  const h = await makeApp(LIMITED);
  t.after(() => h.close());
  const first = await h.token('alice', READ_WRITE);
  const second = await h.token('alice', READ_WRITE);
  for (let i = 0; i < 3; i++) assert.equal((await h.call(first, { method: 'GET', url: '/plants' })).statusCode, 200);
  assertErrorBody(await h.call(first, { method: 'GET', url: '/plants' }), 429);
  const response = await h.call(second, { method: 'GET', url: '/plants' });
  assert.equal(response.statusCode, 200);
  assert.deepEqual(response.json(), []);
  assertRateLimitHeaders(response, 2);
});

test('with rateLimit null there is no limit and no RateLimit headers', async (t) => {
  const h = await makeApp({ rateLimit: null });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (let i = 0; i < 20; i++) {
    const response = await h.call(token, { method: 'GET', url: '/plants' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), []);
    for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']) {
      assert.equal(response.headers[name], undefined, name);
    }
  }
});

test('requests refused for a missing scope count toward the limit and carry RateLimit-* headers', async (t) => {
  const h = await makeApp(LIMITED);
  t.after(() => h.close());
  const writeOnly = await h.token('alice', ['plants:write']);
  for (const remaining of [2, 1, 0]) {
    const r = await h.call(writeOnly, { method: 'GET', url: '/plants' });
    assertErrorBody(r, 403);
    assertRateLimitHeaders(r, remaining);
  }
  const limited = await h.call(writeOnly, { method: 'GET', url: '/plants' });
  assertErrorBody(limited, 429);
  assertSeconds(limited.headers['retry-after'], 'Retry-After');
});

test('requests refused by authentication are not counted and carry no RateLimit-* headers', async (t) => {
  const h = await makeApp(LIMITED);
  t.after(() => h.close());
  for (let i = 0; i < 5; i++) {
    const r = await h.call('pst_nope', { method: 'GET', url: '/plants' });
    assertErrorBody(r, 401);
    assert.equal(r.headers['ratelimit-limit'], undefined);
  }
});
