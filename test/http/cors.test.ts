import assert from 'node:assert/strict';
import { request } from 'node:http';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody, listen, parseRaw, rawExchange } from './support.js';

// CORS_ORIGINS: browser apps on the listed origins may call the API; every answer they
// get, errors included, says so and exposes the headers a script needs; nobody else gets any
// CORS header. The browser's side of it is test/browser/cors.test.ts.

const APP = 'http://app.example:3000';
const OTHER = 'https://elsewhere.example';
const ON = { corsOrigins: [APP, 'https://second.example'] };
const EXPOSED = [
  'Link',
  'X-Request-Id',
  'Retry-After',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'WWW-Authenticate',
];

const preflight = (origin: string, method: string, headers = 'authorization,content-type') => ({
  origin,
  'access-control-request-method': method,
  'access-control-request-headers': headers,
});

/** A comma-separated header as lower-case items. */
const list = (value: string | string[] | number | undefined): string[] =>
  String(value ?? '')
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '');

function corsHeaderNames(response: LightMyRequestResponse): string[] {
  return Object.keys(response.headers).filter((name) => name.startsWith('access-control-'));
}

/** The headers of an answer to an allowed origin, whatever its status. */
function assertCors(response: LightMyRequestResponse, origin: string, what: string): void {
  assert.equal(response.headers['access-control-allow-origin'], origin, `${what}: Access-Control-Allow-Origin`);
  const exposed = list(response.headers['access-control-expose-headers']);
  for (const name of EXPOSED) assert.ok(exposed.includes(name.toLowerCase()), `${what}: exposes ${name}`);
  assert.equal(response.headers['access-control-allow-credentials'], undefined, `${what}: never credentials`);
  assert.ok(list(response.headers.vary).includes('origin'), `${what}: Vary: Origin`);
}

function assertNoCors(response: LightMyRequestResponse, what: string): void {
  assert.deepEqual(corsHeaderNames(response), [], `${what}: no CORS header`);
}

/** Every header a script must read on this answer is one the answer exposes. */
function assertReadable(response: LightMyRequestResponse, what: string, ...names: string[]): void {
  const exposed = list(response.headers['access-control-expose-headers']);
  for (const name of names) {
    assert.notEqual(response.headers[name], undefined, `${what}: carries ${name}`);
    assert.ok(exposed.includes(name), `${what}: exposes ${name}`);
  }
}

test('with CORS_ORIGINS unset no answer carries CORS headers, and OPTIONS keeps its 405 with Allow', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const listed = await h.call(token, { method: 'GET', url: '/plants', headers: { origin: APP } });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), []);
  assertNoCors(listed, 'GET /plants');
  assert.equal(listed.headers.vary, undefined);
  for (const [url, allow] of [
    ['/plants', 'GET, HEAD, POST'],
    ['/plants/1', 'DELETE'],
  ] as const) {
    const refused = await h.call(undefined, { method: 'OPTIONS', url, headers: preflight(APP, 'GET') });
    assertErrorBody(refused, 405);
    assert.equal(refused.headers.allow, allow);
    assertNoCors(refused, `OPTIONS ${url}`);
  }
});

