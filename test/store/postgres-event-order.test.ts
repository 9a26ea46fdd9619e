import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test, type TestContext } from 'node:test';
import pg from 'pg';
import { EVENT_ORDER_LOCK } from '../../src/store/postgres/statements.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import type { PlantRecord, Store } from '../../src/store/store.js';
import type { EventStore } from '../../src/store/event-store.js';
import type { NewWebhookRecord } from '../../src/store/webhook-store.js';
import { eventually } from '../support/eventually.js';
import { postgresUrl, stopSharedPostgres } from '../support/postgres.js';

// On PostgreSQL a reader that resumes after event N never misses an event committed later with a
// smaller id (docs/api.md, Events). Ids come from a sequence before commit and may commit out of
// order; readers stay below the event watermark (migration 11, postgres/publication.ts), and
// writers of events never wait for each other.

after(stopSharedPostgres);

const plant = (id: bigint, owner: string): PlantRecord => ({ id, owner, name: `plant ${id}`, tag: null });

/**
 * Two instances (two pools, as two servers) on a database of their own, and plain connections to
 * it. Of its own: the event-order lock is the database's, and a transaction held open here must
 * hold back no other test's writers.
 */
async function fleet(t: TestContext) {
  const base = new URL(await postgresUrl());
  const name = `event_order_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const app = `event-order-${randomBytes(4).toString('hex')}`;
  url.searchParams.set('application_name', app); // finds this test's connections in pg_stat_activity
  const a = openPostgres(url.toString(), { poolSize: 8 });
  const b = openPostgres(url.toString(), { poolSize: 8 });
  const clients: pg.Client[] = [];
  t.after(async () => {
    await Promise.all([a.close(), b.close(), ...clients.map((c) => c.end())]);
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  });
  await a.migrate();
  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: url.toString() });
    clients.push(client);
    await client.connect();
    return client;
  };
  const sql = await connect();
  const eventIds = async (): Promise<bigint[]> =>
    (await sql.query<{ id: string }>('SELECT id FROM events ORDER BY id')).rows.map((r) => BigInt(r.id));
  return { a, b, app, sql, connect, eventIds };
}

/** Follows the log as the change feed does: each read resumes after the last id it saw. */
class Follower {
  cursor = 0n;
  readonly seen: bigint[] = [];
  constructor(private readonly store: EventStore) {}

  async read(): Promise<number> {
    const events = await this.store.readEvents(this.cursor, null, 500);
    for (const event of events) {
      assert.ok(event.id > this.cursor, `event ${event.id} came after ${this.cursor}`);
      this.seen.push(event.id);
      this.cursor = event.id;
    }
    return events.length;
  }

  async catchUp(): Promise<void> {
    while ((await this.read()) > 0);
  }

  /** Reads until it has seen `ids` (published once the watermark passes them), or fails. */
  async reach(ids: readonly bigint[]): Promise<void> {
    await eventually(
      async () => {
        await this.catchUp();
        return this.seen.length >= ids.length ? true : undefined;
      },
      () => `the reader saw ${this.seen.length} of ${ids.length} events`,
    );
    assert.deepEqual(this.seen, ids);
  }
}

/**
 * One round of the watermark, run by hand: the watermark and the marks that still wait. A round
 * that found another under way (no row) or one run within the fleet's 5 ms (waiting NULL) did
 * nothing: it is run again until one does the work.
 */
async function round(sql: pg.Client): Promise<{ through: bigint; waiting: number }> {
  return eventually(async () => {
    const { rows } = await sql.query<{ through: string; waiting: number | null }>(
      'SELECT through, waiting FROM advance_event_watermark(true)',
    );
    const row = rows[0];
    if (row === undefined || row.waiting === null) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return undefined;
    }
    return { through: BigInt(row.through), waiting: row.waiting };
  }, 'a round that does the work');
}

/** A webhook of alice's plants, stored only: nothing here sends. */
const hook = (id: string): NewWebhookRecord => ({
  id,
  owner: 'alice',
  allPlants: false,
  url: `https://hooks.example/${id}`,
  events: ['plant.created'],
  status: 'active',
  secret: `whsec_${id}`,
  createdAt: Date.now(),
});

