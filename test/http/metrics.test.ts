import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tokenId } from '../../src/auth/token.js';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { sample } from '../support/scrape.js';
import { assertErrorBody } from './support.js';

// GET /metrics: Prometheus text format (prom-client), optionally behind METRICS_TOKEN.

test('counts requests by route pattern and status, times them, and reports plants and the database', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') });
  await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":2,"name":"moss"}') });
  await h.call(token, { method: 'DELETE', url: '/plants/1' });
  await h.call(token, { method: 'DELETE', url: '/plants/1' }); // 404
  await h.call(undefined, { method: 'GET', url: '/plants' }); // 401
  await h.app.inject({ method: 'GET', url: '/no/such/path/123' }); // 404, unmatched

  const response = await h.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.equal(response.headers['cache-control'], 'no-store');
  const text = response.body;

  const requests = (method: string, route: string, status: string) =>
    sample(text, 'plant_store_http_requests_total', { method, route, status });
  assert.equal(requests('POST', '/plants', '200'), 2);
  assert.equal(requests('DELETE', '/plants/:id', '204'), 1);
  assert.equal(requests('DELETE', '/plants/:id', '404'), 1);
  assert.equal(requests('GET', '/plants', '401'), 1);
  assert.equal(requests('GET', 'unmatched', '404'), 1);
  assert.ok(!text.includes('/no/such/path'), 'an unknown path is not a label');
  assert.equal(
    sample(text, 'plant_store_http_request_duration_seconds_count', {
      method: 'POST',
      route: '/plants',
      status: '200',
    }),
    2,
  );
  assert.equal(
    sample(text, 'plant_store_http_request_duration_seconds_bucket', {
      method: 'POST',
      route: '/plants',
      status: '200',
      le: '+Inf',
    }),
    2,
  );
  assert.equal(sample(text, 'plant_store_plants'), 1);
  assert.equal(sample(text, 'plant_store_database_up'), 1);
  assert.ok((sample(text, 'plant_store_process_resident_memory_bytes') ?? 0) > 0, 'process metrics');
  assert.ok(!text.includes(token), 'no token in the metrics');
  // The request log names who made each request (tokenId, subject); the series never do, or
  // every token and subject would be a series of its own.
  const requestSeries = text.split('\n').filter((line) => /^plant_store_http_request/.test(line));
  assert.ok(requestSeries.length > 0);
  for (const line of requestSeries) {
    const labels = [...(/\{([^}]*)\}/.exec(line)?.[1] ?? '').matchAll(/([a-z_]+)="/g)].map((m) => m[1]);
    assert.deepEqual(labels.filter((label) => label !== 'le').sort(), ['method', 'route', 'status'], line);
  }
  assert.ok(!text.includes(tokenId(token)!) && !text.includes('alice'), 'no token id or subject in the metrics');
});

test('the database gauge says 0 when the database does not answer', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const store = h.store as { isReady: () => Promise<boolean>; countPlants: () => Promise<number> };
  store.isReady = () => Promise.resolve(false);
  store.countPlants = () => Promise.reject(new Error('down'));
  const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.equal(sample(text, 'plant_store_database_up'), 0);
  assert.ok(Number.isNaN(sample(text, 'plant_store_plants')), 'unknown (NaN), not a stale or false count');
});

test('with METRICS_TOKEN set, /metrics needs that bearer token', async (t) => {
  const h = await makeApp({ metricsToken: 'scrape-secret' });
  t.after(() => h.close());
  for (const authorization of [undefined, 'Bearer wrong', 'Bearer scrape-secre', 'Basic scrape-secret']) {
    const response = await h.app.inject({
      method: 'GET',
      url: '/metrics',
      headers: authorization ? { authorization } : {},
    });
    assertErrorBody(response, 401);
    assert.equal(response.headers['www-authenticate'], 'Bearer realm="plant-store-metrics"');
  }
  const apiToken = await h.token('alice', ['plants:admin']);
  assertErrorBody(
    await h.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${apiToken}` } }),
    401,
  );
  for (const authorization of ['Bearer scrape-secret', 'bearer scrape-secret']) {
    const ok = await h.app.inject({ method: 'GET', url: '/metrics', headers: { authorization } });
    assert.equal(ok.statusCode, 200, authorization);
    assert.match(ok.body, /^# HELP /m);
  }
});

test('other methods on /metrics get 405 with Allow', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const response = await h.app.inject({ method: 'POST', url: '/metrics' });
  assertErrorBody(response, 405);
  assert.equal(response.headers.allow, 'GET, HEAD');
});
