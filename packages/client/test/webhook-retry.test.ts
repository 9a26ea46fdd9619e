import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  PlantStoreClient,
  type PlantStoreClientOptions,
  PlantStoreError,
  PlantStoreNetworkError,
  type RetryEvent,
} from '../src/index.js';
import { FaultProxy } from './fault-proxy.js';
import { type TestServer, closedPortUrl, startTestServer } from './support.js';

// The retry rule of the webhook calls: create, rotateSecret and ping do it again each time they
// are sent, so once one may have reached the server it is not sent again; the others are.

const SCOPES = ['webhooks:read', 'webhooks:write'];
// Nothing listens there: deliveries fail, which these tests do not look at.
const URL_ = 'http://127.0.0.1:9/hook';

let server: TestServer;
before(async () => {
  server = await startTestServer({ env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
});
after(() => server.stop());

/** A client of its own subject through a fault proxy (fast backoff), a direct one, and the retries reported. */
async function through(
  t: { after: (fn: () => Promise<void>) => void },
  subject: string,
  options: Partial<PlantStoreClientOptions> = {},
) {
  const proxy = await FaultProxy.start(server.url);
  t.after(() => proxy.close());
  const token = await server.token(SCOPES, subject);
  const retries: RetryEvent[] = [];
  const client = new PlantStoreClient({
    baseUrl: proxy.url,
    token,
    baseDelayMs: 20,
    onRetry: (event) => retries.push(event),
    ...options,
  });
  return { proxy, client, retries, direct: new PlantStoreClient({ baseUrl: server.url, token }) };
}

test('a create whose answer is lost is not sent again: the caller gets the network error, and one webhook exists', async (t) => {
  const { proxy, client, retries, direct } = await through(t, 'retry-lost');
  proxy.inject('POST', 'lose-answer');
  await assert.rejects(client.webhooks.create({ url: URL_ }), PlantStoreNetworkError);
  assert.deepEqual(
    proxy.seen.map((s) => [s.method, s.upstreamStatus]),
    [['POST', 201]],
  );
  assert.equal(retries.length, 0);
  assert.equal((await direct.webhooks.list()).length, 1, 'the one attempt made it; a retry would have made two');
});

test('a create answered 502, 503 or 504 is not sent again: it may have been carried out', async (t) => {
  const { proxy, client, retries, direct } = await through(t, 'retry-5xx');
  for (const status of [502, 503, 504]) {
    proxy.inject('POST', { status, headers: { 'retry-after': '0' } });
    await assert.rejects(
      client.webhooks.create({ url: URL_ }),
      (e: unknown) => e instanceof PlantStoreError && e.status === status,
    );
  }
  assert.equal(proxy.count('POST'), 3);
  assert.equal(retries.length, 0);
  assert.deepEqual(await direct.webhooks.list(), []);
});

test('a create refused with 408 or 429 is sent again: nothing was done', async (t) => {
  const { proxy, client, retries, direct } = await through(t, 'retry-429');
  proxy.inject('POST', { status: 408 }, { status: 429, headers: { 'retry-after': '0' } });
  const created = await client.webhooks.create({ url: URL_, description: 'third time' });
  assert.equal(created.description, 'third time');
  assert.equal(proxy.count('POST'), 3);
  assert.deepEqual(
    retries.map((r) => (r.error as PlantStoreError).status),
    [408, 429],
  );
  assert.deepEqual(
    (await direct.webhooks.list()).map((w) => w.id),
    [created.id],
  );
});

test('a create whose connection is refused is sent again: a refused connection sent nothing', async () => {
  const retries: RetryEvent[] = [];
  const client = new PlantStoreClient({
    baseUrl: await closedPortUrl(),
    token: await server.token(SCOPES, 'retry-refused'),
    retries: 2,
    baseDelayMs: 10,
    onRetry: (event) => retries.push(event),
  });
  const error = await client.webhooks.create({ url: URL_ }).catch((e: unknown) => e);
  assert.ok(error instanceof PlantStoreNetworkError, String(error));
  assert.match(error.message, /ECONNREFUSED/);
  assert.deepEqual(
    retries.map((r) => [r.operation, r.attempt]),
    [
      ['createWebhook', 1],
      ['createWebhook', 2],
    ],
  );
});

test('a rotation or a ping whose answer is lost is sent once: a second rotation would drop the secret in use', async (t) => {
  const { proxy, client, retries, direct } = await through(t, 'retry-rotate');
  const { id } = await direct.webhooks.create({ url: URL_ });
  proxy.inject('POST', 'lose-answer', { status: 504 });
  await assert.rejects(client.webhooks.rotateSecret(id), PlantStoreNetworkError);
  await assert.rejects(client.webhooks.ping(id), (e: unknown) => e instanceof PlantStoreError && e.status === 504);
  assert.deepEqual(
    proxy.seen.map((s) => [s.url, s.upstreamStatus]),
    [
      [`/webhooks/${id}/secret`, 200],
      [`/webhooks/${id}/ping`, undefined],
    ],
  );
  assert.equal(retries.length, 0);
});

test('update, enable, recover and deliveries are sent again after a lost answer; a delete answered 404 on its retry is done', async (t) => {
  const { proxy, client, retries, direct } = await through(t, 'retry-safe');
  const { id } = await direct.webhooks.create({ url: URL_ });
  proxy.inject('PATCH', 'lose-answer');
  assert.equal((await client.webhooks.update(id, { description: 'twice is once' })).description, 'twice is once');
  proxy.inject('POST', 'lose-answer');
  assert.equal((await client.webhooks.enable(id)).status, 'active');
  proxy.inject('POST', 'lose-answer');
  assert.deepEqual(await client.webhooks.recover(id, { since: new Date(0) }), { requeued: 0, created: 0 });
  proxy.inject('GET', { status: 503, headers: { 'retry-after': '0' } });
  assert.deepEqual(await client.webhooks.deliveries(id), []);
  proxy.inject('DELETE', 'lose-answer');
  await client.webhooks.delete(id);
  assert.deepEqual(
    proxy.seen.map((s) => [s.method, s.upstreamStatus]),
    [
      ['PATCH', 200],
      ['PATCH', 200],
      ['POST', 200],
      ['POST', 200],
      ['POST', 202],
      ['POST', 202],
      ['GET', undefined],
      ['GET', 200],
      ['DELETE', 204],
      ['DELETE', 404],
    ],
  );
  assert.equal(retries.length, 5);
  assert.deepEqual(await direct.webhooks.list(), []);
});
