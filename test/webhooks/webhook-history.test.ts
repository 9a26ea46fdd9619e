import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { type TestContext, describe, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { READ_WRITE, type TestApp, json, makeApp } from '../helpers.js';
import {
  type Response,
  assertError,
  jsonBody,
  assertForbidden,
  assertIndistinguishable,
  assertNoContent,
  create,
  plantBody,
} from '../plants/plant.helpers.js';
import { type DeliveryHarness, TestReceiver, addWebhook, deliveryHarness, eventually } from './delivery-harness.js';

// A webhook's history for the subscriber's page, on the engine under test: its
// deliveries in pages (`?before=` and `Link: rel="next"`), and its attempts of the last 24 hours
// by the hour (GET /webhooks/{id}/activity), counted from attempts a real dispatcher made against
// a receiver on 127.0.0.1.

const SCOPES = [...READ_WRITE, 'webhooks:read', 'webhooks:write'];
const HOUR = 3_600_000;

interface HourJson {
  start: string;
  delivered: number;
  failed: number;
}
interface ActivityJson {
  from: string;
  to: string;
  hours: HourJson[];
}

/** The ids of a page of deliveries, as written in the body: int64 text, never through a JS number. */
function idsOf(res: Response): string[] {
  assert.equal(res.statusCode, 200, res.payload);
  assert.equal((JSON.parse(res.payload) as unknown[]).length, [...res.payload.matchAll(/"id":/g)].length);
  return [...res.payload.matchAll(/"id":(-?[0-9]+)[,}]/g)].map((m) => m[1]!);
}

const get = (h: TestApp, token: string | undefined, url: string): Promise<Response> =>
  h.call(token, { method: 'GET', url });

const createWebhook = addWebhook;

async function plant(h: TestApp, token: string, id: string): Promise<void> {
  assert.equal((await create(h, token, plantBody(id, `plant ${id}`))).statusCode, 200);
}

/** An app (no dispatcher: deliveries stay pending) with alice's webhook and `n` of its deliveries. */
async function withDeliveries(t: TestContext, n: number) {
  const h = await makeApp({ events: { ...testConfig().events, allowPrivateTargets: false } });
  t.after(() => h.close());
  const alice = await h.token('alice', SCOPES);
  const id = await createWebhook(h, alice, 'https://hooks.example.com/plants');
  for (let i = 1; i <= n; i++) await plant(h, alice, String(i));
  const all = idsOf(await get(h, alice, `/webhooks/${id}/deliveries?limit=1000`));
  assert.equal(all.length, n);
  return { h, alice, id, all };
}

/** A port of 127.0.0.1 that was just free: a server listened on it and closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/** The path and query of a `Link: <…>; rel="next"` header, checked for its exact form. */
function nextOf(res: Response): string | undefined {
  const link = res.headers.link;
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  assert.ok(match, `a next link: ${String(link)}`);
  return match[1];
}

describe('GET /webhooks/{id}/deliveries in pages', () => {
  test('three pages, newest first: each Link names limit and the last id of its page; the last page has none', async (t) => {
    const { h, alice, id, all } = await withDeliveries(t, 5);
    assert.deepEqual(
      all.map(BigInt),
      all.map(BigInt).sort((a, b) => (a < b ? 1 : -1)),
      'newest first',
    );
    const first = await get(h, alice, `/webhooks/${id}/deliveries?limit=2`);
    assert.deepEqual(idsOf(first), all.slice(0, 2));
    assert.equal(first.headers.link, `</webhooks/${id}/deliveries?limit=2&before=${all[1]}>; rel="next"`);

    const second = await get(h, alice, nextOf(first)!);
    assert.deepEqual(idsOf(second), all.slice(2, 4));
    assert.equal(second.headers.link, `</webhooks/${id}/deliveries?limit=2&before=${all[3]}>; rel="next"`);

    const third = await get(h, alice, nextOf(second)!);
    assert.deepEqual(idsOf(third), all.slice(4));
    assert.equal(third.headers.link, undefined, 'nothing follows the last page');
  });

  test('a last page that is exactly full carries no Link; a page below every id is empty', async (t) => {
    const { h, alice, id, all } = await withDeliveries(t, 4);
    const first = await get(h, alice, `/webhooks/${id}/deliveries?limit=2`);
    const last = await get(h, alice, nextOf(first)!);
    assert.deepEqual(idsOf(last), all.slice(2));
    assert.equal(last.headers.link, undefined);
    const below = await get(h, alice, `/webhooks/${id}/deliveries?before=${all.at(-1)}`);
    assert.deepEqual(jsonBody(below), []);
    assert.equal(below.headers.link, undefined);
  });

  test('without before, the first page as before: limit 100 by default, the same bodies; before reads below any id', async (t) => {
    const { h, alice, id, all } = await withDeliveries(t, 3);
    const plain = await get(h, alice, `/webhooks/${id}/deliveries`);
    assert.deepEqual(idsOf(plain), all);
    assert.equal(plain.headers.link, undefined);
    const paged = await get(h, alice, `/webhooks/${id}/deliveries?limit=1`);
    assert.equal(paged.headers.link, `</webhooks/${id}/deliveries?limit=1&before=${all[0]}>; rel="next"`);
    // The page below the newest, without limit: the default 100, and the Link is never needed.
    const rest = await get(h, alice, `/webhooks/${id}/deliveries?before=${all[0]}`);
    assert.deepEqual(
      jsonBody(rest),
      (JSON.parse(plain.payload) as unknown[]).slice(1),
      'the same deliveries as the first page shows',
    );
    // An id between two deliveries, or above them all: only those below it.
    const above = BigInt(all[0]!) + 1000n;
    assert.deepEqual(idsOf(await get(h, alice, `/webhooks/${id}/deliveries?before=${above}`)), all);
    assert.deepEqual(idsOf(await get(h, alice, `/webhooks/${id}/deliveries?before=9223372036854775807`)), all);
  });

  test('before that is not an int64 in decimal answers 400 with the Error body naming it', async (t) => {
    const { h, alice, id } = await withDeliveries(t, 1);
    for (const query of [
      'before=abc',
      'before=',
      'before=1.5',
      'before=1e3',
      'before=0x10',
      'before=%205',
      'before=9223372036854775808',
      'before=-9223372036854775809',
      'before=5&before=6',
    ]) {
      const error = assertError(await get(h, alice, `/webhooks/${id}/deliveries?${query}`), 400);
      assert.match(error.message, /^querystring\.before must be a 64-bit integer/, query);
    }
  });
});

