import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, get } from 'node:http';
import { type TestContext, after, describe, test } from 'node:test';
import { type PostgresStore, openPostgres } from '../../src/store/postgres/store.js';
import { eventually } from '../support/eventually.js';
import { servedApp } from '../support/served-app.js';
import { type ReplicaPair, type Server, silentProxy, startReplicaPair } from './replica-pair.js';

// The faults high availability exists for, beyond a primary whose kernel resets every connection
// (multi-host.test.ts): a primary that goes silent (partitioned, frozen), an old primary that
// comes back writable, and asynchronous replication that loses the acknowledged tail. Each runs
// on a primary and its standby of this machine's PostgreSQL (replica-pair.ts; synchronous where
// nothing acknowledged may be lost), with the service's store and app over the multi-host URL and
// the default DATABASE_FAILOVER_WAIT. Timings are reported as diagnostics (npm run bench measures
// them), never asserted.

const WAIT_MS = 10_000; // DATABASE_FAILOVER_WAIT's default
const pairs: ReplicaPair[] = [];
const stores: PostgresStore[] = [];
after(async () => {
  for (const store of stores) await store.close().catch(() => {});
  for (const pair of pairs) await pair.close();
});

async function pairOfOwn(options: { synchronous?: boolean } = {}): Promise<ReplicaPair> {
  const pair = await startReplicaPair(options);
  pairs.push(pair);
  return pair;
}

interface Opened {
  readonly store: PostgresStore;
  readonly left: string[];
  readonly refused: string[];
}

function open(url: string): Opened {
  const left: string[] = [];
  const refused: string[] = [];
  const store = openPostgres(url, {
    failoverWaitMs: WAIT_MS,
    poolSize: 8,
    onHostLeft: (host, why) => left.push(`${host}: ${why}`),
    onHostRefused: (host, why) => void (why !== undefined && refused.push(`${host}: ${why}`)),
  });
  stores.push(store);
  return { store, left, refused };
}

const plant = (id: bigint) => ({ id, owner: 'alice', name: `plant ${id}`, tag: null });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The app as `serve` builds it over `store`, listening on 127.0.0.1, and a token of alice's. */
function serve(t: TestContext, store: PostgresStore) {
  return servedApp(store, (close) => t.after(close), {
    config: { databaseFailoverWaitMs: WAIT_MS, rateLimit: null },
    listen: true,
  });
}

/** GET /events as an EventSource reads it: every event's id and data, as they arrive. */
async function follow(t: TestContext, port: number, token: string) {
  const seen = new Map<bigint, { data: string; at: number }>();
  const request = get({
    host: '127.0.0.1',
    port,
    path: '/events',
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  const [response] = (await once(request, 'response')) as [IncomingMessage];
  assert.equal(response.statusCode, 200);
  t.after(() => request.destroy());
  let buffered = '';
  let ended = false;
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const id = /^id: (\d+)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (id !== undefined && data !== undefined) seen.set(BigInt(id), { data, at: Date.now() });
    }
  });
  response.on('end', () => void (ended = true));
  return { seen, ended: () => ended };
}

interface Answer {
  readonly id: bigint;
  readonly status: number;
  readonly body?: string;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** `writers` loops creating plants (ids from `firstId`, each loop its own) until stop(); every answer kept. */
function writeLoops(
  send: (id: bigint) => Promise<number | { status: number; body: string }>,
  writers: number,
  firstId: bigint,
) {
  const answers: Answer[] = [];
  let stopping = false;
  let next = firstId;
  const loops = Array.from({ length: writers }, async () => {
    while (!stopping) {
      const id = next++;
      const sentAt = Date.now();
      let status: number;
      let body: string | undefined;
      try {
        const answer = await send(id);
        ({ status, body } = typeof answer === 'number' ? { status: answer, body: undefined } : answer);
      } catch (error) {
        status = 0; // no answer at all: a failure like any other
        body = String(error);
      }
      answers.push({ id, status, body, sentAt, answeredAt: Date.now() });
    }
  });
  return {
    answers,
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(loops);
    },
  };
}

async function idsOn(pair: ReplicaPair, server: Server, table: 'plants' | 'events'): Promise<Map<bigint, string>> {
  const column = table === 'plants' ? 'name' : 'payload';
  const rows = (await pair.sql(server, `SELECT id::text AS id, ${column} AS v FROM ${table}`)).rows as Array<{
    id: string;
    v: string;
  }>;
  return new Map(rows.map((r) => [BigInt(r.id), r.v]));
}

