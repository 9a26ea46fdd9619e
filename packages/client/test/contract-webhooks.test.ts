import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { OPERATIONS, PlantStoreClient } from '../src/index.js';
import { DELIVERY_LIMIT } from '../src/webhook-contract.js';
import { type Json, assertBody, at, lookups, served } from './openapi-document.js';
import { type TestServer, recordingFetch } from './support.js';

// The drift check of the webhook calls (contract.test.ts checks every operation's statuses and
// every shape): their parameters and bodies, and what the client really sends for each.

let server: TestServer;
let document: Json;
before(async () => {
  ({ server, document } = await served());
});
after(() => server.stop());
const { operation, parameters } = lookups(() => document);

const WEBHOOK_OPERATIONS = (Object.keys(OPERATIONS) as Array<keyof typeof OPERATIONS>).filter((id) =>
  OPERATIONS[id].path.startsWith('/webhooks'),
);

test('the webhook operations take the path parameters, query and bodies the client sends', () => {
  assert.equal(WEBHOOK_OPERATIONS.length, 12);
  for (const id of WEBHOOK_OPERATIONS) {
    const op = OPERATIONS[id] as { params?: readonly string[]; query?: readonly string[]; body?: string };
    const inPath = parameters(id).filter((p) => p.in === 'path');
    assert.deepEqual(
      inPath.map((p) => [p.name, p.required]),
      (op.params ?? []).map((name) => [name, true]),
      `${id}: path parameters`,
    );
    for (const p of inPath) {
      const { type, format } = at(p, 'schema');
      // The webhook id is text; a delivery id is an int64, which the client writes digit for digit.
      assert.deepEqual(
        { type, format },
        p.name === 'id' ? { type: 'string', format: undefined } : { type: 'integer', format: 'int64' },
      );
    }
    assert.deepEqual(
      parameters(id)
        .filter((p) => p.in !== 'path')
        .map((p) => [p.name, p.in, p.required]),
      (op.query ?? []).map((name) => [name, 'query', false]),
      `${id}: query parameters`,
    );
    const body = operation(id).requestBody as Json | undefined;
    if (op.body === undefined) {
      assert.equal(body, undefined, `${id} takes no body`);
      continue;
    }
    assert.deepEqual(Object.keys(at(body, 'content')), ['application/json'], id);
    assertBody(`${id}: its body`, at(body, 'content', 'application/json', 'schema'), op.body);
  }
  const limit = at(
    parameters('listDeliveries').find((p) => p.name === 'limit'),
    'schema',
  );
  assert.deepEqual(
    { type: limit.type, minimum: limit.minimum, maximum: limit.maximum, default: limit.default },
    { type: 'integer', minimum: DELIVERY_LIMIT.min, maximum: DELIVERY_LIMIT.max, default: DELIVERY_LIMIT.default },
  );
  // `before` is a delivery id: an int64, which the client writes digit for digit.
  const beforeParam = at(
    parameters('listDeliveries').find((p) => p.name === 'before'),
    'schema',
  );
  assert.deepEqual({ type: beforeParam.type, format: beforeParam.format }, { type: 'integer', format: 'int64' });
});

test('what the client sends for each webhook call fits the document: a documented operation, query and body', async () => {
  const recorded = recordingFetch();
  const token = await server.token(['webhooks:read', 'webhooks:write'], 'contract-webhooks');
  const client = new PlantStoreClient({ baseUrl: server.url, token, fetch: recorded.fetch });
  const { id } = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook', events: ['plant.created'] });
  await client.webhooks.list();
  await client.webhooks.update(id, { description: 'x', status: 'disabled', events: ['plant.deleted'] });
  await client.webhooks.rotateSecret(id);
  await client.webhooks.rotateSecret(id, { overlapSeconds: 0 });
  const ping = await client.webhooks.ping(id);
  await client.webhooks.recover(id, { since: new Date(0) });
  await client.webhooks.enable(id);
  await client.webhooks.deliveries(id, { limit: 5 });
  await client.webhooks.deliveriesPage(id, { limit: 1, before: ping.id });
  await client.webhooks.activity(id);
  await client.webhooks.retryDelivery(id, ping.id);
  await client.webhooks.attempts(id, ping.id);
  await client.webhooks.delete(id);

  const routes = WEBHOOK_OPERATIONS.map((operationId) => ({
    operationId,
    op: OPERATIONS[operationId],
    path: new RegExp(`^${OPERATIONS[operationId].path.replace('{id}', '[^/]+').replace('{deliveryId}', '\\d+')}$`),
  }));
  const resolve = (schema: Json): Json =>
    typeof schema.$ref === 'string' ? at(document, ...schema.$ref.slice(2).split('/')) : schema;
  const called = new Set<string>();
  for (const { method, url, body } of recorded.sent) {
    const route = routes.find((r) => r.op.method === method && r.path.test(url.pathname));
    assert.ok(route, `${method} ${url.pathname} is a webhook operation`);
    called.add(route.operationId);
    const names = parameters(route.operationId)
      .filter((p) => p.in === 'query')
      .map((p) => p.name);
    for (const name of url.searchParams.keys()) assert.ok(names.includes(name), `${name} is documented`);
    const documented = operation(route.operationId).requestBody as Json | undefined;
    assert.equal(
      body !== undefined,
      documented !== undefined,
      `${route.operationId}: a body exactly when one is taken`,
    );
    if (body === undefined) continue;
    const schema = resolve(at(documented, 'content', 'application/json', 'schema'));
    const fields = Object.keys(JSON.parse(body) as Json);
    for (const field of fields) assert.ok(field in at(schema, 'properties'), `${route.operationId}: ${field}`);
    for (const field of (schema.required as string[] | undefined) ?? []) assert.ok(fields.includes(field), field);
  }
  assert.deepEqual([...called].sort(), [...WEBHOOK_OPERATIONS].sort(), 'every webhook operation was called');
});
