import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  type Plant,
  PlantStoreClient,
  type PlantStoreClientOptions,
  PlantStoreError,
  PlantStoreNetworkError,
  type RetryEvent,
} from '../src/index.js';
import { eventually } from '../../../test/support/eventually.js';
import { FaultProxy } from './fault-proxy.js';
import { type TestServer, closedPortUrl, startTestServer } from './support.js';

let server: TestServer;
let token: string;
before(async () => {
  server = await startTestServer();
  token = await server.token();
});
after(() => server.stop());

/** A proxy in front of the server, a client through it (fast backoff), and the retries it reports. */
async function through(
  t: { after: (fn: () => Promise<void>) => void },
  options: Partial<PlantStoreClientOptions> = {},
) {
  const proxy = await FaultProxy.start(server.url);
  t.after(() => proxy.close());
  const retries: RetryEvent[] = [];
  const client = new PlantStoreClient({
    baseUrl: proxy.url,
    token,
    baseDelayMs: 20,
    onRetry: (event) => retries.push(event),
    ...options,
  });
  return { proxy, client, retries };
}

const direct = (): PlantStoreClient => new PlantStoreClient({ baseUrl: server.url, token });

async function names(client: PlantStoreClient): Promise<string[]> {
  const out: Plant[] = [];
  for await (const plant of client.list()) out.push(plant);
  return out.map((p) => p.name);
}

test('a create whose answer is lost is sent again and answers 200 with the one plant it made', async (t) => {
  const { proxy, client, retries } = await through(t);
  proxy.inject('POST', 'lose-answer');
  assert.deepEqual(await client.create({ id: 9007199254740993n, name: 'Lost answer', tag: 'x' }), {
    name: 'Lost answer',
    tag: 'x',
  });
  assert.deepEqual(
    proxy.seen.map((s) => [s.method, s.upstreamStatus]),
    [
      ['POST', 200],
      ['POST', 200],
    ],
  );
  assert.equal(retries.length, 1);
  assert.ok(retries[0]!.error instanceof PlantStoreNetworkError);
  // Both attempts carried the same X-Request-Id, so the server's log ties them together.
  assert.equal(proxy.seen[0]!.requestId, proxy.seen[1]!.requestId);
  assert.deepEqual(
    (await names(direct())).filter((n) => n === 'Lost answer'),
    ['Lost answer'],
  );
});

test('a delete whose 204 is lost counts the 404 to its retry as deleted', async (t) => {
  await direct().create({ id: 9007199254740995n, name: 'To delete' });
  const { proxy, client } = await through(t);
  proxy.inject('DELETE', 'lose-answer');
  await client.delete(9007199254740995n);
  assert.deepEqual(
    proxy.seen.map((s) => s.upstreamStatus),
    [204, 404],
  );
  assert.ok(!(await names(direct())).includes('To delete'));
});

test('a 404 to a delete is an error when nothing can have been done before, even after a retried 408 or 429', async (t) => {
  const { proxy, client } = await through(t);
  proxy.inject('DELETE', { status: 408 }, { status: 429, headers: { 'retry-after': '0' } });
  await assert.rejects(client.delete(31337n), (e: unknown) => e instanceof PlantStoreError && e.status === 404);
  assert.equal(proxy.count('DELETE'), 3);
});

test('a 404 to a delete retried after a 503 counts as deleted: the 503 may have come after the commit', async (t) => {
  const { proxy, client } = await through(t);
  proxy.inject('DELETE', { status: 503, headers: { 'retry-after': '0' } });
  await client.delete(31338n);
  assert.equal(proxy.count('DELETE'), 2);
});

test('a 503 with Retry-After: 1 is waited for, then the create is sent again', async (t) => {
  const { proxy, client, retries } = await through(t);
  proxy.inject('POST', { status: 503, headers: { 'retry-after': '1' } });
  const started = performance.now();
  assert.deepEqual(await client.create({ id: 503n, name: 'Patient' }), { name: 'Patient' });
  assert.ok(performance.now() - started >= 1000, 'waited the Retry-After');
  assert.equal(retries.length, 1);
  assert.ok(retries[0]!.delayMs >= 1000);
  assert.ok(retries[0]!.error instanceof PlantStoreError && retries[0]!.error.status === 503);
  assert.equal(proxy.count('POST'), 2);
});

test('408, 429, 502, 503 and 504 are retried with growing backoff, and the last one is the error', async (t) => {
  const { proxy, client, retries } = await through(t, { retries: 4 });
  proxy.inject('GET', { status: 408 }, { status: 429 }, { status: 502 }, { status: 503 }, { status: 504 });
  const error = await client.listPage().catch((e: unknown) => e);
  assert.ok(error instanceof PlantStoreError);
  assert.equal(error.status, 504);
  assert.equal(error.message, 'injected 504');
  assert.equal(proxy.count('GET'), 5);
  // Equal jitter: retry n waits between half and all of 20 ms × 2^n.
  retries.forEach((r, n) => assert.ok(r.delayMs >= 10 * 2 ** n && r.delayMs <= 20 * 2 ** n, `${n}: ${r.delayMs}`));
});

