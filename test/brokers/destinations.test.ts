import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { FastifyBaseLogger, InjectOptions } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { buildApp } from '../../src/app.js';
import { TokenService } from '../../src/auth/token.service.js';
import { Brokers } from '../../src/brokers/broker.js';
import { loadConfig, testConfig } from '../../src/config.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { TargetSender } from '../../src/webhooks/target-sender.js';
import { type TestApp, json } from '../helpers.js';
import { eventually } from '../support/eventually.js';
import { type NatsPlace, type RabbitPlace, brokersSetting, natsPlace, rabbitPlace } from './broker-fixture.js';

// Destinations (docs/api.md#destinations) against the brokers this machine runs: a webhook that
// publishes to a JetStream subject or a RabbitMQ routing key, its messages signed as a webhook
// delivery is, delivered on the broker's acknowledgement, refused and retried when the broker cannot
// take them.

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

interface Setup {
  readonly h: Pick<TestApp, 'app' | 'store' | 'call' | 'close'>;
  readonly token: string;
  readonly nats: NatsPlace;
  readonly rabbit: RabbitPlace;
  readonly dispatcher: Dispatcher;
  readonly logged: Array<Record<string, unknown>>;
}

/** The message at `seq` of the test's stream: its body and the four headers. */
async function streamed(s: Setup, seq: number): Promise<{ body: string; headers: Record<string, string> }> {
  const stored = await s.nats.jsm.streams.getMessage(s.nats.stream, { seq });
  assert.ok(stored, `message ${seq} is in the stream`);
  const headers: Record<string, string> = {};
  for (const k of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plant-store-event']) {
    headers[k] = stored.header.get(k);
  }
  return { body: new TextDecoder().decode(stored.data), headers };
}

async function setup(t: TestContext, extraEnv: Record<string, string> = {}): Promise<Setup> {
  const nats = await natsPlace(t);
  const rabbit = await rabbitPlace(t);
  const config = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    RATE_LIMIT: 'off',
    LOG_LEVEL: 'silent',
    MAX_EVENT_LOOP_DELAY: 'off',
    WEBHOOK_RETRY_SCHEDULE: '0s,1h',
    BROKERS: brokersSetting(nats, rabbit),
    ...extraEnv,
  });
  // Real time, as a broker's consumer verifies it: a signature's timestamp is checked against now.
  const store = openSqlite(':memory:');
  await store.migrate();
  const app = await buildApp({ config: testConfig({ events: config.events }), store, clock: Date.now });
  await app.ready();
  const tokens = new TokenService(store, Date.now);
  const h = {
    app,
    store,
    token: async (subject: string, scopes: string[]) => (await tokens.create({ subject, scopes })).token,
    call: (token: string, options: InjectOptions) =>
      app.inject({ ...options, headers: { authorization: `Bearer ${token}`, ...options.headers } }),
    close: async () => {
      await app.close();
      await store.close();
    },
  };
  const logged: Array<Record<string, unknown>> = [];
  const log = {
    info: (fields: Record<string, unknown>, msg: string) => logged.push({ ...fields, msg, level: 'info' }),
    warn: (fields: Record<string, unknown>, msg: string) => logged.push({ ...fields, msg, level: 'warn' }),
    error: () => {},
    debug: () => {},
  } as unknown as FastifyBaseLogger;
  const brokers = new Brokers(config.events.brokers, log);
  const sender = new TargetSender(new WebhookSender({ allowPrivate: true }), brokers, 5_000);
  const dispatcher = new Dispatcher(h.store, sender, new SecretBox(null), config.events, log);
  h.app.metrics.watchBrokers(brokers);
  brokers.start();
  dispatcher.start();
  // In this order: the dispatcher gives back its leases while the store is open.
  t.after(async () => {
    await dispatcher.drain();
    await sender.close();
    await h.close();
  });
  return { h, token: await h.token('alice', SCOPES), nats, rabbit, dispatcher, logged };
}

async function addWebhook(
  s: Setup,
  body: unknown,
): Promise<{ id: string; secret: string; body: Record<string, unknown> }> {
  const res = await s.h.call(s.token, { method: 'POST', url: '/webhooks', ...json(JSON.stringify(body)) });
  assert.equal(res.statusCode, 201, res.payload);
  const created = JSON.parse(res.payload) as Record<string, unknown> & { id: string; secret: string };
  return { id: created.id, secret: created.secret, body: created };
}

async function createPlant(s: Setup, id: number): Promise<void> {
  const res = await s.h.call(s.token, { method: 'POST', url: '/plants', ...json(`{"id":${id},"name":"fern ${id}"}`) });
  assert.equal(res.statusCode, 200, res.payload);
  s.dispatcher.wake();
}

