import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EVENT_SHAPES } from '../src/contract.js';
import { WEBHOOK_SHAPES } from '../src/webhook-contract.js';
import { EVENT_LIMIT, EVENT_TYPES, LIMIT, OPERATIONS, PlantStoreClient, RETRY_STATUSES } from '../src/index.js';
import { COMPONENTS, type Json, assertBody, assertShape, at, lookups, ref, served } from './openapi-document.js';
import { type TestServer, recordingFetch } from './support.js';

/**
 * The drift check: everything the client assumes about the API (src/contract.ts, and what it
 * really sends) against the OpenAPI document the running server serves. The compiler ties the
 * client's types to src/contract.ts; this ties src/contract.ts to the server. The webhook calls'
 * parameters, bodies and requests: contract-webhooks.test.ts.
 */

let server: TestServer;
let document: Json;
before(async () => {
  ({ server, document } = await served());
});
after(() => server.stop());
const { operation, parameters } = lookups(() => document);

test('every operation the client calls is served with its method, path and operationId, behind the bearer scheme', () => {
  for (const id of Object.keys(OPERATIONS) as Array<keyof typeof OPERATIONS>) {
    assert.equal(operation(id).operationId, id);
    // The stream also opens with a ticket (interface 1.3.0), which this client does not use.
    const schemes = id === 'streamEvents' ? [{ bearerAuth: [] }, { eventTicket: [] }] : [{ bearerAuth: [] }];
    assert.deepEqual(operation(id).security ?? document.security, schemes, id);
  }
  assert.deepEqual(
    { ...at(document, 'components', 'securitySchemes', 'bearerAuth'), description: undefined },
    { type: 'http', scheme: 'bearer', description: undefined },
  );
});

test('each operation has exactly the one success status the client expects, with the body it reads', () => {
  for (const id of Object.keys(OPERATIONS) as Array<keyof typeof OPERATIONS>) {
    const op = OPERATIONS[id];
    const responses = at(operation(id), 'responses');
    assert.deepEqual(
      Object.keys(responses).filter((s) => s.startsWith('2')),
      [String(op.success)],
      `${id}: success statuses`,
    );
    const success = at(responses, String(op.success));
    if ('response' in op && op.response === 'Event[]') {
      // One operation, two representations: the client reads the JSON one (its items: the test below).
      assert.deepEqual(Object.keys(at(success, 'content')).sort(), ['application/json', 'text/event-stream']);
      assert.equal(at(success, 'content', 'application/json', 'schema').type, 'array');
      continue;
    }
    if (!('response' in op)) {
      assert.equal(success.content, undefined, `${id}: no ${op.success} body`);
      continue;
    }
    assert.deepEqual(Object.keys(at(success, 'content')), ['application/json'], id);
    assertBody(`${id}: the ${op.success} body`, at(success, 'content', 'application/json', 'schema'), op.response);
  }
  assert.ok(at(operation('findPlants'), 'responses', '200', 'headers', 'Link'), 'the next page comes in a Link header');
  assert.ok(at(operation('streamEvents'), 'responses', '200', 'headers', 'Link'), 'so does the next page of events');
  assert.ok(at(operation('listDeliveries'), 'responses', '200', 'headers', 'Link'), 'and of deliveries');
});

test('every failure status is documented with the Error body the client reads its message from', () => {
  for (const id of Object.keys(OPERATIONS) as Array<keyof typeof OPERATIONS>) {
    for (const [status, response] of Object.entries(at(operation(id), 'responses'))) {
      if (Number(status) < 400) continue;
      assert.deepEqual(Object.keys(at(response, 'content') as object), ['application/json'], `${id} ${status}`);
      assert.deepEqual(at(response, 'content', 'application/json', 'schema'), ref('Error'), `${id} ${status}`);
    }
    // The statuses the client retries, where this server sends them, are documented, with Retry-After.
    for (const status of ['408', '429', '503']) {
      assert.ok(RETRY_STATUSES.has(Number(status)));
      assert.ok(at(operation(id), 'responses', status), `${id} documents ${status}`);
    }
    for (const status of ['429', '503']) assert.ok(at(operation(id), 'responses', status, 'headers', 'Retry-After'));
  }
  assert.ok(at(operation('deletePlant'), 'responses', '404'), 'deletePlant documents the 404 the client interprets');
});

test('the parameters are the ones the client sends: limit and its bounds, cursor, tag, and the int64 path id', () => {
  // The list also takes If-None-Match (a poller's conditional request, issue 15); this client asks
  // for whole pages, so only the query parameters are its own.
  const all = parameters('findPlants');
  assert.deepEqual(
    all.filter((p) => p.in === 'header').map((p) => [p.name, p.required]),
    [['If-None-Match', false]],
  );
  const query = all.filter((p) => p.in !== 'header');
  assert.deepEqual(
    query.map((p) => [p.name, p.in, p.required]),
    OPERATIONS.findPlants.query.map((name) => [name, 'query', false]),
  );
  const schema = (name: string): Json =>
    at(
      query.find((p) => p.name === name),
      'schema',
    );
  const { type, minimum, maximum, default: byDefault } = schema('limit');
  assert.deepEqual(
    { type, minimum, maximum, default: byDefault },
    { type: 'integer', minimum: LIMIT.min, maximum: LIMIT.max, default: LIMIT.default },
  );
  assert.equal(schema('cursor').type, 'string');
  assert.equal(schema('tag').type, 'string');

  assert.deepEqual(
    parameters('deletePlant').map((p) => [p.name, p.in, p.required, at(p, 'schema').type, at(p, 'schema').format]),
    OPERATIONS.deletePlant.params.map((name) => [name, 'path', true, 'integer', 'int64']),
  );
  assert.deepEqual(parameters('addPlant'), []);

  // The feed: its query parameters (Last-Event-ID is the stream's, not this client's).
  const events = parameters('streamEvents');
  assert.deepEqual(
    events.filter((p) => p.in === 'query').map((p) => [p.name, p.required, at(p, 'schema').type]),
    OPERATIONS.streamEvents.query.map((name) => [name, false, name === 'limit' ? 'integer' : 'string']),
  );
  const eventLimit = at(
    events.find((p) => p.name === 'limit'),
    'schema',
  );
  assert.deepEqual(
    { minimum: eventLimit.minimum, maximum: eventLimit.maximum, default: eventLimit.default },
    { minimum: EVENT_LIMIT.min, maximum: EVENT_LIMIT.max, default: EVENT_LIMIT.default },
  );
  assert.deepEqual(operation('addPlant').requestBody, {
    required: true,
    content: { 'application/json': { schema: ref(OPERATIONS.addPlant.body) } },
  });
});

