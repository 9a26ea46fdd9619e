import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { READ_WRITE, makeApp } from '../helpers.js';

// Every parameter, request body and response body of the OpenAPI document has an
// example that its schema accepts, and the examples chain: a client generated from the document
// can create the example plant, list it and delete it with nothing but the examples.

type Json = Record<string, unknown>;
interface Operation {
  readonly operationId: string;
  readonly parameters?: Json[];
  readonly requestBody?: { content: Record<string, Json> };
  readonly responses: Record<string, { content?: Record<string, Json> }>;
}

async function served(): Promise<Json> {
  const h = await makeApp();
  try {
    return (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json<Json>();
  } finally {
    await h.close();
  }
}

/** The schema with every `#/components/schemas/…` reference replaced by what it names. */
function resolved(document: Json, schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((s) => resolved(document, s));
  if (schema === null || typeof schema !== 'object') return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string') {
    const name = ref.replace('#/components/schemas/', '');
    return resolved(document, ((document.components as Json).schemas as Json)[name]);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, resolved(document, value)]));
}

/** The example a generator reads for a body: the media type's own, else its schema's first, arrays from their items'. */
function bodyExample(document: Json, media: Json): unknown {
  if (media.example !== undefined) return media.example;
  const schema = resolved(document, media.schema) as Json;
  if (Array.isArray(schema.examples)) return schema.examples[0];
  if (schema.type === 'array') return [bodyExample(document, { schema: schema.items })];
  return undefined;
}

function operations(document: Json): Array<{ where: string; op: Operation }> {
  const paths = Object.entries(document.paths as Record<string, Record<string, Operation>>);
  const hooks = Object.entries(document.webhooks as Record<string, Record<string, Operation>>);
  return [
    ...paths,
    ...hooks.map(([name, item]): [string, Record<string, Operation>] => [`webhook ${name}`, item]),
  ].flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ where: `${method} ${path}`, op })));
}

const byId = (document: Json, id: string): Operation => {
  const found = operations(document).find(({ op }) => op.operationId === id);
  assert.ok(found, `an operation ${id}`);
  return found.op;
};

test('every parameter, request body and response body has an example its schema accepts', async () => {
  const document = await served();
  // Ajv knows JSON Schema's keywords; OpenAPI's formats are annotations here.
  const ajv = new Ajv2020({ strict: false, formats: { int32: true, int64: true, 'date-time': true } });
  const check = (where: string, schema: unknown, example: unknown): void => {
    assert.notEqual(example, undefined, `${where} has an example`);
    const validate = ajv.compile(resolved(document, schema) as Json);
    assert.ok(validate(example), `${where}: ${JSON.stringify(example)} fits: ${ajv.errorsText(validate.errors)}`);
  };
  let counted = 0;
  for (const { where, op } of operations(document)) {
    for (const parameter of op.parameters ?? []) {
      check(`${where} parameter ${String(parameter.name)}`, parameter.schema, parameter.example);
      counted++;
    }
    for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
      check(`${where} request body ${type}`, media.schema, bodyExample(document, media));
      counted++;
    }
    for (const [status, response] of Object.entries(op.responses)) {
      for (const [type, media] of Object.entries(response.content ?? {})) {
        check(`${where} ${status} ${type}`, media.schema, bodyExample(document, media));
        counted++;
      }
    }
  }
  assert.ok(counted > 100, `${counted} examples checked`);
});

test('error answers show an Error example that the server really sends: deleting the example plant again', async () => {
  const document = await served();
  const deletion = byId(document, 'deletePlant');
  const example = bodyExample(document, deletion.responses['404']!.content!['application/json']!);
  const h = await makeApp();
  try {
    const token = await h.token('alice', READ_WRITE);
    const id = String(deletion.parameters!.find((p) => p.name === 'id')!.example);
    const gone = await h.call(token, { method: 'DELETE', url: `/plants/${id}` });
    assert.equal(gone.statusCode, 404);
    assert.deepEqual(gone.json(), example);
  } finally {
    await h.close();
  }
});

