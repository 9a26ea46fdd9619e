import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Database from 'better-sqlite3';
import { Webhook as Verifier } from 'standardwebhooks';
import { runCli } from '../../../test/process.js';
import { Receiver } from '../../../test/e2e/webhook-receiver.js';
import { eventually } from '../../../test/support/eventually.js';
import { type Delivery, type FeedEvent, PlantStoreClient, PlantStoreError } from '../src/index.js';
import { type TestServer, recordingFetch, startTestServer } from './support.js';

// client.webhooks against the real server, delivering to receivers this test runs on 127.0.0.1.

/** Where the stores' id sequences start: beyond 2^62 a double is 1024 apart, so no id here survives a number. */
const FROM = 2n ** 62n;
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

let server: TestServer;
const receiver = new Receiver();
before(async () => {
  await receiver.start();
  server = await startTestServer({
    // One attempt per delivery: a failure is `failed` at once, for recover.
    env: { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_SCHEDULE: '0s' },
    beforeStart: async ({ env, file }) => {
      const migrated = await runCli(['migrate'], env);
      assert.equal(migrated.code, 0, migrated.stderr);
      const db = new Database(file);
      const seed = db.prepare('INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)');
      for (const table of ['events', 'deliveries']) seed.run(table, FROM);
      db.close();
    },
  });
});
after(async () => {
  await server.stop();
  await receiver.stop();
});

async function client(subject: string, scopes = SCOPES): Promise<PlantStoreClient> {
  return new PlantStoreClient({ baseUrl: server.url, token: await server.token(scopes, subject) });
}

/** Polls until `check` answers something, or fails at 20 s: a bound, not a speed. */
const until = <T>(what: string, check: () => Promise<T | undefined>): Promise<T> => eventually(check, what, 20_000);

const settled = (c: PlantStoreClient, id: string, status: Delivery['status']) =>
  until(`every delivery of ${id} ${status}`, async () => {
    const deliveries = await c.webhooks.deliveries(id);
    return deliveries.length > 0 && deliveries.every((d) => d.status === status) ? deliveries : undefined;
  });

const exact = (id: bigint): void => {
  assert.ok(id > FROM, `${id} is beyond 2^62`);
  assert.notEqual(BigInt(Number(id)), id, `${id} does not survive a number`);
};

test('create answers the webhook and its secret; list, update, enable and delete answer it as the server holds it', async () => {
  const c = await client('wh-crud');
  const created = await c.webhooks.create({ url: receiver.url, description: 'greenhouse' });
  const { secret, ...webhook } = created;
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{32,}={0,2}$/);
  assert.match(webhook.id, /^wh_[0-9A-Za-z]{16}$/);
  assert.match(webhook.createdAt, RFC3339);
  assert.deepEqual(webhook, {
    id: webhook.id,
    url: receiver.url,
    destination: null,
    events: ['plant.created', 'plant.deleted'],
    status: 'active',
    description: 'greenhouse',
    failingSince: null,
    disabledReason: null,
    previousSecretExpiresAt: null,
    createdAt: webhook.createdAt,
  });
  assert.deepEqual(await c.webhooks.list(), [webhook], 'listed without its secret');

  const paused = await c.webhooks.update(webhook.id, { status: 'disabled', description: 'paused' });
  assert.deepEqual(paused, { ...webhook, status: 'disabled', disabledReason: 'manual', description: 'paused' });
  assert.deepEqual(await c.webhooks.enable(webhook.id), { ...paused, status: 'active', disabledReason: null });
  const narrowed = await c.webhooks.update(webhook.id, { events: ['plant.deleted'] });
  assert.deepEqual(narrowed.events, ['plant.deleted']);
  assert.deepEqual(await c.webhooks.list(), [narrowed]);

  await c.webhooks.delete(webhook.id);
  assert.deepEqual(await c.webhooks.list(), []);
  await assert.rejects(c.webhooks.delete(webhook.id), (e: unknown) => e instanceof PlantStoreError && e.status === 404);
});

test('a ping reaches the receiver signed with the secret; its delivery and its attempt are listed, ids exact', async () => {
  const c = await client('wh-ping');
  const { id, secret } = await c.webhooks.create({ url: receiver.url });
  receiver.secret = secret;
  const ping = await c.webhooks.ping(id);
  assert.equal(ping.type, 'webhook.ping');
  assert.equal(ping.eventId, null);
  assert.equal(ping.status, 'pending');
  assert.equal(ping.attempts, 0);
  exact(ping.id);

  await receiver.until((r) => r.some((x) => x.type === 'webhook.ping' && x.body.includes(id)));
  const got = receiver.received.find((x) => x.type === 'webhook.ping' && x.body.includes(id))!;
  assert.equal(got.body, JSON.stringify({ webhookId: id }));
  assert.equal(got.verified, true, 'standardwebhooks verifies it with the secret create answered');

  const [delivered] = await settled(c, id, 'delivered');
  assert.deepEqual(delivered, { ...ping, status: 'delivered', attempts: 1, lastStatus: 200, nextAttemptAt: null });
  const attempts = await c.webhooks.attempts(id, ping.id);
  assert.equal(attempts.length, 1);
  const [attempt] = attempts;
  assert.match(attempt!.at, RFC3339);
  assert.ok(Number.isInteger(attempt!.durationMs) && attempt!.durationMs >= 0);
  assert.deepEqual(attempt, {
    attempt: 1,
    at: attempt!.at,
    status: 200,
    durationMs: attempt!.durationMs,
    error: null,
    response: '',
  });
  // The id as decimal text names the same delivery.
  assert.deepEqual(await c.webhooks.attempts(id, String(ping.id)), attempts);
});

