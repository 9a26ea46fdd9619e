import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeApp } from '../helpers.js';
import { assertErrorBody } from './support.js';

type Json = Record<string, unknown>;

const at = (value: unknown, ...path: string[]): Json => {
  let node = value;
  for (const key of path) {
    assert.ok(node !== null && typeof node === 'object' && key in node, `missing ${path.join('.')}`);
    node = (node as Json)[key];
  }
  return node as Json;
};

const REQUIRED_STATUSES: Record<string, { path: string; method: string; statuses: string[] }> = {
  // 408, 431 (the HTTP layer), 500 and 503 can answer any operation.
  addPlant: {
    path: '/plants',
    method: 'post',
    statuses: ['200', '400', '401', '403', '408', '409', '413', '415', '429', '431', '500', '503'],
  },
  findPlants: {
    path: '/plants',
    method: 'get',
    statuses: ['200', '400', '401', '403', '408', '429', '431', '500', '503'],
  },
  deletePlant: {
    path: '/plants/{id}',
    method: 'delete',
    statuses: ['204', '400', '401', '403', '404', '408', '429', '431', '500', '503'],
  },
};

async function openapi(): Promise<{ document: Json; close: () => Promise<void> }> {
  const h = await makeApp();
  const response = await h.app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^application\/json\b/);
  return { document: response.json<Json>(), close: () => h.close() };
}

test('GET /openapi.json needs no token and describes Plant Store 1.3.0 in OpenAPI 3.1.0', async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  assert.equal(document.openapi, '3.1.0');
  assert.equal(at(document, 'info').title, 'Plant Store');
  assert.equal(at(document, 'info').version, '1.4.0');
  assert.ok(at(document, 'paths', '/plants', 'get'));
  assert.ok(at(document, 'paths', '/plants', 'post'));
  assert.ok(at(document, 'paths', '/plants/{id}', 'delete'));
});

test('the OpenAPI document names the Plant, NewPlant and Error schemas', async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  const schemas = at(document, 'components', 'schemas');
  const plant = at(schemas, 'Plant');
  assert.deepEqual(Object.keys(at(plant, 'properties')).sort(), ['name', 'tag']);
  assert.deepEqual(plant.required, ['name']);
  const newPlant = at(schemas, 'NewPlant');
  assert.deepEqual(Object.keys(at(newPlant, 'properties')).sort(), ['id', 'name', 'tag']);
  assert.deepEqual([...(newPlant.required as string[])].sort(), ['id', 'name']);
  assert.equal(at(newPlant, 'properties', 'id').type, 'integer');
  assert.equal(at(newPlant, 'properties', 'id').format, 'int64');
  assert.equal(at(newPlant, 'properties', 'name').type, 'string');
  const error = at(schemas, 'Error');
  assert.deepEqual([...(error.required as string[])].sort(), ['error', 'message']);
  assert.equal(at(error, 'properties', 'error').type, 'integer');
  assert.equal(at(error, 'properties', 'error').format, 'int32');
  assert.equal(at(error, 'properties', 'message').type, 'string');
});

test('the OpenAPI document declares the bearer scheme and every operation requires it', async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  const schemes = Object.entries(at(document, 'components', 'securitySchemes')) as Array<[string, Json]>;
  const bearer = schemes.find(([, s]) => s.type === 'http' && String(s.scheme).toLowerCase() === 'bearer');
  assert.ok(bearer, 'an http bearer security scheme');
  for (const { path, method } of Object.values(REQUIRED_STATUSES)) {
    const security = (at(document, 'paths', path, method).security ?? document.security) as Json[];
    assert.ok(
      security.some((requirement) => bearer[0] in requirement),
      `${method} ${path} requires ${bearer[0]}`,
    );
  }
});

test('the OpenAPI document describes the limit parameter as an integer 1..1000, default 100', async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  const parameters = at(document, 'paths', '/plants', 'get').parameters as Json[];
  const limit = parameters.find((p) => p.name === 'limit');
  assert.ok(limit, 'a limit parameter');
  assert.equal(limit.in, 'query');
  assert.notEqual(limit.required, true);
  const schema = at(limit, 'schema');
  assert.equal(schema.type, 'integer');
  assert.equal(schema.minimum, 1);
  assert.equal(schema.maximum, 1000);
  assert.equal(schema.default, 100);
});

