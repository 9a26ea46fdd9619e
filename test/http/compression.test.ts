import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { type TestContext, describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { LightMyRequestResponse } from 'fastify';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import { assertErrorBody, listen } from './support.js';

// Compressed answers: gzip and brotli by Accept-Encoding, above 1 KiB, with Vary.

async function appWithPlants(t: TestContext, count: number): Promise<{ h: TestApp; token: string }> {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (let id = 1; id <= count; id++) {
    const res = await h.call(token, { method: 'POST', url: '/plants', ...json(`{"id":${id},"name":"plant ${id}"}`) });
    assert.equal(res.statusCode, 200, res.body);
  }
  return { h, token };
}

const get = (h: TestApp, token: string | undefined, url: string, acceptEncoding?: string) =>
  h.call(token, {
    method: 'GET',
    url,
    headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding },
  });

function decoded(res: LightMyRequestResponse): string {
  const encoding = res.headers['content-encoding'];
  if (encoding === 'gzip') return gunzipSync(res.rawPayload).toString('utf8');
  if (encoding === 'br') return brotliDecompressSync(res.rawPayload).toString('utf8');
  assert.equal(encoding, undefined, 'no other coding');
  return res.body;
}

/** An answer sent in `encoding`: the header, Vary, the length of the bytes sent, and the text inside. */
function assertEncoded(res: LightMyRequestResponse, encoding: 'gzip' | 'br' | undefined, identity: string): void {
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers['content-encoding'], encoding);
  assert.match(String(res.headers.vary), /(^|,\s*)accept-encoding(\s*,|$)/i, 'Vary names Accept-Encoding');
  if (res.headers['content-length'] !== undefined) {
    assert.equal(Number(res.headers['content-length']), res.rawPayload.length, 'Content-Length counts the bytes sent');
  }
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(decoded(res), identity);
  if (encoding !== undefined) assert.ok(res.rawPayload.length < Buffer.byteLength(identity), 'smaller than the text');
}

describe('GET /plants compresses pages of 1 KiB and more by Accept-Encoding', () => {
  test('a 100-plant page answers gzip, brotli or identity as asked, the same JSON inside', async (t) => {
    const { h, token } = await appWithPlants(t, 100);
    const identity = await get(h, token, '/plants?limit=100');
    assertEncoded(identity, undefined, identity.body);
    assert.ok(Buffer.byteLength(identity.body) >= 1024, 'the page is above the threshold');
    assert.equal((JSON.parse(identity.body) as unknown[]).length, 100);
    const cases: Array<[string, 'gzip' | 'br' | undefined]> = [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['gzip, deflate, br', 'br'],
      ['gzip;q=1, br;q=0.5', 'gzip'],
      ['x-gzip', 'gzip'],
      ['*', 'br'],
      ['br;q=0, *;q=0.1', 'gzip'],
      ['GZIP', 'gzip'],
      ['identity', undefined],
      ['gzip;q=0, br;q=0', undefined],
      ['deflate', undefined],
      ['gzip;q=2, br;q=high', undefined],
      ['', undefined],
    ];
    for (const [acceptEncoding, encoding] of cases) {
      await t.test(`Accept-Encoding: ${acceptEncoding} → ${encoding ?? 'identity'}`, async () => {
        assertEncoded(await get(h, token, '/plants?limit=100', acceptEncoding), encoding, identity.body);
        // The second answer comes from the page's cached bytes: the same.
        assertEncoded(await get(h, token, '/plants?limit=100', acceptEncoding), encoding, identity.body);
      });
    }
  });

  test('a page under 1 KiB is never compressed, and its answer does not vary by Accept-Encoding', async (t) => {
    const { h, token } = await appWithPlants(t, 10);
    const plain = await get(h, token, '/plants?limit=10');
    assert.ok(Buffer.byteLength(plain.body) < 1024);
    for (const acceptEncoding of ['gzip', 'br', 'gzip, deflate, br']) {
      const res = await get(h, token, '/plants?limit=10', acceptEncoding);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(res.headers.vary, undefined);
      assert.equal(res.body, plain.body);
      assert.equal(res.headers.etag, plain.headers.etag);
    }
  });

  test('HEAD /plants answers the headers GET would, Content-Length of the compressed bytes, no body', async (t) => {
    const { h, token } = await appWithPlants(t, 100);
    for (const acceptEncoding of ['gzip', 'br', 'identity']) {
      const full = await get(h, token, '/plants?limit=100', acceptEncoding);
      const head = await h.call(token, {
        method: 'HEAD',
        url: '/plants?limit=100',
        headers: { 'accept-encoding': acceptEncoding },
      });
      assert.equal(head.statusCode, 200);
      assert.equal(head.rawPayload.length, 0);
      for (const name of [
        'content-encoding',
        'content-length',
        'content-type',
        'etag',
        'vary',
        'link',
        'cache-control',
      ]) {
        assert.equal(head.headers[name], full.headers[name], name);
      }
    }
  });

  test('POST, DELETE and error answers are small and go uncompressed; a 204 has no coding', async (t) => {
    const { h, token } = await appWithPlants(t, 1);
    const headers = { 'accept-encoding': 'gzip, br' };
    const created = await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":2,"name":"fern"}') });
    assert.equal(created.headers['content-encoding'], undefined);
    const deleted = await h.call(token, { method: 'DELETE', url: '/plants/2', headers });
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.headers['content-encoding'], undefined);
    assert.equal(deleted.rawPayload.length, 0);
    const refused = await get(h, undefined, '/plants', 'gzip');
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.headers['content-encoding'], undefined);
    assert.equal(refused.json<{ error: number }>().error, 401);
  });

  test('a request body with Content-Encoding is not decompressed: 415, as before', async (t) => {
    const { h, token } = await appWithPlants(t, 0);
    const res = await h.call(token, {
      method: 'POST',
      url: '/plants',
      payload: '{"id":1,"name":"fern"}',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    // Request decompression stays off: a coded request body is refused, as before (http/json-body.ts).
    assertErrorBody(res, 415);
    assert.equal(res.headers['content-encoding'], undefined);
  });
});