test('a plant event is delivered and listed with its exact event id; retryDelivery sends it again with the same webhook-id', async () => {
  const c = await client('wh-event');
  const { id, secret } = await c.webhooks.create({ url: receiver.url, events: ['plant.created'] });
  receiver.secret = secret;
  await c.create({ id: 9007199254740993n, name: 'Monstera' });
  const events: FeedEvent[] = [];
  for await (const event of c.events()) events.push(event);
  assert.equal(events.length, 1);

  const [delivery] = await settled(c, id, 'delivered');
  assert.equal(delivery!.type, 'plant.created');
  assert.equal(delivery!.eventId, events[0]!.id, 'the event the feed shows');
  exact(delivery!.id);
  exact(delivery!.eventId);
  const sent = receiver.received.filter((r) => r.body === '{"id":9007199254740993,"name":"Monstera"}');
  assert.equal(sent.length, 1);
  assert.equal(sent[0]!.verified, true);

  await c.webhooks.retryDelivery(id, delivery!.id);
  await receiver.until((r) => r.filter((x) => x.id === sent[0]!.id).length === 2);
  await settled(c, id, 'delivered');
  assert.equal((await c.webhooks.attempts(id, delivery!.id)).length, 2);
});

test('deliveriesPage walks the deliveries newest first by Link, ids beyond 2^62 exact; activity counts their attempts by the hour', async () => {
  const c = await client('wh-pages');
  const { id } = await c.webhooks.create({ url: receiver.url, events: ['plant.created'] });
  for (const plant of [1n, 2n, 3n]) await c.create({ id: 7_700_000n + plant, name: `Page ${plant}` });
  const all = await settled(c, id, 'delivered');
  assert.equal(all.length, 3);

  const first = await c.webhooks.deliveriesPage(id, { limit: 2 });
  assert.deepEqual(first.deliveries, all.slice(0, 2));
  assert.equal(first.next, all[1]!.id);
  exact(first.next);
  const last = await c.webhooks.deliveriesPage(id, { limit: 2, before: first.next });
  assert.deepEqual(last, { deliveries: all.slice(2), next: undefined });
  assert.deepEqual(await c.webhooks.deliveries(id, { before: String(all[0]!.id) }), all.slice(1), 'before as text');

  const activity = await c.webhooks.activity(id);
  assert.equal(activity.hours.length, 24);
  assert.match(activity.from, RFC3339);
  assert.match(activity.to, RFC3339);
  assert.equal(activity.hours[0]!.start, activity.from);
  for (const hour of activity.hours) assert.match(hour.start, RFC3339);
  const total = activity.hours.reduce((n, hour) => n + hour.delivered, 0);
  assert.deepEqual([total, activity.hours.reduce((n, hour) => n + hour.failed, 0)], [3, 0]);
});

test('rotateSecret answers a new secret that verifies what follows; with overlap 0 the old one no longer does', async () => {
  const c = await client('wh-rotate');
  const created = await c.webhooks.create({ url: receiver.url });
  const rotated = await c.webhooks.rotateSecret(created.id, { overlapSeconds: 0 });
  const { secret: _old, ...webhook } = created;
  assert.deepEqual({ ...rotated, secret: undefined }, { ...webhook, secret: undefined });
  assert.match(rotated.secret, /^whsec_/);
  assert.notEqual(rotated.secret, created.secret);

  const pingOf = async (): Promise<{ body: string; headers: Record<string, string> }> => {
    const ping = await c.webhooks.ping(created.id);
    await settled(c, created.id, 'delivered');
    const body = JSON.stringify({ webhookId: created.id });
    const got = receiver.received.filter((r) => r.body === body).at(-1)!;
    assert.equal(ping.type, 'webhook.ping');
    return { body, headers: got.headers as Record<string, string> };
  };
  const first = await pingOf();
  assert.ok(new Verifier(rotated.secret).verify(first.body, first.headers));
  assert.throws(() => new Verifier(created.secret).verify(first.body, first.headers), /signature/i);

  // The default overlap: the secret before keeps signing beside the new one.
  const again = await c.webhooks.rotateSecret(created.id);
  const second = await pingOf();
  assert.match(second.headers['webhook-signature']!, /^v1,\S+ v1,\S+$/);
  for (const secret of [again.secret, rotated.secret])
    assert.ok(new Verifier(secret).verify(second.body, second.headers));
});