test("the examples chain: POST /plants's body, GET /plants's parameters, DELETE /plants/{id}'s id", async () => {
  const document = await served();
  const create = byId(document, 'addPlant');
  const list = byId(document, 'findPlants');
  const remove = byId(document, 'deletePlant');
  const newPlant = bodyExample(document, create.requestBody!.content['application/json']!) as Json;
  const id = remove.parameters!.find((p) => p.name === 'id')!.example;
  assert.equal(id, newPlant.id, 'the DELETE path id example is the POST body id example');

  const h = await makeApp();
  try {
    const token = await h.token('alice', READ_WRITE);
    const created = await h.call(token, { method: 'POST', url: '/plants', payload: newPlant });
    assert.equal(created.statusCode, 200, created.body);
    assert.deepEqual(created.json(), bodyExample(document, create.responses['200']!.content!['application/json']!));

    // Every example parameter at once, as a generated request sends them (the cursor and the
    // If-None-Match example are real enough to give the page, not a 400 or a 304).
    const query = new URLSearchParams();
    const headers: Record<string, string> = {};
    for (const p of list.parameters!) {
      if (p.in === 'query') query.set(String(p.name), String(p.example));
      else headers[String(p.name).toLowerCase()] = String(p.example);
    }
    const listed = await h.call(token, { method: 'GET', url: `/plants?${query.toString()}`, headers });
    assert.equal(listed.statusCode, 200, listed.body);
    assert.deepEqual(listed.json(), bodyExample(document, list.responses['200']!.content!['application/json']!));

    const deleted = await h.call(token, { method: 'DELETE', url: `/plants/${String(id)}` });
    assert.equal(deleted.statusCode, 204, deleted.body);
    const after = await h.call(token, { method: 'GET', url: '/plants' });
    assert.deepEqual(after.json(), []);
  } finally {
    await h.close();
  }
});

test('the webhook examples name one webhook and one delivery throughout', async () => {
  const document = await served();
  const created = bodyExample(
    document,
    byId(document, 'createWebhook').responses['201']!.content!['application/json']!,
  );
  const webhookId = (created as Json).id;
  assert.match(String(webhookId), /^wh_[0-9A-Za-z]{16}$/);
  for (const operationId of [
    'deleteWebhook',
    'listDeliveries',
    'retryDelivery',
    'enableWebhook',
    'updateWebhook',
    'rotateWebhookSecret',
    'pingWebhook',
    'recoverDeliveries',
    'listDeliveryAttempts',
    'getWebhookActivity',
  ]) {
    const id = byId(document, operationId).parameters!.find((p) => p.name === 'id');
    assert.equal(id?.example, webhookId, `${operationId}: the id example is the created webhook's`);
  }
  const [delivery] = bodyExample(
    document,
    byId(document, 'listDeliveries').responses['200']!.content!['application/json']!,
  ) as Json[];
  const deliveryId = byId(document, 'retryDelivery').parameters!.find((p) => p.name === 'deliveryId');
  assert.equal(deliveryId?.example, delivery!.id, "retryDelivery's deliveryId example is the listed delivery's id");
  const attemptsOf = byId(document, 'listDeliveryAttempts').parameters!.find((p) => p.name === 'deliveryId');
  assert.equal(attemptsOf?.example, delivery!.id, 'the attempts are the listed delivery’s');
  const { secret: _created, ...webhook } = created as Json;
  const updated = bodyExample(
    document,
    byId(document, 'updateWebhook').responses['200']!.content!['application/json']!,
  );
  assert.deepEqual(updated, webhook, 'PATCH answers the created webhook');
  const rotated = bodyExample(
    document,
    byId(document, 'rotateWebhookSecret').responses['200']!.content!['application/json']!,
  ) as Json;
  assert.equal(rotated.id, webhookId);
  assert.notEqual(rotated.secret, (created as Json).secret, 'a new secret');
  const ping = bodyExample(
    document,
    byId(document, 'pingWebhook').responses['202']!.content!['application/json']!,
  ) as Json;
  assert.deepEqual([ping.type, ping.eventId, ping.status], ['webhook.ping', null, 'pending']);
});