test('a preflight from an allowed origin answers 204 with the methods, headers and max-age, before authentication', async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  for (const [url, method] of [
    ['/plants', 'POST'],
    ['/plants?limit=2', 'GET'],
    ['/plants/9007199254740993', 'DELETE'],
    ['/webhooks', 'POST'],
    ['/webhooks/abc/deliveries', 'GET'],
    ['/events', 'GET'],
    ['/nowhere', 'GET'], // so that the 404 which follows reaches the script
  ] as const) {
    const response = await h.call(undefined, { method: 'OPTIONS', url, headers: preflight(APP, method) });
    const what = `OPTIONS ${url}`;
    assert.equal(response.statusCode, 204, what);
    assert.equal(response.body, '', what);
    assertCors(response, APP, what);
    const methods = list(response.headers['access-control-allow-methods']);
    for (const m of ['get', 'head', 'post', 'delete']) assert.ok(methods.includes(m), `${what}: allows ${m}`);
    const headers = list(response.headers['access-control-allow-headers']);
    for (const name of ['authorization', 'content-type', 'x-request-id']) {
      assert.ok(headers.includes(name), `${what}: allows ${name}`);
    }
    assert.equal(response.headers['access-control-max-age'], '7200', what);
    assert.equal(response.headers['www-authenticate'], undefined, `${what}: not authenticated`);
    assert.match(String(response.headers['x-request-id']), /^[0-9a-f-]{36}$/, what);
    assert.equal(response.headers['cache-control'], 'no-store', what);
  }
  const second = await h.call(undefined, {
    method: 'OPTIONS',
    url: '/plants',
    headers: preflight('https://second.example', 'POST'),
  });
  assert.equal(second.statusCode, 204);
  assertCors(second, 'https://second.example', 'the second origin');
});

test('preflights are not counted by the rate limit, nor refused under a bad token', async (t) => {
  const h = await makeApp({ ...ON, rateLimit: { max: 2, windowMs: 60_000 } });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (let i = 0; i < 5; i++) {
    const response = await h.call('pst_nope', { method: 'OPTIONS', url: '/plants', headers: preflight(APP, 'GET') });
    assert.equal(response.statusCode, 204);
    assert.equal(response.headers['ratelimit-limit'], undefined);
  }
  for (const remaining of ['1', '0']) {
    const listed = await h.call(token, { method: 'GET', url: '/plants', headers: { origin: APP } });
    assert.equal(listed.statusCode, 200);
    assert.equal(listed.headers['ratelimit-remaining'], remaining);
    assertReadable(listed, 'GET /plants', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'x-request-id');
  }
});

test('answers to an allowed origin carry Allow-Origin and expose Link, X-Request-Id and RateLimit-*', async (t) => {
  const h = await makeApp({ ...ON, rateLimit: { max: 100, windowMs: 60_000 } });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const headers = { origin: APP };
  for (const id of [1, 2]) {
    const created = await h.call(token, {
      method: 'POST',
      url: '/plants',
      payload: { id, name: `fern ${id}` },
      headers,
    });
    assert.equal(created.statusCode, 200);
    assert.deepEqual(created.json(), { name: `fern ${id}` });
    assertCors(created, APP, 'POST /plants');
  }
  const first = await h.call(token, { method: 'GET', url: '/plants?limit=1', headers });
  assert.equal(first.statusCode, 200);
  assert.deepEqual(first.json(), [{ name: 'fern 1' }]);
  assertCors(first, APP, 'GET /plants');
  assertReadable(first, 'GET /plants', 'link', 'x-request-id', 'ratelimit-limit', 'ratelimit-remaining');
  const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1];
  assert.ok(next, String(first.headers.link));
  const second = await h.call(token, { method: 'GET', url: next, headers });
  assert.deepEqual(second.json(), [{ name: 'fern 2' }]);
  assertCors(second, APP, 'the next page');
  const deleted = await h.call(token, { method: 'DELETE', url: '/plants/1', headers });
  assert.equal(deleted.statusCode, 204);
  assert.equal(deleted.body, '');
  assertCors(deleted, APP, 'DELETE /plants/1');
  const health = await h.call(undefined, { method: 'GET', url: '/healthz', headers });
  assert.equal(health.statusCode, 200);
  assertCors(health, APP, 'GET /healthz');
});

