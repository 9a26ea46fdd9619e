import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { type ClientRequest, type IncomingHttpHeaders, type ServerResponse, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, describe, test } from 'node:test';
import { type Config, testConfig } from '../../src/config.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import { EventStream } from '../../src/events/event-stream.js';
import type { Store } from '../../src/store/store.js';
import type { EventRecord, EventStore } from '../../src/store/event-store.js';
import { READ_WRITE, TEST_ENGINE, type TestApp, makeApp } from '../helpers.js';
import { assertErrorJson, listen } from '../http/support.js';
import { INT64_MAX, INT64_MIN, create, plantBody, remove } from '../plants/plant.helpers.js';
import { scratchSchema } from '../support/postgres.js';
import { eventually } from './stream-support.js';

// GET /events, the change feed (interface 1.1.0; docs/api.md#the-change-feed), over a real socket on
// 127.0.0.1: Server-Sent Events read as a browser's EventSource would, chunk by chunk. Waits are
// deadlines on a condition (generous, so a slow machine passes), never timing assertions.

const DEADLINE_MS = 15_000;

/** One Server-Sent Events message (WHATWG HTML §9.2.6). */
interface SseMessage {
  readonly id: string | undefined;
  readonly event: string | undefined;
  readonly data: string;
  /** The message as received, from its first line through the blank line that ends it. */
  readonly raw: string;
}

/** An incremental text/event-stream parser: lines end with CRLF, LF or CR; a blank line dispatches. */
class SseParser {
  /** Everything received, decoded as UTF-8. */
  text = '';
  readonly messages: SseMessage[] = [];
  /** Comment lines (`:` and what follows), without the colon. */
  readonly comments: string[] = [];
  /** The values of `retry:` fields: the reconnection time the server asks for. */
  readonly retries: string[] = [];
  private pos = 0;
  private start = 0;
  private fields = 0;
  private id: string | undefined;
  private event: string | undefined;
  private data: string[] = [];

  push(chunk: string): void {
    this.text += chunk;
    for (;;) {
      const rest = this.text.slice(this.pos);
      const end = /\r\n|\r|\n/.exec(rest);
      // A CR at the very end may be the first half of a CRLF that the next chunk completes.
      if (!end || (end[0] === '\r' && end.index === rest.length - 1)) return;
      this.pos += end.index + end[0].length;
      this.line(rest.slice(0, end.index));
    }
  }

  private line(line: string): void {
    if (line === '') {
      // A block without data (a `retry:` alone) dispatches nothing (WHATWG HTML §9.2.6).
      if (this.data.length > 0) {
        const raw = this.text.slice(this.start, this.pos);
        this.messages.push({ id: this.id, event: this.event, data: this.data.join('\n'), raw });
      }
      this.fields = 0;
      this.id = this.event = undefined;
      this.data = [];
      this.start = this.pos;
      return;
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1).trim());
      if (this.fields === 0) this.start = this.pos;
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    this.fields += 1;
    if (field === 'id') this.id = value;
    else if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'retry') this.retries.push(value);
  }
}

/** An open GET /events (or its error answer), read as it arrives. */
interface Feed {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly sse: SseParser;
  /** The response ended cleanly: its last chunk arrived, nothing was cut. */
  readonly ended: boolean;
  /** Resolves once `done()` holds, checked at every chunk; fails at the deadline or when the response closes first. */
  until(what: string, done: () => boolean, ms?: number): Promise<void>;
  /** Hangs up, as a client that goes away. */
  close(): void;
}

interface FeedOptions {
  readonly query?: string;
  readonly headers?: Record<string, string>;
}

/** Every stream a test opened: hung up before its app closes, so a server that keeps one open fails, not hangs. */
const clients = new Set<ClientRequest>();

function hangUpAll(): void {
  for (const req of clients) req.destroy();
  clients.clear();
}