const INSERT_EVENT = `INSERT INTO events (type, owner, plant_id, payload, created_at)
  VALUES ('plant.created', 'alice', 1, '{"id":1,"name":"x"}', 0) RETURNING id`;

describe('postgres: event ids commit in id order', () => {
  test('two instances × 16 writers: readers following the log see every event, in id order, none skipped', async (t) => {
    const { a, b, eventIds } = await fleet(t);
    const MAX_CHANGES = 4000;
    const started = Date.now();
    let tried = 0;
    let created = 0;
    let deleted = 0;
    // Half the ids beyond 2^53, few enough that creates and deletes keep meeting.
    const ids = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? BigInt(i) : 2n ** 62n + BigInt(i)));
    const pick = <T>(from: readonly T[]): T => from[Math.floor(Math.random() * from.length)]!;
    const writer = async (store: Store) => {
      while (tried < MAX_CHANGES && Date.now() - started < 2000) {
        tried++;
        const owner = pick(['alice', 'bob']);
        if (Math.random() < 0.5) {
          if ((await store.createPlant(plant(pick(ids), owner))).created) created++;
        } else if (await store.deletePlant(pick(ids), pick([owner, null]))) deleted++;
      }
    };
    let writing = true;
    const writers = Promise.all([...Array<Store>(16).fill(a), ...Array<Store>(16).fill(b)].map(writer)).finally(
      () => (writing = false),
    );
    const followers = [new Follower(a), new Follower(b)];
    let liveReads = 0;
    const follow = async (follower: Follower) => {
      while (writing) if ((await follower.read()) > 0) liveReads++;
    };
    await Promise.all([writers, ...followers.map(follow)]);

    const all = await eventIds();
    for (const follower of followers) await follower.reach(all);
    t.diagnostic(`${created} creates and ${deleted} deletes in ${tried} tries; ${liveReads} reads found events`);
    assert.ok(created + deleted >= 100, `only ${created + deleted} changes in ${tried} tries`);
    assert.ok(liveReads >= 10, `the readers read only ${liveReads} times while the writers ran`);
    assert.equal(all.length, created + deleted, 'one event per change that happened');
    const types = await a.readEvents(0n, null, 10_000);
    assert.equal(types.filter((e) => e.type === 'plant.created').length, created);
    assert.equal(types.filter((e) => e.type === 'plant.deleted').length, deleted);
    assert.equal(await a.lastEventId(), all.at(-1), 'a stream from now starts after the last published event');
  });

  test('a reader never passes an event still to commit; writers do not wait for it', async (t) => {
    const { a, b, sql, connect, eventIds } = await fleet(t);
    await a.createPlant(plant(2n, 'alice'));
    const follower = new Follower(a);
    await follower.reach(await eventIds());
    // An event written by hand, not yet committed: it holds the smallest id of what follows.
    const open = await connect();
    await open.query('BEGIN');
    const first = BigInt((await open.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    // Two changes on two instances commit meanwhile, with larger ids: nothing waits for the open one.
    assert.deepEqual(await Promise.all([b.createPlant(plant(1n, 'bob')), a.deletePlant(2n, null)]), [
      { created: true },
      true,
    ]);
    const committed = await eventIds();
    assert.equal(committed.length, 3, 'both later events committed');
    assert.ok(committed[1]! > first && committed[2]! > first);
    // Rounds run (here by hand too, as often as one likes): the watermark stays below the open id.
    for (let i = 0; i < 3; i++) {
      const { through, waiting } = await round(sql);
      assert.ok(through < first, `the watermark ${through} passed the open event ${first}`);
      assert.ok(waiting > 0);
    }
    assert.equal(await follower.read(), 0, 'nothing published past the open event');
    assert.ok((await a.lastEventId()) < first, 'a stream from now starts before the open event');
    await open.query('COMMIT');
    await follower.reach(await eventIds());
    assert.equal(follower.seen[1], first, 'the late commit is read, before the events after it');
  });

  test('the test above can fail: a reader without the watermark skips the event that commits late', async (t) => {
    const { a, connect, eventIds } = await fleet(t);
    const [first, second] = [await connect(), await connect()];
    await first.query('BEGIN');
    const skipped = BigInt((await first.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    await a.createPlant(plant(1n, 'bob')); // commits a larger id at once
    // The log as it would be read with nothing in place of the watermark: by id alone.
    const naive = async (after: bigint) =>
      (await second.query<{ id: string }>('SELECT id FROM events WHERE id > $1 ORDER BY id', [after])).rows.map((r) =>
        BigInt(r.id),
      );
    const seen = await naive(0n);
    assert.equal(seen.length, 1);
    assert.ok(seen[0]! > skipped);
    await first.query('COMMIT');
    assert.deepEqual(
      await naive(seen[0]!),
      [],
      'resuming after the larger id, the naive reader never sees the smaller',
    );
    assert.deepEqual(await eventIds(), [skipped, seen[0]]);
  });

  test('a long transaction that writes no event does not hold publishing back', async (t) => {
    const { a, sql, connect, eventIds } = await fleet(t);
    // It has a transaction id, so the oldest one running (xmin) stays below every later mark.
    const long = await connect();
    await long.query('BEGIN');
    await long.query('SELECT pg_current_xact_id()');
    await a.createPlant(plant(1n, 'alice'));
    await a.deletePlant(1n, 'alice');
    const follower = new Follower(a);
    await follower.reach(await eventIds()); // past 100 ms, the holders of the event-order lock decide
    assert.equal(follower.seen.length, 2);
    const { rows } = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid = $1',
      [(await long.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid],
    );
    assert.equal(rows[0]!.n, 1, 'the long transaction was open all along');
    await long.query('COMMIT');
  });

  test('ids a rolled-back write took are passed, and no dispatcher looks again and again for them', async (t) => {
    const { a, sql, connect } = await fleet(t);
    const rolledBack = await connect();
    await rolledBack.query('BEGIN');
    const lost = BigInt((await rolledBack.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    await rolledBack.query('ROLLBACK');
    await a.createWebhook(hook('wh_rolled_back'), 10);
    await eventually(
      async () => ((await round(sql)).through >= lost ? true : undefined),
      'the watermark past the lost id',
    );
    await a.claimDeliveries({ holder: 'holder', leaseMs: 30_000, limit: 10, perWebhook: 1, busy: new Map() }); // the dispatcher's look: fan-out, then claim
    assert.equal(await a.nextDueInMs(), null, 'nothing due, nothing behind the cursor');
  });

  test('a change to the set of active webhooks waits for the writers of events in flight', async (t) => {
    const { a, b, app, sql, connect, eventIds } = await fleet(t);
    const open = await connect();
    await open.query('BEGIN');
    const first = BigInt((await open.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    const webhook = hook('wh_in_flight');
    const created = b.createWebhook(webhook, 10);
    // The create waits for the event-order lock the open writer holds shared (seen in pg_locks).
    const waiting = `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity s USING (pid)
      WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objid = $1 AND s.application_name = $2`;
    await eventually(
      async () =>
        (await sql.query<{ n: number }>(waiting, [EVENT_ORDER_LOCK, app])).rows[0]!.n >= 1 ? true : undefined,
      'the webhook create waiting for the event-order lock',
    );
    await open.query('COMMIT');
    assert.equal(await created, true);
    // The open event committed before the webhook existed: it owes the webhook nothing.
    await a.createPlant(plant(7n, 'alice'));
    const all = await eventIds();
    await new Follower(a).reach(all);
    const deliveries = await eventually(async () => {
      await a.claimDeliveries({ holder: 'holder', leaseMs: 30_000, limit: 10, perWebhook: 10, busy: new Map() });
      const listed = await a.listDeliveries(webhook.id, null, 10);
      return listed !== undefined && listed.length > 0 ? listed : undefined;
    }, 'the later event fanned out');
    assert.deepEqual(
      deliveries.map((d) => d.eventId),
      [all.at(-1)],
      `only the event after the webhook's creation, not ${first}`,
    );
  });
});
