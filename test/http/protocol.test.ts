import assert from 'node:assert/strict';
import { test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import { assertErrorBody, assertErrorJson, listen, parseRaw, rawExchange } from './support.js';

// Answers that Node or Fastify would give themselves, without the Error body, unless the service steps in.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

test('a URL with malformed percent-encoding answers 400 with the Error body and the usual headers', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const [url, caller] of [
    ['/plants/%', token],
    ['/plants/%zz', token],
    ['/plants/%FF', token],
    ['/nope/%C0', undefined],
  ] as const) {
    const r = await h.call(caller, { method: 'DELETE', url });
    assertErrorBody(r, 400);
    assert.match(r.json<{ message: string }>().message, /URL is not valid/);
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
  }
});

test('on /plants paths a malformed URL is authenticated first: no token 401, a bad token 401, a token without the scope 403', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const reader = await h.token('alice', ['plants:read']);
  for (const url of ['/plants/%FF', '/plants/%', '/plants/1%E2%82', '/plants/%zz?x=1']) {
    const missing = await h.call(undefined, { method: 'DELETE', url });
    assertErrorBody(missing, 401);
    assert.equal(missing.headers['www-authenticate'], 'Bearer realm="plant-store"');
    assert.equal(missing.headers['cache-control'], 'no-store');
    assert.match(String(missing.headers['x-request-id']), UUID);

    const forged = await h.call('pst_not-a-token', { method: 'DELETE', url });
    assertErrorBody(forged, 401);
    assert.equal(forged.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token"');

    const scoped = await h.call(reader, { method: 'DELETE', url });
    assertErrorBody(scoped, 403);
    assert.equal(
      scoped.headers['www-authenticate'],
      'Bearer realm="plant-store", error="insufficient_scope", scope="plants:write"',
    );
  }
});

test('an HTTP/1.1 request without Host answers 400 with the Error body', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const r = parseRaw(await rawExchange(t, port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n'));
  assert.equal(r.status, 400);
  assertErrorJson(r.body, 400);
  assert.match(r.headers['x-request-id'] ?? '', UUID);
});

test('an expectation other than 100-continue answers 417 with the Error body', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const raw = await rawExchange(t, port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n');
  const r = parseRaw(raw);
  assert.equal(r.status, 417);
  assertErrorJson(r.body, 417);
  assert.equal(r.headers['cache-control'], 'no-store');
});

test('CONNECT on /plants answers 405 with Allow and the Error body; elsewhere 404', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const plants = parseRaw(await rawExchange(t, port, 'CONNECT /plants HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(plants.status, 405);
  assert.equal(plants.headers.allow, 'GET, HEAD, POST');
  assertErrorJson(plants.body, 405);
  const other = parseRaw(await rawExchange(t, port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(other.status, 404);
  assertErrorJson(other.body, 404);
});

test('answers written by the HTTP parser carry a generated X-Request-Id', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const r = parseRaw(
    await rawExchange(t, port, 'GET /plants HTTP/1.1\r\nHost: x\r\nX: ' + 'a'.repeat(20_000) + '\r\n\r\n'),
  );
  assert.equal(r.status, 431);
  assert.match(r.headers['x-request-id'] ?? '', UUID);
});

test('404 and 405 for a request without a body keep the connection open', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const missing = await h.app.inject({ method: 'GET', url: '/nowhere' });
  assert.equal(missing.statusCode, 404);
  assert.notEqual(missing.headers.connection, 'close');
  const wrong = await h.call(token, { method: 'PUT', url: '/plants' });
  assert.equal(wrong.statusCode, 405);
  assert.notEqual(wrong.headers.connection, 'close');
});

test('the system paths answer 405 with Allow for a wrong method', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  for (const url of ['/healthz', '/readyz', '/openapi.json']) {
    const r = await h.app.inject({ method: 'POST', url });
    assertErrorBody(r, 405);
    assert.equal(r.headers.allow, 'GET, HEAD');
  }
});

test('a compressed body answers 415 naming the encoding, and stores nothing', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const encoding of ['gzip', 'br']) {
    const r = await h.call(token, {
      method: 'POST',
      url: '/plants',
      payload: '{"id":1,"name":"fern"}',
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
    });
    assertErrorBody(r, 415);
    assert.match(r.json<{ message: string }>().message, new RegExp(`Content-Encoding ${encoding}`));
  }
  const identity = await h.call(token, {
    method: 'POST',
    url: '/plants',
    payload: '{"id":1,"name":"fern"}',
    headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
  });
  assert.equal(identity.statusCode, 200);
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), [{ name: 'fern' }]);
});