describe('GET /webhooks/{id}/activity', () => {
  /** A harness whose deliveries are attempted once, and alice's webhook on a receiver of 127.0.0.1. */
  async function setup(t: TestContext) {
    const h = await deliveryHarness(t, [0]);
    const receiver = await new TestReceiver().start(t);
    const alice = await h.token('alice', SCOPES);
    const id = await createWebhook(h, alice, receiver.url);
    h.dispatcher.start();
    return { h, receiver, alice, id };
  }

  const activity = (h: TestApp, token: string | undefined, id: string): Promise<Response> =>
    get(h, token, `/webhooks/${id}/activity`);

  /** Every attempt of every delivery of the webhook, from the attempt log. */
  async function attemptsOf(h: DeliveryHarness, token: string, id: string) {
    const found: Array<{ at: string; status: number | null }> = [];
    for (const delivery of idsOf(await get(h, token, `/webhooks/${id}/deliveries?limit=1000`))) {
      found.push(
        ...jsonBody<Array<{ at: string; status: number | null }>>(
          await get(h, token, `/webhooks/${id}/deliveries/${delivery}/attempts`),
        ),
      );
    }
    return found;
  }

  /** The 24 hours an answer must show, from the attempts themselves and its own `from`. */
  function expectedHours(from: string, attempts: ReadonlyArray<{ at: string; status: number | null }>): HourJson[] {
    const hours = Array.from({ length: 24 }, (_, i) => ({
      start: new Date(Date.parse(from) + i * HOUR).toISOString(),
      delivered: 0,
      failed: 0,
    }));
    for (const a of attempts) {
      const hour = Math.floor((Date.parse(a.at) - Date.parse(from)) / HOUR);
      if (hour < 0 || hour >= 24) continue;
      if (a.status !== null && a.status >= 200 && a.status < 300) hours[hour]!.delivered++;
      else hours[hour]!.failed++;
    }
    return hours;
  }

  function assertShape(answer: ActivityJson, before: number, after: number): void {
    assert.deepEqual(Object.keys(answer).sort(), ['from', 'hours', 'to']);
    assert.equal(answer.hours.length, 24);
    const to = Date.parse(answer.to);
    assert.equal(new Date(to).toISOString(), answer.to, 'to is RFC 3339 in UTC');
    assert.ok(to >= before && to <= after, 'to is now, by the service clock');
    const from = Date.parse(answer.from);
    assert.equal(from % HOUR, 0, 'whole hours');
    assert.equal(answer.hours[0]!.start, answer.from);
    answer.hours.forEach((hour, i) => {
      assert.deepEqual(Object.keys(hour).sort(), ['delivered', 'failed', 'start']);
      assert.equal(Date.parse(hour.start), from + i * HOUR, `hour ${i}: oldest first, an hour apart`);
      assert.ok(Number.isInteger(hour.delivered) && hour.delivered >= 0);
      assert.ok(Number.isInteger(hour.failed) && hour.failed >= 0);
    });
    const last = Date.parse(answer.hours[23]!.start);
    assert.ok(last <= to && to < last + HOUR, 'the last hour is the one under way');
  }

  async function read(h: DeliveryHarness, token: string, id: string): Promise<ActivityJson> {
    const before = h.now();
    const res = await activity(h, token, id);
    const answer = jsonBody<ActivityJson>(res);
    assertShape(answer, before, h.now());
    return answer;
  }

  test('counts the attempts a dispatcher made by the hour: 2xx delivered; a 500, a refused connection failed; pings too', async (t) => {
    const { h, receiver, alice, id } = await setup(t);
    const empty = await read(h, alice, id);
    assert.deepEqual(empty.hours, expectedHours(empty.from, []), 'no attempt yet: 24 hours of zeros');

    await plant(h, alice, '1');
    await plant(h, alice, '2');
    h.dispatcher.wake();
    const ping = async () => {
      const res = await h.call(alice, { method: 'POST', url: `/webhooks/${id}/ping` });
      assert.equal(res.statusCode, 202, res.payload);
      h.dispatcher.wake();
    };
    await ping();
    await eventually(async () => ((await attemptsOf(h, alice, id)).length === 3 ? true : undefined), '3 attempts');
    receiver.answer = () => ({ status: 500, body: 'down' });
    await ping();
    await eventually(async () => ((await attemptsOf(h, alice, id)).length === 4 ? true : undefined), 'a 4th attempt');
    // A port nothing listens on any more: the connection is refused, the attempt has no status.
    const patched = await h.call(alice, {
      method: 'PATCH',
      url: `/webhooks/${id}`,
      ...json(JSON.stringify({ url: `http://127.0.0.1:${await closedPort()}/hooks` })),
    });
    assert.equal(patched.statusCode, 200, patched.payload);
    await ping();
    const attempts = await eventually(async () => {
      const found = await attemptsOf(h, alice, id);
      return found.length === 5 ? found : undefined;
    }, 'a 5th attempt');
    assert.deepEqual(
      attempts.map((a) => a.status).sort(),
      [204, 204, 204, 500, null].sort(),
      'three delivered, a 500, a refused connection',
    );

    const answer = await read(h, alice, id);
    assert.deepEqual(answer.hours, expectedHours(answer.from, attempts));
    const sum = (key: 'delivered' | 'failed') => answer.hours.reduce((n, hour) => n + hour[key], 0);
    assert.deepEqual([sum('delivered'), sum('failed')], [3, 2]);
  });

  test('the hours follow the clock: 25 hours later the same attempts are out of the window', async (t) => {
    const { h, alice, id } = await setup(t);
    await plant(h, alice, '1');
    h.dispatcher.wake();
    const [attempt] = await eventually(async () => {
      const found = await attemptsOf(h, alice, id);
      return found.length === 1 ? found : undefined;
    }, 'an attempt');
    const now = await read(h, alice, id);
    assert.deepEqual(now.hours, expectedHours(now.from, [attempt!]));
    assert.equal(
      now.hours.reduce((n, hour) => n + hour.delivered, 0),
      1,
    );

    h.advance(25 * HOUR);
    const later = await read(h, alice, id);
    assert.ok(Date.parse(later.from) - Date.parse(now.from) >= 25 * HOUR, 'the window moved with the clock');
    assert.deepEqual(later.hours, expectedHours(later.from, []), 'every hour 0');
  });

  test("another subject's webhook answers 404 exactly as a missing one, for activity and every page of deliveries", async (t) => {
    const h = await makeApp({ events: { ...testConfig().events, allowPrivateTargets: false } });
    t.after(() => h.close());
    const alice = await h.token('alice', SCOPES);
    const bob = await h.token('bob', SCOPES);
    const id = await createWebhook(h, alice, 'https://hooks.example.com/plants');
    await plant(h, alice, '1');
    const [delivery] = idsOf(await get(h, alice, `/webhooks/${id}/deliveries`));
    const urls = [
      `/webhooks/${id}/activity`,
      `/webhooks/${id}/deliveries?before=${delivery}`,
      `/webhooks/${id}/deliveries?limit=1&before=1`,
    ];
    const others: Response[] = [];
    for (const url of urls) others.push(await get(h, bob, url));
    for (const res of others) assert.equal(assertError(res, 404).message, `no webhook ${id}`);
    assertNoContent(await h.call(alice, { method: 'DELETE', url: `/webhooks/${id}` }));
    for (const [i, url] of urls.entries()) assertIndistinguishable(others[i]!, await get(h, bob, url), url);
    assertError(await get(h, alice, '/webhooks/wh_missing/activity'), 404);
  });

  test('both calls need webhooks:read: 403 insufficient_scope without it, 401 without a token', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const owner = await h.token('alice', SCOPES);
    const id = await createWebhook(h, owner, 'https://hooks.example.com/plants');
    const urls = [`/webhooks/${id}/activity`, `/webhooks/${id}/deliveries?before=5`];
    for (const scopes of [READ_WRITE, ['webhooks:write'], ['plants:admin']]) {
      const token = await h.token('alice', scopes);
      for (const url of urls) assertForbidden(await get(h, token, url), 'webhooks:read');
    }
    for (const url of urls) {
      const res = await get(h, undefined, url);
      assertError(res, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store"');
    }
    const reader = await h.token('alice', ['webhooks:read']);
    assert.equal((await get(h, reader, urls[0]!)).statusCode, 200);
    assert.equal((await get(h, reader, urls[1]!)).statusCode, 200);
  });
});
