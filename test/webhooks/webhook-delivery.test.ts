import assert from 'node:assert/strict';
import { describe, mock, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { type DeliveryHarness, type Request, TestReceiver, deliveryHarness, eventually } from './delivery-harness.js';

// Interface 1.2.0 as a receiver sees it: rotation's two signatures (verified by the standardwebhooks
// package), ping, recover, the attempt log, Retry-After and the warn line of a disabled webhook,
// delivered by a real dispatcher to receivers on 127.0.0.1, on the engine under test.

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];
const HOUR = 3_600_000;

interface DeliveryJson {
  id: string;
  type: string;
  eventId: string | null;
  status: string;
  attempts: number;
  lastStatus: number | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

interface AttemptJson {
  attempt: number;
  at: string;
  status: number | null;
  durationMs: number;
  error: string | null;
  response: string | null;
}

async function setup(t: Parameters<typeof deliveryHarness>[0], schedule?: readonly number[]) {
  const h = await deliveryHarness(t, schedule);
  const receiver = await new TestReceiver().start(t);
  const alice = await h.token('alice', SCOPES);
  const created = await h.call(alice, {
    method: 'POST',
    url: '/webhooks',
    ...json(JSON.stringify({ url: receiver.url })),
  });
  assert.equal(created.statusCode, 201, created.payload);
  const { id, secret } = JSON.parse(created.payload) as { id: string; secret: string };
  return { h, receiver, alice, id, secret };
}

async function post(h: DeliveryHarness, token: string, url: string, payload?: unknown) {
  return h.call(token, { method: 'POST', url, ...(payload === undefined ? {} : json(JSON.stringify(payload))) });
}

async function plant(h: DeliveryHarness, token: string, id: string): Promise<void> {
  const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(id, `plant ${id}`)) });
  assert.equal(res.statusCode, 200, res.payload);
  h.dispatcher.wake();
}

/** The webhook's deliveries; ids as written in the body (int64 text, never a JS number). */
async function deliveries(h: DeliveryHarness, token: string, id: string): Promise<DeliveryJson[]> {
  const res = await h.call(token, { method: 'GET', url: `/webhooks/${id}/deliveries?limit=1000` });
  assert.equal(res.statusCode, 200, res.payload);
  const text = res.payload.replace(/"(id|eventId)":(-?\d+)/g, '"$1":"$2"');
  return JSON.parse(text) as DeliveryJson[];
}

async function webhookOf(h: DeliveryHarness, token: string, id: string): Promise<Record<string, unknown>> {
  const res = await h.call(token, { method: 'GET', url: '/webhooks' });
  return (JSON.parse(res.payload) as Array<Record<string, unknown>>).find((w) => w.id === id)!;
}

const until = (receiver: TestReceiver, n: number): Promise<Request[]> =>
  eventually(async () => (receiver.requests.length >= n ? receiver.requests : undefined), `${n} requests`);

const untilStatus = (h: DeliveryHarness, token: string, id: string, ok: (d: DeliveryJson[]) => boolean) =>
  eventually(async () => {
    const found = await deliveries(h, token, id);
    return ok(found) ? found : undefined;
  }, 'the deliveries');

/**
 * Whether the standardwebhooks package verifies the request with `secret`, read at the time the
 * request was signed: the library refuses a timestamp 5 minutes from its clock, and a test that
 * moves the app's clock past an overlap sends from the future.
 */
const verifies = (secret: string, r: Request): boolean => {
  mock.timers.enable({ apis: ['Date'], now: Number(r.headers['webhook-timestamp']) * 1000 });
  try {
    new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  } finally {
    mock.timers.reset();
  }
};