function openFeed(port: number, token: string | undefined, options: FeedOptions = {}): Promise<Feed> {
  return new Promise((resolve, reject) => {
    const headers = {
      accept: 'text/event-stream',
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
      ...options.headers,
    };
    // agent: false: a connection of its own for each stream, closed with it.
    const req = request({ host: '127.0.0.1', port, path: `/events${options.query ?? ''}`, headers, agent: false });
    clients.add(req);
    req.on('close', () => clients.delete(req));
    req.on('error', reject);
    req.on('response', (res) => {
      res.setEncoding('utf8');
      const sse = new SseParser();
      const waiters = new Set<() => void>();
      let ended = false;
      let closed = false;
      const check = (): void => {
        for (const waiter of [...waiters]) waiter();
      };
      res.on('data', (chunk: string) => {
        sse.push(chunk);
        check();
      });
      res.on('end', () => {
        ended = res.complete;
        check();
      });
      res.on('error', () => {}); // a reset shows as `ended` staying false
      res.on('close', () => {
        closed = true;
        check();
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        sse,
        get ended() {
          return ended;
        },
        until: (what, done, ms = DEADLINE_MS) =>
          new Promise<void>((ok, fail) => {
            const failure = (why: string): Error =>
              new Error(`${what}: ${why}; received so far ${JSON.stringify(sse.text.slice(-3000))}`);
            const waiter = (): void => {
              if (done()) ok();
              else if (closed) fail(failure('the response closed first'));
              else return;
              clearTimeout(timer);
              waiters.delete(waiter);
            };
            const timer = setTimeout(() => {
              waiters.delete(waiter);
              fail(failure(`not within ${ms} ms`));
            }, ms);
            waiters.add(waiter);
            waiter();
          }),
        close: () => void req.destroy(),
      });
    });
    req.end();
  });
}

/** Until the server has set the stream up (its first comment line). */
const connected = (feed: Feed): Promise<void> =>
  feed.until('the stream starts', () => feed.sse.comments.length > 0 || feed.sse.messages.length > 0);

/** The whole answer of a refused request, checked as the contract's Error body. */
async function assertFeedError(feed: Feed, status: number): Promise<string> {
  assert.equal(feed.status, status, `status (received ${feed.sse.text.slice(0, 300)})`);
  await feed.until('the error body', () => feed.ended);
  assert.match(String(feed.headers['content-type']), /^application\/json\b/);
  assert.equal(feed.headers['cache-control'], 'no-store');
  assertErrorJson(feed.sse.text, status);
  return feed.sse.text;
}

const closing = new WeakMap<TestApp, Promise<void>>();
/** Closes the app and its store once, whoever asks first (a test, or its after hook). */
function closeApp(h: TestApp): Promise<void> {
  let closed = closing.get(h);
  if (!closed) {
    closed = h.close();
    closing.set(h, closed);
  }
  return closed;
}

async function listening(t: TestContext, overrides: Partial<Config> = {}): Promise<{ h: TestApp; port: number }> {
  const h = await makeApp(overrides);
  t.after(() => {
    hangUpAll();
    return closeApp(h);
  });
  return { h, port: await listen(h) };
}

/** What the feed must send for an event: its id, its type, its payload as stored. */
const sse = (e: Pick<EventRecord, 'id' | 'type' | 'payload'>): string =>
  `id: ${e.id}\nevent: ${e.type}\ndata: ${e.payload}\n\n`;

const raws = (feed: Feed): string[] => feed.sse.messages.map((m) => m.raw);

async function log(store: Store, owner: string | null = null): Promise<EventRecord[]> {
  return store.readEvents(0n, owner, 1000);
}

async function plant(h: TestApp, token: string, id: string, name = `plant ${id}`): Promise<void> {
  assert.equal((await create(h, token, plantBody(id, name))).statusCode, 200);
}

/** Closes the app: each open stream must end, its client seeing the response end, within the deadline. */
async function closeAndDrain(h: TestApp, feeds: readonly Feed[]): Promise<void> {
  const closed = closeApp(h);
  for (const feed of feeds) await feed.until('the stream ends', () => feed.ended);
  await closed;
}

