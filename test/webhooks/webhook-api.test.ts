import assert from 'node:assert/strict';
import { claimSettled } from '../support/settled-claim.js';
import dns from 'node:dns';
import { isIP } from 'node:net';
import { type TestContext, after, before, describe, test } from 'node:test';
import { type Config, testConfig } from '../../src/config.js';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import {
  type Response,
  assertApiHeaders,
  assertError,
  assertForbidden,
  assertIndistinguishable,
  assertNoContent,
  create,
  plantBody,
  remove,
} from '../plants/plant.helpers.js';
import type { WebhookBody } from '../../src/webhooks/webhook.schema.js';

// The /webhooks API (interface 1.1.0; docs/api.md#webhooks) over app.inject, on the engine under
// test. Nothing here connects anywhere: registration neither resolves nor connects, and buildApp
// starts no dispatcher, so deliveries stay pending. As a guard, DNS lookups of every name but
// localhost fail for the whole file and are counted, so not even a resolver is asked.

const lookups: string[] = [];
const realLookup = dns.lookup;
const realPromisesLookup = dns.promises.lookup;
// localhost, and address literals (which resolve to themselves): the other suites of this folder
// run in the same process on PostgreSQL (test/postgres/suites.ts) and deliver to 127.0.0.1.
const passes = (hostname: string): boolean => hostname === 'localhost' || isIP(hostname) !== 0;
before(() => {
  const refuse = (hostname: string): Error => {
    lookups.push(hostname);
    return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname} (refused by the test)`), { code: 'ENOTFOUND' });
  };
  // Overloaded signatures: a stand-in typed as each of them would say nothing more.
  (dns as { lookup: unknown }).lookup = (hostname: string, ...rest: unknown[]) => {
    if (passes(hostname)) return (realLookup as (...args: unknown[]) => unknown)(hostname, ...rest);
    const callback = rest.at(-1) as (error: Error) => void;
    process.nextTick(() => callback(refuse(hostname)));
  };
  (dns.promises as { lookup: unknown }).lookup = (hostname: string, options?: unknown) =>
    passes(hostname) ? realPromisesLookup(hostname, options as dns.LookupOptions) : Promise.reject(refuse(hostname));
});
after(() => {
  dns.lookup = realLookup;
  dns.promises.lookup = realPromisesLookup;
});

const WEBHOOKS = ['webhooks:read', 'webhooks:write'];
const ALL = [...READ_WRITE, ...WEBHOOKS];
const ADMIN = ['plants:admin', ...WEBHOOKS];
const URL_1 = 'https://hooks.example.com/plants';
const BOTH = ['plant.created', 'plant.deleted'];
const WEBHOOK_KEYS = [
  'createdAt',
  'description',
  'destination',
  'disabledReason',
  'events',
  'failingSince',
  'id',
  'previousSecretExpiresAt',
  'status',
  'url',
];
const DELIVERY_KEYS = [
  'attempts',
  'createdAt',
  'eventId',
  'id',
  'lastError',
  'lastStatus',
  'nextAttemptAt',
  'status',
  'type',
];
const SECRET = /^whsec_[A-Za-z0-9+/]{32}$/;
const FIVE_DAYS = 5 * 86_400_000;

/** A Webhook as answered: the schema's own type (webhook.schema.ts), not a second description of it. */
type WebhookJson = WebhookBody;
type CreatedJson = WebhookJson & { secret: string };

/** A delivery, its int64 ids as written in the body (never through a JS number). */
interface DeliveryJson {
  id: string;
  type: string;
  eventId: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

interface Users {
  h: TestApp;
  alice: string;
  bob: string;
}

async function users(t: TestContext, overrides: Partial<Config> = {}): Promise<Users> {
  const h = await makeApp(overrides);
  t.after(() => h.close());
  return { h, alice: await h.token('alice', ALL), bob: await h.token('bob', ALL) };
}

const isIso = (value: unknown): boolean => typeof value === 'string' && new Date(value).toISOString() === value;

const post = (h: TestApp, token: string | undefined, body: unknown): Promise<Response> =>
  h.call(token, { method: 'POST', url: '/webhooks', ...json(JSON.stringify(body)) });

const listWebhooks = (h: TestApp, token: string | undefined): Promise<Response> =>
  h.call(token, { method: 'GET', url: '/webhooks' });

const deliveries = (h: TestApp, token: string | undefined, id: string, query = ''): Promise<Response> =>
  h.call(token, { method: 'GET', url: `/webhooks/${id}/deliveries${query}` });

const retry = (h: TestApp, token: string | undefined, id: string, deliveryId: string): Promise<Response> =>
  h.call(token, { method: 'POST', url: `/webhooks/${id}/deliveries/${deliveryId}/retry` });

const enable = (h: TestApp, token: string | undefined, id: string): Promise<Response> =>
  h.call(token, { method: 'POST', url: `/webhooks/${id}/enable` });

const removeWebhook = (h: TestApp, token: string | undefined, id: string): Promise<Response> =>
  h.call(token, { method: 'DELETE', url: `/webhooks/${id}` });

function assertJson(res: Response, status: number): unknown {
  assert.equal(res.statusCode, status, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  assert.match(String(res.headers['content-type']), /^application\/json(?:;|$)/);
  return JSON.parse(res.payload) as unknown;
}

/** A Webhook: exactly its five keys, never a secret. */
function assertWebhook(value: unknown): WebhookJson {
  const w = value as WebhookJson;
  assert.deepEqual(Object.keys(w).sort(), WEBHOOK_KEYS);
  assert.match(w.id, /^\S+$/);
  assert.ok(['active', 'disabled'].includes(w.status), `status ${w.status}`);
  assert.ok(isIso(w.createdAt), `createdAt ${w.createdAt}`);
  return w;
}

async function createWebhook(h: TestApp, token: string, body: unknown = { url: URL_1 }): Promise<CreatedJson> {
  const created = assertJson(await post(h, token, body), 201) as CreatedJson;
  const { secret, ...webhook } = created;
  assertWebhook(webhook);
  assert.match(secret, SECRET);
  return created;
}

async function webhooksOf(h: TestApp, token: string): Promise<WebhookJson[]> {
  const body = assertJson(await listWebhooks(h, token), 200);
  assert.ok(Array.isArray(body));
  return body.map(assertWebhook);
}

/** The deliveries of a 200, checked for shape; ids are taken from the body text, digit for digit. */
function deliveryList(res: Response): DeliveryJson[] {
  const parsed = assertJson(res, 200) as Array<Record<string, unknown>>;
  const ids = [...res.payload.matchAll(/"id":(-?[0-9]+)[,}]/g)].map((m) => m[1]!);
  const eventIds = [...res.payload.matchAll(/"eventId":(-?[0-9]+)[,}]/g)].map((m) => m[1]!);
  assert.equal(ids.length, parsed.length, 'every id is a JSON integer');
  assert.equal(eventIds.length, parsed.length, 'every eventId is a JSON integer');
  return parsed.map((d, i) => {
    assert.deepEqual(Object.keys(d).sort(), DELIVERY_KEYS);
    assert.ok(BOTH.includes(d.type as string), `type ${String(d.type)}`);
    assert.ok(['pending', 'delivered', 'failed'].includes(d.status as string), `status ${String(d.status)}`);
    assert.ok(Number.isInteger(d.attempts) && (d.attempts as number) >= 0, 'attempts');
    assert.ok(d.lastStatus === null || Number.isInteger(d.lastStatus), 'lastStatus');
    assert.ok(d.lastError === null || typeof d.lastError === 'string', 'lastError');
    assert.ok(d.nextAttemptAt === null || isIso(d.nextAttemptAt), `nextAttemptAt ${String(d.nextAttemptAt)}`);
    assert.ok(isIso(d.createdAt), `createdAt ${String(d.createdAt)}`);
    return { ...d, id: ids[i]!, eventId: eventIds[i]! } as DeliveryJson;
  });
}

async function deliveriesOf(h: TestApp, token: string, id: string): Promise<DeliveryJson[]> {
  return deliveryList(await deliveries(h, token, id));
}

/** The event log as the store has it: ids as decimal text. */
async function events(h: TestApp): Promise<Array<{ id: string; type: string; owner: string }>> {
  return (await h.store.readEvents(0n, null, 1000)).map((e) => ({ id: String(e.id), type: e.type, owner: e.owner }));
}

async function plant(h: TestApp, token: string, id: string, name = `plant ${id}`): Promise<void> {
  assert.equal((await create(h, token, plantBody(id, name))).statusCode, 200);
}

/** Makes the store record one failed attempt of the webhook's due delivery, as a dispatcher would. */
async function failOneAttempt(h: TestApp, lastStatus: number, disable: 'gone' | null = null): Promise<string> {
  const [claimed] = await claimSettled(h.store, {
    holder: 'test-dispatcher',
    leaseMs: 60_000,
    limit: 1,
    perWebhook: 16,
    busy: new Map(),
  });
  assert.ok(claimed, 'a due delivery to claim');
  const outcome = {
    status: 'failed' as const,
    lastStatus,
    lastError: `the receiver answered ${lastStatus}`,
    retryInMs: null,
    healthy: false,
    disable,
    disableWhenFailingForMs: FIVE_DAYS,
    durationMs: 5,
    response: null,
  };
  assert.ok(await h.store.recordAttempt(claimed.id, 'test-dispatcher', outcome));
  return String(claimed.id);
}

describe('POST /webhooks registers a webhook', () => {
  test('POST /webhooks answers 201 with exactly id, url, events, status, createdAt and a whsec_ secret', async (t) => {
    const { h, alice } = await users(t);
    const res = await post(h, alice, { url: URL_1 });
    const body = assertJson(res, 201) as CreatedJson;
    assert.deepEqual(Object.keys(body).sort(), [...WEBHOOK_KEYS, 'secret'].sort());
    assert.equal(body.url, URL_1);
    assert.deepEqual(body.events, BOTH, 'events default to both types');
    assert.equal(body.status, 'active');
    assert.ok(isIso(body.createdAt), body.createdAt);
    assert.match(body.secret, SECRET);
    assert.equal(Buffer.from(body.secret.slice('whsec_'.length), 'base64').length, 24, '24 random bytes');
  });

  test('POST /webhooks keeps only the event types asked for', async (t) => {
    const { h, alice } = await users(t);
    assert.deepEqual((await createWebhook(h, alice, { url: URL_1, events: ['plant.deleted'] })).events, [
      'plant.deleted',
    ]);
    assert.deepEqual((await createWebhook(h, alice, { url: URL_1, events: ['plant.created'] })).events, [
      'plant.created',
    ]);
    const both = await createWebhook(h, alice, { url: URL_1, events: ['plant.deleted', 'plant.created'] });
    assert.deepEqual([...both.events].sort(), BOTH);
  });

  test('POST /webhooks accepts application/json with a charset parameter', async (t) => {
    const { h, alice } = await users(t);
    const res = await h.call(alice, {
      method: 'POST',
      url: '/webhooks',
      payload: JSON.stringify({ url: URL_1 }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    assertJson(res, 201);
  });

  test('GET /webhooks lists the caller’s webhooks oldest first', async (t) => {
    const { h, alice } = await users(t);
    const ids: string[] = [];
    for (const i of [1, 2, 3]) {
      ids.push((await createWebhook(h, alice, { url: `${URL_1}/${i}` })).id);
      // Creation times must differ: the app's clock (SQLite) and the database's (PostgreSQL, in ms).
      h.advance(1000);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.deepEqual(
      (await webhooksOf(h, alice)).map((w) => w.id),
      ids,
    );
  });

  test('GET /webhooks lists the caller’s webhooks without any secret', async (t) => {
    const { h, alice } = await users(t);
    const first = await createWebhook(h, alice);
    const second = await createWebhook(h, alice, { url: 'https://other.example.com/in', events: ['plant.created'] });
    const res = await listWebhooks(h, alice);
    const listed = await webhooksOf(h, alice);
    assert.deepEqual(listed.map((w) => w.id).sort(), [first.id, second.id].sort());
    assert.doesNotMatch(res.payload, /whsec_|secret/);
    assert.ok(!res.payload.includes(first.secret.slice(6)) && !res.payload.includes(second.secret.slice(6)));
    assert.notEqual(first.secret, second.secret);
  });

  test('GET /webhooks lists each webhook exactly as POST answered it, without the secret', async (t) => {
    const { h, alice } = await users(t);
    const { secret: _secret, ...created } = await createWebhook(h, alice);
    assert.deepEqual(await webhooksOf(h, alice), [created]);
  });

  test('POST /webhooks answers 409 with an Error body for a subject’s 21st webhook; others are not held back', async (t) => {
    const { h, alice, bob } = await users(t);
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add((await createWebhook(h, alice, { url: `${URL_1}/${i}` })).id);
    assert.equal(ids.size, 20, 'ids are distinct');
    assertError(await post(h, alice, { url: URL_1 }), 409);
    assert.equal((await webhooksOf(h, alice)).length, 20, 'the 21st was not stored');
    // Another token of the same subject counts against the same limit.
    assertError(await post(h, await h.token('alice', WEBHOOKS), { url: URL_1 }), 409);
    await createWebhook(h, bob);
    assertNoContent(await removeWebhook(h, alice, [...ids][0]!));
    await createWebhook(h, alice);
  });

  test('POST /webhooks answers 415 with an Error body without a JSON content type', async (t) => {
    const { h, alice } = await users(t);
    const body = JSON.stringify({ url: URL_1 });
    for (const headers of [
      { 'content-type': 'text/plain' },
      { 'content-type': 'application/x-www-form-urlencoded' },
      {},
    ]) {
      assertError(await h.call(alice, { method: 'POST', url: '/webhooks', payload: body, headers }), 415);
    }
    assert.deepEqual(await webhooksOf(h, alice), []);
  });

  const badBodies: Array<[string, string]> = [
    ['an unknown property', JSON.stringify({ url: URL_1, secret: 'whsec_mine' })],
    ['an unknown event type', JSON.stringify({ url: URL_1, events: ['plant.updated'] })],
    ['no event type', JSON.stringify({ url: URL_1, events: [] })],
    ['a repeated event type', JSON.stringify({ url: URL_1, events: ['plant.created', 'plant.created'] })],
    ['events as a string', JSON.stringify({ url: URL_1, events: 'plant.created' })],
    ['events with null', JSON.stringify({ url: URL_1, events: [null] })],
    ['no url', JSON.stringify({ events: ['plant.created'] })],
    ['a url that is not a string', JSON.stringify({ url: 7 })],
    ['an empty url', JSON.stringify({ url: '' })],
    ['a relative url', JSON.stringify({ url: '/hooks' })],
    ['a url with a user name', JSON.stringify({ url: 'https://user:pw@hooks.example.com/' })],
    ['a url with a fragment', JSON.stringify({ url: `${URL_1}#frag` })],
    ['a url over 2048 characters', JSON.stringify({ url: `https://hooks.example.com/${'a'.repeat(2048)}` })],
    ['a JSON array', JSON.stringify([{ url: URL_1 }])],
    ['malformed JSON', '{"url": '],
    ['a duplicate key', `{"url":"${URL_1}","url":"https://b.example.com/"}`],
  ];
  for (const [what, body] of badBodies) {
    test(`POST /webhooks answers 400 with an Error body for ${what}`, async (t) => {
      const { h, alice } = await users(t);
      assertError(await h.call(alice, { method: 'POST', url: '/webhooks', ...json(body) }), 400);
      assert.deepEqual(await webhooksOf(h, alice), []);
    });
  }
});

