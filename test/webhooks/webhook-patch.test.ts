import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import { assertError, jsonBody, create, plantBody, remove } from '../plants/plant.helpers.js';
import type { WebhookBody } from '../../src/webhooks/webhook.schema.js';

// Interface 1.2.0's webhook management over app.inject, on the engine under test (PATCH, rotation,
// recover, the attempt log's 404s): nothing is delivered here (buildApp starts no dispatcher);
// delivery-side behaviour is in webhook-delivery.test.ts.

const ALL = [...READ_WRITE, 'webhooks:read', 'webhooks:write'];
const URL_1 = 'https://hooks.example.com/plants';

/** A Webhook as answered: the schema's own type (webhook.schema.ts), not a second description of it. */
type WebhookJson = WebhookBody;

async function users(t: TestContext): Promise<{ h: TestApp; alice: string; bob: string }> {
  const h = await makeApp({ events: { ...testConfig().events, allowPrivateTargets: false } });
  t.after(() => h.close());
  return { h, alice: await h.token('alice', ALL), bob: await h.token('bob', ALL) };
}

const call = (h: TestApp, token: string, method: 'POST' | 'PATCH' | 'GET', url: string, payload?: unknown) =>
  h.call(token, { method, url, ...(payload === undefined ? {} : json(JSON.stringify(payload))) });

async function createWebhook(h: TestApp, token: string, extra: Record<string, unknown> = {}) {
  return jsonBody<WebhookJson & { secret: string }>(
    await call(h, token, 'POST', '/webhooks', { url: URL_1, ...extra }),
    201,
  );
}

const patch = (h: TestApp, token: string, id: string, payload: unknown) =>
  call(h, token, 'PATCH', `/webhooks/${id}`, payload);

const listed = async (h: TestApp, token: string): Promise<WebhookJson[]> =>
  jsonBody<WebhookJson[]>(await h.call(token, { method: 'GET', url: '/webhooks' }), 200);

describe('description, failingSince and disabledReason on every Webhook', () => {
  test('POST /webhooks takes a description; "" by default; failingSince and disabledReason null', async (t) => {
    const { h, alice } = await users(t);
    const plain = await createWebhook(h, alice);
    assert.deepEqual([plain.description, plain.failingSince, plain.disabledReason], ['', null, null]);
    h.advance(1000); // listed oldest first
    const described = await createWebhook(h, alice, { description: 'Greenhouse sync 🌿' });
    assert.equal(described.description, 'Greenhouse sync 🌿');
    assert.deepEqual(
      (await listed(h, alice)).map((w) => w.description),
      ['', 'Greenhouse sync 🌿'],
    );
  });

  for (const [what, description] of [
    ['201 characters', 'x'.repeat(201)],
    ['a control character', 'a\u0007b'],
    ['a lone surrogate', 'a\ud800b'],
    ['a number', 5],
  ] as const) {
    test(`POST /webhooks answers 400 for a description with ${what}`, async (t) => {
      const { h, alice } = await users(t);
      assertError(await call(h, alice, 'POST', '/webhooks', { url: URL_1, description }), 400);
    });
  }
});

