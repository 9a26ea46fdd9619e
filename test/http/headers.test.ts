import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { READ_WRITE, json, makeApp } from '../helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Credentials = 'read-write' | 'read' | 'none';

const cases: Array<[string, number, Credentials, InjectOptions]> = [
  [
    'POST /plants creating a plant',
    200,
    'read-write',
    { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') },
  ],
  ['GET /plants', 200, 'read-write', { method: 'GET', url: '/plants' }],
  ['HEAD /plants', 200, 'read-write', { method: 'HEAD', url: '/plants' }],
  ['DELETE /plants/{id} of an own plant', 204, 'read-write', { method: 'DELETE', url: '/plants/1' }],
  ['DELETE /plants/{id} of a missing plant', 404, 'read-write', { method: 'DELETE', url: '/plants/2' }],
  ['POST /plants with a bad body', 400, 'read-write', { method: 'POST', url: '/plants', ...json('{"id":"x"}') }],
  [
    'POST /plants with a text body',
    415,
    'read-write',
    { method: 'POST', url: '/plants', payload: 'fern', headers: { 'content-type': 'text/plain' } },
  ],
  ['GET /plants without a token', 401, 'none', { method: 'GET', url: '/plants' }],
  [
    'POST /plants without the write scope',
    403,
    'read',
    { method: 'POST', url: '/plants', ...json('{"id":3,"name":"fern"}') },
  ],
  ['an unknown path', 404, 'none', { method: 'GET', url: '/nowhere' }],
  ['PUT /plants', 405, 'read-write', { method: 'PUT', url: '/plants' }],
  ['GET /plants/{id}', 405, 'read-write', { method: 'GET', url: '/plants/1' }],
  ['GET /healthz', 200, 'none', { method: 'GET', url: '/healthz' }],
  ['GET /readyz', 200, 'none', { method: 'GET', url: '/readyz' }],
  ['GET /openapi.json', 200, 'none', { method: 'GET', url: '/openapi.json' }],
];

test('every response carries Cache-Control: no-store and X-Content-Type-Options: nosniff', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const tokens: Record<Credentials, string | undefined> = {
    'read-write': await h.token('alice', READ_WRITE),
    read: await h.token('bob', ['plants:read']),
    none: undefined,
  };
  for (const [name, status, credentials, options] of cases) {
    await t.test(`${name} → ${status}`, async () => {
      const response = await h.call(tokens[credentials], options);
      assert.equal(response.statusCode, status, response.body);
      assert.equal(response.headers['cache-control'], 'no-store');
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.match(String(response.headers['x-request-id']), UUID);
      if (status >= 400 && options.method !== 'HEAD') {
        assert.deepEqual(Object.keys(response.json<object>()).sort(), ['error', 'message']);
      }
    });
  }
});

test('X-Request-Id is echoed when the client sends one', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const id of ['abc-123', 'f47ac10b-58cc-4372-a567-0e02b2c3d479', 'trace:1/2;x=y', 'x'.repeat(64)]) {
    const ok = await h.call(token, { method: 'GET', url: '/plants', headers: { 'x-request-id': id } });
    assert.equal(ok.statusCode, 200);
    assert.deepEqual(ok.json(), []);
    assert.equal(ok.headers['x-request-id'], id);
  }
  const unauthorised = await h.call(undefined, {
    method: 'GET',
    url: '/plants',
    headers: { 'x-request-id': 'req-401' },
  });
  assert.equal(unauthorised.statusCode, 401);
  assert.equal(unauthorised.headers['x-request-id'], 'req-401');
  const missing = await h.call(undefined, { method: 'GET', url: '/nowhere', headers: { 'x-request-id': 'req-404' } });
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.headers['x-request-id'], 'req-404');
});

test('X-Request-Id is a fresh UUID for each request that sends none', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const first = await h.call(undefined, { method: 'GET', url: '/healthz' });
  const second = await h.call(undefined, { method: 'GET', url: '/healthz' });
  assert.equal(first.statusCode, 200);
  assert.equal(second.statusCode, 200);
  assert.match(String(first.headers['x-request-id']), UUID);
  assert.match(String(second.headers['x-request-id']), UUID);
  assert.notEqual(first.headers['x-request-id'], second.headers['x-request-id']);
});

test('a junk or oversized X-Request-Id is replaced by a generated UUID', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const junk of [
    'has spaces in it',
    'tab\there',
    'caf\u00e9',
    '<script>\u0000',
    'x'.repeat(1000),
    'y'.repeat(10_000),
  ]) {
    const response = await h.call(token, { method: 'GET', url: '/plants', headers: { 'x-request-id': junk } });
    assert.equal(response.statusCode, 200, JSON.stringify(junk));
    assert.deepEqual(response.json(), []);
    assert.match(String(response.headers['x-request-id']), UUID, JSON.stringify(junk));
  }
});
