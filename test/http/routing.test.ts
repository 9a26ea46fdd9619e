import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HTTPMethods } from 'fastify';
import { READ_WRITE, makeApp } from '../helpers.js';
import { assertErrorBody } from './support.js';

test('an unknown path answers 404 with an Error body', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const [method, url] of [
    ['GET', '/'],
    ['GET', '/plant'],
    ['POST', '/plants/1/leaves'],
    ['GET', '/plants/1/leaves'],
    ['DELETE', '/nowhere?x=1'],
  ] as const) {
    for (const credentials of [token, undefined]) {
      const response = await h.call(credentials, { method, url });
      assertErrorBody(response, 404);
      assert.equal(response.headers.allow, undefined, `${method} ${url}`);
    }
  }
});

test('a wrong method on /plants answers 405 with Allow: GET, HEAD, POST and an Error body', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS'] satisfies HTTPMethods[]) {
    for (const url of ['/plants', '/plants?limit=5']) {
      const response = await h.call(token, { method, url });
      assertErrorBody(response, 405);
      assert.equal(response.headers.allow, 'GET, HEAD, POST', `${method} ${url}`);
    }
  }
});

test('a wrong method on /plants/{id} answers 405 with Allow: DELETE and an Error body', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const method of ['GET', 'POST', 'PUT', 'PATCH'] satisfies HTTPMethods[]) {
    for (const url of ['/plants/1', '/plants/9007199254740993', '/plants/abc']) {
      const response = await h.call(token, { method, url });
      assertErrorBody(response, 405);
      assert.equal(response.headers.allow, 'DELETE', `${method} ${url}`);
    }
  }
});

test('HEAD /plants with a read token answers 200 without a body', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', ['plants:read']);
  const response = await h.call(token, { method: 'HEAD', url: '/plants' });
  assert.equal(response.statusCode, 200);
  assert.equal(response.body, '');
  assert.match(String(response.headers['content-type']), /^application\/json\b/);
});

test('a trailing slash names nothing: /plants/ and /webhooks/ answer 404 pointing at the path without it', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', [...READ_WRITE, 'webhooks:read', 'webhooks:write']);
  for (const [path, meant] of [
    ['/plants/', '/plants'],
    ['/webhooks/', '/webhooks'],
  ] as const) {
    for (const method of ['GET', 'HEAD', 'POST', 'DELETE', 'PUT', 'OPTIONS'] satisfies HTTPMethods[]) {
      for (const url of [path, `${path}?limit=5`]) {
        // Before authentication, like every unknown path: a token changes nothing.
        for (const credentials of [token, undefined]) {
          const response = await h.call(credentials, { method, url });
          assert.equal(response.statusCode, 404, `${method} ${url}`);
          assert.equal(response.headers.allow, undefined, `${method} ${url}`);
          assert.equal(response.headers['www-authenticate'], undefined, `${method} ${url}`);
          if (method === 'HEAD') continue;
          assertErrorBody(response, 404);
          const { message } = response.json<{ message: string }>();
          assert.equal(message, `no route ${method} ${path}; did you mean ${meant}, without the slash?`);
        }
      }
    }
  }
  // An empty id anywhere else is an unknown path too; real ids behave as before.
  assertErrorBody(await h.call(token, { method: 'POST', url: '/webhooks//enable' }), 404);
  assertErrorBody(await h.call(token, { method: 'GET', url: '/webhooks//deliveries' }), 404);
  assert.equal(
    (await h.call(token, { method: 'POST', url: '/plants', payload: { id: 1, name: 'fern' } })).statusCode,
    200,
  );
  assert.equal((await h.call(token, { method: 'DELETE', url: '/plants/1' })).statusCode, 204);
  assertErrorBody(await h.call(token, { method: 'DELETE', url: '/plants/1' }), 404);
  assertErrorBody(await h.call(token, { method: 'DELETE', url: '/plants/abc' }), 400);
  const wrong = await h.call(token, { method: 'GET', url: '/plants/1' });
  assertErrorBody(wrong, 405);
  assert.equal(wrong.headers.allow, 'DELETE');
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), []);
});