describe('POST /webhooks refuses targets that are not public https (allowPrivateTargets off)', () => {
  let h: TestApp;
  let alice: string;
  before(async () => {
    h = await makeApp();
    alice = await h.token('alice', ALL);
  });
  after(() => h.close());

  test('POST /webhooks answers 400 for an http:// URL, saying https is needed and what allows http in development', async () => {
    assert.equal(
      assertError(await post(h, alice, { url: 'http://hooks.example.com/plants' }), 400).message,
      'the webhook URL must use https (a server started with WEBHOOK_ALLOW_PRIVATE=1 allows http:// and private addresses, for development only)',
    );
    // The setting allows http, not other schemes: it is not named for them.
    assert.equal(
      assertError(await post(h, alice, { url: 'ftp://hooks.example.com/plants' }), 400).message,
      'the webhook URL must use https',
    );
  });

  const refused: Array<[string, string]> = [
    ['https://127.0.0.1/hook', '127.0.0.1'],
    ['https://127.0.0.1:8443/hook', '127.0.0.1'],
    ['https://10.0.0.1/hook', '10.0.0.1'],
    ['https://192.168.1.20/hook', '192.168.1.20'],
    ['https://172.16.0.1/hook', '172.16.0.1'],
    ['https://100.64.0.1/hook', '100.64.0.1'],
    ['https://169.254.169.254/latest/meta-data', '169.254.169.254'],
    ['https://0.0.0.0/hook', '0.0.0.0'],
    ['https://[::1]/hook', '::1'],
    ['https://[::]/hook', '::'],
    ['https://[fd00::1]/hook', 'fd00::1'],
    ['https://[fe80::1]/hook', 'fe80::1'],
    ['https://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1'],
    ['https://[::ffff:10.0.0.1]/hook', '::ffff:a00:1'],
    ['https://2130706433/hook', '127.0.0.1'],
    ['https://0x7f.1/hook', '127.0.0.1'],
    ['https://127.1/hook', '127.0.0.1'],
    ['https://localhost/hook', 'localhost'],
    ['https://api.localhost./hook', 'api.localhost.'],
  ];
  for (const [url, address] of refused) {
    test(`POST /webhooks answers 400 for ${url}, naming the refused address`, async () => {
      const { message } = assertError(await post(h, alice, { url }), 400);
      assert.match(message, /public address/);
      assert.ok(message.includes(address), `the message names ${address}: ${message}`);
      assert.match(
        message,
        / \(a server started with WEBHOOK_ALLOW_PRIVATE=1 allows http:\/\/ and private addresses, for development only\)$/,
      );
    });
  }

  test('POST /webhooks stored none of the refused webhooks', async () => {
    assert.deepEqual(await webhooksOf(h, alice), []);
  });

  test('POST /webhooks answers 201 for a public host name without resolving it', async () => {
    const before = lookups.length;
    const created = await createWebhook(h, alice, { url: 'https://hooks.example.com' });
    assert.equal(created.url, 'https://hooks.example.com/', 'the URL as WHATWG serialises it');
    assert.deepEqual(lookups.slice(before), [], 'no DNS lookup at registration');
  });
});