interface DeliveryJson {
  id: string;
  status: string;
  attempts: number;
  lastError: string | null;
}
async function deliveriesOf(s: Setup, webhook: string): Promise<DeliveryJson[]> {
  const res = await s.h.call(s.token, { method: 'GET', url: `/webhooks/${webhook}/deliveries` });
  assert.equal(res.statusCode, 200, res.payload);
  return JSON.parse(res.payload.replace(/"(id|eventId)":(\d+)/g, '"$1":"$2"')) as DeliveryJson[];
}
async function lastAttempt(s: Setup, webhook: string, delivery: string): Promise<Record<string, unknown>> {
  const res = await s.h.call(s.token, {
    method: 'GET',
    url: `/webhooks/${webhook}/deliveries/${delivery}/attempts`,
  });
  assert.equal(res.statusCode, 200, res.payload);
  return (JSON.parse(res.payload) as Array<Record<string, unknown>>)[0]!;
}

test('POST /webhooks takes a destination within what BROKERS allows, and refuses every other with a 400', async (t) => {
  const s = await setup(t);
  const nats = await addWebhook(s, { destination: { broker: 'nats', subject: `${s.nats.prefix}.in.plants` } });
  assert.equal(nats.body.url, null);
  assert.deepEqual(nats.body.destination, { broker: 'nats', subject: `${s.nats.prefix}.in.plants` });
  const rabbit = await addWebhook(s, { destination: { broker: 'rabbit', routingKey: 'plants' } });
  assert.deepEqual(rabbit.body.destination, { broker: 'rabbit', routingKey: 'plants' });
  const listed = await s.h.call(s.token, { method: 'GET', url: '/webhooks' });
  assert.deepEqual(
    (JSON.parse(listed.payload) as Array<{ url: unknown; destination: { broker: string } }>)
      .map((w) => [w.url, w.destination])
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    [
      [null, { broker: 'nats', subject: `${s.nats.prefix}.in.plants` }],
      [null, { broker: 'rabbit', routingKey: 'plants' }],
    ],
  );

  const refused = async (body: unknown, message: RegExp): Promise<void> => {
    const res = await s.h.call(s.token, { method: 'POST', url: '/webhooks', ...json(JSON.stringify(body)) });
    assert.equal(res.statusCode, 400, res.payload);
    const error = JSON.parse(res.payload) as { error: number; message: string };
    assert.equal(error.error, 400);
    assert.match(error.message, message);
  };
  await refused(
    { url: 'https://example.com/hook', destination: { broker: 'nats', subject: `${s.nats.prefix}.x` } },
    /either url .* or destination/,
  );
  await refused({}, /either url .* or destination/);
  await refused(
    { destination: { broker: 'kafka', subject: 'x' } },
    /no broker "kafka".*BROKERS names "nats", "rabbit"/,
  );
  await refused({ destination: { broker: 'nats', subject: 'elsewhere.plants' } }, /must be "pstest[0-9a-f]+" or start/);
  await refused({ destination: { broker: 'nats', subject: `${s.nats.prefix}.*` } }, /no \* or >/);
  await refused({ destination: { broker: 'nats', subject: `${s.nats.prefix}x` } }, /must be/);
  await refused({ destination: { broker: 'nats', routingKey: 'plants' } }, /NATS broker: give a subject/);
  await refused({ destination: { broker: 'rabbit', subject: 'plants' } }, /RabbitMQ broker: give a routingKey/);
  await refused({ destination: { broker: 'rabbit', routingKey: 'p', exchange: 'amq.direct' } }, /destination/);

  // PATCH keeps a webhook's kind, and a destination within what its broker allows.
  const patch = (id: string, body: unknown) =>
    s.h.call(s.token, { method: 'PATCH', url: `/webhooks/${id}`, ...json(JSON.stringify(body)) });
  const moved = await patch(nats.id, { destination: { broker: 'nats', subject: `${s.nats.prefix}.in.moved` } });
  assert.equal(moved.statusCode, 200, moved.payload);
  assert.deepEqual((JSON.parse(moved.payload) as { destination: unknown }).destination, {
    broker: 'nats',
    subject: `${s.nats.prefix}.in.moved`,
  });
  assert.equal((await patch(nats.id, { url: 'https://example.com/hook' })).statusCode, 400);
  assert.equal((await patch(nats.id, { destination: { broker: 'nats', subject: 'other' } })).statusCode, 400);
});

