import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { mintToken } from '../../src/auth/token.js';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody, assertErrorJson, listen, parseRaw, rawExchange } from './support.js';

const CHALLENGE = 'Bearer realm="plant-store"';
const INVALID_TOKEN = 'Bearer realm="plant-store", error="invalid_token"';
const INVALID_REQUEST = 'Bearer realm="plant-store", error="invalid_request"';
const insufficientScope = (scope: string): string =>
  `Bearer realm="plant-store", error="insufficient_scope", scope="${scope}"`;

function assertInvalidToken(response: LightMyRequestResponse): void {
  assertErrorBody(response, 401);
  assert.equal(response.headers['www-authenticate'], INVALID_TOKEN);
}

test('a request without Authorization answers 401 with a bare Bearer challenge', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  for (const [method, url] of [
    ['GET', '/plants'],
    ['HEAD', '/plants'],
    ['POST', '/plants'],
    ['DELETE', '/plants/1'],
  ] as const) {
    const response = await h.call(undefined, { method, url });
    assert.equal(response.statusCode, 401, `${method} ${url}`);
    assert.equal(response.headers['www-authenticate'], CHALLENGE, `${method} ${url}`);
    if (method !== 'HEAD') assertErrorBody(response, 401);
  }
});

test('a malformed bearer token answers 401 invalid_token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const valid = await h.token('alice', READ_WRITE);
  for (const header of [
    'Bearer not-a-token',
    'Bearer pst_short',
    `Bearer ${valid.slice(0, -1)}`,
    `Bearer ${valid}x`,
    `Bearer ${valid} junk`,
    `Bearer ${valid.replace('pst_', 'xyz_')}`,
  ]) {
    assertInvalidToken(await h.app.inject({ method: 'GET', url: '/plants', headers: { authorization: header } }));
  }
});

test('a well-formed token that was never issued answers 401 invalid_token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  await h.token('alice', READ_WRITE);
  assertInvalidToken(await h.call(mintToken().token, { method: 'GET', url: '/plants' }));
});

test('an issued token with a wrong checksum answers 401 invalid_token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const last = token.at(-1) === 'a' ? 'b' : 'a';
  assertInvalidToken(await h.call(token.slice(0, -1) + last, { method: 'GET', url: '/plants' }));
  const response = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(response.statusCode, 200);
  assert.deepEqual(response.json(), []);
});

test('an expired token answers 401 invalid_token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE, 60_000);
  const before = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(before.statusCode, 200);
  assert.deepEqual(before.json(), []);
  h.advance(60_000);
  assertInvalidToken(await h.call(token, { method: 'GET', url: '/plants' }));
  assertInvalidToken(await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') }));
});

test('a revoked token answers 401 invalid_token within 5 seconds', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const issued = await h.tokens.create({ subject: 'alice', scopes: READ_WRITE });
  const before = await h.call(issued.token, { method: 'GET', url: '/plants' });
  assert.equal(before.statusCode, 200);
  assert.equal(await h.tokens.revoke(issued.id), true);
  h.advance(5000);
  assertInvalidToken(await h.call(issued.token, { method: 'GET', url: '/plants' }));
});

test('the Bearer scheme word is case-insensitive', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
    const response = await h.app.inject({
      method: 'GET',
      url: '/plants',
      headers: { authorization: `${scheme} ${token}` },
    });
    assert.equal(response.statusCode, 200, scheme);
    assert.deepEqual(response.json(), []);
  }
});

test('two Authorization headers answer 400 invalid_request (injected)', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const pair of [
    [`Bearer ${token}`, `Bearer ${token}`],
    [`Bearer ${token}`, 'Bearer other'],
  ]) {
    // light-my-request sends an array as repeated headers, listed one by one in rawHeaders.
    const headers: Record<string, string[]> = { authorization: pair };
    const response = await h.app.inject({ method: 'GET', url: '/plants', headers });
    assertErrorBody(response, 400);
    assert.equal(response.headers['www-authenticate'], INVALID_REQUEST);
  }
});

test('two Authorization headers answer 400 invalid_request (over a real connection)', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const port = await listen(h);
  const response = parseRaw(
    await rawExchange(
      t,
      port,
      `GET /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Authorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
    ),
  );
  assert.equal(response.status, 400);
  assert.equal(response.headers['www-authenticate'], INVALID_REQUEST);
  assert.match(response.headers['content-type'] ?? '', /^application\/json\b/);
  assertErrorJson(response.body, 400);
});

test('a token without the needed scope answers 403 insufficient_scope naming the scope', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const reader = await h.token('alice', ['plants:read']);
  const writer = await h.token('alice', ['plants:write']);
  const cases = [
    [writer, 'GET', '/plants', 'plants:read'],
    [reader, 'POST', '/plants', 'plants:write'],
    [reader, 'DELETE', '/plants/1', 'plants:write'],
  ] as const;
  for (const [token, method, url, scope] of cases) {
    const response = await h.call(token, { method, url, ...(method === 'POST' ? json('{"id":1,"name":"fern"}') : {}) });
    assertErrorBody(response, 403);
    assert.equal(response.headers['www-authenticate'], insufficientScope(scope), `${method} ${url}`);
  }
  const listed = await h.call(reader, { method: 'GET', url: '/plants' });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), []);
});

test('plants:admin satisfies every operation', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const admin = await h.token('root', ['plants:admin']);
  const created = await h.call(admin, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') });
  assert.equal(created.statusCode, 200);
  assert.deepEqual(created.json(), { name: 'fern' });
  const listed = await h.call(admin, { method: 'GET', url: '/plants' });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), [{ name: 'fern' }]);
  const deleted = await h.call(admin, { method: 'DELETE', url: '/plants/1' });
  assert.equal(deleted.statusCode, 204);
  assert.equal(deleted.body, '');
});

test('authentication runs before body and id validation', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const requests = [
    { method: 'POST', url: '/plants', ...json('{"id":"abc","name":') },
    { method: 'POST', url: '/plants', ...json('{"id":1.5,"name":"fern","extra":true}') },
    { method: 'POST', url: '/plants', payload: 'fern', headers: { 'content-type': 'text/plain' } },
    { method: 'POST', url: '/plants', ...json(JSON.stringify({ id: 1, name: 'x'.repeat(20_000) })) },
    { method: 'DELETE', url: '/plants/abc' },
    { method: 'DELETE', url: '/plants/99999999999999999999' },
    { method: 'GET', url: '/plants?limit=0&cursor=%%%' },
  ] as const;
  for (const request of requests) {
    for (const authorization of [undefined, 'Bearer pst_unknown']) {
      const response = await h.app.inject({
        ...request,
        headers: { ...('headers' in request ? request.headers : {}), ...(authorization ? { authorization } : {}) },
      });
      assertErrorBody(response, 401);
      assert.equal(response.headers['www-authenticate'], authorization ? INVALID_TOKEN : CHALLENGE);
    }
  }
});
