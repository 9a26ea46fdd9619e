import assert from 'node:assert/strict';
import { type IncomingHttpHeaders, request } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { type TestContext, describe, test } from 'node:test';
import type { EventRecord } from '../../src/store/event-store.js';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import {
  TWO_POW_53,
  TWO_POW_53_PLUS_1,
  type Response,
  assertError,
  create,
  plantBody,
  remove,
} from '../plants/plant.helpers.js';
import { eventually } from './stream-support.js';

// GET /events as pages of JSON and with ?types= (interface 1.2.0; docs/api.md#the-change-feed), on
// SQLite and again on PostgreSQL (test/postgres/events.test.ts). Pages are read with app.inject;
// what must be a stream (it never ends) is read over a real socket on 127.0.0.1, only as far as the
// test needs.

const DEADLINE_MS = 15_000;

async function app(t: TestContext): Promise<TestApp> {
  const h = await makeApp();
  t.after(() => h.close());
  return h;
}

const page = (h: TestApp, token: string | undefined, query = '', headers: Record<string, string> = {}) =>
  h.call(token, { method: 'GET', url: `/events${query}`, headers: { accept: 'application/json', ...headers } });

/** Every event in the log, read from the store itself (the truth a page is checked against). */
const log = (h: TestApp, owner: string | null = null): Promise<EventRecord[]> => h.store.readEvents(0n, owner, 1000);

/** An event exactly as a page must write it. */
const item = (e: EventRecord): string =>
  `{"id":${e.id},"type":"${e.type}","data":${e.payload},"createdAt":"${new Date(e.createdAt).toISOString()}"}`;
const pageText = (events: readonly EventRecord[]): string => `[${events.map(item).join(',')}]`;

/** A 200 page: its headers checked, its Link's query answered. */
function assertPage(res: Response): URLSearchParams {
  assert.equal(res.statusCode, 200, `status (body: ${res.payload.slice(0, 300)})`);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.match(String(res.headers.vary), /(^|, ?)accept(,|$)/i, 'Vary names Accept');
  assert.equal(res.headers.etag, undefined, 'no entity tag: a poller follows Link instead (docs/decisions.md)');
  const link = /^<\/events\?([^<>]*)>; rel="next"$/.exec(String(res.headers.link));
  assert.ok(link, `a Link rel="next" on every page: ${String(res.headers.link)}`);
  return new URLSearchParams(link[1]);
}