test('error answers carry the CORS headers: 400, 401, 403, 404, 405, 409, 413, 415, 429 and bad URLs', async (t) => {
  const h = await makeApp({ ...ON, bodyLimit: 64, rateLimit: { max: 11, windowMs: 60_000 } });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const reader = await h.token('bob', ['plants:read']);
  const headers = { origin: APP };
  const taken = await h.call(token, { method: 'POST', url: '/plants', payload: { id: 7, name: 'fern' }, headers });
  assert.equal(taken.statusCode, 200);
  const cases = [
    [401, undefined, { method: 'GET', url: '/plants' }, ['www-authenticate']],
    [401, 'pst_nope', { method: 'GET', url: '/plants' }, ['www-authenticate']],
    [403, reader, { method: 'DELETE', url: '/plants/7' }, ['www-authenticate']],
    [404, token, { method: 'DELETE', url: '/plants/8' }, []],
    [404, undefined, { method: 'GET', url: '/nowhere' }, []],
    [405, token, { method: 'PUT', url: '/plants' }, []],
    [400, token, { method: 'GET', url: '/plants?limit=0' }, []],
    [400, token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"a","name":"b"}') }, []],
    [409, token, { method: 'POST', url: '/plants', ...json('{"id":7,"name":"other"}') }, []],
    [413, token, { method: 'POST', url: '/plants', ...json(`{"id":1,"name":"${'a'.repeat(100)}"}`) }, []],
    [415, token, { method: 'POST', url: '/plants', payload: 'x', headers: { 'content-type': 'text/plain' } }, []],
    [401, undefined, { method: 'DELETE', url: '/plants/%FF' }, ['www-authenticate']],
    [400, token, { method: 'DELETE', url: '/plants/%FF' }, []],
    [400, undefined, { method: 'GET', url: '/%FF' }, []],
  ] as const;
  for (const [status, credentials, options, readable] of cases) {
    const what = `${status} for ${options.method} ${options.url}`;
    const response = await h.call(credentials, {
      ...options,
      headers: { ...('headers' in options ? options.headers : {}), ...headers },
    });
    assertErrorBody(response, status);
    assertCors(response, APP, what);
    assertReadable(response, what, 'x-request-id', ...readable);
  }
  for (let i = 0; i < 20; i++) {
    const response = await h.call(token, { method: 'GET', url: '/plants', headers });
    if (response.statusCode === 200) continue;
    assertErrorBody(response, 429);
    assertCors(response, APP, '429');
    assertReadable(response, '429', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset');
    return;
  }
  assert.fail('the rate limit was never reached');
});

test('an origin not on the list gets no CORS headers, on answers, errors and preflights', async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const origin of [OTHER, 'http://app.example', 'http://app.example:3000/', 'HTTP://APP.EXAMPLE:3000', 'null']) {
    const listed = await h.call(token, { method: 'GET', url: '/plants', headers: { origin } });
    assert.equal(listed.statusCode, 200);
    assert.deepEqual(listed.json(), []);
    assertNoCors(listed, origin);
    assert.equal(listed.headers.vary, 'Origin', 'the answer depends on Origin');
    assertNoCors(await h.call(undefined, { method: 'GET', url: '/plants', headers: { origin } }), `401 to ${origin}`);
    const refused = await h.call(undefined, { method: 'OPTIONS', url: '/plants', headers: preflight(origin, 'POST') });
    assert.equal(refused.statusCode, 204, `preflight from ${origin}`);
    assert.equal(refused.body, '');
    assert.equal(refused.headers.allow, 'GET, HEAD, POST, OPTIONS');
    assertNoCors(refused, `preflight from ${origin}`);
  }
  const none = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(none.statusCode, 200);
  assertNoCors(none, 'a request without Origin');
});