describe('rotating the secret', () => {
  test('during the overlap a delivery verifies with the old and the new secret; after it, only the new', async (t) => {
    const { h, receiver, alice, id, secret: old } = await setup(t);
    const res = await post(h, alice, `/webhooks/${id}/secret`, { overlapSeconds: 3600 });
    assert.equal(res.statusCode, 200, res.payload);
    const { secret: fresh } = JSON.parse(res.payload) as { secret: string };
    h.dispatcher.start();
    await plant(h, alice, '1');
    const [during] = await until(receiver, 1);
    const signatures = String(during!.headers['webhook-signature']).split(' ');
    assert.equal(signatures.length, 2, 'two signatures, space-separated');
    assert.ok(signatures.every((s) => s.startsWith('v1,')));
    assert.ok(verifies(fresh, during!), 'the new secret verifies');
    assert.ok(verifies(old, during!), 'the old secret verifies');

    h.advance(3601 * 1000); // past the overlap, by the app's and the dispatcher's clock
    await plant(h, alice, '2');
    const after = (await until(receiver, 2))[1]!;
    assert.equal(String(after.headers['webhook-signature']).split(' ').length, 1);
    assert.ok(verifies(fresh, after), 'the new secret verifies');
    assert.ok(!verifies(old, after), 'the old one no longer does');
  });

  test('overlapSeconds 0: only the new secret signs at once', async (t) => {
    const { h, receiver, alice, id, secret: old } = await setup(t);
    const res = await post(h, alice, `/webhooks/${id}/secret`, { overlapSeconds: 0 });
    const { secret: fresh } = JSON.parse(res.payload) as { secret: string };
    h.dispatcher.start();
    await plant(h, alice, '1');
    const [got] = await until(receiver, 1);
    assert.ok(verifies(fresh, got!));
    assert.ok(!verifies(old, got!));
  });
});

describe('POST /webhooks/{id}/ping', () => {
  test('answers 202 with the pending ping; the receiver gets {"webhookId"} signed, typed webhook.ping', async (t) => {
    const { h, receiver, alice, id, secret } = await setup(t);
    h.dispatcher.start();
    const res = await post(h, alice, `/webhooks/${id}/ping`);
    assert.equal(res.statusCode, 202, res.payload);
    const ping = JSON.parse(res.payload.replace(/"id":(\d+)/, '"id":"$1"')) as DeliveryJson;
    assert.deepEqual([ping.type, ping.eventId, ping.status, ping.attempts], ['webhook.ping', null, 'pending', 0]);
    h.dispatcher.wake();
    const [got] = await until(receiver, 1);
    assert.equal(got!.body, JSON.stringify({ webhookId: id }));
    assert.equal(got!.headers['plant-store-event'], 'webhook.ping');
    assert.equal(got!.headers['content-type'], 'application/json');
    assert.equal(got!.headers['user-agent'], 'plant-store-webhooks/1.2.0');
    assert.equal(got!.headers['webhook-id'], `ping_${ping.id}`);
    assert.ok(verifies(secret, got!), 'signed like any delivery');
    const listed = await untilStatus(h, alice, id, (d) => d[0]?.status === 'delivered');
    assert.deepEqual(
      listed.map((d) => [d.id, d.type, d.eventId, d.attempts]),
      [[ping.id, 'webhook.ping', null, 1]],
    );
    assert.deepEqual(await h.store.readEvents(0n, null, 10), [], 'a ping is never in the change feed');
  });

  test('a disabled webhook’s ping is sent too, and it stays disabled', async (t) => {
    const { h, receiver, alice, id, secret } = await setup(t);
    const off = await h.call(alice, { method: 'PATCH', url: `/webhooks/${id}`, ...json('{"status":"disabled"}') });
    assert.equal(off.statusCode, 200);
    h.dispatcher.start();
    await plant(h, alice, '1'); // not owed to a disabled webhook
    assert.equal((await post(h, alice, `/webhooks/${id}/ping`)).statusCode, 202);
    h.dispatcher.wake();
    const [got] = await until(receiver, 1);
    assert.equal(got!.headers['plant-store-event'], 'webhook.ping');
    assert.ok(verifies(secret, got!));
    assert.equal((await webhookOf(h, alice, id)).status, 'disabled');
    assert.equal(receiver.requests.length, 1);
  });

  test('a failed ping is attempted once, not retried', async (t) => {
    const { h, receiver, alice, id } = await setup(t, [0, 0, 0]);
    receiver.answer = () => ({ status: 500 });
    h.dispatcher.start();
    await post(h, alice, `/webhooks/${id}/ping`);
    h.dispatcher.wake();
    const [d] = await untilStatus(h, alice, id, (all) => all[0]?.status === 'failed');
    assert.equal(d!.attempts, 1);
    assert.equal(receiver.requests.length, 1);
  });
});