const idsOf = (res: Response): string[] => [...res.payload.matchAll(/\{"id":(\d+),"type"/g)].map((m) => m[1]!);

async function plant(h: TestApp, token: string, id: string, name = `plant ${id}`, tag?: string): Promise<void> {
  assert.equal((await create(h, token, plantBody(id, name, tag))).statusCode, 200);
}

describe('GET /events with Accept: application/json answers pages of JSON', () => {
  test('a page lists the events in id order, payloads as stored, ids beyond 2^53 exact, and links to the next', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    await plant(h, alice, TWO_POW_53_PLUS_1, 'Ficus "lyrata" – 🌿');
    await plant(h, alice, TWO_POW_53, 'Fern', 'shade');
    assert.equal((await remove(h, alice, TWO_POW_53_PLUS_1)).statusCode, 204);
    const all = await log(h);
    assert.equal(all.length, 3);
    const res = await page(h, alice);
    const next = assertPage(res);
    assert.equal(res.payload, pageText(all));
    // The text itself, not only a round trip through the helper: 9007199254740993 is not …992.
    assert.ok(
      res.payload.includes(`"type":"plant.created","data":{"id":9007199254740993,"name":"Ficus \\"lyrata\\" – 🌿"}`),
    );
    assert.ok(res.payload.includes(`"data":{"id":9007199254740992,"name":"Fern","tag":"shade"}`));
    assert.ok(res.payload.includes(`"type":"plant.deleted","data":{"id":9007199254740993}`));
    assert.match(res.payload, /"createdAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"/);
    assert.deepEqual(Object.fromEntries(next), { after: String(all[2]!.id), limit: '100' });
  });

  test('every page carries Link rel="next": after its last id, or the same after when it is empty', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    const empty = await page(h, alice);
    assert.equal(empty.payload, '[]');
    assert.deepEqual(Object.fromEntries(assertPage(empty)), { after: '0', limit: '100' }, 'an empty log: after 0');
    await plant(h, alice, '1');
    await plant(h, alice, '2');
    const [first, second] = await log(h);
    const one = await page(h, alice, `?after=${first!.id}&limit=5`);
    assert.equal(one.payload, pageText([second!]));
    assert.deepEqual(Object.fromEntries(assertPage(one)), { after: String(second!.id), limit: '5' });
    const none = await page(h, alice, `?after=${second!.id}&limit=5`);
    assert.equal(none.payload, '[]');
    assert.deepEqual(Object.fromEntries(assertPage(none)), { after: String(second!.id), limit: '5' });
    const far = '9223372036854775807';
    assert.equal(assertPage(await page(h, alice, `?after=${far}`)).get('after'), far);
  });

  test('following Link from the first page yields every event once, in order, and then what commits later', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    for (let i = 1; i <= 23; i++) await plant(h, alice, String(i));
    for (const id of ['4', '9']) assert.equal((await remove(h, alice, id)).statusCode, 204);
    const seen: string[] = [];
    let url = '/events?limit=10';
    let pages = 0;
    for (;;) {
      const res = await page(h, alice, url.slice('/events'.length));
      const next = assertPage(res);
      pages += 1;
      assert.ok(pages < 10, 'the pages end in an empty one');
      const ids = idsOf(res);
      seen.push(...ids);
      url = `/events?${next.toString()}`;
      if (ids.length === 0) break;
      assert.ok(ids.length <= 10);
    }
    assert.deepEqual(
      seen,
      (await log(h)).map((e) => String(e.id)),
    );
    assert.equal(pages, 4, '25 events at 10 a page, then the empty one');
    // The empty page's link is where the next event will be found.
    await plant(h, alice, '100');
    const later = await page(h, alice, url.slice('/events'.length));
    assert.equal(later.payload, pageText((await log(h)).slice(-1)));
  });

  test('?limit= defaults to 100 and takes 1 to 1000', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    for (let i = 1; i <= 101; i++) await plant(h, alice, String(i));
    const all = await log(h);
    assert.equal(idsOf(await page(h, alice)).length, 100);
    assert.equal(idsOf(await page(h, alice, '?limit=1')).length, 1);
    const most = await page(h, alice, '?limit=1000');
    assert.equal(most.payload, pageText(all));
    assert.equal(assertPage(most).get('limit'), '1000');
  });

  for (const query of ['?limit=0', '?limit=-1', '?limit=1001', '?limit=1.5', '?limit=abc', '?limit=', '?limit=1e2']) {
    test(`GET /events (JSON) answers 400 with an Error body for ${query}`, async (t) => {
      const h = await app(t);
      assertError(await page(h, await h.token('alice', READ_WRITE), query), 400);
    });
  }

  for (const query of ['?after=abc', '?after=-1', '?after=1.5', '?after=', '?after=9223372036854775808']) {
    test(`GET /events (JSON) answers 400 with an Error body for ${query}`, async (t) => {
      const h = await app(t);
      assertError(await page(h, await h.token('alice', READ_WRITE), query), 400);
    });
  }

  test('GET /events (JSON) answers 410 for an after older than the retention; without after it starts at the oldest kept', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    for (const id of ['1', '2', '3']) await plant(h, alice, id);
    const ids = (await log(h)).map((e) => e.id);
    // Retention 0: every event written is past it once the store's clock has moved on.
    await eventually('the log is pruned through its newest event', async () => {
      await h.store.pruneEvents(0, 1000);
      return (await h.store.eventHorizon()) >= ids[2]!;
    });
    for (const old of ['0', String(ids[0]), String(ids[1])]) {
      const { message } = assertError(await page(h, alice, `?after=${old}`), 410);
      assert.match(message, /retention/);
    }
    const atHorizon = await page(h, alice, `?after=${ids[2]}`);
    assert.equal(atHorizon.payload, '[]');
    assert.equal(assertPage(atHorizon).get('after'), String(ids[2]));
    const fromOldest = await page(h, alice);
    assert.equal(fromOldest.payload, '[]');
    assert.equal(assertPage(fromOldest).get('after'), String(ids[2]), 'the oldest kept: after the horizon');
    await plant(h, alice, '4');
    assert.equal((await page(h, alice)).payload, pageText(await log(h)));
  });

  test('a page shows a subject only its own plants’ events, and plants:admin every plant’s', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    const bob = await h.token('bob', READ_WRITE);
    await plant(h, alice, '1');
    await plant(h, bob, '2');
    await plant(h, alice, '3');
    assert.equal((await remove(h, bob, '2')).statusCode, 204);
    const all = await log(h);
    assert.equal((await page(h, alice)).payload, pageText(all.filter((e) => e.owner === 'alice')));
    assert.equal((await page(h, bob)).payload, pageText(all.filter((e) => e.owner === 'bob')));
    // bob's events in alice's id range are skipped, not counted: her page of 1 is her next event.
    const [a1, , a3] = all;
    assert.equal((await page(h, alice, `?after=${a1!.id}&limit=1`)).payload, pageText([a3!]));
    for (const scopes of [['plants:admin'], ['plants:admin', 'plants:read']]) {
      assert.equal((await page(h, await h.token('root', scopes))).payload, pageText(all));
    }
  });

  test('GET /events (JSON) answers 401 without a token and 403 without plants:read', async (t) => {
    const h = await app(t);
    assert.equal(assertError(await page(h, undefined), 401).error, 401);
    const res = await page(h, await h.token('alice', ['plants:write']));
    assertError(res, 403);
    assert.equal(
      res.headers['www-authenticate'],
      'Bearer realm="plant-store", error="insufficient_scope", scope="plants:read"',
    );
  });

  test('a page of 1 KiB or more is compressed for a client that accepts gzip, and sent as is otherwise', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    for (let i = 1; i <= 30; i++) await plant(h, alice, String(i));
    const plain = await page(h, alice);
    assert.ok(plain.payload.length >= 1024);
    assert.equal(plain.headers['content-encoding'], undefined);
    const zipped = await page(h, alice, '', { 'accept-encoding': 'gzip' });
    assertPage(zipped);
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.match(String(zipped.headers.vary), /accept-encoding/i);
    assert.equal(gunzipSync(zipped.rawPayload).toString('utf8'), plain.payload);
  });
});