describe('PATCH /webhooks/{id}', () => {
  test('changes each field alone, answers the Webhook, and the list shows the change', async (t) => {
    const { h, alice } = await users(t);
    const { secret: _secret, ...created } = await createWebhook(h, alice);
    const url = 'https://hooks.example.com/v2/plants';
    let expected: WebhookJson = { ...created, url };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, { url }), 200), expected);
    expected = { ...expected, events: ['plant.deleted'] };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, { events: ['plant.deleted'] }), 200), expected);
    expected = { ...expected, description: 'CRM' };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, { description: 'CRM' }), 200), expected);
    expected = { ...expected, status: 'disabled', disabledReason: 'manual' };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, { status: 'disabled' }), 200), expected);
    assert.deepEqual(await listed(h, alice), [expected]);
    expected = { ...expected, status: 'active', disabledReason: null };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, { status: 'active' }), 200), expected);
    const all = { url: URL_1, events: ['plant.deleted', 'plant.created'], description: '', status: 'active' };
    assert.deepEqual(jsonBody(await patch(h, alice, created.id, all), 200), {
      ...expected,
      url: URL_1,
      events: ['plant.created', 'plant.deleted'],
      description: '',
    });
  });

  for (const [what, payload] of [
    ['an empty object', {}],
    ['an unknown field', { colour: 'green' }],
    ['a known field beside an unknown one', { description: 'x', secret: 'whsec_x' }],
    ['an http:// url (private targets not allowed)', { url: 'http://hooks.example.com/' }],
    ['a loopback url', { url: 'https://127.0.0.1/hook' }],
    ['no event type', { events: [] }],
    ['an unknown event type', { events: ['plant.watered'] }],
    ['an unknown status', { status: 'paused' }],
    ['a description of 201 characters', { description: 'd'.repeat(201) }],
    ['null for a field', { url: null }],
    ['an array', [{ description: 'x' }]],
  ] as const) {
    test(`PATCH /webhooks/{id} answers 400 with an Error body for ${what}, changing nothing`, async (t) => {
      const { h, alice } = await users(t);
      const { secret: _secret, ...created } = await createWebhook(h, alice);
      assertError(await patch(h, alice, created.id, payload), 400);
      assert.deepEqual(await listed(h, alice), [created]);
    });
  }

  test('PATCH /webhooks/{id} answers 415 without a JSON content type', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    const res = await h.call(alice, {
      method: 'PATCH',
      url: `/webhooks/${created.id}`,
      payload: 'description=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertError(res, 415);
  });

  test('another subject’s webhook answers 404 as a missing one, for every new call, and is unchanged', async (t) => {
    const { h, alice, bob } = await users(t);
    const { secret: _secret, ...created } = await createWebhook(h, alice);
    const calls: Array<[method: 'POST' | 'PATCH' | 'GET', path: string, payload?: unknown]> = [
      ['PATCH', '', { status: 'disabled' }],
      ['POST', '/secret', {}],
      ['POST', '/ping'],
      ['POST', '/recover', { since: '2025-01-01T00:00:00Z' }],
      ['GET', '/deliveries/1/attempts'],
    ];
    for (const [method, path, payload] of calls) {
      const theirs = await call(h, bob, method, `/webhooks/${created.id}${path}`, payload);
      const missing = await call(h, bob, method, `/webhooks/wh_missing${path}`, payload);
      assert.equal(theirs.statusCode, 404, `${method} ${path}`);
      assert.equal(missing.statusCode, 404, `${method} ${path} (missing)`);
      assert.equal(
        assertError(theirs, 404).message.replace(created.id, 'X'),
        assertError(missing, 404).message.replace('wh_missing', 'X'),
      );
    }
    assert.deepEqual(await listed(h, alice), [created]);
    assert.deepEqual(await h.store.listDeliveries(created.id, null, 10), [], 'no ping was made for bob');
  });

  test('the new calls need webhooks:write (webhooks:read for the attempts)', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    const reader = await h.token('alice', ['webhooks:read']);
    const writer = await h.token('alice', ['webhooks:write']);
    for (const [method, path, payload] of [
      ['PATCH', '', { description: 'x' }],
      ['POST', '/secret', {}],
      ['POST', '/ping'],
      ['POST', '/recover', { since: '2025-01-01T00:00:00Z' }],
    ] as const) {
      const res = await call(h, reader, method, `/webhooks/${created.id}${path}`, payload);
      assert.equal(res.statusCode, 403, `${method} ${path}`);
      assert.match(String(res.headers['www-authenticate']), /scope="webhooks:write"/);
    }
    const attempts = await call(h, writer, 'GET', `/webhooks/${created.id}/deliveries/1/attempts`);
    assert.equal(attempts.statusCode, 403);
    assert.match(String(attempts.headers['www-authenticate']), /scope="webhooks:read"/);
  });

  test('events changed by PATCH apply from the change on: earlier events keep their deliveries', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    assert.equal((await create(h, alice, plantBody('1', 'one'))).statusCode, 200);
    jsonBody(await patch(h, alice, created.id, { events: ['plant.deleted'] }), 200);
    assert.equal((await create(h, alice, plantBody('2', 'two'))).statusCode, 200);
    assert.equal((await remove(h, alice, '2')).statusCode, 204);
    const deliveries = jsonBody<Array<{ type: string }>>(
      await h.call(alice, { method: 'GET', url: `/webhooks/${created.id}/deliveries` }),
      200,
    );
    assert.deepEqual(
      deliveries.map((d) => d.type),
      ['plant.deleted', 'plant.created'],
      'plant 1’s create (before the change) and plant 2’s delete; not plant 2’s create',
    );
  });

  test('status disabled pauses: an event meanwhile is not owed after status active', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    assert.equal((await create(h, alice, plantBody('1', 'one'))).statusCode, 200);
    jsonBody(await patch(h, alice, created.id, { status: 'disabled' }), 200);
    assert.equal((await create(h, alice, plantBody('2', 'two'))).statusCode, 200);
    jsonBody(await patch(h, alice, created.id, { status: 'active' }), 200);
    assert.equal((await create(h, alice, plantBody('3', 'three'))).statusCode, 200);
    const deliveries = await h.store.listDeliveries(created.id, null, 10);
    const events = await h.store.readEvents(0n, null, 10);
    assert.deepEqual(
      deliveries?.map((d) => d.eventId),
      [events[2]!.id, events[0]!.id],
    );
  });
});