describe('GET /events streams the caller’s events as Server-Sent Events', () => {
  test('GET /events answers 200 text/event-stream with Cache-Control no-store and an X-Request-Id', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const feed = await openFeed(port, alice, { headers: { 'x-request-id': 'feed-test-1' } });
    assert.equal(feed.status, 200);
    assert.match(String(feed.headers['content-type']), /^text\/event-stream(?:;|$)/);
    assert.equal(feed.headers['cache-control'], 'no-store');
    assert.equal(feed.headers['x-content-type-options'], 'nosniff');
    assert.equal(feed.headers['x-request-id'], 'feed-test-1', 'a request id sent is echoed');
    const generated = await openFeed(port, alice);
    assert.match(String(generated.headers['x-request-id']), /^\S+$/, 'a request id is generated otherwise');
    await connected(feed);
    assert.deepEqual(feed.sse.messages, [], 'no event before one commits');
    // A reconnection time for EventSource, between 1 and 2 s.
    assert.equal(feed.sse.retries.length, 1);
    assert.ok(Number(feed.sse.retries[0]) >= 1000 && Number(feed.sse.retries[0]) < 2000, feed.sse.retries[0]);
  });

  test('GET /events sends each change live, exactly as id, event and data lines, ids beyond 2^53 exact', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const feed = await openFeed(port, alice);
    await connected(feed);

    await plant(h, alice, INT64_MAX, 'Ficus "lyrata" – 🌿');
    assert.equal((await create(h, alice, plantBody(INT64_MIN, 'cactus', 'desert'))).statusCode, 200);
    assert.equal((await remove(h, alice, INT64_MAX)).statusCode, 204);
    const [first, second, third] = (await log(h.store)).map((e) => e.id);
    await feed.until('three events', () => feed.sse.messages.length >= 3);
    assert.deepEqual(raws(feed), [
      `id: ${first}\nevent: plant.created\ndata: {"id":9223372036854775807,"name":"Ficus \\"lyrata\\" – 🌿"}\n\n`,
      `id: ${second}\nevent: plant.created\ndata: {"id":-9223372036854775808,"name":"cactus","tag":"desert"}\n\n`,
      `id: ${third}\nevent: plant.deleted\ndata: {"id":9223372036854775807}\n\n`,
    ]);
    assert.ok(first! < second! && second! < third!, 'ids grow with commits');
    const [message] = feed.sse.messages;
    assert.equal(message!.data, '{"id":9223372036854775807,"name":"Ficus \\"lyrata\\" – 🌿"}');
    assert.equal(message!.id, String(first));
    assert.equal(message!.event, 'plant.created');
  });

  test('GET /events shows a subject only its own plants’ events, and plants:admin every plant’s', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const bob = await h.token('bob', READ_WRITE);
    const admin = await h.token('root', ['plants:admin', 'plants:read']);
    const adminAlone = await h.token('root', ['plants:admin']);
    const feeds = {
      alice: await openFeed(port, alice),
      bob: await openFeed(port, bob),
      admin: await openFeed(port, admin),
      adminAlone: await openFeed(port, adminAlone),
    };
    for (const feed of Object.values(feeds)) {
      assert.equal(feed.status, 200);
      await connected(feed);
    }
    await plant(h, alice, '1');
    await plant(h, bob, '2');
    assert.equal((await remove(h, admin, '2')).statusCode, 204); // bob's plant: bob's event
    assert.equal((await remove(h, alice, '1')).statusCode, 204);
    await plant(h, admin, '3'); // root's own plant
    const all = await log(h.store);
    assert.equal(all.length, 5);
    await feeds.admin.until('every event', () => feeds.admin.sse.messages.length >= all.length);
    // The tail hands each event to every stream in turn: once the admin has the last one, every
    // stream has been written all it will get; closing the app ends each after what it was sent.
    await closeAndDrain(h, Object.values(feeds));
    const of = (owner: string): string[] => all.filter((e) => e.owner === owner).map(sse);
    assert.deepEqual(raws(feeds.alice), of('alice'));
    assert.deepEqual(raws(feeds.bob), of('bob'));
    assert.deepEqual(raws(feeds.admin), all.map(sse));
    assert.deepEqual(raws(feeds.adminAlone), all.map(sse));
  });
});

