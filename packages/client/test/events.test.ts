import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type FeedEvent, PlantStoreClient, PlantStoreError } from '../src/index.js';
import { type TestServer, recordingFetch, startTestServer } from './support.js';

// events(): the change feed as pages of JSON, against the real server.

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

/** A client of its own subject, so that each test sees only its own events. */
async function client(subject: string, options: Partial<ConstructorParameters<typeof PlantStoreClient>[0]> = {}) {
  return new PlantStoreClient({ baseUrl: server.url, token: await server.token(undefined, subject), ...options });
}

async function all(events: AsyncIterable<FeedEvent>): Promise<FeedEvent[]> {
  const out: FeedEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

test('events() yields every event once, in id order, across pages, with ids beyond 2^53 exact', async () => {
  const recorded = recordingFetch();
  const c = await client('events-exact', { fetch: recorded.fetch });
  await c.create({ id: 9007199254740993n, name: 'Monstera "deliciosa"', tag: 'tropical' });
  await c.create({ id: '9007199254740992', name: 'Fern' });
  await c.delete(9007199254740993n);
  const events = await all(c.events({ limit: 2 }));
  assert.deepEqual(
    events.map(({ type, data }) => ({ type, data })),
    [
      { type: 'plant.created', data: { id: 9007199254740993n, name: 'Monstera "deliciosa"', tag: 'tropical' } },
      { type: 'plant.created', data: { id: 9007199254740992n, name: 'Fern' } },
      { type: 'plant.deleted', data: { id: 9007199254740993n } },
    ],
  );
  for (const event of events) {
    assert.equal(typeof event.id, 'bigint');
    assert.match(event.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  }
  assert.ok(events[0]!.id < events[1]!.id && events[1]!.id < events[2]!.id, 'in id order');
  const pages = recorded.sent.filter((s) => s.url.pathname === '/events');
  // Two pages of 2 and 1, then the empty page that ends it; each follows the last one's Link.
  assert.deepEqual(
    pages.map((s) => s.url.searchParams.get('after')),
    [null, String(events[1]!.id), String(events[2]!.id)],
  );
});

test('events() takes after and types: it resumes after an id and keeps only those types', async () => {
  const c = await client('events-filter');
  for (const id of [1001n, 1002n, 1003n]) await c.create({ id, name: `plant ${id}` });
  await c.delete(1002n);
  const everything = await all(c.events());
  assert.equal(everything.length, 4);
  assert.deepEqual(
    (await all(c.events({ after: everything[1]!.id }))).map((e) => e.id),
    everything.slice(2).map((e) => e.id),
  );
  assert.deepEqual(await all(c.events({ types: ['plant.deleted'] })), [everything[3]]);
  assert.deepEqual(
    (await all(c.events({ types: ['plant.created'], after: String(everything[0]!.id) }))).map((e) => e.data.id),
    [1002n, 1003n],
  );
});

test('eventsPage() answers one page and where the next starts: the same after when the page is empty', async () => {
  const c = await client('events-page');
  await c.create({ id: 2001n, name: 'one' });
  const first = await c.eventsPage();
  assert.equal(first.events.length, 1);
  assert.equal(first.next, first.events[0]!.id);
  const empty = await c.eventsPage({ after: first.next });
  assert.deepEqual(empty, { events: [], next: first.next });
});

test('events({ follow: true }) keeps polling after an empty page until its signal aborts', async () => {
  const c = await client('events-follow');
  await c.create({ id: 3001n, name: 'before' });
  const controller = new AbortController();
  const seen: FeedEvent[] = [];
  const following = (async () => {
    for await (const event of c.events({ follow: true, pollIntervalMs: 10, signal: controller.signal })) {
      seen.push(event);
      if (seen.length === 1) await c.create({ id: 3002n, name: 'after' }); // while it follows
      if (seen.length === 2) controller.abort(new Error('enough'));
    }
  })();
  await assert.rejects(following, /enough/);
  assert.deepEqual(
    seen.map((e) => e.data.id),
    [3001n, 3002n],
  );
});

test('events() refuses bad options before sending anything, and a token without plants:read gets a 403 PlantStoreError', async () => {
  const recorded = recordingFetch();
  const c = await client('events-bad', { fetch: recorded.fetch });
  for (const options of [
    { limit: 0 },
    { limit: 1001 },
    { limit: 1.5 },
    { after: -1n },
    { after: 5 as unknown as bigint },
  ]) {
    await assert.rejects(
      all(c.events(options)),
      /limit|after|id/,
      JSON.stringify(options, (_, v: unknown) => String(v)),
    );
  }
  await assert.rejects(all(c.events({ types: ['plant.updated' as 'plant.created'] })), RangeError);
  await assert.rejects(all(c.events({ types: [] })), TypeError);
  assert.deepEqual(recorded.sent, []);
  const writer = new PlantStoreClient({ baseUrl: server.url, token: await server.token(['plants:write'], 'w') });
  await assert.rejects(
    all(writer.events()),
    (error: unknown) => error instanceof PlantStoreError && error.status === 403,
  );
});

test('eventTicket() answers a single-use ticket of 60 s that opens the stream without Authorization, once', async () => {
  const recorded = recordingFetch();
  const c = await client('events-ticket', { fetch: recorded.fetch });
  const { ticket, expiresAt } = await c.eventTicket();
  assert.match(ticket, /^pse_[A-Za-z0-9_-]{43}$/);
  const lifetime = Date.parse(expiresAt) - Date.now();
  assert.ok(lifetime > 50_000 && lifetime <= 60_000, `expires in ${lifetime} ms`);
  assert.deepEqual(
    recorded.sent.map(({ method, url }) => `${method} ${url.pathname}`),
    ['POST /events/tickets'],
  );
  const url = new URL(`events?ticket=${ticket}`, server.url);
  const stream = await fetch(url, { headers: { accept: 'text/event-stream' } });
  assert.equal(stream.status, 200);
  assert.match(String(stream.headers.get('content-type')), /^text\/event-stream/);
  const reader = stream.body!.getReader();
  const { value } = (await reader.read()) as { value?: Uint8Array };
  const first = new TextDecoder().decode(value);
  assert.match(first, /^: connected\n/);
  await reader.cancel();
  const again = await fetch(url, { headers: { accept: 'text/event-stream' } });
  assert.equal(again.status, 401);
  assert.equal(((await again.json()) as { error: number }).error, 401);
});