/** idsOn a standby still replaying: the table it has not yet created has no ids. */
async function replayedOn(pair: ReplicaPair, server: Server, table: 'plants' | 'events'): Promise<Map<bigint, string>> {
  return idsOn(pair, server, table).catch((error: { code?: string }) => {
    if (error.code === '42P01') return new Map<bigint, string>(); // undefined_table
    throw error;
  });
}

const faults = {
  partition: 'a proxy in front of the primary stops forwarding: no reset, no close',
  freeze: 'the primary and every process of it SIGSTOPped',
} as const;

describe('a primary that goes silent, its synchronous standby promoted 3 s later', () => {
  for (const [fault, how] of Object.entries(faults) as Array<[keyof typeof faults, string]>) {
    test(`${fault} (${how}): no request answers 503, every write lands, the stream opened before receives every event`, async (t) => {
      const pair = await pairOfOwn({ synchronous: true }); // nothing acknowledged may be lost
      const proxy = await silentProxy(pair.primary.port);
      t.after(() => proxy.close());
      const first = fault === 'partition' ? proxy.port : pair.primary.port;
      const url = `postgres://postgres@127.0.0.1:${first},127.0.0.1:${pair.standby.port}/postgres?target_session_attrs=read-write`;
      const { store, left } = open(url);
      await store.migrate();
      const { app, token, port } = await serve(t, store);
      const stream = await follow(t, port, token);
      const writers = writeLoops(
        async (id) => {
          const answer = await app.inject({
            method: 'POST',
            url: '/plants',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            payload: `{"id":${id},"name":"plant ${id}"}`,
          });
          return { status: answer.statusCode, body: answer.body };
        },
        4,
        1n,
      );
      await sleep(2000);
      const faultAt = Date.now();
      if (fault === 'partition') proxy.vanish();
      else await pair.freeze(pair.primary, true);
      await sleep(3000);
      await pair.promote(pair.standby);
      const promotedAt = Date.now();
      await sleep(8000);
      await writers.stop();

      const failed = writers.answers.filter((a) => a.status !== 200);
      assert.deepEqual(
        failed.map(
          (a) =>
            `${a.id}: ${a.status} after ${a.answeredAt - a.sentAt} ms, sent ${a.sentAt - faultAt} ms after the fault: ${a.body}`,
        ),
        [],
        'every create answered 200: none was refused while a writable primary was reachable',
      );
      const stored = await idsOn(pair, pair.standby, 'plants');
      const lost = writers.answers.filter((a) => !stored.has(a.id));
      assert.deepEqual(
        lost.map((a) => String(a.id)),
        [],
        'every acknowledged create is on the new primary',
      );
      const events = await idsOn(pair, pair.standby, 'events');
      await eventually(
        async () => ([...events.keys()].every((id) => stream.seen.has(id)) ? true : undefined),
        'the stream opened before the fault received every event on the new primary',
        30_000,
      );
      assert.equal(stream.ended(), false, 'the stream stayed open');
      assert.equal(store.databaseRoute()?.host, `127.0.0.1:${pair.standby.port}`, left.join('; '));

      const firstAfter = writers.answers.filter((a) => a.sentAt >= promotedAt || a.answeredAt >= promotedAt);
      const firstWrite = Math.min(...firstAfter.map((a) => a.answeredAt)) - promotedAt;
      const slowest = Math.max(...writers.answers.map((a) => a.answeredAt - a.sentAt));
      t.diagnostic(
        `${writers.answers.length} creates, all 200; the first answered ${firstWrite} ms after the promotion ` +
          `(${promotedAt - faultAt} ms after the fault); the slowest took ${slowest} ms; ${stream.seen.size} events streamed`,
      );
    });
  }
});