describe('POST /webhooks/{id}/recover', () => {
  test('requeues exactly the failed deliveries created since `since`, and they are delivered with their own webhook-id', async (t) => {
    const { h, receiver, alice, id } = await setup(t, [0]); // one attempt: a 500 fails it for good
    receiver.answer = () => ({ status: 500 });
    h.dispatcher.start();
    await plant(h, alice, '1');
    await untilStatus(h, alice, id, (d) => d.length === 1 && d[0]!.status === 'failed');
    h.advance(1); // the SQLite store stamps with its own clock; the later creates are later anyway
    await new Promise((resolve) => setTimeout(resolve, 5));
    await plant(h, alice, '2');
    await plant(h, alice, '3');
    const failed = await untilStatus(h, alice, id, (d) => d.length === 3 && d.every((x) => x.status === 'failed'));
    receiver.answer = () => ({ status: 204 });
    receiver.requests.length = 0;
    const since = failed[1]!.createdAt; // plant 2's (newest first: 3, 2, 1)
    const res = await post(h, alice, `/webhooks/${id}/recover`, { since });
    assert.equal(res.statusCode, 202, res.payload);
    assert.deepEqual(JSON.parse(res.payload), { requeued: 2, created: 0 });
    h.dispatcher.wake();
    const after = await untilStatus(h, alice, id, (d) => d.filter((x) => x.status === 'delivered').length === 2);
    assert.deepEqual(
      after.map((d) => [d.eventId, d.status, d.attempts]),
      [
        [failed[0]!.eventId, 'delivered', 2],
        [failed[1]!.eventId, 'delivered', 2],
        [failed[2]!.eventId, 'failed', 1],
      ],
    );
    assert.deepEqual(
      receiver.requests.map((r) => r.headers['webhook-id']).sort(),
      [`evt_${failed[1]!.eventId}`, `evt_${failed[0]!.eventId}`].sort(),
    );
    assert.deepEqual(JSON.parse((await post(h, alice, `/webhooks/${id}/recover`, { since })).payload), {
      requeued: 0,
      created: 0,
    });
  });
});

describe('the attempt log', () => {
  test('lists each attempt newest first: status, durationMs, error, and the first 1 KiB of the answer', async (t) => {
    const { h, receiver, alice, id } = await setup(t, [0, 0]);
    let n = 0;
    receiver.answer = () => (++n === 1 ? { status: 500, body: 'e'.repeat(5 * 1024) } : { status: 200, body: 'thanks' });
    h.dispatcher.start();
    await plant(h, alice, '1');
    const [d] = await untilStatus(h, alice, id, (all) => all[0]?.status === 'delivered');
    const res = await h.call(alice, { method: 'GET', url: `/webhooks/${id}/deliveries/${d!.id}/attempts` });
    assert.equal(res.statusCode, 200, res.payload);
    const attempts = JSON.parse(res.payload) as AttemptJson[];
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.status, a.error, a.response]),
      [
        [2, 200, null, 'thanks'],
        [1, 500, 'the receiver answered 500', 'e'.repeat(1024)],
      ],
    );
    for (const a of attempts) {
      assert.ok(Number.isInteger(a.durationMs) && a.durationMs >= 0, `durationMs ${a.durationMs}`);
      assert.equal(new Date(a.at).toISOString(), a.at);
    }
    assert.deepEqual(Object.keys(attempts[0]!).sort(), ['at', 'attempt', 'durationMs', 'error', 'response', 'status']);
  });

  test('a refused connection is an attempt with no status, its error, and no answer', async (t) => {
    const { h, alice } = await setup(t, [0]);
    const hooks = (await h.call(alice, { method: 'GET', url: '/webhooks' })).payload;
    const { id } = (JSON.parse(hooks) as Array<{ id: string }>)[0]!;
    // Port 9 (discard) on loopback: nothing listens there in a test machine.
    const moved = await h.call(alice, {
      method: 'PATCH',
      url: `/webhooks/${id}`,
      ...json('{"url":"http://127.0.0.1:9/x"}'),
    });
    assert.equal(moved.statusCode, 200);
    h.dispatcher.start();
    await plant(h, alice, '1');
    const [d] = await untilStatus(h, alice, id, (all) => all[0]?.status === 'failed');
    const res = await h.call(alice, { method: 'GET', url: `/webhooks/${id}/deliveries/${d!.id}/attempts` });
    const [attempt] = JSON.parse(res.payload) as AttemptJson[];
    assert.deepEqual([attempt!.attempt, attempt!.status, attempt!.response], [1, null, null]);
    assert.match(attempt!.error ?? '', /refused|reset|closed/);
  });
});

