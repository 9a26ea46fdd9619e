import assert from 'node:assert/strict';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type TestContext, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { type EventSettings, testConfig } from '../../src/config.js';
import type { DeliveryRecord } from '../../src/store/webhook-store.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { type WebhookRequest, WebhookSender } from '../../src/webhooks/sender.js';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import { sample } from '../support/scrape.js';
import { eventually } from '../support/eventually.js';

// The event side's metrics (interface 1.2.0; docs/api.md#health-documentation-and-metrics) after
// known traffic, on the engine under test: attempts by result through a real dispatcher and sender
// to receivers on 127.0.0.1 (a refusal through an injected resolver, so nothing leaves the
// machine), and the backlog the database holds. Waits are deadlines on a condition.

const DEADLINE_MS = 15_000;
const ALL = [...READ_WRITE, 'webhooks:read', 'webhooks:write'];
const log = { warn() {}, info() {}, error() {} } as unknown as FastifyBaseLogger;

/** Waits for `probe` to answer something, up to DEADLINE_MS. */
const until = <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> =>
  eventually(probe, what, DEADLINE_MS);

/**
 * Listens on a loopback address and answers its URL. By the name `localhost`: in the PostgreSQL
 * rerun this file shares its process with webhook-api.test.ts, whose DNS guard lets only that
 * name through, and `listen` looks up even an address.
 */
async function listenOnLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, 'localhost', resolve));
  const { address, port } = server.address() as AddressInfo;
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** Steps run at the end of a test, the last added first (t.after runs its hooks in the order added). */
function cleanup(t: TestContext): (step: () => unknown) => void {
  const steps: Array<() => unknown> = [];
  t.after(async () => {
    for (const step of steps.reverse()) await step();
  });
  return (step) => void steps.push(step);
}

/** A receiver on 127.0.0.1 answering each POST with the next status of `statuses` (the last one after). */
async function receiver(
  atEnd: (step: () => unknown) => void,
  statuses: number[],
): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => res.writeHead(statuses[Math.min(hits++, statuses.length - 1)]!).end());
  });
  const origin = await listenOnLoopback(server);
  atEnd(() => {
    server.closeAllConnections(); // the sender's keep-alive connections
    return new Promise((resolve) => server.close(resolve));
  });
  return { url: `${origin}/hook`, hits: () => hits };
}

/** A loopback URL where nothing listens any more. */
async function closedUrl(): Promise<string> {
  const server = createServer();
  const origin = await listenOnLoopback(server);
  await new Promise((resolve) => server.close(resolve));
  return `${origin}/hook`;
}

async function scrape(h: TestApp): Promise<string> {
  const response = await h.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(response.statusCode, 200);
  return response.body;
}

async function subscribe(h: TestApp, token: string, url: string, events?: string[]): Promise<string> {
  const r = await h.call(token, { method: 'POST', url: '/webhooks', ...json(JSON.stringify({ url, events })) });
  assert.equal(r.statusCode, 201, r.body);
  return (JSON.parse(r.body) as { id: string }).id;
}

async function createPlant(h: TestApp, token: string, id: number): Promise<void> {
  const r = await h.call(token, { method: 'POST', url: '/plants', ...json(`{"id":${id},"name":"fern ${id}"}`) });
  assert.equal(r.statusCode, 200, r.body);
}

const attempts = (text: string, result: string) => sample(text, 'plant_store_webhook_attempts_total', { result });