describe('POST /webhooks with allowPrivateTargets (WEBHOOK_ALLOW_PRIVATE=1)', () => {
  const privateOk = { events: { ...testConfig().events, allowPrivateTargets: true } };

  test('POST /webhooks answers 201 for http://127.0.0.1:9/x and private https targets', async (t) => {
    const { h, alice } = await users(t, privateOk);
    assert.equal((await createWebhook(h, alice, { url: 'http://127.0.0.1:9/x' })).url, 'http://127.0.0.1:9/x');
    await createWebhook(h, alice, { url: 'https://10.0.0.1/x' });
    await createWebhook(h, alice, { url: 'http://[::1]:9/x' });
  });

  test('POST /webhooks still answers 400 for a scheme other than http and https', async (t) => {
    const { h, alice } = await users(t, privateOk);
    assertError(await post(h, alice, { url: 'ftp://127.0.0.1/x' }), 400);
    assertError(await post(h, alice, { url: 'file:///etc/passwd' }), 400);
  });
});

describe('the /webhooks API needs a token with the webhooks scopes', () => {
  let h: TestApp;
  let webhookId: string;
  let deliveryId: string;
  before(async () => {
    h = await makeApp();
    const owner = await h.token('alice', ALL);
    webhookId = (await createWebhook(h, owner)).id;
    await plant(h, owner, '1');
    deliveryId = (await deliveriesOf(h, owner, webhookId))[0]!.id;
  });
  after(() => h.close());

  const operations = (): Array<{
    name: string;
    scope: string;
    call: (token: string | undefined) => Promise<Response>;
  }> => [
    { name: 'POST /webhooks', scope: 'webhooks:write', call: (token) => post(h, token, { url: URL_1 }) },
    { name: 'GET /webhooks', scope: 'webhooks:read', call: (token) => listWebhooks(h, token) },
    { name: 'DELETE /webhooks/{id}', scope: 'webhooks:write', call: (token) => removeWebhook(h, token, webhookId) },
    {
      name: 'GET /webhooks/{id}/deliveries',
      scope: 'webhooks:read',
      call: (token) => deliveries(h, token, webhookId),
    },
    {
      name: 'GET /webhooks/{id}/deliveries?before=',
      scope: 'webhooks:read',
      call: (token) => deliveries(h, token, webhookId, `?before=${deliveryId}`),
    },
    {
      name: 'GET /webhooks/{id}/activity',
      scope: 'webhooks:read',
      call: (token) => h.call(token, { method: 'GET', url: `/webhooks/${webhookId}/activity` }),
    },
    {
      name: 'POST /webhooks/{id}/deliveries/{deliveryId}/retry',
      scope: 'webhooks:write',
      call: (token) => retry(h, token, webhookId, deliveryId),
    },
    { name: 'POST /webhooks/{id}/enable', scope: 'webhooks:write', call: (token) => enable(h, token, webhookId) },
  ];

  test('every /webhooks operation answers 401 with the Bearer challenge without a token', async () => {
    for (const { name, call } of operations()) {
      const res = await call(undefined);
      assertError(res, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store"', name);
    }
  });

  test('POST /webhooks answers 401 before looking at the body or its type', async () => {
    for (const options of [
      { payload: '{"url":', headers: { 'content-type': 'application/json' } },
      { payload: '<xml/>', headers: { 'content-type': 'text/xml' } },
      { ...json(JSON.stringify({ url: 'http://127.0.0.1/', bogus: true })) },
    ]) {
      assertError(await h.call(undefined, { method: 'POST', url: '/webhooks', ...options }), 401);
    }
    const res = await h.call('pst_notatoken', { method: 'POST', url: '/webhooks', payload: '{', headers: {} });
    assertError(res, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token"');
  });

  test('every /webhooks operation answers 403 insufficient_scope to a plants:read and plants:write token', async () => {
    const token = await h.token('alice', READ_WRITE);
    for (const { scope, call } of operations()) assertForbidden(await call(token), scope);
  });

  test('plants:admin alone does not stand for the webhooks scopes', async () => {
    const token = await h.token('root', ['plants:admin']);
    for (const { scope, call } of operations()) assertForbidden(await call(token), scope);
  });

  test('POST /webhooks answers 403 before reading a bad body', async () => {
    const token = await h.token('alice', READ_WRITE);
    const res = await h.call(token, { method: 'POST', url: '/webhooks', payload: '{', headers: {} });
    assertForbidden(res, 'webhooks:write');
  });

  test('webhooks:read and webhooks:write are granted one by one', async () => {
    const reader = await h.token('carol', ['webhooks:read']);
    assertForbidden(await post(h, reader, { url: URL_1 }), 'webhooks:write');
    assert.deepEqual(await webhooksOf(h, reader), []);
    const writer = await h.token('carol', ['webhooks:write']);
    const created = await createWebhook(h, writer);
    assertForbidden(await listWebhooks(h, writer), 'webhooks:read');
    assertForbidden(await deliveries(h, writer, created.id), 'webhooks:read');
    assert.deepEqual(
      (await webhooksOf(h, reader)).map((w) => w.id),
      [created.id],
    );
  });
});

describe('a webhook belongs to the subject that created it', () => {
  test('GET /webhooks lists only the caller’s own webhooks', async (t) => {
    const { h, alice, bob } = await users(t);
    const alices = await createWebhook(h, alice);
    const bobs = await createWebhook(h, bob);
    assert.deepEqual(
      (await webhooksOf(h, alice)).map((w) => w.id),
      [alices.id],
    );
    assert.deepEqual(
      (await webhooksOf(h, bob)).map((w) => w.id),
      [bobs.id],
    );
  });

  test('another subject’s webhook answers 404 exactly as a missing one, for every operation', async (t) => {
    const { h, alice, bob } = await users(t);
    const admin = await h.token('root', ADMIN);
    const { id } = await createWebhook(h, alice);
    await plant(h, alice, '1');
    const [delivery] = await deliveriesOf(h, alice, id);
    const calls = (token: string): Array<() => Promise<Response>> => [
      () => removeWebhook(h, token, id),
      () => enable(h, token, id),
      () => deliveries(h, token, id),
      () => retry(h, token, id, delivery!.id),
    ];
    const others: Response[] = [];
    for (const token of [bob, admin]) for (const call of calls(token)) others.push(await call());
    for (const res of others) assertError(res, 404);
    // Nothing changed for alice.
    assert.deepEqual(
      (await webhooksOf(h, alice)).map((w) => w.id),
      [id],
    );
    assert.deepEqual(await deliveriesOf(h, alice, id), [delivery]);

    assertNoContent(await removeWebhook(h, alice, id));
    const missing: Response[] = [];
    for (const token of [bob, admin]) for (const call of calls(token)) missing.push(await call());
    others.forEach((res, i) => assertIndistinguishable(res, missing[i]!, `answer ${i}`));
  });
});

describe('DELETE /webhooks/{id}', () => {
  test('DELETE /webhooks/{id} answers 204 with no body, then 404; its deliveries go with it', async (t) => {
    const { h, alice } = await users(t);
    const { id } = await createWebhook(h, alice);
    const kept = await createWebhook(h, alice);
    await plant(h, alice, '1');
    assertNoContent(await removeWebhook(h, alice, id));
    assertError(await removeWebhook(h, alice, id), 404);
    assertError(await deliveries(h, alice, id), 404);
    assertError(await enable(h, alice, id), 404);
    assert.deepEqual(
      (await webhooksOf(h, alice)).map((w) => w.id),
      [kept.id],
    );
    assert.equal((await deliveriesOf(h, alice, kept.id)).length, 1, 'the other webhook keeps its delivery');
  });

  test('DELETE /webhooks/{id} answers 404 for an id no webhook ever had', async (t) => {
    const { h, alice } = await users(t);
    assertError(await removeWebhook(h, alice, 'wh_0000000000000000'), 404);
  });
});

describe('GET /webhooks/{id}/deliveries', () => {
  test('lists one pending delivery per event, newest first, in exactly the Delivery shape', async (t) => {
    const { h, alice } = await users(t);
    const { id } = await createWebhook(h, alice);
    await plant(h, alice, '7');
    assertNoContent(await remove(h, alice, '7'));
    const [created, deleted] = await events(h);
    const listed = await deliveriesOf(h, alice, id);
    assert.deepEqual(
      listed.map((d) => [d.type, d.eventId]),
      [
        ['plant.deleted', deleted!.id],
        ['plant.created', created!.id],
      ],
    );
    for (const d of listed) {
      assert.equal(d.status, 'pending');
      assert.equal(d.attempts, 0);
      assert.equal(d.lastStatus, null);
      assert.equal(d.lastError, null);
      assert.ok(isIso(d.nextAttemptAt), 'a pending delivery says when it is tried');
    }
    assert.ok(BigInt(listed[0]!.id) > BigInt(listed[1]!.id), 'newest first');
  });

  test('?limit= keeps the newest; a limit outside 1…1000 answers 400', async (t) => {
    const { h, alice } = await users(t);
    const { id } = await createWebhook(h, alice);
    for (const plantId of ['1', '2', '3']) await plant(h, alice, plantId);
    const all = await deliveriesOf(h, alice, id);
    assert.equal(all.length, 3);
    assert.deepEqual(deliveryList(await deliveries(h, alice, id, '?limit=2')), all.slice(0, 2));
    for (const limit of ['0', '-1', '1001', '1.5', 'abc', '']) {
      assertError(await deliveries(h, alice, id, `?limit=${limit}`), 400);
    }
  });

  test('a webhook subscribed to plant.deleted gets no plant.created delivery', async (t) => {
    const { h, alice } = await users(t);
    const deletedOnly = await createWebhook(h, alice, { url: URL_1, events: ['plant.deleted'] });
    const createdOnly = await createWebhook(h, alice, { url: URL_1, events: ['plant.created'] });
    await plant(h, alice, '1');
    assert.deepEqual(await deliveriesOf(h, alice, deletedOnly.id), []);
    assertNoContent(await remove(h, alice, '1'));
    assert.deepEqual(
      (await deliveriesOf(h, alice, deletedOnly.id)).map((d) => d.type),
      ['plant.deleted'],
    );
    assert.deepEqual(
      (await deliveriesOf(h, alice, createdOnly.id)).map((d) => d.type),
      ['plant.created'],
    );
  });

  test('a webhook created by plants:admin gets every owner’s events; a subject’s only its own', async (t) => {
    const { h, alice, bob } = await users(t);
    const admin = await h.token('root', ADMIN);
    const alices = await createWebhook(h, alice);
    const bobs = await createWebhook(h, bob);
    const everyone = await createWebhook(h, admin);
    await plant(h, alice, '1');
    await plant(h, bob, '2');
    await plant(h, admin, '3');
    assertNoContent(await remove(h, admin, '1')); // an admin deletes alice's plant: alice's event
    const log = await events(h);
    const idsOf = (owner: string): string[] =>
      log
        .filter((e) => e.owner === owner)
        .map((e) => e.id)
        .reverse();
    const eventIds = async (token: string, webhook: string): Promise<string[]> =>
      (await deliveriesOf(h, token, webhook)).map((d) => d.eventId);
    assert.deepEqual(await eventIds(alice, alices.id), idsOf('alice'));
    assert.equal(idsOf('alice').length, 2);
    assert.deepEqual(await eventIds(bob, bobs.id), idsOf('bob'));
    assert.deepEqual(await eventIds(admin, everyone.id), log.map((e) => e.id).reverse());
  });

  test('an identical create retry adds no delivery; a 409, a 400 or a 404 adds none', async (t) => {
    const { h, alice, bob } = await users(t);
    const { id } = await createWebhook(h, alice);
    await plant(h, alice, '5', 'fern');
    await plant(h, alice, '5', 'fern'); // a safe retry: 200, nothing new
    assertError(await create(h, alice, plantBody('5', 'not a fern')), 409);
    assertError(await create(h, bob, plantBody('5', 'fern')), 409);
    assertError(await create(h, alice, plantBody('6.5', 'fern')), 400);
    assertError(await remove(h, alice, '99'), 404);
    assertError(await remove(h, bob, '5'), 404);
    assert.deepEqual(
      (await deliveriesOf(h, alice, id)).map((d) => d.type),
      ['plant.created'],
    );
    assert.equal((await events(h)).length, 1);
  });
});

describe('POST /webhooks/{id}/deliveries/{deliveryId}/retry and POST /webhooks/{id}/enable', () => {
  test('retry answers 202 and the failed delivery is pending and due again', async (t) => {
    const { h, alice } = await users(t);
    const { id } = await createWebhook(h, alice);
    await plant(h, alice, '1');
    const deliveryId = await failOneAttempt(h, 500);
    const [failed] = await deliveriesOf(h, alice, id);
    assert.deepEqual(
      { ...failed, createdAt: '' },
      {
        id: deliveryId,
        type: 'plant.created',
        eventId: failed!.eventId,
        status: 'failed',
        attempts: 1,
        lastStatus: 500,
        lastError: 'the receiver answered 500',
        nextAttemptAt: null,
        createdAt: '',
      },
    );
    // 202 with the JSON `null` its schema declares (webhook.routes.ts): nothing to say but "accepted".
    assert.equal(assertJson(await retry(h, alice, id, deliveryId), 202), null);
    const [again] = await deliveriesOf(h, alice, id);
    assert.equal(again!.id, deliveryId, 'the same delivery (the same webhook-id)');
    assert.equal(again!.eventId, failed!.eventId);
    assert.equal(again!.status, 'pending');
    assert.ok(isIso(again!.nextAttemptAt));
    assert.equal(await h.store.nextDueInMs(), 0, 'due at once');
  });

  test('retry answers 404 for an unknown delivery or another webhook’s, 400 for a non-numeric id', async (t) => {
    const { h, alice } = await users(t);
    const first = await createWebhook(h, alice);
    const second = await createWebhook(h, alice, { url: URL_1, events: ['plant.deleted'] });
    await plant(h, alice, '1');
    const [delivery] = await deliveriesOf(h, alice, first.id);
    assertError(await retry(h, alice, first.id, '999999'), 404);
    assertError(await retry(h, alice, second.id, delivery!.id), 404);
    assertError(await retry(h, alice, 'wh_0000000000000000', delivery!.id), 404);
    for (const bad of ['abc', '1.5', '9223372036854775808', '0x10']) {
      assertError(await retry(h, alice, first.id, bad), 400);
    }
  });

  test('enable answers 200 with the webhook, active again after a 410 disabled it', async (t) => {
    const { h, alice } = await users(t);
    const { secret: _secret, ...created } = await createWebhook(h, alice);
    await plant(h, alice, '1');
    await failOneAttempt(h, 410, 'gone');
    const [disabled] = await webhooksOf(h, alice);
    assert.equal(disabled!.status, 'disabled');
    const enabled = assertWebhook(assertJson(await enable(h, alice, created.id), 200));
    assert.equal(disabled!.disabledReason, 'gone');
    assert.ok(isIso(disabled!.failingSince), 'failing since the 410');
    assert.deepEqual(enabled, { ...disabled, status: 'active', disabledReason: null, failingSince: null });
    assert.deepEqual(await webhooksOf(h, alice), [enabled]);
    // Enabling an active webhook changes nothing.
    assert.deepEqual(assertJson(await enable(h, alice, created.id), 200), enabled);
  });
});
