import assert from 'node:assert/strict';
import { test } from 'node:test';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody, assertErrorJson, listen, parseRaw, rawExchange } from '../http/support.js';

// Deviations the fuzzer found, each reduced to its smallest reproduction, and fixed: these keep
// them fixed.

const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

test('the 400 for a URL with broken percent-encoding carries an X-Request-Id like every other answer', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE); // /plants paths are authenticated first
  const response = await h.call(token, { method: 'GET', url: '/plants/%', headers: { 'x-request-id': 'fuzz-1' } });
  assertErrorBody(response, 400);
  assert.equal(response.headers['x-request-id'], 'fuzz-1');
  const anonymous = await h.app.inject({ method: 'GET', url: '/plants/%', headers: { 'x-request-id': 'fuzz-2' } });
  assertErrorBody(anonymous, 401);
  assert.equal(anonymous.headers['x-request-id'], 'fuzz-2');
});

test(
  'a request answered before its body was read gets no second answer when its chunked body is malformed',
  {
    timeout: 10_000,
  },
  async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const port = await listen(h);
    // 404 at once (no route), then the parser meets the chunk size "zz".
    const text = await rawExchange(
      t,
      port,
      'POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    );
    assert.deepEqual(statuses(text), [404], `exactly one answer, got ${JSON.stringify(text)}`);
    assertErrorJson(parseRaw(text).body, 404);
  },
);

test(
  'a valid request pipelined before a malformed one gets its own answer before the 400',
  {
    timeout: 10_000,
  },
  async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const port = await listen(h);
    const text = await rawExchange(t, port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nBLAH\r\n\r\n');
    assert.deepEqual(statuses(text), [200, 400], JSON.stringify(text)); // RFC 9112 §9.3.2: answers in order
  },
);

test('broken percent-encoding in the query answers 400, as it does in the path', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  assert.equal(
    (await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"a","tag":"%zz"}') })).statusCode,
    200,
  );
  for (const query of ['tag=%zz', 'tag=%E9', 'tag=%ED%A0%80', 'tag=fern&x=%']) {
    assertErrorBody(await h.call(token, { method: 'GET', url: `/plants?${query}` }), 400);
  }
});

test(
  'several valid requests pipelined before a malformed one each get their answer, in order, before the 400',
  { timeout: 10_000 },
  async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const token = await h.token('alice', READ_WRITE);
    const port = await listen(h);
    const post = (id: number): string => {
      const body = `{"id":${id},"name":"plant ${id}"}`;
      return `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    };
    const text = await rawExchange(
      t,
      port,
      `${post(6)}${post(7)}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n`,
    );
    assert.deepEqual(statuses(text), [200, 200, 200, 400], JSON.stringify(text));
    const listed = await h.call(token, { method: 'GET', url: '/plants' });
    assert.deepEqual(listed.json(), [{ name: 'plant 6' }, { name: 'plant 7' }]);
  },
);