describe('GET /events resumes after an event id', () => {
  test('Last-Event-ID and ?after= resume strictly after that event: none repeated, none missing', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const bob = await h.token('bob', READ_WRITE);
    for (const id of ['1', '2', '3']) await plant(h, alice, id);
    await plant(h, bob, '4'); // an id alice cannot see, inside the range she resumes over
    assert.equal((await remove(h, alice, '2')).statusCode, 204);
    const before = await log(h.store);
    const ids = before.map((e) => String(e.id));
    const feeds = {
      header: await openFeed(port, alice, { headers: { 'last-event-id': ids[1]! } }),
      query: await openFeed(port, alice, { query: `?after=${ids[1]}` }),
      // Last-Event-ID (what EventSource sends on reconnect) wins over ?after=.
      both: await openFeed(port, alice, { headers: { 'last-event-id': ids[3]! }, query: `?after=${ids[0]}` }),
      latest: await openFeed(port, alice, { query: `?after=${ids.at(-1)}` }),
    };
    for (const feed of Object.values(feeds)) await connected(feed);
    await plant(h, alice, '5'); // live, after the resume point
    const all = await log(h.store);
    const last = all.at(-1)!;
    for (const feed of Object.values(feeds)) {
      await feed.until('the live event', () => feed.sse.messages.some((m) => m.id === String(last.id)));
    }
    await closeAndDrain(h, Object.values(feeds));
    const alices = (after: string): string[] => all.filter((e) => e.owner === 'alice' && e.id > BigInt(after)).map(sse);
    assert.deepEqual(raws(feeds.header), alices(ids[1]!));
    assert.deepEqual(raws(feeds.query), alices(ids[1]!));
    assert.deepEqual(raws(feeds.both), alices(ids[3]!));
    assert.deepEqual(raws(feeds.latest), [sse(last)]);
  });

  test('without Last-Event-ID or ?after= a stream starts from now; ?after=0 replays every event kept', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    await plant(h, alice, '1');
    await plant(h, alice, '2');
    const fromNow = await openFeed(port, alice);
    const everything = await openFeed(port, alice, { query: '?after=0' });
    await connected(fromNow);
    await connected(everything);
    await plant(h, alice, '3');
    const all = await log(h.store);
    // Each feed holds what it should before it closes: the one new event, and every event kept.
    await fromNow.until('the new event', () => fromNow.sse.messages.length >= 1);
    await everything.until('every event kept', () => everything.sse.messages.length >= all.length);
    await closeAndDrain(h, [fromNow, everything]);
    assert.deepEqual(raws(fromNow), [sse(all[2]!)]);
    assert.deepEqual(raws(everything), all.map(sse));
  });

  test('streams that resume while changes commit get every later event once, in order', async (t) => {
    const { h, port } = await listening(t);
    const writers = [await h.token('alice', READ_WRITE), await h.token('alice', READ_WRITE)];
    let written = 0;
    // Two writers at once, so commits keep arriving while each stream reads the log to catch up.
    const writing = Promise.all(
      writers.map(async (token, w) => {
        for (let i = 0; i < 100; i++) {
          await plant(h, token, String(w * 1000 + i));
          written += 1;
        }
      }),
    );
    const feeds: Array<{ feed: Feed; after: bigint }> = [];
    for (const point of [0, 40, 80, 120, 160]) {
      await eventually(`${point} plants written`, () => Promise.resolve(written >= point));
      const after = point === 0 ? 0n : ((await log(h.store)).at(-20)?.id ?? 0n);
      const token = await h.token('alice', READ_WRITE);
      feeds.push({ feed: await openFeed(port, token, { query: `?after=${after}` }), after });
    }
    await writing;
    const all = await log(h.store);
    assert.equal(all.length, 200);
    const last = String(all.at(-1)!.id);
    for (const { feed } of feeds) await feed.until('the last event', () => feed.sse.messages.at(-1)?.id === last);
    await closeAndDrain(
      h,
      feeds.map((f) => f.feed),
    );
    for (const { feed, after } of feeds) {
      assert.deepEqual(raws(feed), all.filter((e) => e.id > after).map(sse), `the stream after ${after}`);
    }
  });

  for (const [what, options] of [
    ['?after=abc', { query: '?after=abc' }],
    ['?after=-1', { query: '?after=-1' }],
    ['?after=1.5', { query: '?after=1.5' }],
    ['?after=9223372036854775808', { query: '?after=9223372036854775808' }],
    ['Last-Event-ID: abc', { headers: { 'last-event-id': 'abc' } }],
    ['Last-Event-ID: -5', { headers: { 'last-event-id': '-5' } }],
    ['Last-Event-ID: 99999999999999999999', { headers: { 'last-event-id': '99999999999999999999' } }],
  ] as Array<[string, FeedOptions]>) {
    test(`GET /events answers 400 with an Error body for ${what}`, async (t) => {
      const { h, port } = await listening(t);
      await assertFeedError(await openFeed(port, await h.token('alice', READ_WRITE), options), 400);
    });
  }

  test('GET /events answers 410 for an id older than the retention; from the horizon on it streams', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    for (const id of ['1', '2', '3']) await plant(h, alice, id);
    const ids = (await log(h.store)).map((e) => e.id);
    // Retention 0: every event already written is past it (once the store's clock has moved on).
    await eventually('the log is pruned through its newest event', async () => {
      await h.store.pruneEvents(0, 1000);
      return (await h.store.eventHorizon()) >= ids[2]!;
    });
    const horizon = await h.store.eventHorizon();
    assert.equal(horizon, ids[2]);
    for (const old of [ids[0]!, ids[1]!]) {
      const body = await assertFeedError(await openFeed(port, alice, { query: `?after=${old}` }), 410);
      assert.match(body, /retention/);
      await assertFeedError(await openFeed(port, alice, { headers: { 'last-event-id': String(old) } }), 410);
    }
    // ?after=0 resumes after event 0 too: the events up to the horizon are gone, so it cannot be exact.
    await assertFeedError(await openFeed(port, alice, { query: '?after=0' }), 410);
    const feeds = [
      await openFeed(port, alice, { query: `?after=${horizon}` }),
      await openFeed(port, alice, { headers: { 'last-event-id': String(horizon) } }),
      await openFeed(port, alice, { query: `?after=${horizon + 1000n}` }),
    ];
    for (const feed of feeds) assert.equal(feed.status, 200);
    await plant(h, alice, '4');
    const [fresh] = await log(h.store);
    assert.ok(fresh && fresh.id > horizon);
    await feeds[0]!.until('the new event', () => feeds[0]!.sse.messages.length > 0);
    await feeds[1]!.until('the new event', () => feeds[1]!.sse.messages.length > 0);
    await closeAndDrain(h, feeds);
    assert.deepEqual(raws(feeds[0]!), [sse(fresh)]);
    assert.deepEqual(raws(feeds[1]!), [sse(fresh)]);
    assert.deepEqual(raws(feeds[2]!), [], 'nothing at or before the id it resumes after');
  });
});