describe('a receiver that asks to wait (Retry-After)', () => {
  const cases: Array<[what: string, header: (now: number) => string, waitMs: number, tolerance: number]> = [
    ['429 with Retry-After: 120 (seconds)', () => '120', 120_000, 0],
    ['503 with Retry-After as an HTTP date an hour on', (now) => new Date(now + HOUR).toUTCString(), HOUR, 1000],
    ['429 with Retry-After of 3 days: at most 24 h', () => String(3 * 86_400), 24 * HOUR, 0],
  ];
  for (const [what, header, waitMs, tolerance] of cases) {
    test(`${what} puts the next attempt that far on`, async (t) => {
      const { h, receiver, alice, id } = await setup(t, [0, 1000, 1000]);
      const status = what.startsWith('503') ? 503 : 429;
      receiver.answer = () => ({ status, headers: { 'retry-after': header(h.now()) } });
      h.dispatcher.start();
      const before = Date.now();
      await plant(h, alice, '1');
      const [d] = await untilStatus(h, alice, id, (all) => all[0]?.attempts === 1);
      const after = Date.now();
      assert.equal(d!.status, 'pending');
      const next = Date.parse(d!.nextAttemptAt!);
      // The store stamps with its own clock (this machine's) when it records: between before and after.
      assert.ok(next >= before + waitMs - tolerance - 1000, `${d!.nextAttemptAt} is ${waitMs} ms on`);
      assert.ok(next <= after + waitMs + 1000, `${d!.nextAttemptAt} is at most ${waitMs} ms on`);
    });
  }

  test('a Retry-After shorter than the schedule’s wait keeps the schedule’s', async (t) => {
    const { h, receiver, alice, id } = await setup(t, [0, 10 * HOUR]);
    receiver.answer = () => ({ status: 503, headers: { 'retry-after': '5' } });
    h.dispatcher.start();
    const before = Date.now();
    await plant(h, alice, '1');
    const [d] = await untilStatus(h, alice, id, (all) => all[0]?.attempts === 1);
    assert.ok(Date.parse(d!.nextAttemptAt!) >= before + 8 * HOUR, 'the schedule’s 10 h, less its jitter');
  });
});

describe('failingSince, disabledReason and the warn line', () => {
  test('a 410 disables the webhook: failingSince set, disabledReason gone, one warn line without the URL’s query', async (t) => {
    const { h, receiver, alice, id } = await setup(t);
    const secretUrl = `${receiver.url}?token=s3cr3t-value`;
    await h.call(alice, { method: 'PATCH', url: `/webhooks/${id}`, ...json(JSON.stringify({ url: secretUrl })) });
    receiver.answer = () => ({ status: 410 });
    h.dispatcher.start();
    await plant(h, alice, '1');
    const webhook = await eventually(async () => {
      const w = await webhookOf(h, alice, id);
      return w.status === 'disabled' ? w : undefined;
    }, 'disabled');
    assert.equal(webhook.disabledReason, 'gone');
    assert.equal(typeof webhook.failingSince, 'string');
    assert.ok(Date.parse(webhook.failingSince as string) > 0);
    const lines = h.dispatcherWarnings.filter((w) => w.webhook === id);
    assert.equal(lines.length, 1, JSON.stringify(h.dispatcherWarnings));
    assert.deepEqual([lines[0]!.owner, lines[0]!.reason], ['alice', 'gone']);
    assert.match(String(lines[0]!.msg), new RegExp(`${id}.*alice.*410`));
    assert.ok(!JSON.stringify(lines).includes('s3cr3t'), 'no credential of the URL');

    const on = await h.call(alice, { method: 'PATCH', url: `/webhooks/${id}`, ...json('{"status":"active"}') });
    const enabled = JSON.parse(on.payload) as Record<string, unknown>;
    assert.deepEqual([enabled.status, enabled.disabledReason, enabled.failingSince], ['active', null, null]);
  });

  test('PATCH status disabled logs one warn line naming the webhook, its owner and why; again, none', async (t) => {
    const { h, alice, id } = await setup(t);
    await h.call(alice, {
      method: 'PATCH',
      url: `/webhooks/${id}`,
      ...json(JSON.stringify({ url: 'http://127.0.0.1:9/hook?api_key=hunter2' })),
    });
    const off = await h.call(alice, { method: 'PATCH', url: `/webhooks/${id}`, ...json('{"status":"disabled"}') });
    assert.equal((JSON.parse(off.payload) as Record<string, unknown>).disabledReason, 'manual');
    await h.call(alice, { method: 'PATCH', url: `/webhooks/${id}`, ...json('{"status":"disabled"}') });
    const lines = h.appLog.filter((l) => l.webhook === id);
    assert.equal(lines.length, 1, JSON.stringify(h.appLog));
    assert.equal(lines[0]!.level, 40, 'warn');
    assert.deepEqual([lines[0]!.owner, lines[0]!.reason], ['alice', 'manual']);
    assert.match(String(lines[0]!.msg), new RegExp(`${id} of alice disabled`));
    assert.ok(!JSON.stringify(h.appLog).includes('hunter2'));
  });
});