describe('GET /events?types= keeps only those types', () => {
  test('on a page: one type, both types, and the Link carries the filter', async (t) => {
    const h = await app(t);
    const alice = await h.token('alice', READ_WRITE);
    for (const id of ['1', '2', '3']) await plant(h, alice, id);
    for (const id of ['1', '3']) assert.equal((await remove(h, alice, id)).statusCode, 204);
    await plant(h, alice, '4');
    const all = await log(h);
    const deleted = all.filter((e) => e.type === 'plant.deleted');
    const res = await page(h, alice, '?types=plant.deleted');
    assert.equal(res.payload, pageText(deleted));
    assert.deepEqual(Object.fromEntries(assertPage(res)), {
      after: String(deleted[1]!.id),
      limit: '100',
      types: 'plant.deleted',
    });
    // Resuming after an id works as before: after the first delete, the second.
    assert.equal(
      (await page(h, alice, `?types=plant.deleted&after=${deleted[0]!.id}`)).payload,
      pageText([deleted[1]!]),
    );
    const created = await page(h, alice, '?types=plant.created&limit=2');
    assert.equal(created.payload, pageText(all.filter((e) => e.type === 'plant.created').slice(0, 2)));
    for (const both of ['plant.created,plant.deleted', 'plant.deleted,plant.created', 'plant.created, plant.deleted']) {
      const res = await page(h, alice, `?types=${encodeURIComponent(both)}`);
      assert.equal(res.payload, pageText(all));
      assert.equal(assertPage(res).get('types'), null, 'every type is no filter');
    }
  });

  for (const types of ['plant.updated', 'plant.created,nope', '', 'plant.created,', 'PLANT.CREATED']) {
    test(`GET /events?types=${types} answers 400 with an Error body, on a page and on the stream`, async (t) => {
      const h = await app(t);
      const alice = await h.token('alice', READ_WRITE);
      const query = `?types=${encodeURIComponent(types)}`;
      assertError(await page(h, alice, query), 400);
      // Refused before any stream is set up, so this answer ends like any other.
      const stream = await h.call(alice, {
        method: 'GET',
        url: `/events${query}`,
        headers: { accept: 'text/event-stream' },
      });
      const { message } = assertError(stream, 400);
      if (types !== '') assert.match(message, /plant\.created, plant\.deleted/, 'the message names the known types');
    });
  }

  test('on the stream: only events of those types, byte for byte, from the log and live', async (t) => {
    const h = await app(t);
    const port = await listen(h);
    const alice = await h.token('alice', READ_WRITE);
    await plant(h, alice, TWO_POW_53_PLUS_1);
    await plant(h, alice, '2');
    assert.equal((await remove(h, alice, TWO_POW_53_PLUS_1)).statusCode, 204);
    const stream = await openStream(t, port, alice, '?after=0&types=plant.deleted');
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    assert.match(String(stream.headers.vary), /accept/i);
    await plant(h, alice, '3'); // live, and not of the type asked for
    assert.equal((await remove(h, alice, '2')).statusCode, 204); // live, of the type
    const all = await log(h);
    const deleted = all.filter((e) => e.type === 'plant.deleted');
    const last = `id: ${deleted[1]!.id}\n`;
    await stream.until(() => stream.text().includes(last));
    // The stream opens with its comment and the reconnection time, then only events.
    assert.match(stream.text(), /^: connected\nretry: \d{4}\n\n/);
    const messages = stream
      .text()
      .replace(/^: connected\nretry: \d{4}\n\n/, '')
      .replace(/^(?::[^\n]*\n\n)+/gm, '');
    assert.equal(messages, deleted.map((e) => `id: ${e.id}\nevent: plant.deleted\ndata: ${e.payload}\n\n`).join(''));
    assert.ok(messages.includes('data: {"id":9007199254740993}\n'));
  });
});

