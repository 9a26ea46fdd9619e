import assert from 'node:assert/strict';
import { test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import { type RawResponse, assertErrorJson, listen, parseRaw, rawExchange } from './support.js';

/** The answer Node's parser errors get: the status, the Error body, and the usual API headers. */
function assertRawError(response: RawResponse, status: number): void {
  assert.equal(response.status, status, response.body);
  assert.match(response.headers['content-type'] ?? '', /^application\/json\b/);
  assert.equal(response.headers['cache-control'], 'no-store');
  assert.equal(response.headers['x-content-type-options'], 'nosniff');
  assert.equal(Number(response.headers['content-length']), Buffer.byteLength(response.body));
  assertErrorJson(response.body, status);
}

test('headers over 16 KiB answer 431 with an Error body', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const request = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: ${'a'.repeat(17 * 1024)}\r\n\r\n`;
  assertRawError(parseRaw(await rawExchange(t, port, request)), 431);
});

test('a malformed request line answers 400 with an Error body', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  for (const line of ['this is not http', 'GET /healthz HTTP/9.9', 'G@T /healthz HTTP/1.1']) {
    await t.test(JSON.stringify(line), async (t) => {
      const response = parseRaw(await rawExchange(t, port, `${line}\r\nHost: 127.0.0.1\r\n\r\n`));
      assertRawError(response, 400);
    });
  }
});

test('two different Content-Length headers answer 400 with an Error body', { timeout: 10_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const port = await listen(h);
  const request =
    'POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    'Content-Length: 5\r\nContent-Length: 6\r\n\r\n{"a":1}';
  assertRawError(parseRaw(await rawExchange(t, port, request)), 400);
});

test(
  'a client that stops halfway through its headers is answered 408 with an Error body',
  { timeout: 15_000 },
  async (t) => {
    const h = await makeApp({ headersTimeoutMs: 500, requestTimeoutMs: 1000 });
    t.after(() => h.close());
    const port = await listen(h);
    // No blank line: the headers never end, and the server must give up on its own.
    const response = parseRaw(await rawExchange(t, port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n'));
    assertRawError(response, 408);
  },
);

test(
  'a client that stops halfway through its body is answered 408 with an Error body',
  { timeout: 15_000 },
  async (t) => {
    const h = await makeApp({ headersTimeoutMs: 500, requestTimeoutMs: 1000 });
    t.after(() => h.close());
    const token = await h.token('alice', READ_WRITE);
    const port = await listen(h);
    const request =
      `POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"id":1,';
    const text = await rawExchange(t, port, request);
    assert.equal(text.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `one response, got ${JSON.stringify(text)}`);
    assertRawError(parseRaw(text), 408);
  },
);

test(
  'a request answered before its body arrived is not answered a second time when the body never comes',
  { timeout: 20_000 },
  async (t) => {
    const h = await makeApp({ headersTimeoutMs: 500, requestTimeoutMs: 1000 });
    t.after(() => h.close());
    const token = await h.token('alice', READ_WRITE);
    const port = await listen(h);
    // Each request is answered at once, before its (never completed) body is read.
    const cases: Array<[string, number, string]> = [
      ['no token', 401, 'POST /plants HTTP/1.1\r\nContent-Type: application/json\r\n'],
      ['a text body', 415, `POST /plants HTTP/1.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: text/plain\r\n`],
      ['an unknown path', 404, 'POST /nowhere HTTP/1.1\r\nContent-Type: application/json\r\n'],
    ];
    for (const [name, status, head] of cases) {
      await t.test(`${name} → ${status}`, async (t) => {
        const text = await rawExchange(t, port, `${head}Host: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"id":1,`);
        assert.equal(text.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `exactly one response, got ${JSON.stringify(text)}`);
        const response = parseRaw(text);
        assert.equal(response.status, status);
        assertErrorJson(response.body, status);
      });
    }
  },
);