test('two instances × 16 writers through a kill and a promotion: readers of the log see every event, in id order, none skipped', async (t) => {
  const pair = await pairOfOwn({ synchronous: true });
  const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
  const [a, b] = [open(url).store, open(url).store];
  await a.migrate();
  // Each instance's writers take ids of their own: the events interleave, the plants never clash.
  const writers = [a, b].map((store, i) =>
    writeLoops((id) => store.createPlant(plant(id)).then(() => 200), 16, BigInt(i) * 1_000_000_000n + 1n),
  );
  /** Follows the log as the change feed does, each read after the last id it saw; errors are waited out. */
  const follower = (store: PostgresStore) => {
    const seen: bigint[] = [];
    let stopping = false;
    const done = (async () => {
      for (;;) {
        try {
          const events = await store.readEvents(seen.at(-1) ?? 0n, null, 500);
          for (const event of events) {
            assert.ok(event.id > (seen.at(-1) ?? 0n), `event ${event.id} came after ${seen.at(-1)}`);
            seen.push(event.id);
          }
          if (stopping && events.length === 0) return;
        } catch {
          await sleep(100); // no primary yet: the failover
        }
      }
    })();
    return { seen, stop: () => ((stopping = true), done) };
  };
  const followers = [follower(a), follower(b)];
  await sleep(2000);
  await pair.stop(pair.primary, 'kill');
  await pair.promote(pair.standby);
  await sleep(4000);
  await Promise.all(writers.map((w) => w.stop()));

  const all = [...(await idsOn(pair, pair.standby, 'events')).keys()].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const acknowledged = writers.flatMap((w) => w.answers).filter((answer) => answer.status === 200);
  await eventually(
    async () => (followers.every((f) => f.seen.length >= all.length) ? true : undefined),
    () => `the readers saw ${followers.map((f) => f.seen.length).join(' and ')} of ${all.length} events`,
    30_000,
  );
  for (const f of followers) await f.stop();
  for (const f of followers) assert.deepEqual(f.seen, all, 'every event on the new primary, in id order, once');
  const afterPromotion = all.filter((id) => id >= 2n * 2n ** 32n); // timeline 2's ids start at 2 × 2^32
  assert.ok(afterPromotion.length > 0, 'events were written on the new timeline too');
  assert.ok(acknowledged.length >= 100, `only ${acknowledged.length} creates acknowledged`);
  t.diagnostic(
    `${acknowledged.length} creates acknowledged, ${all.length} events (${afterPromotion.length} on the new timeline), read whole by both readers`,
  );
});

describe('never back to an older history', () => {
  test('an old primary restarted without being rewound takes no write, from an instance that wrote past it or one started after', async (t) => {
    const pair = await pairOfOwn();
    const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
    const a = open(url);
    await a.store.migrate();
    for (let id = 1n; id <= 10n; id++) await a.store.createPlant(plant(id));
    await eventually(
      async () => ((await replayedOn(pair, pair.standby, 'plants')).size === 10 ? true : undefined),
      'the standby has the first ten plants',
      30_000,
    );
    await pair.stop(pair.primary, 'kill');
    await pair.promote(pair.standby);
    for (let id = 11n; id <= 20n; id++) await a.store.createPlant(plant(id)); // the promoted standby, a new timeline
    await pair.restart(pair.primary); // writable again, on the timeline its standby left

    const b = open(url); // started now: the old primary is first in the URL and answers
    for (let id = 21n; id <= 30n; id++) await b.store.createPlant(plant(id));
    // Instance a's connections to the new primary cut: it must find its way back there, not to the old one.
    await pair.sql(
      pair.standby,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    );
    for (let id = 31n; id <= 40n; id++) await a.store.createPlant(plant(id));

    assert.deepEqual(
      [...(await idsOn(pair, pair.primary, 'plants')).keys()].sort((x, y) => Number(x - y)).map(Number),
      Array.from({ length: 10 }, (_, i) => i + 1),
      'the old primary has only what it had before the failover',
    );
    assert.equal((await idsOn(pair, pair.standby, 'plants')).size, 40);
    await eventually(
      async () =>
        a.store.databaseRoute()?.refused.get(`127.0.0.1:${pair.primary.port}`)?.kind === 'older_timeline'
          ? true
          : undefined,
      'the instance that wrote to the new timeline refuses the old primary, and says so',
      10_000,
    );
    assert.ok(
      a.refused.some((line) => line.includes('older than timeline')),
      a.refused.join('; '),
    );
    assert.equal(await a.store.isReady(), true);
    t.diagnostic(`instance a: ${a.refused.join('; ')}`);
  });

  test('a standby promoted while its old primary still runs: the newer timeline is written to, the old primary left', async () => {
    const pair = await pairOfOwn();
    const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
    const { store, left } = open(url);
    await store.migrate();
    await store.createPlant(plant(1n));
    await pair.promote(pair.standby); // two servers take writes now; nothing fences the old one
    await eventually(
      async () =>
        store.databaseRoute()?.host === `127.0.0.1:${pair.standby.port}` || left.length > 0 ? true : undefined,
      'the store leaves the old primary for the newer timeline',
      15_000,
    );
    for (let id = 2n; id <= 11n; id++) await store.createPlant(plant(id));
    assert.deepEqual([...(await idsOn(pair, pair.primary, 'plants')).keys()], [1n], 'nothing more on the old primary');
    assert.equal((await idsOn(pair, pair.standby, 'plants')).size, 11);
    assert.ok(
      left.some((line) => line.includes('newer timeline')),
      left.join('; '),
    );
  });
});