describe('GET /events: access, limits, heartbeats and shutdown', () => {
  test('GET /events answers 401 without a token or with a bad one, 403 without plants:read', async (t) => {
    const { h, port } = await listening(t);
    const none = await openFeed(port, undefined);
    await assertFeedError(none, 401);
    assert.equal(none.headers['www-authenticate'], 'Bearer realm="plant-store"');
    const bad = await openFeed(port, 'pst_notatoken');
    await assertFeedError(bad, 401);
    assert.equal(bad.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token"');
    for (const scopes of [['plants:write'], ['webhooks:read', 'webhooks:write']]) {
      const feed = await openFeed(port, await h.token('alice', scopes));
      await assertFeedError(feed, 403);
      assert.equal(
        feed.headers['www-authenticate'],
        'Bearer realm="plant-store", error="insufficient_scope", scope="plants:read"',
      );
    }
  });

  test('GET /events answers 429 to a token’s 6th open stream; the 5 stay open, other tokens are not held back', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const open: Feed[] = [];
    for (let i = 0; i < 5; i++) {
      const feed = await openFeed(port, alice);
      assert.equal(feed.status, 200);
      await connected(feed);
      open.push(feed);
    }
    const sixth = await openFeed(port, alice);
    await assertFeedError(sixth, 429);
    assert.match(String(sixth.headers['retry-after']), /^[0-9]+$/);
    const others = [
      await openFeed(port, await h.token('alice', READ_WRITE)),
      await openFeed(port, await h.token('bob', READ_WRITE)),
    ];
    for (const feed of others) assert.equal(feed.status, 200);
    await plant(h, alice, '1');
    for (const feed of [...open, others[0]!]) {
      await feed.until('the event on every open stream', () => feed.sse.messages.length === 1);
      assert.equal(feed.ended, false);
    }
    // A stream that ends frees its place.
    open[0]!.close();
    await eventually('a new stream once one closed', async () => {
      const feed = await openFeed(port, alice);
      if (feed.status === 200) return true;
      await assertFeedError(feed, 429);
      return false;
    });
  });

  test('GET /events sends a comment line at every heartbeat while no event comes', async (t) => {
    const { h, port } = await listening(t, { events: { ...testConfig().events, heartbeatMs: 200 } });
    assert.ok(testConfig().events.heartbeatMs <= 15_000, 'by default at least every 15 s');
    const feed = await openFeed(port, await h.token('alice', READ_WRITE));
    await connected(feed);
    const first = feed.sse.comments.length;
    await feed.until('two heartbeats', () => feed.sse.comments.length >= first + 2);
    assert.deepEqual(feed.sse.messages, []);
    assert.match(feed.sse.text, /^(?::[^\r\n]*\n(?:retry: [0-9]+\n)?\n)+$/, 'nothing but comment lines (and retry:)');
  });

  test('closing the app ends every open stream cleanly', async (t) => {
    const { h, port } = await listening(t);
    const alice = await h.token('alice', READ_WRITE);
    const feeds = [
      await openFeed(port, alice),
      await openFeed(port, alice),
      await openFeed(port, await h.token('root', ['plants:admin'])),
    ];
    for (const feed of feeds) await connected(feed);
    await plant(h, alice, '1');
    for (const feed of feeds) await feed.until('the event', () => feed.sse.messages.length === 1);
    await closeAndDrain(h, feeds);
    for (const feed of feeds) {
      assert.equal(feed.ended, true, 'the response ended, not cut');
      assert.match(feed.sse.text, /\n\n$/, 'after a whole message or comment');
    }
  });
});