test('the OpenAPI document lists every status each operation sends, errors with the Error body', async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  for (const [operationId, { path, method, statuses }] of Object.entries(REQUIRED_STATUSES)) {
    const operation = at(document, 'paths', path, method);
    assert.equal(operation.operationId, operationId);
    const responses = at(operation, 'responses');
    for (const status of statuses) {
      assert.ok(status in responses, `${method} ${path} documents ${status}`);
      if (Number(status) >= 400) {
        assert.deepEqual(at(responses, status, 'content', 'application/json', 'schema'), {
          $ref: '#/components/schemas/Error',
        });
      }
    }
  }
  const created = at(document, 'paths', '/plants', 'post');
  assert.deepEqual(at(created, 'requestBody', 'content', 'application/json', 'schema'), {
    $ref: '#/components/schemas/NewPlant',
  });
  assert.deepEqual(at(created, 'responses', '200', 'content', 'application/json', 'schema'), {
    $ref: '#/components/schemas/Plant',
  });
  const listed = at(document, 'paths', '/plants', 'get', 'responses', '200', 'content', 'application/json', 'schema');
  assert.equal(listed.type, 'array');
  assert.deepEqual(listed.items, { $ref: '#/components/schemas/Plant' });
  assert.equal(at(document, 'paths', '/plants/{id}', 'delete', 'responses', '204').content, undefined);
});

test("the deliveries' pages and a webhook's activity are documented: before an int64, the Link header, WebhookActivity named", async (t) => {
  const { document, close } = await openapi();
  t.after(close);
  const list = at(document, 'paths', '/webhooks/{id}/deliveries', 'get');
  const before = (list.parameters as Json[]).find((p) => p.name === 'before');
  assert.ok(before, 'a before parameter');
  assert.deepEqual(
    [before.in, before.required, at(before, 'schema').type, at(before, 'schema').format],
    ['query', false, 'integer', 'int64'],
  );
  const link = at(list, 'responses', '200', 'headers', 'Link');
  assert.match(String(link.description), /RFC 8288/);
  assert.match(String(link.example), /^<\/webhooks\/wh_\w+\/deliveries\?limit=\d+&before=\d+>; rel="next"$/);

  const activity = at(document, 'paths', '/webhooks/{id}/activity', 'get');
  assert.equal(activity.operationId, 'getWebhookActivity');
  assert.match(String(activity.description), /`webhooks:read`/);
  assert.deepEqual(at(activity, 'responses', '200', 'content', 'application/json', 'schema'), {
    $ref: '#/components/schemas/WebhookActivity',
  });
  assert.deepEqual(Object.keys(at(activity, 'responses')), [
    '200',
    '400',
    '401',
    '403',
    '404',
    '408',
    '429',
    '431',
    '500',
    '503',
  ]);
  const schema = at(document, 'components', 'schemas', 'WebhookActivity');
  assert.ok(String(schema.description).length > 0);
  assert.deepEqual([...(schema.required as string[])].sort(), ['from', 'hours', 'to']);
  const hours = at(schema, 'properties', 'hours');
  assert.deepEqual([hours.minItems, hours.maxItems], [24, 24]);
  const hour = at(hours, 'items');
  assert.deepEqual([...(hour.required as string[])].sort(), ['delivered', 'failed', 'start']);
  for (const name of ['start', 'delivered', 'failed']) {
    assert.ok(String(at(hour, 'properties', name).description).length > 0, `${name} has a description`);
  }
});

test('GET /docs serves an HTML page without a token whose scripts and styles are all local', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  let url = '/docs';
  let page = await h.app.inject({ method: 'GET', url });
  for (let hops = 0; page.statusCode >= 300 && page.statusCode < 400 && hops < 5; hops++) {
    url = new URL(String(page.headers.location), `http://localhost${url}`).pathname;
    page = await h.app.inject({ method: 'GET', url });
  }
  assert.equal(page.statusCode, 200);
  assert.match(String(page.headers['content-type']), /^text\/html\b/);
  assert.match(page.body, /<html/i);
  const assets = [...page.body.matchAll(/<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']/gi)].map(
    (m) => m[1]!,
  );
  assert.ok(
    assets.some((asset) => /\.js\b/.test(asset)),
    'the page loads a script',
  );
  assert.ok(
    assets.some((asset) => /\.css\b/.test(asset)),
    'the page loads a style sheet',
  );
  for (const asset of assets) {
    assert.doesNotMatch(asset, /^(?:[a-z][a-z0-9+.-]*:)?\/\//i, `${asset} is local`);
    const resolved = new URL(asset, `http://localhost${url}`);
    const response = await h.app.inject({ method: 'GET', url: resolved.pathname + resolved.search });
    assert.equal(response.statusCode, 200, `${asset} is served`);
  }
});

test('GET /healthz answers 200 without a token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const response = await h.app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^application\/json\b/);
  assert.equal(typeof response.json(), 'object');
});

test('GET /readyz answers 200 without a token while the database answers, 503 with an Error body once it is closed', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(ready.statusCode, 200);
  assert.match(String(ready.headers['content-type']), /^application\/json\b/);
  await h.store.close();
  const down = await h.app.inject({ method: 'GET', url: '/readyz' });
  assertErrorBody(down, 503);
  assert.equal(down.headers['cache-control'], 'no-store');
});