interface OpenStream {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  text(): string;
  until(done: () => boolean): Promise<void>;
}

/** GET /events over a socket, read as it arrives; hung up when the test ends. */
function openStream(t: TestContext, port: number, token: string, query = '', accept?: string): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (accept !== undefined) headers.accept = accept;
    const req = request({ host: '127.0.0.1', port, path: `/events${query}`, headers, agent: false });
    t.after(() => void req.destroy());
    req.on('error', reject);
    req.on('response', (res) => {
      res.setEncoding('utf8');
      let text = '';
      const waiters = new Set<() => void>();
      res.on('data', (chunk: string) => {
        text += chunk;
        for (const waiter of [...waiters]) waiter();
      });
      res.on('error', () => {});
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        text: () => text,
        until: (done) =>
          new Promise<void>((ok, fail) => {
            const timer = setTimeout(
              () => fail(new Error(`not within ${DEADLINE_MS} ms; received ${text}`)),
              DEADLINE_MS,
            );
            const waiter = (): void => {
              if (!done()) return;
              clearTimeout(timer);
              waiters.delete(waiter);
              ok();
            };
            waiters.add(waiter);
            waiter();
          }),
      });
    });
    req.end();
  });
}

describe('GET /events chooses its representation by Accept', () => {
  const cases: Array<[string | undefined, 'stream' | 'json']> = [
    [undefined, 'stream'], // the 1.1.0 answer stays the default
    ['*/*', 'stream'], // curl
    ['text/event-stream', 'stream'], // EventSource
    ['text/*', 'stream'],
    ['text/html', 'stream'], // nothing acceptable: the default, never a 406
    ['application/json;q=0', 'stream'],
    ['application/json, text/event-stream', 'stream'], // a tie between two named: the default
    ['text/event-stream;q=0.9, application/json;q=0.5', 'stream'],
    ['application/json', 'json'],
    ['Application/JSON; charset=utf-8', 'json'],
    ['application/*', 'json'],
    ['application/json, */*', 'json'], // named beats a wildcard of the same q
    ['application/json, text/plain, */*', 'json'], // what axios sends
    ['application/json;q=0.9, text/event-stream;q=0.8', 'json'],
    ['text/event-stream;q=0.2, application/json;q=0.5, */*;q=0.1', 'json'],
  ];
  for (const [accept, expected] of cases) {
    test(`Accept: ${accept ?? '(none)'} gets the ${expected === 'json' ? 'JSON page' : 'stream'}`, async (t) => {
      const h = await app(t);
      const port = await listen(h);
      const alice = await h.token('alice', READ_WRITE);
      await plant(h, alice, '1');
      const res = await openStream(t, port, alice, '?after=0', accept);
      assert.equal(res.status, 200);
      assert.match(String(res.headers.vary), /(^|, ?)accept(,|$)/i);
      if (expected === 'stream') {
        assert.match(String(res.headers['content-type']), /^text\/event-stream/);
        await res.until(() => res.text().includes('event: plant.created\n'));
      } else {
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.match(String(res.headers.link), /^<\/events\?after=\d+&limit=100>; rel="next"$/);
        await res.until(() => res.text().endsWith(']'));
        assert.equal(res.text(), pageText(await log(h)));
      }
    });
  }
});