test('an item of a page of events has the fields of EVENT_SHAPES, its type one of EVENT_TYPES, its data the payload', () => {
  const items = at(operation('streamEvents'), 'responses', '200', 'content', 'application/json', 'schema', 'items');
  assertShape('Event', items, EVENT_SHAPES.Event);
  assert.deepEqual(at(items, 'properties', 'type').enum, [...EVENT_TYPES]);
  assert.equal(at(items, 'properties', 'createdAt').format, 'date-time');
  assertShape('Event.data', at(items, 'properties', 'data'), EVENT_SHAPES.EventData);
});

test("the schemas of components.schemas have exactly the fields, types, values and required lists of the client's shapes", () => {
  assert.deepEqual(Object.keys(COMPONENTS).sort(), [
    'CreatedWebhook',
    'Delivery',
    'DeliveryAttempt',
    'Error',
    'NewPlant',
    'NewWebhook',
    'Plant',
    'RotatedWebhook',
    'Webhook',
    'WebhookActivity',
    'WebhookPatch',
  ]);
  for (const [name, shape] of Object.entries(COMPONENTS)) {
    assertShape(name, at(document, 'components', 'schemas', name), shape);
  }
  assertShape(
    'WebhookActivity.hours items',
    at(document, 'components', 'schemas', 'WebhookActivity', 'properties', 'hours', 'items'),
    WEBHOOK_SHAPES.WebhookActivityHour,
  );
});

test('what the client puts on the wire fits the document: each request a documented operation, parameter and body', async () => {
  const recorded = recordingFetch();
  const client = new PlantStoreClient({ baseUrl: server.url, token: await server.token(), fetch: recorded.fetch });
  await client.create({ id: 9223372036854775807n, name: 'Highest', tag: 'edge' });
  await client.create({ id: '-9223372036854775808', name: 'Lowest', tag: null });
  await client.create({ id: 1n, name: 'Plain', tag: 'edge' });
  for await (const _ of client.list({ limit: 1, tag: 'edge' }));
  for await (const _ of client.list({ limit: 1 }));
  await client.delete('9223372036854775807');

  const newPlant = at(document, 'components', 'schemas', 'NewPlant');
  const routes = Object.values(OPERATIONS).map((op) => ({
    op,
    path: new RegExp(`^${op.path.replace(/\{\w+\}/g, '-?\\d+')}$`),
  }));
  assert.equal(recorded.sent.length, 3 + 2 + 3 + 1, 'three creates, two pages by tag, three pages, a delete');
  for (const { method, url, body } of recorded.sent) {
    const route = routes.find((r) => r.op.method === method && r.path.test(url.pathname));
    assert.ok(route, `${method} ${url.pathname} is an operation of the client`);
    const documented = at(document, 'paths', route.op.path, method.toLowerCase());
    const names = ((documented.parameters as Json[] | undefined) ?? []).filter((p) => p.in === 'query');
    for (const name of new URL(url).searchParams.keys()) {
      assert.ok(
        names.some((p) => p.name === name),
        `${name} is a documented query parameter`,
      );
    }
    if (body === undefined) continue;
    const fields = Object.keys(JSON.parse(body) as Json);
    assert.ok(
      fields.every((f) => f in at(newPlant, 'properties')),
      `${body}: only NewPlant fields`,
    );
    assert.ok(
      (newPlant.required as string[]).every((f) => fields.includes(f)),
      `${body}: every required field`,
    );
    assert.match(body, /^\{"id":-?\d+,/, 'the id is a JSON integer, written exactly');
  }
  assert.ok(recorded.sent.some((s) => s.body?.startsWith('{"id":9223372036854775807,')));
  assert.ok(recorded.sent.some((s) => s.body?.startsWith('{"id":-9223372036854775808,')));
});

test('what the client sends for the feed fits the document: the path and the documented query names', async () => {
  const recorded = recordingFetch();
  const client = new PlantStoreClient({ baseUrl: server.url, token: await server.token(), fetch: recorded.fetch });
  for await (const _ of client.events({ after: 0n, limit: 5, types: ['plant.deleted'] }));
  for await (const _ of client.events());
  const names = parameters('streamEvents')
    .filter((p) => p.in === 'query')
    .map((p) => p.name);
  assert.ok(recorded.sent.length >= 2);
  for (const { method, url } of recorded.sent) {
    assert.equal(method, 'GET');
    assert.equal(url.pathname, OPERATIONS.streamEvents.path);
    for (const name of url.searchParams.keys()) assert.ok(names.includes(name), `${name} is documented`);
  }
  assert.equal(recorded.sent[0]!.url.search, '?after=0&types=plant.deleted&limit=5');
});