test('a NATS destination: one JetStream message per delivery, signed, Nats-Msg-Id its webhook-id; a retry is kept once', async (t) => {
  const s = await setup(t);
  const subject = `${s.nats.prefix}.in.plants`;
  const { id, secret } = await addWebhook(s, { destination: { broker: 'nats', subject } });
  await createPlant(s, 1);
  const [delivery] = await eventually(async () => {
    const found = await deliveriesOf(s, id);
    return found[0]?.status === 'delivered' ? found : undefined;
  }, 'the delivery acknowledged by JetStream');
  const attempt = await lastAttempt(s, id, delivery!.id);
  assert.equal(attempt.status, null, 'no HTTP status: a broker answered');
  assert.match(String(attempt.response), new RegExp(`^stream ${s.nats.stream}, seq 1$`));

  const stored = await s.nats.jsm.streams.getMessage(s.nats.stream, { seq: 1 });
  assert.ok(stored, 'the message is in the stream');
  assert.equal(stored.subject, subject);
  const headers = Object.fromEntries(
    ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plant-store-event', 'Nats-Msg-Id'].map((k) => [
      k,
      stored.header.get(k),
    ]),
  );
  const body = new TextDecoder().decode(stored.data);
  assert.equal(body, '{"id":1,"name":"fern 1"}');
  assert.equal(headers['plant-store-event'], 'plant.created');
  assert.match(headers['webhook-id']!, /^evt_\d+$/);
  assert.equal(headers['Nats-Msg-Id'], headers['webhook-id']);
  // Any Standard Webhooks library verifies it from the message's headers.
  new Webhook(secret).verify(body, {
    'webhook-id': headers['webhook-id']!,
    'webhook-timestamp': headers['webhook-timestamp']!,
    'webhook-signature': headers['webhook-signature']!,
  });

  // Sent again (a retry asked for): JetStream's duplicate window keeps one message.
  const retried = await s.h.call(s.token, { method: 'POST', url: `/webhooks/${id}/deliveries/${delivery!.id}/retry` });
  assert.equal(retried.statusCode, 202, retried.payload);
  s.dispatcher.wake();
  await eventually(async () => {
    const [d] = await deliveriesOf(s, id);
    return d!.attempts === 2 && d!.status === 'delivered' ? true : undefined;
  }, 'the retry acknowledged');
  assert.match(String((await lastAttempt(s, id, delivery!.id)).response), /, seq 1, duplicate$/);
  assert.equal((await s.nats.jsm.streams.info(s.nats.stream)).state.messages, 1);
});

test('a RabbitMQ destination: one persistent, mandatory message on the allowed exchange, confirmed; message_id its webhook-id', async (t) => {
  const s = await setup(t);
  const { id, secret } = await addWebhook(s, { destination: { broker: 'rabbit', routingKey: 'plants' } });
  await createPlant(s, 2);
  const [delivery] = await eventually(async () => {
    const found = await deliveriesOf(s, id);
    return found[0]?.status === 'delivered' ? found : undefined;
  }, 'the delivery confirmed by RabbitMQ');
  assert.equal((await lastAttempt(s, id, delivery!.id)).response, 'confirmed');
  const message = await s.rabbit.channel.get(s.rabbit.queue, { noAck: true });
  assert.ok(message, 'a message in the bound queue');
  const body = message.content.toString('utf8');
  assert.equal(body, '{"id":2,"name":"fern 2"}');
  assert.equal(message.fields.exchange, s.rabbit.exchange);
  assert.equal(message.fields.routingKey, 'plants');
  assert.equal(message.properties.contentType, 'application/json');
  assert.equal(message.properties.deliveryMode, 2, 'persistent');
  const headers = message.properties.headers as Record<string, unknown>;
  assert.equal(message.properties.messageId, headers['webhook-id']);
  assert.equal(String(headers['plant-store-event']), 'plant.created');
  new Webhook(secret).verify(body, {
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  });
  assert.equal(await s.rabbit.channel.get(s.rabbit.queue, { noAck: true }), false, 'one message');
});

test('no stream for the subject, and a routing key no queue is bound for: failed attempts, retried on the schedule', async (t) => {
  const s = await setup(t);
  const nats = await addWebhook(s, { destination: { broker: 'nats', subject: `${s.nats.prefix}.elsewhere` } });
  const rabbit = await addWebhook(s, { destination: { broker: 'rabbit', routingKey: 'nobody' } });
  await createPlant(s, 3);
  for (const [webhook, words] of [
    [nats.id, /no stream takes this subject/],
    [rabbit.id, /unroutable: no queue is bound to exchange "pstest-[0-9a-f]+" for "nobody"/],
  ] as const) {
    const [d] = await eventually(async () => {
      const found = await deliveriesOf(s, webhook);
      return found[0]?.attempts === 1 ? found : undefined;
    }, 'the first attempt recorded');
    assert.equal(d!.status, 'pending', 'retried on the schedule');
    assert.match(String(d!.lastError), words);
  }
});