test('asynchronous loss is the tail and nothing more: no event id given twice, a reader past the loss gets every later event', async (t) => {
  const pair = await pairOfOwn();
  const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
  const { store } = open(url);
  await store.migrate();
  // A poller of the feed, as GET /events?after= pages it.
  const seen = new Map<bigint, string>();
  let cursor = 0n;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      try {
        const page = await store.readEvents(cursor, 'alice', 1000);
        for (const row of page) {
          seen.set(row.id, row.payload);
          cursor = row.id;
        }
        if (page.length === 0) await sleep(50);
      } catch {
        await sleep(100);
      }
    }
  })();
  const writers = writeLoops(
    async (id) => {
      await store.createPlant(plant(id));
      return 200;
    },
    2,
    1n,
  );
  await sleep(1500);
  await pair.stopReceiving(pair.standby); // from here on what the primary acknowledges is not on the standby
  await sleep(2000);
  const cursorAtLoss = cursor;
  await pair.stop(pair.primary, 'kill');
  await pair.promote(pair.standby);
  await sleep(3000);
  await writers.stop();
  const onNew = await idsOn(pair, pair.standby, 'events');
  await eventually(
    async () => ([...onNew.keys()].every((id) => seen.has(id)) ? true : undefined),
    'the poller received every event on the new primary',
    20_000,
  );
  polling = false;
  await poller;

  const changed = [...seen].filter(([id, payload]) => onNew.has(id) && onNew.get(id) !== payload);
  assert.deepEqual(changed, [], 'no event id the poller saw means another event now');
  const lostTail = [...seen.keys()].filter((id) => !onNew.has(id));
  const after = [...onNew.keys()].filter((id) => id > cursorAtLoss);
  assert.ok(after.length > 0, 'events were committed after the failover');
  t.diagnostic(
    `${seen.size} events seen; ${lostTail.length} of them lost with the tail; ${after.length} committed after, all received ` +
      `(the first id after the failover ${after.sort((x, y) => (x < y ? -1 : 1))[0]}, the poller's cursor at the loss ${cursorAtLoss})`,
  );
  const acknowledged = writers.answers.filter((a) => a.status === 200);
  const stored = await idsOn(pair, pair.standby, 'plants');
  const missing = acknowledged.filter((a) => !stored.has(a.id));
  t.diagnostic(
    `${acknowledged.length} creates acknowledged, ${missing.length} lost with the tail (asynchronous replication)`,
  );
});

test('one host in the URL whose server goes silent and is replaced: the stream opened before receives every later event', async (t) => {
  const pair = await pairOfOwn({ synchronous: true });
  // One address whose server changes: a managed database's DNS name, a plain TCP proxy.
  const address = await silentProxy(pair.primary.port);
  t.after(() => address.close());
  // No target_session_attrs, one host: no monitor of hosts; what notices the silence is per connection.
  const { store } = open(`postgres://postgres@127.0.0.1:${address.port}/postgres`);
  await store.migrate();
  const { app, token, port } = await serve(t, store);
  const stream = await follow(t, port, token);
  const create = (id: bigint) =>
    app.inject({
      method: 'POST',
      url: '/plants',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: `{"id":${id},"name":"plant ${id}"}`,
    });
  for (let id = 1n; id <= 20n; id++) assert.equal((await create(id)).statusCode, 200);
  await eventually(async () => (stream.seen.size === 20 ? true : undefined), 'the stream has the first 20 events');
  const faultAt = Date.now();
  address.moveTo(pair.standby.port);
  await sleep(3000);
  await pair.promote(pair.standby);
  // Writes on connections made after the move reach the new primary (those on silent ones wait for
  // the statement timeout, the pool's business); the stream must not depend on them.
  let made = 0;
  for (let id = 21n; made < 20 && id < 1000n; id++) if ((await create(id)).statusCode === 200) made++;
  assert.equal(made, 20, 'creates answered 200 on the new primary');
  const events = await idsOn(pair, pair.standby, 'events');
  await eventually(
    async () => ([...events.keys()].every((id) => stream.seen.has(id)) ? true : undefined),
    () => `the stream received every event on the new primary (${stream.seen.size} of ${events.size})`,
    30_000,
  );
  assert.equal(stream.ended(), false, 'the stream stayed open');
  const last = Math.max(...[...stream.seen.values()].map((e) => e.at));
  t.diagnostic(`the stream had every event ${last - faultAt} ms after the fault`);
});