describe('the OpenAPI document and the API reference are compressed too', () => {
  test('GET /openapi.json answers gzip and brotli with Vary, and the same document inside', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const plain = await get(h, undefined, '/openapi.json');
    assertEncoded(plain, undefined, plain.body);
    JSON.parse(plain.body);
    assertEncoded(await get(h, undefined, '/openapi.json', 'gzip'), 'gzip', plain.body);
    assertEncoded(await get(h, undefined, '/openapi.json', 'br'), 'br', plain.body);
    // @fastify/compress never reaches a HEAD answer (Fastify's HEAD hook drops the body before its
    // own hook runs): HEAD answers the identity document's headers, which is a valid answer too.
    const head = await h.call(undefined, {
      method: 'HEAD',
      url: '/openapi.json',
      headers: { 'accept-encoding': 'br' },
    });
    assert.equal(head.statusCode, 200);
    assert.equal(head.headers['content-encoding'], undefined);
    assert.equal(head.headers['content-length'], String(Buffer.byteLength(plain.body)));
    assert.equal(head.rawPayload.length, 0);
  });

  test('GET /docs and its script and style files answer brotli and gzip', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const page = await get(h, undefined, '/docs/', 'identity');
    assert.equal(page.statusCode, 200);
    const assets = [...page.body.matchAll(/(?:src|href)="\.?\/?([^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
    assert.ok(assets.length > 0, `the page names its assets: ${page.body.slice(0, 500)}`);
    for (const url of ['/docs/', ...assets.map((asset) => `/docs/${asset.replace(/^docs\//, '')}`)]) {
      const plain = await get(h, undefined, url);
      assert.equal(plain.statusCode, 200, url);
      if (Buffer.byteLength(plain.body) < 1024) continue;
      for (const encoding of ['br', 'gzip'] as const) {
        assertEncoded(await get(h, undefined, url, encoding), encoding, plain.body);
      }
    }
  });
});

test('Vary keeps the CORS layer’s Origin and adds Accept-Encoding', async (t) => {
  const h = await makeApp({ corsOrigins: '*' });
  t.after(() => h.close());
  const res = await h.call(undefined, {
    method: 'GET',
    url: '/openapi.json',
    headers: { origin: 'https://app.example', 'accept-encoding': 'gzip' },
  });
  assert.equal(res.headers['content-encoding'], 'gzip');
  const vary = String(res.headers.vary)
    .split(',')
    .map((v) => v.trim().toLowerCase());
  assert.deepEqual(vary.sort(), ['accept-encoding', 'origin']);
});

test('GET /events streams text/event-stream uncompressed even when gzip is accepted', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const port = await listen(h);
  const { headers, first } = await new Promise<{ headers: Record<string, unknown>; first: string }>(
    (resolve, reject) => {
      const req = httpRequest(
        {
          port,
          host: '127.0.0.1',
          path: '/events',
          headers: { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip, br' },
        },
        (res) => {
          // The first comment arrives at once, as text: nothing buffers it to compress a block.
          res.once('data', (chunk: Buffer) => {
            resolve({ headers: res.headers, first: chunk.toString('utf8') });
            req.destroy();
          });
        },
      );
      req.on('error', reject);
      req.end();
    },
  );
  assert.match(String(headers['content-type']), /^text\/event-stream/);
  assert.equal(headers['content-encoding'], undefined);
  assert.match(first, /^: connected\nretry: [0-9]+\n\n$/);
});