test('recover sends failed deliveries again, since a Date or RFC 3339 text, and answers how many', async (t) => {
  const failing = new Receiver(() => 500);
  await failing.start();
  t.after(() => failing.stop());
  const c = await client('wh-recover');
  const { id } = await c.webhooks.create({ url: failing.url, events: ['plant.created'] });
  const since = new Date(Date.now() - 60_000);
  await c.create({ id: 4242n, name: 'Fern' });
  const [failed] = await settled(c, id, 'failed');
  assert.equal(failed!.lastStatus, 500);
  const [listed] = await c.webhooks.list();
  assert.match(listed!.failingSince!, RFC3339);

  failing.respondWith(() => 204);
  assert.deepEqual(await c.webhooks.recover(id, { since }), { requeued: 1, created: 0 });
  await settled(c, id, 'delivered');
  assert.deepEqual(await c.webhooks.recover(id, { since: since.toISOString() }), { requeued: 0, created: 0 });
});

test('refusals are PlantStoreErrors: 400, 404 for another subject’s webhook, 409 at the 21st, 403 without the scope', async () => {
  const alice = await client('wh-errors');
  const { id } = await alice.webhooks.create({ url: receiver.url });
  const refused = async (call: Promise<unknown>, status: number, message?: RegExp): Promise<void> => {
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof PlantStoreError, String(error));
      assert.equal(error.status, status);
      if (message) assert.match(error.message, message);
      return true;
    });
  };
  await refused(alice.webhooks.create({ url: 'ftp://example.com/hook' }), 400, /webhook URL must use http or https/);
  await refused(alice.webhooks.update(id, {}), 400);
  await refused(alice.webhooks.update(id, { colour: 'green' } as never), 400);
  await refused(alice.webhooks.recover(id, { since: 'yesterday' }), 400, /RFC 3339/);
  await refused(alice.webhooks.rotateSecret(id, { overlapSeconds: 604_801 }), 400);

  const bob = await client('wh-errors-bob');
  for (const call of [
    () => bob.webhooks.update(id, { description: 'mine now' }),
    () => bob.webhooks.delete(id),
    () => bob.webhooks.rotateSecret(id),
    () => bob.webhooks.ping(id),
    () => bob.webhooks.recover(id, { since: new Date(0) }),
    () => bob.webhooks.enable(id),
    () => bob.webhooks.deliveries(id),
    () => bob.webhooks.deliveriesPage(id, { before: FROM + 1n }),
    () => bob.webhooks.activity(id),
    () => bob.webhooks.retryDelivery(id, FROM + 1n),
    () => bob.webhooks.attempts(id, FROM + 1n),
  ]) {
    await refused(call(), 404);
  }
  assert.equal((await alice.webhooks.list()).length, 1, 'bob changed nothing');

  const many = await client('wh-errors-many');
  for (let i = 0; i < 20; i++) await many.webhooks.create({ url: `${receiver.url}?n=${i}` });
  await refused(many.webhooks.create({ url: receiver.url }), 409, /at most 20 webhooks/);
  assert.equal((await many.webhooks.list()).length, 20);

  const reader = await client('wh-errors', ['plants:read']);
  await refused(reader.webhooks.list(), 403);
});

test('bad arguments are refused before anything is sent', async () => {
  const recorded = recordingFetch();
  const c = new PlantStoreClient({
    baseUrl: server.url,
    token: await server.token(SCOPES, 'wh-bad'),
    fetch: recorded.fetch,
  });
  const sent = (): string[] => recorded.sent.map((s) => s.url.href);
  await assert.rejects(c.webhooks.deliveries('wh_x', { limit: 0 }), RangeError);
  await assert.rejects(c.webhooks.deliveries('wh_x', { limit: 1001 }), RangeError);
  await assert.rejects(c.webhooks.deliveriesPage('wh_x', { before: 2n ** 63n }), RangeError);
  await assert.rejects(c.webhooks.deliveriesPage('wh_x', { before: 1.5 as unknown as bigint }), TypeError);
  await assert.rejects(c.webhooks.activity(''), TypeError);
  await assert.rejects(c.webhooks.attempts('wh_x', 5 as unknown as bigint), TypeError);
  await assert.rejects(c.webhooks.retryDelivery('wh_x', 2n ** 63n), RangeError);
  await assert.rejects(c.webhooks.recover('wh_x', { since: new Date(Number.NaN) }), RangeError);
  await assert.rejects(c.webhooks.ping(''), TypeError);
  await assert.rejects(c.webhooks.create(null as never), TypeError);
  assert.deepEqual(sent(), []);
  // A webhook id is a path segment, encoded: it cannot reach another path.
  await assert.rejects(c.webhooks.enable('../plants'), { status: 404 });
  assert.deepEqual(sent(), [`${server.url}/webhooks/..%2Fplants/enable`]);
});