describe('POST /webhooks/{id}/secret', () => {
  test('answers 200 with the Webhook and a new whsec_ secret, shown this once', async (t) => {
    const { h, alice } = await users(t);
    const { secret, ...created } = await createWebhook(h, alice);
    const rotated = jsonBody<WebhookJson & { secret: string }>(
      await call(h, alice, 'POST', `/webhooks/${created.id}/secret`, { overlapSeconds: 60 }),
      200,
    );
    const { secret: newSecret, ...webhook } = rotated;
    // Contract 1.3.0: when the old secret stops signing, 60 s from the app's clock (2026-01-01).
    assert.equal(created.previousSecretExpiresAt, null);
    assert.deepEqual(webhook, { ...created, previousSecretExpiresAt: '2026-01-01T00:01:00.000Z' });
    assert.match(newSecret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.notEqual(newSecret, secret);
    const [shown] = await listed(h, alice);
    assert.equal(shown!.previousSecretExpiresAt, '2026-01-01T00:01:00.000Z', 'listed too');
    h.advance(60_000);
    assert.equal((await listed(h, alice))[0]!.previousSecretExpiresAt, null, 'the overlap is over');
    const again = await call(h, alice, 'POST', `/webhooks/${created.id}/secret`, {});
    assert.notEqual(jsonBody<{ secret: string }>(again, 200).secret, newSecret, 'the default overlap; another secret');
    const none = await call(h, alice, 'POST', `/webhooks/${created.id}/secret`, { overlapSeconds: 0 });
    assert.equal(jsonBody<WebhookJson>(none, 200).previousSecretExpiresAt, null, 'overlapSeconds 0: no overlap');
    assert.ok(!JSON.stringify(await listed(h, alice)).includes('whsec_'), 'never listed');
  });

  for (const [what, payload] of [
    ['a negative overlap', { overlapSeconds: -1 }],
    ['an overlap over 7 days', { overlapSeconds: 604_801 }],
    ['a fractional overlap', { overlapSeconds: 1.5 }],
    ['an unknown field', { overlap: 10 }],
  ] as const) {
    test(`answers 400 for ${what}`, async (t) => {
      const { h, alice } = await users(t);
      const created = await createWebhook(h, alice);
      assertError(await call(h, alice, 'POST', `/webhooks/${created.id}/secret`, payload), 400);
    });
  }
});

describe('POST /webhooks/{id}/recover and GET …/attempts refuse what they cannot read', () => {
  // Dates that do not exist (Date.parse read 30 February as 2 March), hours and
  // offsets past their range.
  const impossible = ['2025-02-30T00:00:00Z', '2024-02-30T00:00:00Z', '2025-04-31T00:00:00Z', '2025-03-01T24:00:00Z'];
  for (const since of ['yesterday', '2025-03-01', '2025-03-01T06:00:00', '2025-13-01T00:00:00Z', 5, ...impossible]) {
    test(`recover answers 400 for since ${JSON.stringify(since)}`, async (t) => {
      const { h, alice } = await users(t);
      const created = await createWebhook(h, alice);
      assertError(await call(h, alice, 'POST', `/webhooks/${created.id}/recover`, { since }), 400);
    });
  }

  test('recover answers 400 without since; 202 with requeued 0 when nothing failed', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    assertError(await call(h, alice, 'POST', `/webhooks/${created.id}/recover`, {}), 400);
    const res = await call(h, alice, 'POST', `/webhooks/${created.id}/recover`, { since: '2025-03-01T06:00:00+01:00' });
    assert.deepEqual(jsonBody(res, 202), { requeued: 0, created: 0 });
    // RFC 3339 §5.7 allows a leap second, and 29 February of a leap year.
    for (const since of ['2016-12-31T23:59:60Z', '2024-02-29T00:00:00Z', '2025-03-01T06:00:00.5-23:59']) {
      assert.equal((await call(h, alice, 'POST', `/webhooks/${created.id}/recover`, { since })).statusCode, 202, since);
    }
  });

  test('attempts answer 404 for a delivery of another webhook or none, 400 for a non-numeric id, [] before any', async (t) => {
    const { h, alice } = await users(t);
    const one = await createWebhook(h, alice);
    const two = await createWebhook(h, alice);
    assert.equal((await create(h, alice, plantBody('1', 'one'))).statusCode, 200);
    const [delivery] = (await h.store.listDeliveries(one.id, null, 1))!;
    const path = (w: string, d: string) => `/webhooks/${w}/deliveries/${d}/attempts`;
    assert.deepEqual(jsonBody(await call(h, alice, 'GET', path(one.id, String(delivery!.id))), 200), []);
    assertError(await call(h, alice, 'GET', path(two.id, String(delivery!.id))), 404);
    assertError(await call(h, alice, 'GET', path(one.id, '999999')), 404);
    assertError(await call(h, alice, 'GET', path(one.id, 'x')), 400);
  });
});

describe('POST /webhooks/{id}/secret without a body', () => {
  test('no body rotates with the default overlap, as {} does; a body that is not JSON is still a 415', async (t) => {
    const { h, alice } = await users(t);
    const created = await createWebhook(h, alice);
    const url = `/webhooks/${created.id}/secret`;
    for (const headers of [
      {},
      { 'content-length': '0' },
      { 'content-type': 'application/json', 'content-length': '0' },
    ]) {
      const res = await h.call(alice, { method: 'POST', url, headers });
      const body = jsonBody<{ secret: string; previousSecretExpiresAt?: unknown }>(res, 200);
      assert.match(body.secret, /^whsec_/, JSON.stringify(headers));
    }
    const text = await h.call(alice, { method: 'POST', url, headers: { 'content-type': 'text/plain' }, payload: 'x' });
    assertError(text, 415);
    const document = jsonBody<{ paths: Record<string, { post: { requestBody: { required: boolean } } }> }>(
      await h.call(undefined, { method: 'GET', url: '/openapi.json' }),
      200,
    );
    assert.equal(document.paths['/webhooks/{id}/secret']!.post.requestBody.required, false);
    assert.equal(document.paths['/webhooks/{id}/recover']!.post.requestBody.required, true);
  });
});