test('with CORS on, 405 answers name OPTIONS in Allow, and a plain OPTIONS answers 204 with Allow', async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const [url, allow, wrong] of [
    ['/plants', 'GET, HEAD, POST, OPTIONS', 'PUT'],
    ['/plants/1', 'DELETE, OPTIONS', 'GET'],
    ['/healthz', 'GET, HEAD, OPTIONS', 'POST'],
    ['/webhooks/abc', 'DELETE, PATCH, OPTIONS', 'PUT'],
    ['/webhooks/abc/ping', 'POST, OPTIONS', 'GET'],
    ['/webhooks/abc/deliveries/1/attempts', 'GET, HEAD, OPTIONS', 'DELETE'],
    ['/events', 'GET, OPTIONS', 'POST'],
  ] as const) {
    const refused = await h.call(token, { method: wrong, url, headers: { origin: APP } });
    assertErrorBody(refused, 405);
    assert.equal(refused.headers.allow, allow, `${wrong} ${url}`);
    assertCors(refused, APP, `${wrong} ${url}`);
    const options = await h.call(undefined, { method: 'OPTIONS', url });
    assert.equal(options.statusCode, 204, `OPTIONS ${url}`);
    assert.equal(options.headers.allow, allow, `OPTIONS ${url}`);
    assertNoCors(options, `OPTIONS ${url} without Origin`);
  }
  const unknown = await h.call(undefined, { method: 'OPTIONS', url: '/nowhere' });
  assertErrorBody(unknown, 404);
});

test('CORS_ORIGINS=* allows every origin with Access-Control-Allow-Origin: *, never credentials', async (t) => {
  const h = await makeApp({ corsOrigins: '*' });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const origin of [APP, OTHER, 'null']) {
    const pre = await h.call(undefined, { method: 'OPTIONS', url: '/plants', headers: preflight(origin, 'POST') });
    assert.equal(pre.statusCode, 204);
    assertCors(pre, '*', `preflight from ${origin}`);
    const listed = await h.call(token, { method: 'GET', url: '/plants', headers: { origin } });
    assert.equal(listed.statusCode, 200);
    assertCors(listed, '*', `GET from ${origin}`);
    const refused = await h.call(undefined, { method: 'GET', url: '/plants', headers: { origin } });
    assertErrorBody(refused, 401);
    assertCors(refused, '*', `401 to ${origin}`);
  }
  assertNoCors(await h.call(token, { method: 'GET', url: '/plants' }), 'a request without Origin');
});

test('a preflight for a URL with bad percent-encoding is answered, and the refusal that follows carries CORS headers', async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const pre = await h.call(undefined, { method: 'OPTIONS', url: '/plants/%FF', headers: preflight(APP, 'DELETE') });
  assert.equal(pre.statusCode, 204);
  assert.equal(pre.body, '');
  assertCors(pre, APP, 'preflight');
  assert.equal(pre.headers['access-control-max-age'], '7200');
  assert.match(String(pre.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  const refused = await h.call(token, { method: 'DELETE', url: '/plants/%FF', headers: { origin: APP } });
  assertErrorBody(refused, 400);
  assertCors(refused, APP, 'DELETE /plants/%FF');
  const other = await h.call(undefined, { method: 'OPTIONS', url: '/plants/%FF', headers: preflight(OTHER, 'DELETE') });
  assertErrorBody(other, 401);
  assertNoCors(other, 'another origin');
});

test('the change feed answers an allowed origin with the CORS headers', { timeout: 15_000 }, async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  const token = await h.token('alice', ['plants:read']);
  const port = await listen(h);
  const req = request({
    host: '127.0.0.1',
    port,
    path: '/events',
    headers: { authorization: `Bearer ${token}`, origin: APP, accept: 'text/event-stream' },
    agent: false,
  });
  req.end();
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  try {
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    assert.equal(res.headers['access-control-allow-origin'], APP);
    assert.ok(list(res.headers['access-control-expose-headers']).includes('x-request-id'));
    assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  } finally {
    req.destroy();
  }
});

test('with CORS on, CONNECT on a known path answers 405 with OPTIONS in Allow', { timeout: 10_000 }, async (t) => {
  const h = await makeApp(ON);
  t.after(() => h.close());
  const port = await listen(h);
  const plants = parseRaw(await rawExchange(t, port, 'CONNECT /plants HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(plants.status, 405);
  assert.equal(plants.headers.allow, 'GET, HEAD, POST, OPTIONS');
});