interface TwoInstances {
  readonly h: TestApp;
  readonly port: number;
  /** Another connection to the same database, as another instance of the service has. */
  readonly other: Store;
}

/** An app over a database another store writes to: a file on SQLite, a shared schema on PostgreSQL. */
async function twoInstances(t: TestContext): Promise<TwoInstances> {
  let served: Store;
  let other: Store;
  let cleanUp: () => Promise<void>;
  if (TEST_ENGINE === 'postgres') {
    const scratch = await scratchSchema();
    served = openPostgres(scratch.url, { poolSize: 4 });
    other = openPostgres(scratch.url, { poolSize: 2 });
    cleanUp = () => scratch.drop();
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-feed-'));
    served = openSqlite(join(dir, 'plants.db'), { locks: 'event-loop' }); // as the server opens it
    other = openSqlite(join(dir, 'plants.db'));
    cleanUp = async () => rmSync(dir, { recursive: true, force: true });
  }
  const h = await makeApp({}, served);
  t.after(async () => {
    hangUpAll();
    await closeApp(h);
    await other.close();
    await cleanUp();
  });
  await other.migrate();
  return { h, port: await listen(h), other };
}

describe('GET /events sees changes committed by another connection', () => {
  const how = TEST_ENGINE === 'postgres' ? 'LISTEN/NOTIFY' : 'PRAGMA data_version polling';
  test(`GET /events streams events another instance commits (${TEST_ENGINE}: ${how})`, async (t) => {
    const { h, port, other } = await twoInstances(t);
    const alice = await h.token('alice', READ_WRITE);
    const feeds = [await openFeed(port, alice), await openFeed(port, await h.token('root', ['plants:admin']))];
    for (const feed of feeds) await connected(feed);
    await other.createPlant({ id: BigInt(INT64_MAX), owner: 'alice', name: 'from elsewhere', tag: null });
    await other.createPlant({ id: 2n, owner: 'bob', name: 'not hers', tag: 'x' });
    assert.equal(await other.deletePlant(BigInt(INT64_MAX), 'alice'), true);
    const all = await log(other);
    assert.equal(all.length, 3);
    await feeds[1]!.until('every event, from the other store', () => feeds[1]!.sse.messages.length >= 3);
    // Each stream is fed on its own: alice's two may come a moment after root's three.
    await feeds[0]!.until('alice’s events, from the other store', () => feeds[0]!.sse.messages.length >= 2);
    await closeAndDrain(h, feeds);
    assert.deepEqual(raws(feeds[0]!), [
      `id: ${all[0]!.id}\nevent: plant.created\ndata: {"id":9223372036854775807,"name":"from elsewhere"}\n\n`,
      `id: ${all[2]!.id}\nevent: plant.deleted\ndata: {"id":9223372036854775807}\n\n`,
    ]);
    assert.deepEqual(raws(feeds[1]!), all.map(sse));
  });
});