test('a broker that refuses the login: attempts fail, the password never reaches an answer or a log', async (t) => {
  const nats = await natsPlace(t);
  const rabbit = await rabbitPlace(t);
  const s = await setup(t, {
    BROKERS: `${brokersSetting(nats, rabbit).split(',')[0]},bad=amqp://guest:s3cr3t-pw@127.0.0.1:5672?allow=${rabbit.exchange}`,
  });
  const { id } = await addWebhook(s, { destination: { broker: 'bad', routingKey: 'plants' } });
  await createPlant(s, 4);
  const [d] = await eventually(
    async () => {
      const found = await deliveriesOf(s, id);
      return found[0]?.attempts === 1 ? found : undefined;
    },
    'the attempt recorded',
    20_000,
  );
  assert.equal(d!.status, 'pending');
  const everything = JSON.stringify([d, await lastAttempt(s, id, d!.id), s.logged]);
  assert.doesNotMatch(everything, /s3cr3t-pw/);
  assert.ok(
    s.logged.some((l) => l.broker === 'bad' && l.level === 'warn' && l.url === 'amqp://guest:***@127.0.0.1:5672'),
    JSON.stringify(s.logged),
  );
  assert.ok(s.logged.some((l) => l.broker === 'nats' && l.msg === 'broker connected'));
});

test("a ping, and a rotation's two signatures, reach the stream; plant_store_broker_up says each broker is up", async (t) => {
  const s = await setup(t);
  const { id, secret } = await addWebhook(s, {
    destination: { broker: 'nats', subject: `${s.nats.prefix}.in.plants` },
  });
  const ping = await s.h.call(s.token, { method: 'POST', url: `/webhooks/${id}/ping` });
  assert.equal(ping.statusCode, 202, ping.payload);
  s.dispatcher.wake();
  await eventually(
    async () => ((await s.nats.jsm.streams.info(s.nats.stream)).state.messages === 1 ? true : undefined),
    'the ping',
  );
  const pinged = await streamed(s, 1);
  assert.equal(pinged.headers['plant-store-event'], 'webhook.ping');
  assert.equal(pinged.body, `{"webhookId":"${id}"}`);
  new Webhook(secret).verify(pinged.body, pinged.headers);

  const rotated = await s.h.call(s.token, { method: 'POST', url: `/webhooks/${id}/secret`, ...json('{}') });
  assert.equal(rotated.statusCode, 200, rotated.payload);
  const newSecret = (JSON.parse(rotated.payload) as { secret: string }).secret;
  await createPlant(s, 5);
  await eventually(
    async () => ((await s.nats.jsm.streams.info(s.nats.stream)).state.messages === 2 ? true : undefined),
    'the event',
  );
  const event = await streamed(s, 2);
  assert.equal(event.headers['webhook-signature']!.split(' ').length, 2, 'both signatures during the overlap');
  new Webhook(secret).verify(event.body, event.headers);
  new Webhook(newSecret).verify(event.body, event.headers);

  const metrics = await s.h.app.metrics.text();
  assert.match(metrics, /^plant_store_broker_up\{broker="nats"\} 1$/m);
  assert.match(metrics, /^plant_store_broker_up\{broker="rabbit"\} 1$/m);
});

test('a paused destination misses what happens meanwhile; enabled and recovered, the missed event reaches the stream', async (t) => {
  const s = await setup(t);
  const { id } = await addWebhook(s, { destination: { broker: 'nats', subject: `${s.nats.prefix}.in.plants` } });
  const patch = async (body: unknown): Promise<void> => {
    const res = await s.h.call(s.token, { method: 'PATCH', url: `/webhooks/${id}`, ...json(JSON.stringify(body)) });
    assert.equal(res.statusCode, 200, res.payload);
  };
  const since = new Date(Date.now() - 60_000).toISOString();
  await patch({ status: 'disabled' });
  await createPlant(s, 7);
  await patch({ status: 'active' });
  await createPlant(s, 8);
  await eventually(
    async () => ((await s.nats.jsm.streams.info(s.nats.stream)).state.messages === 1 ? true : undefined),
    'plant 8',
  );
  assert.equal(
    (JSON.parse((await streamed(s, 1)).body) as { id: number }).id,
    8,
    'the paused time is not sent by itself',
  );

  const recovered = await s.h.call(s.token, {
    method: 'POST',
    url: `/webhooks/${id}/recover`,
    ...json(JSON.stringify({ since })),
  });
  assert.equal(recovered.statusCode, 202, recovered.payload);
  assert.deepEqual(JSON.parse(recovered.payload), { requeued: 0, created: 1 });
  s.dispatcher.wake();
  await eventually(
    async () => ((await s.nats.jsm.streams.info(s.nats.stream)).state.messages === 2 ? true : undefined),
    'plant 7',
  );
  assert.equal((JSON.parse((await streamed(s, 2)).body) as { id: number }).id, 7);
});