test('counts each attempt by result and times it; failing deliveries are the backlog, a 410 a disabled webhook', async (t) => {
  const events: EventSettings = { ...testConfig().events, allowPrivateTargets: true, retrySchedule: [0, 3_600_000] };
  const atEnd = cleanup(t);
  const h = await makeApp({ events });
  atEnd(() => h.close());
  const token = await h.token('alice', ALL);

  const before = await scrape(h);
  for (const result of ['delivered', 'http_error', 'network_error', 'refused']) {
    assert.equal(attempts(before, result), 0, `${result} starts at 0`);
  }
  assert.equal(sample(before, 'plant_store_webhook_attempt_duration_seconds_count'), 0);

  const okThenError = await receiver(atEnd, [200, 200, 500]);
  const gone = await receiver(atEnd, [410]);
  // Creates only for the first three: a plant's delete would wait behind its failed create's
  // retry (order per plant), an hour away.
  const ids = {
    okThenError: await subscribe(h, token, okThenError.url, ['plant.created']),
    closed: await subscribe(h, token, await closedUrl(), ['plant.created']),
    // Resolved by the strict sender below to a loopback address, which the policy refuses.
    refused: await subscribe(h, token, 'https://refused.test/hook', ['plant.created']),
    gone: await subscribe(h, token, gone.url, ['plant.deleted']),
  };
  await createPlant(h, token, 1);
  await createPlant(h, token, 2);
  await createPlant(h, token, 3);
  assert.equal((await h.call(token, { method: 'DELETE', url: '/plants/2' })).statusCode, 204);

  // The app's senders: loopback allowed, except for refused.test under the production policy.
  const lax = new WebhookSender({ allowPrivate: true, timeoutMs: 5000 });
  const strict = new WebhookSender({
    allowPrivate: false,
    resolve: () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]),
  });
  atEnd(() => Promise.all([lax.close(), strict.close()]));
  const sender = {
    send: (request: WebhookRequest) => (new URL(request.url).hostname === 'refused.test' ? strict : lax).send(request),
  } as WebhookSender;
  const dispatcher = new Dispatcher(h.store, sender, new SecretBox(null), events, log, undefined, Date.now, (r, s) =>
    h.app.metrics.observeAttempt(r, s),
  );
  dispatcher.start();
  atEnd(() => dispatcher.drain());

  // 3 creates to 3 webhooks, the delete to the 4th: 10 first attempts, each recorded.
  const all = (): Promise<DeliveryRecord[]> =>
    Promise.all(Object.values(ids).map((id) => h.store.listDeliveries(id, null, 10))).then((lists) =>
      lists.flatMap((list) => list ?? []),
    );
  const settled = await until('every delivery attempted once', async () => {
    const deliveries = await all();
    return deliveries.length === 10 && deliveries.every((d) => d.attempts === 1) ? deliveries : undefined;
  });
  await dispatcher.drain();

  h.advance(5000); // past the database gauges' refresh interval
  const text = await scrape(h);
  assert.equal(attempts(text, 'delivered'), 2, 'two 200s of the first receiver');
  // Which of the first receiver's three deliveries met the 500 is not known, only how many did.
  assert.equal(okThenError.hits(), 3);
  assert.equal(attempts(text, 'http_error'), 1 + 1, 'the 500, and the 410');
  assert.equal(attempts(text, 'network_error'), 3, 'the closed port, three times');
  assert.equal(attempts(text, 'refused'), 3, 'refused.test, three times, nothing sent');
  assert.equal(gone.hits(), 1);
  assert.equal(sample(text, 'plant_store_webhook_attempt_duration_seconds_count'), 10);
  assert.equal(sample(text, 'plant_store_webhook_attempt_duration_seconds_bucket', { le: '+Inf' }), 10);
  assert.ok((sample(text, 'plant_store_webhook_attempt_duration_seconds_bucket', { le: '10' }) ?? 0) === 10);

  // Pending: what failed, waiting an hour for its retry (the 500, the closed port, the refusals).
  const pending = settled.filter((d) => d.status === 'pending');
  assert.equal(pending.length, 1 + 3 + 3);
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 7);
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'active' }), 3);
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'disabled' }), 1, 'the 410 disabled its webhook');
});

test("the backlog counts a burst of creates before it is fanned out, and its age is the oldest one's", async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', ALL);
  await createPlant(h, token, 1); // before any webhook: owed to no one
  let text = await scrape(h);
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 0);
  assert.equal(sample(text, 'plant_store_webhook_oldest_pending_seconds'), 0, '0 when none');
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'active' }), 0);
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'disabled' }), 0);

  // No dispatcher runs here (buildApp starts none): the events wait behind the delivery cursor.
  const id = await subscribe(h, token, 'https://hooks.example.com/plants');
  for (const plant of [2, 3, 4]) await createPlant(h, token, plant);
  h.advance(5000);
  const scrapedFrom = Date.now();
  text = await scrape(h);
  const scrapedBy = Date.now();
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 3, 'three events not yet fanned out');
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'active' }), 1);

  // Listing fans them out: the same three, now as deliveries, made at their events' times.
  const deliveries = (await h.store.listDeliveries(id, null, 10))!;
  assert.equal(deliveries.length, 3);
  const oldest = Math.min(...deliveries.map((d) => d.createdAt));
  // Read on the store's clock while this scrape ran (no timing assumption: both ends bracket it).
  const age = sample(text, 'plant_store_webhook_oldest_pending_seconds')!;
  assert.ok(age >= (scrapedFrom - oldest) / 1000 - 0.01 && age <= (scrapedBy - oldest) / 1000 + 0.01, `${age} s`);

  await createPlant(h, token, 5);
  text = await scrape(h);
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 3, 'within 5 s of the last read: the same reading');
  h.advance(5000);
  text = await scrape(h);
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 4, 'three deliveries and one event behind the cursor');
});

test('a database that fails the backlog read: /metrics still answers, with the last values, and reads once per interval', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', ALL);
  await subscribe(h, token, 'https://hooks.example.com/plants');
  await createPlant(h, token, 1);
  const store = h.store as { webhookBacklog: () => Promise<unknown> };
  const real = store.webhookBacklog.bind(h.store);
  let reads = 0;
  let failing = false;
  store.webhookBacklog = () => {
    reads += 1;
    return failing ? Promise.reject(new Error('the database is away')) : real();
  };
  assert.equal(sample(await scrape(h), 'plant_store_webhook_backlog'), 1);
  failing = true;
  h.advance(5000);
  for (let i = 0; i < 5; i++) {
    const text = await scrape(h);
    assert.equal(sample(text, 'plant_store_webhook_backlog'), 1, 'the last value stays');
    assert.equal(sample(text, 'plant_store_webhooks', { status: 'active' }), 1);
  }
  assert.equal(reads, 2, 'one read for the five scrapes of one interval');
});