describe('EventStream: one stream’s catch-up from the log', () => {
  // event-stream.ts: offer() empties `held` past 10,000 events ("starts over from its cursor"), but
  // Events dropped from the hold must be read from the log again, or they would be skipped when the
  // last read's snapshot predates them (PostgreSQL: the tail may offer commits newer than that snapshot).
  test('a catch-up offered over 10,000 live events during its last read still sends every event once', async () => {
    const written: string[] = [];
    const response = { write: (text: string) => written.push(text) > 0, writableLength: 0, on: () => response };
    const committed: EventRecord[] = [];
    let answerFirstRead: (events: EventRecord[]) => void = () => {};
    let reads = 0;
    const store = {
      readEvents: (after: bigint, _owner: string | null, limit: number): Promise<EventRecord[]> =>
        ++reads === 1
          ? new Promise((resolve) => (answerFirstRead = resolve))
          : Promise.resolve(committed.filter((e) => e.id > after).slice(0, limit)),
    };
    const stream = new EventStream(
      response as unknown as ServerResponse,
      store as unknown as EventStore,
      null,
      0n,
      () => {},
    );
    const catchingUp = stream.catchUp();
    for (let id = 1n; id <= 10_050n; id++) {
      const event: EventRecord = { id, type: 'plant.created', owner: 'alice', payload: `{"id":${id}}`, createdAt: 0 };
      committed.push(event);
      stream.offer(event);
    }
    answerFirstRead([]); // a snapshot taken before those commits
    await catchingUp;
    const ids = written.map((text) => /^id: ([0-9]+)\n/.exec(text)?.[1]).filter((id) => id !== undefined);
    assert.equal(ids.length, 10_050, `events sent: ${ids.length}, the first ${ids[0]}`);
    assert.deepEqual(ids.slice(0, 2), ['1', '2']);
  });
});