test('a Retry-After longer than maxRetryAfterMs is not waited for: the 429 goes to the caller', async (t) => {
  const { proxy, client } = await through(t);
  proxy.inject('POST', { status: 429, headers: { 'retry-after': '120' } });
  const error = await client.create({ id: 429n, name: 'Later' }).catch((e: unknown) => e);
  assert.ok(error instanceof PlantStoreError);
  assert.equal(error.status, 429);
  assert.equal(error.retryAfterMs, 120_000);
  assert.equal(proxy.count('POST'), 1);
});

test('statuses that another attempt cannot cure are sent once: 400, 401, 403, 404, 409, 500', async (t) => {
  const { proxy, client, retries } = await through(t);
  await client.create({ id: 409n, name: 'Taken' });
  const reader = new PlantStoreClient({ baseUrl: proxy.url, token: await server.token(['plants:read']) });
  const stranger = new PlantStoreClient({
    baseUrl: proxy.url,
    token: 'pst_000000000000000000000000000000000000000000000000000',
  });
  const calls: Array<[number, () => Promise<unknown>]> = [
    [400, () => client.create({ id: 400n, name: '' })],
    [401, () => stranger.listPage()],
    [403, () => reader.delete(409n)],
    [404, () => client.delete(404n)],
    [409, () => client.create({ id: 409n, name: 'Not the same' })],
    [500, () => (proxy.inject('GET', { status: 500 }), client.listPage())],
  ];
  for (const [status, call] of calls) {
    const before = proxy.seen.length;
    await assert.rejects(call(), (e: unknown) => e instanceof PlantStoreError && e.status === status);
    assert.equal(proxy.seen.length - before, 1, `${status} sent once`);
  }
  assert.equal(retries.length, 0);
});

test('an answer that never comes times out and is retried; retries give up with a PlantStoreNetworkError', async (t) => {
  const { proxy, client, retries } = await through(t, { timeoutMs: 300 });
  proxy.inject('GET', 'hang');
  assert.equal((await client.listPage()).plants.length >= 0, true);
  // The hung request, then its retry; on a machine busy enough that a real answer also takes more
  // than 300 ms, that retry times out too and is retried again: each send but the last was a retry.
  assert.ok(proxy.count('GET') >= 2);
  assert.equal(retries.length, proxy.count('GET') - 1);
  assert.match(retries[0]!.error.message, /no answer within 300 ms/);

  const nowhere = new PlantStoreClient({ baseUrl: await closedPortUrl(), token, retries: 2, baseDelayMs: 10 });
  const error = await nowhere.listPage().catch((e: unknown) => e);
  assert.ok(error instanceof PlantStoreNetworkError, String(error));
  assert.match(error.message, /^GET http:\/\/127\.0\.0\.1:\d+\/plants: .*ECONNREFUSED/);
});

test('retries: 0 sends once; an aborted signal stops a wait or a request at once, without a retry', async (t) => {
  const { proxy, client } = await through(t, { retries: 0 });
  proxy.inject('GET', { status: 503, headers: { 'retry-after': '0' } });
  await assert.rejects(client.listPage(), (e: unknown) => e instanceof PlantStoreError && e.status === 503);
  assert.equal(proxy.count('GET'), 1);

  const patient = await through(t);
  patient.proxy.inject('GET', { status: 503, headers: { 'retry-after': '20' } });
  const controller = new AbortController();
  const started = performance.now();
  const listing = patient.client.listPage({ signal: controller.signal });
  // Aborted once the client waits for its retry (it reports the retry, then waits 20 s).
  await eventually(async () => (patient.retries.length === 1 ? true : undefined), 'the client waiting to retry');
  controller.abort(new Error('stop'));
  await assert.rejects(listing, /stop/);
  assert.ok(performance.now() - started < 15_000, 'not after the 20 s the server asked for');
  assert.equal(patient.proxy.count('GET'), 1);

  // Aborted while the request is in flight: no retry, not even reported as one.
  const waiting = await through(t);
  waiting.proxy.inject('GET', 'hang');
  const stop = new AbortController();
  const hanging = waiting.client.listPage({ signal: stop.signal });
  await eventually(async () => (waiting.proxy.count('GET') === 1 ? true : undefined), 'the request at the proxy');
  stop.abort(new Error('stop now'));
  await assert.rejects(hanging, /stop now/);
  assert.equal(waiting.retries.length, 0);
  assert.equal(waiting.proxy.count('GET'), 1);
});
